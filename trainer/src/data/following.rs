//! Next observations for sources that record none: each row's is the row that follows it
//! in its episode (D4RL's layout, and arrays saved without `next_observations`).

use super::RawArray;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// Which rows stay, and where each one's next observation comes from, for a source of
/// `n` rows whose episodes end at a terminal, at a timeout and at the last row.
///
/// No row takes its next observation from another episode, so the last row of each
/// episode has none. A terminal one is kept (its value is its reward; nothing bootstraps
/// past it), its next observation a copy of its own, marked missing; any other is left
/// out, since its value would need the next observation, and the row before it becomes
/// the episode's cut (a timeout).
///
/// ```
/// use laq::data::following::Following;
///
/// // Two episodes: rows 0-2 end in a terminal, rows 3-4 are cut by the end of the file.
/// let f = Following::of(&[false, false, true, false, false], &[false; 5]);
/// assert_eq!(f.keep, [0, 1, 2, 3]);
/// assert_eq!(f.next_row, [1, 2, 2, 4]);
/// assert_eq!(f.missing, [false, false, true, false]);
/// assert_eq!(f.timeouts, [false, false, false, true]);
/// assert_eq!((f.episodes, f.dropped()), (2, 1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Following {
    /// Rows of the source that stay, in order.
    pub keep: Vec<usize>,
    /// For each kept row, the source row that is its next observation.
    pub next_row: Vec<usize>,
    /// For each kept row: terminal.
    pub terminals: Vec<bool>,
    /// For each kept row: the last of an episode cut without a terminal.
    pub timeouts: Vec<bool>,
    /// For each kept row: a terminal without a next observation.
    pub missing: Vec<bool>,
    /// Episodes in the source.
    pub episodes: usize,
    rows: usize,
}

impl Following {
    /// The rows of a source with these `terminals` and `timeouts` (one each per row).
    pub fn of(terminals: &[bool], timeouts: &[bool]) -> Self {
        let n = terminals.len();
        let ends: Vec<bool> = (0..n)
            .map(|i| terminals[i] || timeouts.get(i).copied().unwrap_or(false) || i + 1 == n)
            .collect();
        let keep: Vec<usize> = (0..n).filter(|&i| !ends[i] || terminals[i]).collect();
        Following {
            next_row: keep
                .iter()
                .map(|&i| if ends[i] { i } else { i + 1 })
                .collect(),
            terminals: keep.iter().map(|&i| terminals[i]).collect(),
            // The last kept row of an episode cut without a terminal is where it is cut.
            timeouts: keep
                .iter()
                .map(|&i| !ends[i] && ends[i + 1] && !terminals[i + 1])
                .collect(),
            missing: keep.iter().map(|&i| ends[i]).collect(),
            episodes: ends.iter().filter(|&&e| e).count(),
            keep,
            rows: n,
        }
    }

    /// Itself, or an error where no row stays.
    pub fn any_left(self) -> Result<Self> {
        if self.keep.is_empty() {
            bail!(
                "no transition left: every episode is a single row cut without a terminal, \
                 and without `next_observations` such a row needs the next one of its episode"
            );
        }
        Ok(self)
    }

    /// Rows of the source left out: the last rows of episodes cut without a terminal.
    pub fn dropped(&self) -> usize {
        self.rows - self.keep.len()
    }
}

/// Arrays of the dataset format saved without `next_observations` (D4RL's layout in an
/// `.npz`): each row's next observation becomes the row after it in its episode, as
/// [`Following`] says, and every array of one value per row keeps the rows that stay.
/// `None` where the arrays have `next_observations` (or no `observations`), unchanged.
pub fn next_from_rows(arrays: &mut BTreeMap<String, RawArray>) -> Result<Option<Following>> {
    if arrays.contains_key("next_observations") {
        return Ok(None);
    }
    let Some(obs) = arrays.get("observations") else {
        return Ok(None);
    };
    obs.check_size("observations")?;
    let n = obs.shape.first().copied().unwrap_or(0);
    if arrays.contains_key("next_missing") {
        bail!(
            "key `next_missing` without `next_observations`: there are no next \
             observations to be missing"
        );
    }
    let flags = |k: &str| -> Result<Option<Vec<bool>>> {
        let Some(a) = arrays.get(k) else {
            return Ok(None);
        };
        a.check_size(k)?;
        if a.shape != [n] {
            bail!("key `{k}`: expected shape [{n}], got {:?}", a.shape);
        }
        a.flags(k).map(Some)
    };
    let Some(terminals) = flags("terminals")? else {
        bail!(
            "missing keys `next_observations` and `terminals`: without next observations, \
             each row's is the next row of its episode, and episodes end at `terminals` \
             (and `timeouts`)"
        );
    };
    let timeouts = flags("timeouts")?.unwrap_or_else(|| vec![false; n]);
    let f = Following::of(&terminals, &timeouts).any_left()?;
    // The next observations, then the kept rows of each array, are new copies.
    let row = (obs.bytes.len() / n.max(1)) as u64;
    crate::util::memory::ensure_fits(
        "`next_observations`",
        "each row's next row in its episode, beside a copy of the kept rows",
        row.saturating_mul(2 * f.next_row.len() as u64),
    )?;
    let next = rows(obs, &f.next_row);
    for (k, a) in arrays.iter_mut() {
        if a.shape.first() == Some(&n) {
            a.check_size(k)?;
            *a = rows(a, &f.keep);
        }
    }
    arrays.insert("next_observations".into(), next);
    for (k, v) in [
        ("terminals", &f.terminals),
        ("timeouts", &f.timeouts),
        ("next_missing", &f.missing),
    ] {
        arrays.insert(k.into(), RawArray::from_bool(vec![v.len()], v));
    }
    Ok(Some(f))
}

/// Rows `idx` of `a` (shape `[n, ...]`, its size checked), in that order.
fn rows(a: &RawArray, idx: &[usize]) -> RawArray {
    let width = a.bytes.len() / a.shape[0].max(1);
    let mut shape = a.shape.clone();
    shape[0] = idx.len();
    RawArray {
        dtype: a.dtype,
        shape,
        bytes: idx
            .iter()
            .flat_map(|&i| &a.bytes[i * width..(i + 1) * width])
            .copied()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn episodes_end_at_terminals_timeouts_and_the_last_row() {
        // Episode rows 0-1 cut by a timeout, 2-3 terminal, 4 alone and terminal, 5-6 cut
        // by the end.
        let t = [false, false, false, true, true, false, false];
        let o = [false, true, false, false, false, false, false];
        let f = Following::of(&t, &o);
        assert_eq!(f.keep, [0, 2, 3, 4, 5]);
        assert_eq!(f.next_row, [1, 3, 3, 4, 6]);
        assert_eq!(f.terminals, [false, false, true, true, false]);
        assert_eq!(f.timeouts, [true, false, false, false, true]);
        assert_eq!(f.missing, [false, false, true, true, false]);
        assert_eq!((f.episodes, f.dropped()), (4, 2));
        // A single row cut without a terminal leaves nothing.
        assert!(Following::of(&[false], &[true]).keep.is_empty());
    }
}
