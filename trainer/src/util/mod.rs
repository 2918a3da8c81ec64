//! What every layer uses: atomic file writes, the one safetensors writer, logging and
//! progress bars, statistics, nearest neighbours, the memory left for a dataset, numbers
//! in JSON that may be NaN.

pub mod io;
pub mod json;
pub mod memory;
pub mod neighbours;
pub mod parallel;
pub mod progress;
pub mod safetensors;
pub mod stats;

/// Whole numbers as runs of neighbours, each run joined by `to`, in increasing order and
/// once each: `0..=3, 7` (episodes), `2-3` (dimensions).
///
/// ```
/// assert_eq!(laq::util::runs([3, 0, 1, 2, 7, 9, 8], "..="), "0..=3, 7..=9");
/// assert_eq!(laq::util::runs([0, 4, 5, 6, 9], "-"), "0, 4-6, 9");
/// assert_eq!(laq::util::runs([5], "..="), "5");
/// assert_eq!(laq::util::runs([], "-"), "");
/// ```
pub fn runs(values: impl IntoIterator<Item = u64>, to: &str) -> String {
    let mut v: Vec<u64> = values.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    let mut parts = vec![];
    let mut k = 0;
    while k < v.len() {
        let mut j = k;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if j == k {
            v[k].to_string()
        } else {
            format!("{}{to}{}", v[k], v[j])
        });
        k = j + 1;
    }
    parts.join(", ")
}
