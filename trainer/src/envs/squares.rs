//! Moving squares: a tiny synthetic image environment for tests and benchmarks.

use crate::data::{Actions, Dataset};

/// Synthetic image data: a bright 4x4 square on a dark 3-channel `size` x `size`
/// image, moved 3 pixels up, down, left or right (ground-truth actions 0-3). With
/// `chain`, the square instead sits on one row at one of 8 columns and moves left (0) or
/// right (1); reaching column 7 ends the episode with reward 1 (`size` at least 28).
pub fn moving_squares(n: usize, size: usize, chain: bool, seed: u64) -> Dataset {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let colour = [230u8, 120, 60];
    let frame = |x: usize, y: usize| {
        let mut f = vec![20u8; 3 * size * size];
        for (c, &v) in colour.iter().enumerate() {
            for dy in 0..4 {
                for dx in 0..4 {
                    f[c * size * size + (y + dy) * size + x + dx] = v;
                }
            }
        }
        f
    };
    let (mut o, mut nx, mut r, mut t, mut a) = (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..n {
        if chain {
            let col = rng.random_range(0..7usize);
            let act = rng.random_range(0..2usize);
            let next = if act == 1 {
                col + 1
            } else {
                col.saturating_sub(1)
            };
            let y = size / 2 - 2;
            o.extend(frame(2 + 3 * col, y));
            nx.extend(frame(2 + 3 * next, y));
            r.push((next == 7) as u8 as f32);
            t.push(next == 7);
            a.push(act as i64);
        } else {
            let (lo, hi) = (3, size - 7);
            let (x, y) = (rng.random_range(lo..=hi), rng.random_range(lo..=hi));
            let act = rng.random_range(0..4usize);
            let (x2, y2) = match act {
                0 => (x, y - 3),
                1 => (x, y + 3),
                2 => (x - 3, y),
                _ => (x + 3, y),
            };
            o.extend(frame(x, y));
            nx.extend(frame(x2, y2));
            r.push(0.0);
            t.push(false);
            a.push(act as i64);
        }
    }
    Dataset {
        obs_shape: vec![3, size, size],
        observations: o.into(),
        next_observations: nx.into(),
        rewards: r,
        terminals: t,
        timeouts: None,
        next_missing: None,
        actions: Some(Actions::Discrete(a)),
    }
}
