//! What a run tells its user while it works: levelled log lines on stderr (`-q` keeps
//! warnings and errors, `-v` adds debug detail, `-vv` trace) and the progress of long
//! stages: a bar on a terminal, a line a minute in a log.

use indicatif::style::ProgressTracker;
use indicatif::{
    HumanDuration, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle, TermLike,
};
use std::fmt;
use std::io::{self, IsTerminal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

static QUIET: AtomicBool = AtomicBool::new(false);
static START: OnceLock<Instant> = OnceLock::new();

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &log::Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let t = START.get_or_init(Instant::now).elapsed().as_secs_f64();
        let line = format!("[{t:>7.1}s {:<5}] {}", r.level(), r.args());
        // A bar being drawn would be torn by a plain write; indicatif prints above it.
        eprintln!("{line}");
    }

    fn flush(&self) {}
}

static LOGGER: Logger = Logger;

/// Installs the logger: `verbosity` -1 quiet (warnings and errors, no bars), 0 normal
/// (info), 1 debug, 2 or more trace. Calling it twice keeps the first logger.
pub fn init(verbosity: i8) {
    START.get_or_init(Instant::now);
    QUIET.store(verbosity < 0, Ordering::Relaxed);
    let level = match verbosity {
        i8::MIN..=-1 => log::LevelFilter::Warn,
        0 => log::LevelFilter::Info,
        1 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}

thread_local! {
    /// Set on a thread whose work runs beside another's that shows the progress.
    static HIDDEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f` with its progress bars hidden: for work run beside a stage that draws its own
/// (two bars on one terminal line would overwrite each other).
///
/// ```
/// let bar = laq::util::progress::hidden(|| laq::util::progress::bar(10, "x"));
/// assert!(bar.is_hidden());
/// ```
pub fn hidden<R>(f: impl FnOnce() -> R) -> R {
    let before = HIDDEN.with(|h| h.replace(true));
    let r = f();
    HIDDEN.with(|h| h.set(before));
    r
}

thread_local! {
    /// The run whose stages this thread's bars show, among a study's (see [`labelled`]).
    static LABEL: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// `f` with its bars' lines naming the run `label` (`latent: Q-learning: step ...`): a
/// study's runs take turns on the worker that shows progress, and a log line must say
/// whose it is. Inside another label, both are named, the outer first.
///
/// ```
/// use laq::util::progress::{bar, labelled};
/// let b = labelled("latent", || bar(10, "Q-learning"));
/// assert_eq!(b.prefix(), "latent: Q-learning");
/// let b = labelled("latent", || labelled("another seed", || bar(10, "Q-learning")));
/// assert_eq!(b.prefix(), "latent: another seed: Q-learning");
/// ```
pub fn labelled<R>(label: &str, f: impl FnOnce() -> R) -> R {
    let before = LABEL.with(|l| {
        let inner = match l.borrow().as_deref() {
            Some(outer) => format!("{outer}: {label}"),
            None => label.to_string(),
        };
        l.replace(Some(inner))
    });
    let r = f();
    LABEL.with(|l| l.replace(before));
    r
}

/// How often a stage's progress is logged where no bar is drawn.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// A progress bar of `len` steps for the stage `what`: drawn on a terminal; elsewhere (a
/// file, CI, a notebook) a log line every [`LOG_EVERY`] while the stage lasts, so that a
/// long stage is not silent; hidden with `-q`, `LAQ_QUIET` or inside [`hidden`].
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    let shown = std::env::var_os("LAQ_QUIET").is_none()
        && !QUIET.load(Ordering::Relaxed)
        && !HIDDEN.with(|h| h.get());
    let template = if !shown {
        None
    } else if std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
        Some("{prefix:>24} [{bar:30}] {pos}/{len} {msg} ({left})")
    } else {
        let lines = LogLines::new(LOG_EVERY, |line| log::info!("{line}"));
        bar.set_draw_target(ProgressDrawTarget::term_like_with_hz(Box::new(lines), 1));
        Some("{prefix}: step {pos} of {len} ({percent}%), {msg}, about {left} left")
    };
    if let Some(style) = template.and_then(|t| ProgressStyle::with_template(t).ok()) {
        bar.set_style(
            style
                .with_key("left", AveragePace::default())
                .progress_chars("=> "),
        );
    }
    let prefix = LABEL.with(|l| match l.borrow().as_deref() {
        Some(label) => format!("{label}: {what}"),
        None => what.to_string(),
    });
    bar.set_prefix(prefix);
    bar
}

/// The time a stage has left at its average pace since the bar first saw it.
/// indicatif's own `{eta}` follows the last seconds' pace, and a stage that pauses at
/// intervals (Q-learning at each target copy, which recomputes every target along the
/// data's trajectories) read hours left minutes before it ended. A resumed stage's
/// pace counts from where it resumed.
#[derive(Clone, Default)]
struct AveragePace {
    from: Option<(u64, Instant)>,
}

impl ProgressTracker for AveragePace {
    fn clone_box(&self) -> Box<dyn ProgressTracker> {
        Box::new(self.clone())
    }

    fn tick(&mut self, state: &ProgressState, now: Instant) {
        self.from.get_or_insert((state.pos(), now));
    }

    fn reset(&mut self, _: &ProgressState, _: Instant) {
        self.from = None;
    }

    fn write(&self, state: &ProgressState, w: &mut dyn fmt::Write) {
        let left = self.from.zip(state.len()).and_then(|((pos, at), len)| {
            time_left(
                state.pos().saturating_sub(pos),
                at.elapsed(),
                len.saturating_sub(state.pos()),
            )
        });
        let _ = match left {
            Some(d) => write!(w, "{:#}", HumanDuration(d)),
            None => write!(w, "?"),
        };
    }
}

/// `left` steps at the pace of `done` steps in `took`; unknown before the first step.
fn time_left(done: u64, took: Duration, left: u64) -> Option<Duration> {
    (done > 0).then(|| took.mul_f64(left as f64 / done as f64))
}

/// A draw target that passes a bar's line on at most once per period, from the period's
/// end: the progress of a stage as log lines, where a bar redrawn in place would fill a
/// file with its every state.
#[derive(Debug)]
struct LogLines {
    every: Duration,
    /// When the last line was passed on (at first, when the bar was made).
    last: Mutex<Instant>,
    emit: fn(&str),
}

impl LogLines {
    fn new(every: Duration, emit: fn(&str)) -> Self {
        LogLines {
            every,
            last: Mutex::new(Instant::now()),
            emit,
        }
    }

    fn line(&self, s: &str) {
        let line = s.trim().replace(", ,", ",");
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        if line.is_empty() || last.elapsed() < self.every {
            return;
        }
        *last = Instant::now();
        (self.emit)(line.trim_end_matches(','));
    }
}

impl TermLike for LogLines {
    fn width(&self) -> u16 {
        200
    }

    fn move_cursor_up(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn move_cursor_down(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn move_cursor_right(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn move_cursor_left(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        self.line(s);
        Ok(())
    }

    fn write_str(&self, s: &str) -> io::Result<()> {
        self.line(s);
        Ok(())
    }

    fn clear_line(&self) -> io::Result<()> {
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static LINES: Mutex<Vec<String>> = Mutex::new(vec![]);

    fn keep(line: &str) {
        LINES.lock().unwrap().push(line.to_string());
    }

    /// A stage's progress reaches a log as whole lines, none before its period is out.
    #[test]
    fn progress_is_logged_once_per_period() {
        let bar = ProgressBar::with_draw_target(
            Some(100),
            ProgressDrawTarget::term_like(Box::new(LogLines::new(Duration::ZERO, keep))),
        );
        bar.set_style(
            ProgressStyle::with_template("{prefix}: step {pos} of {len}, {msg}").unwrap(),
        );
        bar.set_prefix("Q-learning");
        bar.set_position(40);
        bar.set_message("TD loss 1e-3");
        bar.set_position(50);
        let lines = LINES.lock().unwrap().clone();
        assert!(
            lines.contains(&"Q-learning: step 40 of 100".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"Q-learning: step 50 of 100, TD loss 1e-3".to_string()),
            "{lines:?}"
        );
        let slow = LogLines::new(Duration::from_secs(3600), |_| panic!("logged early"));
        slow.line("Q-learning: step 1 of 100");
    }

    /// The time left follows the stage's average pace, however its last seconds went.
    #[test]
    fn time_left_is_at_the_average_pace() {
        let minute = Duration::from_secs(60);
        assert_eq!(time_left(2000, minute, 8000), Some(4 * minute));
        assert_eq!(time_left(0, minute, 8000), None);
        assert_eq!(time_left(10, minute, 0), Some(Duration::ZERO));
        static SEEN: Mutex<Vec<String>> = Mutex::new(vec![]);
        let bar = ProgressBar::with_draw_target(
            Some(100),
            ProgressDrawTarget::term_like(Box::new(LogLines::new(Duration::ZERO, |line| {
                SEEN.lock().unwrap().push(line.to_string())
            }))),
        );
        bar.set_style(
            ProgressStyle::with_template("{pos}: {left}")
                .unwrap()
                .with_key("left", AveragePace::default()),
        );
        // Resumed at 30: nothing is known of the pace until a step is done.
        bar.set_position(30);
        std::thread::sleep(Duration::from_millis(100));
        bar.set_position(40);
        let seen = SEEN.lock().unwrap().clone();
        assert!(seen.contains(&"30: ?".to_string()), "{seen:?}");
        let at_40 = seen
            .iter()
            .find(|l| l.starts_with("40: "))
            .expect("a line at 40");
        assert!(at_40.ends_with('s') && !at_40.ends_with('?'), "{seen:?}");
    }
}
