//! Contexts: dimensions of a vector state that no transition changes within an episode
//! (a goal, a task, a setting of the episode), and the rows that change one anyway.
//!
//! Minari's PointMaze episodes go on from where the last goal was reached, and the first
//! observation of each still shows the last goal (gymnasium-robotics sets the new goal
//! after building that observation): its first transition changes the goal, a step no
//! action of the task makes. Mined as it is, such a row takes latent actions of its own
//! (five of eight on the chained medium maze), and Q-learning's maximum over them gives
//! every state the value of starting towards some new goal. [`carried`] finds these rows;
//! `laq train` leaves them out of mining and Q-learning, and says so.
//!
//! The same rule finds a value that each reset sets and the first step changes once (the
//! fingers of gymnasium-robotics' Fetch arm closing after every reset): that step too
//! is no action of the task, and mined it took labels of its own; kept, V of the arm
//! reaching for its goals ranked the states at 0.836, doubtful, against 0.892, trusted,
//! with those rows left out (docs/trust.md, "A robot arm").

use super::paths::never_jump;
use super::Dataset;

/// The least share of rows that go on from the row before for the data to show episodes
/// at all: in a replay buffer of independent transitions, or with `s'` shuffled, nearly
/// every row begins an "episode", no dimension would be seen changing within one, and
/// every dimension would pass for a context.
pub const MIN_CONTINUING: f64 = 0.5;

/// Which dimensions of `data`'s states are contexts: changed by no transition within an
/// episode (only by one where an episode begins, if at all). An episode begins at the
/// first row, wherever a row does not continue the one before ([`Dataset::continues`]),
/// and after a rewarded row ([`Dataset::reward_baseline`]): a task that goes on to a new
/// goal where the last was reached, without cutting its episode there, shows the new
/// goal from the row after the reward; where fewer than [`MIN_CONTINUING`] of the rows go
/// on from an unrewarded row (a dense reward), episodes alone begin one. None for frames
/// and long states ([`never_jump`]), and none where fewer than [`MIN_CONTINUING`] of the
/// rows go on from the row before (shuffled rows, a replay buffer).
///
/// ```
/// use laq::data::{contexts, Dataset};
/// // Position, then goal: two episodes, the second's first row still shows the old goal.
/// let d = Dataset {
///     obs_shape: vec![2],
///     observations: vec![0.0, 5.0, 1.0, 5.0, 2.0, 5.0, 2.0, 9.0, 3.0, 9.0].into(),
///     next_observations: vec![1.0, 5.0, 2.0, 5.0, 2.0, 9.0, 3.0, 9.0, 4.0, 9.0].into(),
///     rewards: vec![0.0, 1.0, 0.0, 0.0, 1.0],
///     terminals: vec![false; 5],
///     timeouts: Some(vec![false, true, false, false, true]),
///     next_missing: None,
///     actions: None,
/// };
/// assert_eq!(contexts::dims(&d), [false, true]);
/// assert_eq!(contexts::carried(&d, &contexts::dims(&d)), [2]);
/// ```
pub fn dims(data: &Dataset) -> Vec<bool> {
    let d = data.obs_dim();
    let n = data.len();
    if n == 0 || never_jump(data) {
        return vec![false; d];
    }
    let missing = |i: usize| data.next_missing.as_ref().is_some_and(|m| m[i]);
    let baseline = data.reward_baseline();
    // A dense reward follows nearly every row: then episodes alone begin one.
    for after_rewards in [true, false] {
        let mut within = vec![false; d];
        let mut continuing = 0usize;
        for i in 1..n {
            let after = after_rewards && data.rewards[i - 1] > baseline;
            if !data.continues(i - 1) || after || missing(i) {
                continue;
            }
            continuing += 1;
            let (a, b) = (data.obs_row(i), data.next_obs_row(i));
            for (w, (x, y)) in within.iter_mut().zip(a.iter().zip(b.iter())) {
                *w |= x != y;
            }
        }
        if continuing as f64 >= MIN_CONTINUING * n as f64 {
            return within.iter().map(|w| !w).collect();
        }
    }
    vec![false; d]
}

/// The rows whose transition changes one of the `contexts` ([`dims`]): each begins an
/// episode (or follows a reward), and carries the last episode's context into it.
pub fn carried(data: &Dataset, contexts: &[bool]) -> Vec<usize> {
    if !contexts.contains(&true) {
        return vec![];
    }
    let missing = |i: usize| data.next_missing.as_ref().is_some_and(|m| m[i]);
    (0..data.len())
        .filter(|&i| {
            !missing(i)
                && data
                    .obs_row(i)
                    .iter()
                    .zip(data.next_obs_row(i).iter())
                    .zip(contexts)
                    .any(|((x, y), &c)| c && x != y)
        })
        .collect()
}

/// Which of `data`'s values are set once an episode and differ between episodes
/// ([`dims`] that vary over the rows that change none of them, [`carried`]): a goal, a
/// task; not a gripper that each reset opens and the first step closes, which shows one
/// value on every row but the carried ones.
pub fn goals(data: &Dataset) -> Vec<usize> {
    let contexts = dims(data);
    let mut is_carried = vec![false; data.len()];
    for i in carried(data, &contexts) {
        is_carried[i] = true;
    }
    let mut rows = (0..data.len()).filter(|&i| !is_carried[i]);
    let Some(first) = rows.next().map(|i| data.obs_row(i)) else {
        return vec![];
    };
    let varies = rows.fold(vec![false; contexts.len()], |mut varies, i| {
        let row = data.obs_row(i);
        for (v, (x, y)) in varies.iter_mut().zip(row.iter().zip(first.iter())) {
            *v |= x != y;
        }
        varies
    });
    (0..contexts.len())
        .filter(|&j| varies[j] && contexts[j])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Episodes of `len` rows along dim 0, each heading for its own goal (dim 1); with
    /// `chained` an episode goes on from the last one's end and its first row still shows
    /// the last goal.
    fn episodes(count: usize, len: usize, chained: bool) -> Dataset {
        let (mut obs, mut next, mut timeouts) = (vec![], vec![], vec![]);
        let mut x = 0.0f32;
        for e in 0..count {
            let goal = e as f32 * 10.0;
            if !chained {
                x = 0.0;
            }
            for t in 0..len {
                let shown = if chained && e > 0 && t == 0 {
                    goal - 10.0
                } else {
                    goal
                };
                obs.extend([x, shown]);
                x += 1.0;
                next.extend([x, goal]);
                timeouts.push(t + 1 == len);
            }
        }
        let n = timeouts.len();
        Dataset {
            obs_shape: vec![2],
            observations: obs.into(),
            next_observations: next.into(),
            rewards: timeouts.iter().map(|&t| t as u8 as f32).collect(),
            terminals: vec![false; n],
            timeouts: Some(timeouts),
            next_missing: None,
            actions: None,
        }
    }

    #[test]
    fn a_chained_episode_s_first_row_is_carried() {
        let d = episodes(4, 5, true);
        assert_eq!(dims(&d), [false, true]);
        assert_eq!(carried(&d, &dims(&d)), [5, 10, 15]);
        let reset = episodes(4, 5, false);
        assert_eq!(dims(&reset), [false, true]);
        assert!(carried(&reset, &dims(&reset)).is_empty());
    }

    /// One long episode whose goal changes on the row after each reward (the goal is set
    /// once the last is reached): the same context, the same rows carried.
    #[test]
    fn a_goal_that_changes_after_a_reward_is_a_context() {
        let chained = episodes(4, 5, true);
        let mut one = chained.clone();
        one.timeouts = None;
        assert_eq!(dims(&one), [false, true]);
        assert_eq!(carried(&one, &dims(&one)), [5, 10, 15]);
        // Rewarded on every row: episodes alone tell a context, here none (one episode);
        // the chained episodes' still.
        one.rewards = vec![1.0; one.len()];
        assert_eq!(dims(&one), [false, false]);
        assert!(carried(&one, &dims(&one)).is_empty());
        let dense = Dataset {
            rewards: vec![0.5; chained.len()],
            ..chained
        };
        assert_eq!(carried(&dense, &dims(&dense)), [5, 10, 15]);
    }

    #[test]
    fn no_context_without_episodes() {
        // s' of other rows: no row goes on from the one before.
        let mut d = episodes(4, 5, true);
        let n = d.len();
        let next = d.next_observations.to_f32().into_owned();
        let shuffled: Vec<f32> = (0..n)
            .flat_map(|i| next[((i * 7 + 3) % n) * 2..((i * 7 + 3) % n) * 2 + 2].to_vec())
            .collect();
        d.next_observations = shuffled.into();
        assert_eq!(dims(&d), [false, false]);
        assert!(carried(&d, &dims(&d)).is_empty());
    }

    #[test]
    fn a_dimension_changed_within_an_episode_is_no_context() {
        let mut d = episodes(4, 5, true);
        let mut next = d.next_observations.to_f32().into_owned();
        next[2 * 7 + 1] += 0.5;
        d.next_observations = next.into();
        assert_eq!(dims(&d), [false, false]);
        assert!(carried(&d, &dims(&d)).is_empty());
    }
}
