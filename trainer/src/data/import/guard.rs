//! Decoders that panic on some damaged inputs, run so that the panic becomes an error.

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    /// Whether this thread is decoding, whose panics [`guarded`] reports.
    static DECODING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, with a panic turned into its message. Decoders (Parquet's, the video ones)
/// meet some damaged inputs with a panic rather than an error, and a damaged file must be
/// one clear error: so the panic is caught, and its default report (several lines on
/// stderr) is left out for this thread only.
pub fn guarded<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !DECODING.with(Cell::get) {
                previous(info);
            }
        }));
    });
    DECODING.with(|d| d.set(true));
    let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    DECODING.with(|d| d.set(false));
    got.map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into())
    })
}
