//! Whether an array about to be read fits in the memory left: a dataset is held in
//! memory whole (u8 frames as u8), and an allocation larger than the machine can give
//! is not an error on Linux but a kill, part way through reading, with no message.

use anyhow::{bail, Result};

/// Bytes this process can still take, where the system says: the kernel's estimate of
/// memory available without swapping (`MemAvailable`) plus free swap, and no more than a
/// container's limit ([`container_limit`]) less what this process holds. `None` where
/// neither is known (not Linux).
pub fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let field = |name: &str| -> Option<u64> {
        let m = meminfo.as_deref()?;
        let line = m.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    };
    let swap = field("SwapFree:").unwrap_or(0);
    let host = field("MemAvailable:").map(|m| m + swap);
    let limit = container_limit(
        |name| std::fs::read_to_string(format!("/sys/fs/cgroup/{name}")).ok(),
        swap,
    );
    // Others in the container only lower what is left, so the limit less this process's
    // own resident memory is an upper bound: never a refusal of what would have fitted.
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

/// A container's limit on memory and swap together, from the files of its cgroup
/// (`read` gives a file under `/sys/fs/cgroup` by name): cgroup v2's `memory.max` plus
/// `memory.swap.max`, or cgroup v1's `memory/memory.memsw.limit_in_bytes` (memory and
/// swap) or else `memory/memory.limit_in_bytes`; a swap limit that is not set counts as
/// all the free swap (`swap`). `None` where no limit is set ("max", or v1's largest page
/// multiple) or no cgroup file is read.
///
/// ```
/// use laq::util::memory::container_limit;
///
/// let v2 = |f: &str| match f {
///     "memory.max" => Some("2147483648\n".to_string()),
///     "memory.swap.max" => Some("max\n".to_string()),
///     _ => None,
/// };
/// assert_eq!(container_limit(v2, 100), Some(2_147_483_648 + 100));
/// let v1 = |f: &str| (f == "memory/memory.limit_in_bytes").then(|| "1073741824".to_string());
/// assert_eq!(container_limit(v1, 100), Some(1_073_741_824 + 100));
/// let unlimited = |f: &str| (f == "memory/memory.limit_in_bytes").then(|| "9223372036854771712".to_string());
/// assert_eq!(container_limit(unlimited, 100), None);
/// ```
pub fn container_limit(read: impl Fn(&str) -> Option<String>, swap: u64) -> Option<u64> {
    // v1 writes "no limit" as the largest multiple of the page size below 2^63.
    let number = |name: &str| -> Option<u64> {
        let v: u64 = read(name)?.trim().parse().ok()?;
        (v < 1 << 62).then_some(v)
    };
    if let Some(m) = number("memory.max") {
        return Some(m.saturating_add(number("memory.swap.max").map_or(swap, |s| s.min(swap))));
    }
    if let Some(both) = number("memory/memory.memsw.limit_in_bytes") {
        return Some(both);
    }
    number("memory/memory.limit_in_bytes").map(|m| m.saturating_add(swap))
}

/// An error when `bytes` (of `what`, a key or a file, and `detail`, its shape and type)
/// exceed what [`available`] says is left; nothing is said where that is not known.
pub fn ensure_fits(what: &str, detail: &str, bytes: u64) -> Result<()> {
    #[cfg(test)]
    if let Some(left) = LEFT.with(|l| l.get()) {
        return check(what, detail, bytes, Some(left));
    }
    check(what, detail, bytes, available())
}

#[cfg(test)]
thread_local! {
    /// What [`ensure_fits`] takes as left on this thread, for the readers' tests.
    static LEFT: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// `f` with `bytes` taken as the memory left, on this thread.
#[cfg(test)]
pub(crate) fn with_left<T>(bytes: u64, f: impl FnOnce() -> T) -> T {
    LEFT.with(|l| l.set(Some(bytes)));
    let out = f();
    LEFT.with(|l| l.set(None));
    out
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
            size(bytes),
            size(left)
        );
    }
    Ok(())
}

fn size(bytes: u64) -> String {
    let b = bytes as f64;
    match b {
        b if b >= 1e9 => format!("{:.1} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.1} MB", b / 1e6),
        b => format!("{:.1} kB", b / 1e3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each reader asks before it holds: a file that does not fit is refused with its
    /// name and what it needs, one that fits is read.
    #[test]
    fn the_readers_refuse_what_does_not_fit() {
        use crate::data::{Dataset, ObsStorage};
        let data = crate::envs::squares::moving_squares(50, 16, false, 0);
        let (n, d) = (data.len(), data.obs_dim());
        let dir = tempfile::tempdir().unwrap();
        // 2 x 38,400 bytes of u8 frames, and the rewards, flags and actions.
        for (name, why) in [
            ("d.npz", "the archive's"),
            ("d.safetensors", "a .safetensors file"),
        ] {
            let p = dir.path().join(name);
            data.save_as(&p, ObsStorage::U8).unwrap();
            let e = with_left(50_000, || Dataset::load(&p)).unwrap_err();
            let msg = format!("{e:#}");
            assert!(
                msg.contains(&format!("cannot read {}", p.display())),
                "{msg}"
            );
            assert!(msg.contains(why) && msg.contains("50.0 kB left"), "{msg}");
            assert!(with_left(1 << 30, || Dataset::load(&p)).is_ok(), "{name}");
        }
        // Next observations built from the rows that follow: twice the frames again.
        let mut arrays = std::collections::BTreeMap::new();
        let frames = crate::data::array::RawArray {
            dtype: crate::data::array::DType::U8,
            shape: [vec![n], data.obs_shape.clone()].concat(),
            bytes: vec![7; n * d],
        };
        arrays.insert("observations".to_string(), frames);
        let flags = crate::data::array::RawArray {
            dtype: crate::data::array::DType::Bool,
            shape: vec![n],
            bytes: (0..n).map(|i| u8::from(i == n - 1)).collect(),
        };
        arrays.insert("terminals".to_string(), flags);
        let e = with_left(40_000, || {
            crate::data::following::next_from_rows(&mut arrays.clone())
        })
        .unwrap_err();
        assert!(e.to_string().contains("`next_observations`"), "{e}");
        assert!(
            with_left(1 << 30, || crate::data::following::next_from_rows(
                &mut arrays
            ))
            .is_ok()
        );
    }

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
