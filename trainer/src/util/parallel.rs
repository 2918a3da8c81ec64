//! Independent runs of a study side by side: as many at once as there are cores for them
//! (each run's tensor operations take `RAYON_NUM_THREADS` cores, 1 by default; the
//! environment variable `LAQ_JOBS` sets the number), results in input order, so that a
//! study's figures do not depend on how many ran at once.

use crate::util::progress;
use anyhow::Result;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

thread_local! {
    /// Set on the threads of [`map`].
    static WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// How many runs fit on this machine at once (1 on a GPU, whose runs share one device,
/// and 1 inside a run that [`map`] started).
///
/// ```
/// assert!(laq::util::parallel::jobs(&candle_core::Device::Cpu) >= 1);
/// ```
pub fn jobs(device: &candle_core::Device) -> usize {
    // A run that is itself one of several side by side has its core already.
    if !device.is_cpu() || WORKER.with(|w| w.get()) {
        return 1;
    }
    if let Some(n) = std::env::var("LAQ_JOBS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        return n.max(1);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_run = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1);
    (cores / per_run).max(1)
}

/// `f` of every item, `jobs` at a time, in the items' order; the first error in that
/// order, if any.
///
/// ```
/// let squares = laq::util::parallel::map(&[1, 2, 3], 2, |&x| Ok(x * x))?;
/// assert_eq!(squares, [1, 4, 9]);
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn map<T, R, F>(items: &[T], jobs: usize, f: F) -> Result<Vec<R>>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> Result<R> + Sync,
{
    if jobs <= 1 || items.len() <= 1 {
        return items.iter().map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<R>>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for worker in 0..jobs.min(items.len()) {
            let (next, slots, f) = (&next, &slots, &f);
            s.spawn(move || {
                WORKER.with(|w| w.set(true));
                let work = || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(r);
                    }
                };
                // One worker shows its runs' progress: bars side by side on one terminal
                // line would overwrite each other, and log lines of several would not
                // say whose they are.
                match worker {
                    0 => work(),
                    _ => progress::hidden(work),
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| Err(anyhow::anyhow!("a parallel run ended without a result")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_started_by_map_gets_one_job() {
        let inner = map(&[0, 1], 2, |_| Ok(jobs(&candle_core::Device::Cpu))).unwrap();
        assert_eq!(inner, [1, 1]);
    }

    #[test]
    fn results_keep_the_input_order_and_the_first_error() {
        let items: Vec<u64> = (0..20).collect();
        let out = map(&items, 3, |&x| {
            std::thread::sleep(std::time::Duration::from_millis(20 - x));
            Ok(x * 2)
        })
        .unwrap();
        assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        let e = map(&items, 4, |&x| {
            if x == 7 || x == 12 {
                anyhow::bail!("item {x}")
            }
            Ok(x)
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "item 7");
    }
}
