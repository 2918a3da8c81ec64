//! Whether an array about to be read fits in the memory left: a dataset is held in
//! memory whole (u8 frames as u8), and an allocation larger than the machine can give
//! is not an error on Linux but a kill, part way through reading, with no message.

use anyhow::{bail, Result};

/// Bytes this process can still take, where the system says: the kernel's estimate of
/// memory available without swapping (`MemAvailable`) plus free swap, and no more than a
/// container's limit (cgroup v2 `memory.max`) less what this process holds. `None` where
/// neither is known (not Linux).
pub fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let host = meminfo.as_deref().and_then(|m| {
        let field = |name: &str| -> Option<u64> {
            let line = m.lines().find(|l| l.starts_with(name))?;
            let kb: u64 = line[name.len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some(kb * 1024)
        };
        Some(field("MemAvailable:")? + field("SwapFree:").unwrap_or(0))
    });
    // Others in the container only lower what is left, so the limit less this process's
    // own resident memory is an upper bound: never a refusal of what would have fitted.
    let limit = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    let resident = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages * 4096);
    let contained = limit.map(|l| l.saturating_sub(resident.unwrap_or(0)));
    match (host, contained) {
        (Some(h), Some(c)) => Some(h.min(c)),
        (h, c) => h.or(c),
    }
}

/// An error when `bytes` (of `what`, a key or a file, and `detail`, its shape and type)
/// exceed what [`available`] says is left; nothing is said where that is not known.
pub fn ensure_fits(what: &str, detail: &str, bytes: u64) -> Result<()> {
    check(what, detail, bytes, available())
}

/// [`ensure_fits`] against a given amount of memory left.
///
/// ```
/// use laq::util::memory::check;
///
/// assert!(check("`rewards`", "[1000] f32", 4_000, Some(1 << 30)).is_ok());
/// assert!(check("`rewards`", "[1000] f32", 4_000, None).is_ok());
/// let e = check("`observations`", "[1000000, 4, 84, 84] u8", 28_224_000_000, Some(21_900_000_000));
/// let msg = e.unwrap_err().to_string();
/// assert!(msg.contains("`observations` ([1000000, 4, 84, 84] u8): 28.2 GB"), "{msg}");
/// assert!(msg.contains("21.9 GB"), "{msg}");
/// ```
pub fn check(what: &str, detail: &str, bytes: u64, available: Option<u64>) -> Result<()> {
    let Some(left) = available else {
        return Ok(());
    };
    if bytes > left {
        bail!(
            "{what} ({detail}): {} in memory, and this machine has {} left; laq holds a \
             dataset in memory whole (u8 frames as u8, next observations too), so give it \
             fewer transitions (a file of part of the data) or smaller frames",
            gigabytes(bytes),
            gigabytes(left)
        );
    }
    Ok(())
}

fn gigabytes(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_left_is_known_here_and_an_array_beyond_it_is_refused() {
        assert!(ensure_fits("`x`", "[1] u8", 1).is_ok());
        if cfg!(target_os = "linux") {
            assert!(available().is_some_and(|left| left > 0));
            let e = ensure_fits("`x`", "[huge] u8", u64::MAX).unwrap_err();
            assert!(e.to_string().contains("`x` ([huge] u8): "), "{e}");
        }
    }
}
