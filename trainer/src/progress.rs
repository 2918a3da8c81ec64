//! Progress bars for long stages: drawn on a terminal, silent when stderr is not one
//! (logs, CI) or when `LAQ_QUIET` is set.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    if std::io::stderr().is_terminal() && std::env::var_os("LAQ_QUIET").is_none() {
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
