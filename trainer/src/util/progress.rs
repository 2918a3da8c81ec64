//! What a run tells its user while it works: levelled log lines on stderr (`-q` keeps
//! warnings and errors, `-v` adds debug detail, `-vv` trace) and progress bars for long
//! stages, drawn on a terminal only, so logs and CI output stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

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

/// A progress bar of `len` steps for the stage `what`: hidden unless stderr is a
/// terminal, and hidden with `-q`, `LAQ_QUIET` or inside [`hidden`].
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    if std::io::stderr().is_terminal()
        && std::env::var_os("LAQ_QUIET").is_none()
        && !QUIET.load(Ordering::Relaxed)
        && !HIDDEN.with(|h| h.get())
    {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    }
    if let Ok(style) =
        ProgressStyle::with_template("{prefix:>24} [{bar:30}] {pos}/{len} {msg} ({eta})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(what.to_string());
    bar
}
