//! Controller selection and potential-based reward shaping.

use crate::lookahead::best;
#[cfg(feature = "batch")]
use crate::BATCH;
use crate::{Error, Model};

/// What a controller predicts besides the next state: the reward of the step and
/// whether it ends the episode. Defaults to reward 0, not terminal.
///
/// ```
/// use laq_runtime::Outcome;
///
/// assert_eq!(Outcome::default(), Outcome { reward: 0.0, terminal: false });
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Outcome {
    /// Reward of the step.
    pub reward: f32,
    /// Whether the predicted state is terminal (its value is then 0).
    pub terminal: bool,
}

/// A candidate low-level controller, as seen by [`Model::select`]: it predicts the
/// state it would lead to from `state`.
///
/// `next` has the model's `input_dim` elements; write the predicted state into it.
/// Return [`Error::Controller`] (or any error) if the prediction fails; the candidate is
/// then reported as [`Status::Failed`] and cannot win.
///
/// ```
/// use laq_runtime::{Controller, Error, Outcome};
///
/// /// Moves one unit along an axis.
/// struct Step(usize);
///
/// impl Controller for Step {
///     fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, Error> {
///         next.copy_from_slice(state);
///         *next.get_mut(self.0).ok_or(Error::Controller)? += 1.0;
///         Ok(Outcome::default())
///     }
/// }
///
/// let mut next = [0.0; 2];
/// Step(1).predict(&[3.0, 4.0], &mut next)?;
/// assert_eq!(next, [3.0, 5.0]);
/// # Ok::<(), Error>(())
/// ```
pub trait Controller {
    /// Predicts the next state (into `next`) and the step's outcome.
    fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, Error>;
}

impl<C: Controller + ?Sized> Controller for &C {
    fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, Error> {
        (**self).predict(state, next)
    }
}

/// A state slice is a controller whose predicted next state is that slice (reward 0,
/// not terminal): a table of predicted states, e.g. `[&[f32]; K]`, is a list of
/// controllers.
///
/// ```
/// use laq_runtime::{Controller, Outcome};
///
/// let table: [&[f32]; 2] = [&[0.0, 1.0], &[1.0, 0.0]];
/// let mut next = [0.0; 2];
/// assert_eq!(table[1].predict(&[5.0, 5.0], &mut next)?, Outcome::default());
/// assert_eq!(next, [1.0, 0.0]);
/// # Ok::<(), laq_runtime::Error>(())
/// ```
impl Controller for [f32] {
    fn predict(&self, _state: &[f32], next: &mut [f32]) -> Result<Outcome, Error> {
        if self.len() != next.len() {
            return Err(Error::StateLength);
        }
        next.copy_from_slice(self);
        Ok(Outcome::default())
    }
}

/// A precomputed prediction: a next state with its outcome (a row of a table of
/// predictions that also carries rewards and terminal flags).
///
/// ```
/// use laq_runtime::{Controller, Outcome, Predicted};
///
/// let goal = Predicted { next: &[5.0, 5.0], outcome: Outcome { reward: 1.0, terminal: true } };
/// let mut next = [0.0; 2];
/// assert!(goal.predict(&[4.0, 4.0], &mut next)?.terminal);
/// # Ok::<(), laq_runtime::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Predicted<'a> {
    /// The predicted next state.
    pub next: &'a [f32],
    /// The predicted outcome of the step.
    pub outcome: Outcome,
}

impl Controller for Predicted<'_> {
    fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, Error> {
        self.next.predict(state, next)?;
        Ok(self.outcome)
    }
}

/// Why a candidate can or cannot be selected.
///
/// ```
/// use laq_runtime::Status;
///
/// assert!(Status::Valid.is_valid());
/// assert!(!Status::OutOfDistribution.is_valid());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Status {
    /// Scored; may win.
    Valid,
    /// The predicted state, the reward or the score is NaN or infinite.
    NonFinite,
    /// The predicted state fails the density gate.
    OutOfDistribution,
    /// The controller returned an error.
    Failed,
}

impl Status {
    /// Whether the candidate may be selected.
    ///
    /// ```
    /// assert!(laq_runtime::Status::Valid.is_valid());
    /// ```
    pub const fn is_valid(self) -> bool {
        matches!(self, Status::Valid)
    }
}

/// The per-candidate report of [`Model::select`].
///
/// ```
/// use laq_runtime::{Candidate, Status};
///
/// let c = Candidate::default();
/// assert_eq!(c.status, Status::Failed);
/// assert!(c.score.is_nan());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Candidate {
    /// Whether the candidate could be scored.
    pub status: Status,
    /// The predicted outcome (reward 0 and not terminal for failed candidates).
    pub outcome: Outcome,
    /// `V(next)` in the units of the rewards, [`Model::value_in_data_units`] (0 for
    /// terminal states; raw, ungated value for out-of-distribution states; NaN if not
    /// evaluated).
    pub value: f32,
    /// `log p(next)` under the density gate, if the model has one and it was evaluated.
    pub log_density: Option<f32>,
    /// `reward + gamma * V(next)`, with `V := 0` for terminal and out-of-distribution
    /// states (NaN if not evaluated).
    pub score: f32,
}

impl Default for Candidate {
    fn default() -> Self {
        Candidate {
            status: Status::Failed,
            outcome: Outcome::default(),
            value: f32::NAN,
            log_density: None,
            score: f32::NAN,
        }
    }
}

impl Model<'_> {
    /// Scores one candidate; `next` holds `input_dim` elements, `eval` the rest of the
    /// scratch.
    fn score<C: Controller + ?Sized>(
        &self,
        controller: &C,
        state: &[f32],
        next: &mut [f32],
        eval: &mut [f32],
    ) -> Candidate {
        let (c, needs_value) = self.predict_candidate(controller, state, next);
        if !needs_value {
            return c;
        }
        let value = self.value(next, eval);
        self.scored(c, next, value)
    }

    /// The candidate as far as it goes without `V(next)`, and whether it needs it: a
    /// failed or non-finite prediction and a terminal state are final.
    pub(crate) fn predict_candidate<C: Controller + ?Sized>(
        &self,
        controller: &C,
        state: &[f32],
        next: &mut [f32],
    ) -> (Candidate, bool) {
        let mut c = Candidate::default();
        let Ok(outcome) = controller.predict(state, next) else {
            return (c, false);
        };
        c.outcome = outcome;
        c.status = Status::NonFinite;
        if !outcome.reward.is_finite() || !next.iter().all(|v| v.is_finite()) {
            return (c, false);
        }
        if outcome.terminal {
            c.value = 0.0;
            c.score = outcome.reward;
            c.status = Status::Valid;
            return (c, false);
        }
        (c, true)
    }

    /// The candidate scored with `value`, `V(next)` (an error leaves it non-finite).
    fn scored(&self, mut c: Candidate, next: &[f32], value: Result<f32, Error>) -> Candidate {
        let Ok(value) = value else {
            return c;
        };
        // In the rewards' units, so that a reward and a value add up where V was
        // learned above a cost per step.
        c.value = self.value_in_data_units(value);
        if self.gate(&mut c, next) {
            c.score = c.outcome.reward + self.gamma() * c.value;
            if c.score.is_finite() {
                c.status = Status::Valid;
            }
        }
        c
    }

    /// Records the log-density of `next` in `c`; false when the density gate puts `next`
    /// outside the data, and then `c` is scored by its reward alone and marked
    /// [`Status::OutOfDistribution`].
    pub(crate) fn gate(&self, c: &mut Candidate, next: &[f32]) -> bool {
        c.log_density = self.log_density(next).ok().flatten();
        let inside = match (c.log_density, self.density_threshold()) {
            (Some(lp), Some(threshold)) => lp >= threshold,
            _ => true,
        };
        if !inside {
            c.score = c.outcome.reward;
            c.status = Status::OutOfDistribution;
        }
        inside
    }

    #[cfg(feature = "batch")]
    /// [`Model::select`]'s scoring, [`BATCH`] candidates at a time: their predicted
    /// states go through the network together (see [`Model::values`]).
    fn score_batched<C: Controller>(
        &self,
        state: &[f32],
        controllers: &[C],
        scratch: &mut [f32],
        report: &mut [Candidate],
    ) -> Result<(), Error> {
        let d = self.input_dim().max(1);
        let (nexts, eval) = scratch
            .split_at_mut_checked(d.saturating_mul(BATCH))
            .ok_or(Error::BufferTooSmall)?;
        for (group, slots) in controllers.chunks(BATCH).zip(report.chunks_mut(BATCH)) {
            let mut needs = [false; BATCH];
            let rows = group
                .iter()
                .zip(slots.iter_mut())
                .zip(nexts.chunks_exact_mut(d));
            for (needs, ((controller, slot), next)) in needs.iter_mut().zip(rows) {
                (*slot, *needs) = self.predict_candidate(controller, state, next);
            }
            let mut values = [Ok(0.0f32); BATCH];
            self.value_group(nexts.chunks_exact(d).take(group.len()), &mut values, eval)?;
            let lanes = slots
                .iter_mut()
                .zip(nexts.chunks_exact(d))
                .zip(needs)
                .zip(values);
            for (((slot, next), needs), value) in lanes {
                if needs {
                    *slot = self.scored(*slot, next, value);
                }
            }
        }
        Ok(())
    }

    /// Picks the controller with the best score `reward + gamma * V(next)` (`V := 0`
    /// for terminal states) among `controllers`, reporting every candidate into
    /// `report[..controllers.len()]`. With reward 0 this ranks exactly by `V` of the
    /// predicted states. `V` is in the units of the rewards
    /// ([`Model::value_in_data_units`]), so that they add up where V was learned above a
    /// cost per step.
    ///
    /// Candidates whose prediction fails, is NaN/infinite, or falls outside the density
    /// gate are reported with their [`Status`] and never win. Ties go to the lowest
    /// index. Returns the index of the winner, or [`Error::NoValidCandidate`].
    ///
    /// `scratch` needs [`Model::scratch_len`] elements; with
    /// [`Model::batch_scratch_len`] a fully connected f32 model scores [`BATCH`] candidates
    /// at a time, reading each weight once for all of them (the same values and choice).
    /// `report` needs at least `controllers.len()`. `gamma` is [`Model::gamma`].
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// use laq_runtime::{Candidate, Model, Scratch, Status};
    ///
    /// let model = Model::new_checked(bytes)?;
    /// // A table of predicted next states: one per candidate controller.
    /// let table: [&[f32]; 3] = [&[1.0, 1.0], &[3.0, 3.0], &[f32::NAN, 0.0]];
    /// let mut report = [Candidate::default(); 3];
    /// let mut scratch = Scratch::<9>::new();
    /// let best = model.select(&[2.0, 2.0], &table, &mut scratch, &mut report)?;
    /// assert_eq!(best, 1);
    /// assert!(report[1].score > report[0].score);
    /// assert_eq!(report[2].status, Status::NonFinite);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn select<C: Controller>(
        &self,
        state: &[f32],
        controllers: &[C],
        scratch: &mut [f32],
        report: &mut [Candidate],
    ) -> Result<usize, Error> {
        self.check_state(state)?;
        if report.len() < controllers.len() || scratch.len() < self.scratch_len() {
            return Err(Error::BufferTooSmall);
        }
        #[cfg(feature = "batch")]
        let batched =
            self.batches() && controllers.len() > 1 && scratch.len() >= self.batch_scratch_len();
        #[cfg(not(feature = "batch"))]
        let batched = false;
        if batched {
            #[cfg(feature = "batch")]
            self.score_batched(state, controllers, scratch, report)?;
        } else {
            let (next, eval) = scratch
                .split_at_mut_checked(self.input_dim())
                .ok_or(Error::BufferTooSmall)?;
            for (controller, slot) in controllers.iter().zip(report.iter_mut()) {
                *slot = self.score(controller, state, next, eval);
            }
        }
        best(report.iter().take(controllers.len())).ok_or(Error::NoValidCandidate)
    }

    /// The potential-based shaped reward `r + gamma * V(s') - V(s)`, with `V(s') = 0`
    /// when `outcome.terminal` and the density gate applied to both values (an
    /// out-of-distribution state has `V = 0`). V is taken in the units of the rewards,
    /// [`Model::value_in_data_units`]: for a V learned above a cost per step, the
    /// return that cost gives, so that the potential is on the scale of `r` (a state the
    /// gate rejects is then worth the cost for ever).
    ///
    /// `scratch` needs [`Model::scratch_len`] elements.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// use laq_runtime::{Model, Outcome, Scratch};
    ///
    /// let model = Model::new_checked(bytes)?;
    /// let mut scratch = Scratch::<9>::new();
    /// let (s, s2) = ([1.0, 1.0], [2.0, 2.0]);
    /// let shaped = model.shaped_reward(&s, Outcome::default(), &s2, &mut scratch)?;
    /// let v = model.gated_value(&s, &mut scratch)?.value;
    /// let v2 = model.gated_value(&s2, &mut scratch)?.value;
    /// assert_eq!(shaped, 0.9 * v2 - v);
    /// let done = Outcome { reward: 1.0, terminal: true };
    /// assert_eq!(model.shaped_reward(&s, done, &s2, &mut scratch)?, 1.0 - v);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn shaped_reward(
        &self,
        state: &[f32],
        outcome: Outcome,
        next: &[f32],
        scratch: &mut [f32],
    ) -> Result<f32, Error> {
        if !outcome.reward.is_finite() {
            return Err(Error::InvalidArgument);
        }
        let v = self.value_in_data_units(self.gated_value(state, scratch)?.value);
        let v_next = if outcome.terminal {
            self.check_state(next)?;
            0.0
        } else {
            self.value_in_data_units(self.gated_value(next, scratch)?.value)
        };
        Ok(outcome.reward + self.gamma() * v_next - v)
    }
}
