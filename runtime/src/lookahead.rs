//! Selection by lookahead: sequences of controllers scored by their predicted rewards
//! and V where they end.

use crate::{Candidate, Controller, Error, Model, Status, BATCH};

/// Most controllers in a sequence that [`Model::select_ahead`] plans: with 8
/// controllers, up to 8^4 = 4,096 sequences and as many evaluations of V.
///
/// ```
/// assert_eq!(laq_runtime::MAX_LOOKAHEAD, 4);
/// ```
pub const MAX_LOOKAHEAD: usize = 4;

impl Model<'_> {
    /// Scratch (f32 elements) that [`Model::select_ahead`] needs for sequences of `depth`
    /// controllers: one predicted state per step before the last, then what
    /// [`Model::select`] needs at the last step. With `batch_scratch_len() -
    /// scratch_len()` more, the last step's candidates go through the network
    /// [`BATCH`] at a time, as in `select` (the same values).
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.lookahead_scratch_len(1), model.scratch_len());
    /// assert_eq!(model.lookahead_scratch_len(3), model.scratch_len() + 2 * model.input_dim());
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn lookahead_scratch_len(&self, depth: usize) -> usize {
        depth
            .saturating_sub(1)
            .saturating_mul(self.input_dim())
            .saturating_add(self.scratch_len())
    }

    /// Picks the first controller of the best sequence of `depth` controllers from
    /// `state`: a sequence scores `r1 + gamma * (r2 + gamma * (... + gamma * V(s_depth)))`
    /// with the rewards and states its controllers predict one after another (each from
    /// the state the previous one predicted). A terminal prediction ends its sequence
    /// (its score is then the rewards so far). With `depth` 1 this is [`Model::select`].
    ///
    /// Greedy selection (`depth` 1) stops at any local maximum of V that one controller
    /// cannot leave; a few steps ahead, V's rise beyond a dip is seen. The cost is
    /// `controllers.len()^depth` evaluations of V at most, the memory
    /// [`Model::lookahead_scratch_len`] and a stack frame per step, with no heap.
    ///
    /// `report[i]` describes controller i as the first step: its status and outcome as in
    /// `select`, its `value` the best score of the sequences that continue from its
    /// predicted state, its `score` `reward + gamma * value`. A step whose prediction
    /// fails, is not finite or leaves the density gate ends no sequence; a first step
    /// from which no sequence continues is reported [`Status::Failed`]. Ties go to the
    /// lowest index. [`Error::InvalidArgument`] if `depth` is 0 or above
    /// [`MAX_LOOKAHEAD`]; [`Error::NoValidCandidate`] if no sequence scores.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// use laq_runtime::{Candidate, Controller, Error, Model, Outcome};
    ///
    /// /// Moves along the first axis; predicts nothing beyond `wall`.
    /// struct Move { by: f32, wall: f32 }
    ///
    /// impl Controller for Move {
    ///     fn predict(&self, s: &[f32], next: &mut [f32]) -> Result<Outcome, Error> {
    ///         next.copy_from_slice(s);
    ///         next[0] += self.by;
    ///         if next[0] > self.wall { return Err(Error::Controller); }
    ///         Ok(Outcome::default())
    ///     }
    /// }
    ///
    /// let model = Model::new_checked(bytes)?;
    /// let moves = [Move { by: -1.0, wall: 10.0 }, Move { by: 1.0, wall: 10.0 }];
    /// let mut scratch = vec![0.0; model.lookahead_scratch_len(3)];
    /// let mut report = [Candidate::default(); 2];
    /// let first = model.select_ahead(&[2.0, 2.0], &moves, 3, &mut scratch, &mut report)?;
    /// let greedy = model.select(&[2.0, 2.0], &moves, &mut scratch, &mut report)?;
    /// assert!(first < 2 && greedy < 2);
    /// assert_eq!(model.select_ahead(&[2.0, 2.0], &moves, 0, &mut scratch, &mut report), Err(Error::InvalidArgument));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn select_ahead<C: Controller>(
        &self,
        state: &[f32],
        controllers: &[C],
        depth: usize,
        scratch: &mut [f32],
        report: &mut [Candidate],
    ) -> Result<usize, Error> {
        if depth == 0 || depth > MAX_LOOKAHEAD {
            return Err(Error::InvalidArgument);
        }
        if depth == 1 {
            return self.select(state, controllers, scratch, report);
        }
        self.check_state(state)?;
        if report.len() < controllers.len() || scratch.len() < self.lookahead_scratch_len(depth) {
            return Err(Error::BufferTooSmall);
        }
        let (next, rest) = scratch
            .split_at_mut_checked(self.input_dim())
            .ok_or(Error::BufferTooSmall)?;
        for (controller, slot) in controllers.iter().zip(report.iter_mut()) {
            *slot = self.first_step(controller, state, next, rest, controllers, depth - 1)?;
        }
        best(report.iter().take(controllers.len())).ok_or(Error::NoValidCandidate)
    }

    /// `controller` from `state` (into `next`), followed by the best of the sequences of
    /// `depth` more controllers.
    fn first_step<C: Controller>(
        &self,
        controller: &C,
        state: &[f32],
        next: &mut [f32],
        scratch: &mut [f32],
        controllers: &[C],
        depth: usize,
    ) -> Result<Candidate, Error> {
        let (mut c, needs_value) = self.predict_candidate(controller, state, next);
        if !needs_value {
            return Ok(c);
        }
        if !self.gate(&mut c, next) {
            return Ok(c);
        }
        let Some(value) = self.best_ahead(next, controllers, depth, scratch)? else {
            c.status = Status::Failed;
            return Ok(c);
        };
        c.value = value;
        c.score = c.outcome.reward + self.gamma() * value;
        c.status = if c.score.is_finite() {
            Status::Valid
        } else {
            Status::NonFinite
        };
        Ok(c)
    }

    /// The best score of the sequences of `depth` controllers from `state`, if any
    /// scores: the last step is [`Model::select`]'s, [`BATCH`] candidates at a time.
    fn best_ahead<C: Controller>(
        &self,
        state: &[f32],
        controllers: &[C],
        depth: usize,
        scratch: &mut [f32],
    ) -> Result<Option<f32>, Error> {
        let mut top: Option<f32> = None;
        if depth <= 1 {
            let mut report = [Candidate::default(); BATCH];
            for group in controllers.chunks(BATCH) {
                let slots = report.get_mut(..group.len()).ok_or(Error::BufferTooSmall)?;
                match self.select(state, group, scratch, slots) {
                    Ok(i) => {
                        let s = slots.get(i).ok_or(Error::BufferTooSmall)?.score;
                        top = Some(top.map_or(s, |t| t.max(s)));
                    }
                    Err(Error::NoValidCandidate) => {}
                    Err(e) => return Err(e),
                }
            }
            return Ok(top);
        }
        let (next, rest) = scratch
            .split_at_mut_checked(self.input_dim())
            .ok_or(Error::BufferTooSmall)?;
        for controller in controllers {
            let c = self.first_step(controller, state, next, rest, controllers, depth - 1)?;
            if c.status.is_valid() {
                top = Some(top.map_or(c.score, |t| t.max(c.score)));
            }
        }
        Ok(top)
    }
}

/// The index of the valid candidate with the highest score (ties: the lowest index).
pub(crate) fn best<'c>(candidates: impl Iterator<Item = &'c Candidate>) -> Option<usize> {
    let mut top: Option<(usize, f32)> = None;
    for (i, c) in candidates.enumerate() {
        if c.status.is_valid() && top.is_none_or(|(_, s)| c.score > s) {
            top = Some((i, c.score));
        }
    }
    top.map(|(i, _)| i)
}
