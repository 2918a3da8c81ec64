//! The paper's behaviour study: an online SAC agent in the Maze2D U-maze learns from the
//! sparse task reward alone or from the reward densified by a learned value function used
//! as a potential (Ng et al., 1999), on the point mass that produced the value function's
//! data and on a differential-drive robot that did not (embodiment transfer).

use crate::envs::maze2d::Maze;
use crate::envs::unicycle::{self, Pose};
use crate::rl::sac::{ReplayBuffer, Sac, SacConfig};
use crate::run::plot::{Heatmap, LinePlot, Series, SeriesLabelPosition};
use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use laq_runtime::OwnedModel;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Which body the agent controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Body {
    /// The Maze2D point mass (the body whose logs trained the value function).
    PointMass,
    /// The differential-drive robot of [`crate::envs::unicycle`].
    Unicycle,
}

impl Body {
    pub fn name(self) -> &'static str {
        match self {
            Body::PointMass => "point_mass",
            Body::Unicycle => "unicycle",
        }
    }
}

/// Which reward the agent learns from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// The task reward (1 within the target radius), times `sparse_scale`.
    Sparse,
    /// The same plus the potential term gamma * phi(s') - phi(s).
    Shaped,
}

impl Condition {
    pub fn name(self) -> &'static str {
        match self {
            Condition::Sparse => "sparse",
            Condition::Shaped => "shaped",
        }
    }
}

/// Point-mass speeds are clamped at 5 (see `envs::maze2d`); dividing by it keeps
/// observations within [-1, 1] as the positions are.
const SPEED_SCALE: f32 = 5.0;

/// The state of either body.
#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Mass([f32; 4]),
    Robot(Pose),
}

impl State {
    fn start(body: Body, p: [f32; 2], rng: &mut impl Rng) -> Self {
        match body {
            Body::PointMass => State::Mass([p[0], p[1], 0.0, 0.0]),
            Body::Unicycle => State::Robot(Pose {
                x: p[0],
                y: p[1],
                heading: rng.random_range(-std::f32::consts::PI..std::f32::consts::PI),
            }),
        }
    }

    /// A random start of `body` in a random open cell, outside the target disc (a start
    /// inside it would be a success without acting).
    fn random(maze: &Maze, body: Body, rng: &mut impl Rng) -> Result<Self> {
        // With at least one open cell besides the target's, a try fails with probability
        // at most 1/2, so running out of tries means the maze has no such cell.
        for _ in 0..200 {
            let p = maze.random_point(rng);
            let s = State::start(body, p, rng);
            if s.task_reward(maze) == 0.0 {
                return Ok(s);
            }
        }
        bail!("the maze has no open cell outside the target to start from")
    }

    fn step(self, maze: &Maze, a: [f32; 2]) -> Self {
        match self {
            State::Mass(s) => State::Mass(maze.step(s, a)),
            State::Robot(p) => State::Robot(unicycle::step(maze, p, a)),
        }
    }

    /// The point-mass state at which the value function is queried: the state itself,
    /// or the robot's position at rest (as the paper queries the ant at (x, y, 0, 0)).
    fn as_point_mass(&self) -> [f32; 4] {
        match self {
            State::Mass(s) => *s,
            State::Robot(p) => p.as_point_mass(),
        }
    }

    fn position(&self) -> [f32; 2] {
        let s = self.as_point_mass();
        [s[0], s[1]]
    }

    fn task_reward(&self, maze: &Maze) -> f32 {
        maze.reward(self.as_point_mass())
    }

    /// The agent's observation, each component roughly within [-1, 1].
    fn observe(&self, maze: &Maze) -> [f32; 4] {
        let (hr, hc) = (maze.rows as f32 / 2.0, maze.cols as f32 / 2.0);
        match self {
            State::Mass([x, y, vx, vy]) => [
                (x - hr) / hr,
                (y - hc) / hc,
                vx / SPEED_SCALE,
                vy / SPEED_SCALE,
            ],
            State::Robot(p) => [
                (p.x - hr) / hr,
                (p.y - hc) / hc,
                p.heading.cos(),
                p.heading.sin(),
            ],
        }
    }
}

/// The value function as a potential: evaluated by the embedded runtime and mapped
/// affinely so that it spans [0, 1] over the open maze at rest.
///
/// The exported V is in discounted-return units of its own data (no terminals there, so
/// it is far from [0, 1]); the paper's V lies in [0, 1] (targets clamped), and its
/// `5 * sparse` is sized against that range. Any affine map of a potential is again a
/// potential, so the normalisation changes the guidance's strength, not its validity.
pub struct Potential {
    model: OwnedModel,
    scratch: Vec<f32>,
    lo: f32,
    hi: f32,
}

impl Potential {
    /// Loads a value model for `maze` (4 inputs: x, y, vx, vy) and finds its range over a
    /// grid of open rest states.
    pub fn new(bytes: &[u8], maze: &Maze) -> Result<Self> {
        let model = OwnedModel::from_vec(bytes.to_vec())
            .map_err(|e| anyhow::anyhow!("invalid value model: {e}"))?;
        let d = model.model().input_dim();
        if d != 4 {
            bail!("the potential needs a value model of the point mass (4 inputs), got {d}");
        }
        let scratch = vec![0.0; model.model().scratch_len()];
        let mut p = Potential {
            model,
            scratch,
            lo: 0.0,
            hi: 1.0,
        };
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for (x, y) in open_grid(maze, 0.05) {
            let v = p.value([x, y, 0.0, 0.0])?;
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if hi - lo <= 1e-6 || !(hi - lo).is_finite() {
            bail!("the value model is constant over the maze; it cannot guide anything");
        }
        p.lo = lo;
        p.hi = hi;
        Ok(p)
    }

    /// V(s) as the runtime computes it.
    pub fn value(&mut self, s: [f32; 4]) -> Result<f32> {
        self.model
            .model()
            .value(&s, &mut self.scratch)
            .map_err(|e| anyhow::anyhow!("value model failed on {s:?}: {e}"))
    }

    /// phi(s) = (V(s) - min) / (max - min) over the open maze at rest.
    pub fn phi(&mut self, s: [f32; 4]) -> Result<f32> {
        Ok((self.value(s)? - self.lo) / (self.hi - self.lo))
    }

    /// The (min, max) of V used by the normalisation.
    pub fn range(&self) -> (f32, f32) {
        (self.lo, self.hi)
    }
}

/// Points on a grid of spacing `h` (cell-centred) where the disc of the mass fits.
pub fn open_grid(maze: &Maze, h: f32) -> Vec<(f32, f32)> {
    let nx = (maze.rows as f32 / h).round() as usize;
    let ny = (maze.cols as f32 / h).round() as usize;
    let mut out = vec![];
    for i in 0..nx {
        for j in 0..ny {
            let (x, y) = ((i as f32 + 0.5) * h, (j as f32 + 0.5) * h);
            if !maze.blocked(x, y) {
                out.push((x, y));
            }
        }
    }
    out
}

/// The shaped reward `scale * sparse + gamma * phi(s') - phi(s)`.
///
/// At a terminal transition (the target reached) `phi(s')` counts as 0: the episode
/// ends in an absorbing state, and Ng et al.'s invariance needs that state's potential
/// to be 0, otherwise the discounted sum of the shaping terms, gamma^T phi(s_T) - phi(s0),
/// would pay for where an episode ends and could change which policy is best. With phi
/// in [0, 1] and the sparse reward scaled by 5, the final transition still earns at least
/// 4. At a timeout the episode is cut short, not ended: the agent bootstraps through s'
/// and the potential term stays as usual, since the time limit is not part of the task
/// (the observation has no clock).
pub fn shaped_reward(
    sparse: f32,
    scale: f32,
    gamma: f32,
    phi_s: f32,
    phi_next: f32,
    terminal: bool,
) -> f32 {
    let phi_next = if terminal { 0.0 } else { phi_next };
    scale * sparse + gamma * phi_next - phi_s
}

/// Settings of [`shaping_study`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct ShapingConfig {
    pub sac: SacConfig,
    /// Independent runs per condition; seed `i` gives both conditions the same initial
    /// networks and the same training starts.
    pub seeds: usize,
    /// Environment steps per run.
    pub steps: usize,
    /// Environment steps between evaluations (also done before the first step and
    /// after the last).
    pub eval_every: usize,
    /// Evaluation episodes, from starts fixed by `eval_seed` and shared by all runs.
    pub eval_episodes: usize,
    pub eval_seed: u64,
    /// Time limit of an episode (training and evaluation).
    pub max_episode_steps: usize,
    /// Factor of the task reward in both conditions (the paper's 5).
    pub sparse_scale: f32,
    /// Cap the critics' targets at the largest return the task can pay (see
    /// [`ReplayBuffer::push_capped`]): `sparse_scale` from the sparse reward, and
    /// `sparse_scale - phi(s)` from the shaped one, whose Q is the sparse Q minus phi(s)
    /// (Ng et al.: the potential terms from s on sum to -phi(s)).
    pub clip_targets: bool,
    /// Mean success rate that counts as solved for `steps_to_threshold`.
    pub threshold: f64,
    /// Final-policy evaluation trajectories of seed 0 kept per condition (for plots).
    pub trajectories: usize,
}

impl Default for ShapingConfig {
    /// The point mass's settings: 15k steps per run, evaluated every 750 steps on 20
    /// episodes. The time limit of 300 steps is D4RL's for the U-maze; from the far end
    /// of the U (about 6 maze units of path) trained agents need about 30 steps with the
    /// point mass and 100 with the robot, slower and turning, so the limit leaves room for
    /// a learner's detours without letting it wander for long.
    fn default() -> Self {
        ShapingConfig {
            sac: SacConfig::default(),
            seeds: 5,
            steps: 15_000,
            eval_every: 750,
            eval_episodes: 20,
            eval_seed: 1_000_003,
            max_episode_steps: 300,
            sparse_scale: 5.0,
            clip_targets: true,
            threshold: 0.8,
            trajectories: 5,
        }
    }
}

impl ShapingConfig {
    /// The defaults for `body`. The robot gets three times the steps: it must turn before
    /// it can move sideways, so random actions rarely carry it far (in a 30k-step trial,
    /// sparse SAC reached the target in over a thousand training episodes with the point
    /// mass and in none with the robot).
    pub fn for_body(body: Body) -> Self {
        match body {
            Body::PointMass => Self::default(),
            Body::Unicycle => ShapingConfig {
                steps: 45_000,
                eval_every: 2250,
                ..Self::default()
            },
        }
    }

    /// Environment steps of the whole study (both conditions, all seeds), for a
    /// progress bar.
    pub fn total_steps(&self) -> u64 {
        (2 * self.seeds * self.steps) as u64
    }

    fn check(&self) -> Result<()> {
        self.sac.check()?;
        if self.seeds == 0 || self.steps == 0 || self.eval_every == 0 {
            bail!("the study needs at least one seed, one step and a positive eval interval");
        }
        if self.eval_episodes == 0 || self.max_episode_steps == 0 {
            bail!("the study needs evaluation episodes and a positive time limit");
        }
        if !(self.sparse_scale.is_finite() && self.sparse_scale > 0.0) {
            bail!("sparse_scale must be positive");
        }
        Ok(())
    }
}

/// One condition's curves over seeds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConditionResult {
    pub condition: Condition,
    /// Success rate of every seed at every evaluation step.
    pub per_seed: Vec<Vec<f64>>,
    pub mean: Vec<f64>,
    /// Standard error of the mean over seeds (0 with one seed).
    pub stderr: Vec<f64>,
    /// First evaluation step at which the mean success reaches the threshold.
    pub steps_to_threshold: Option<usize>,
    pub final_mean: f64,
    pub final_stderr: f64,
    /// Mean success over all evaluations (the normalised area under the curve).
    pub auc: f64,
    /// Training episodes that reached the target, per seed.
    pub train_successes: Vec<usize>,
    /// Positions along the first evaluation episodes of seed 0's final policy.
    pub trajectories: Vec<Vec<[f32; 2]>>,
    /// Learner statistics of every seed at every evaluation.
    pub training: Vec<Training>,
}

/// A run's learner statistics at each evaluation: the temperature, and the mean critic
/// loss and policy entropy over the updates since the previous evaluation (`None`
/// where there were none).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Training {
    pub alpha: Vec<f64>,
    pub critic_loss: Vec<Option<f64>>,
    pub entropy: Vec<Option<f64>>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShapingResult {
    pub body: Body,
    pub config: ShapingConfig,
    /// Environment steps at which the policies were evaluated.
    pub eval_steps: Vec<usize>,
    pub conditions: Vec<ConditionResult>,
    /// Range of V over the open maze at rest, mapped to potentials 0 and 1.
    pub value_range: (f32, f32),
    pub updates: usize,
    /// Time spent in SAC updates per update.
    pub ms_per_update: f64,
    pub seconds: f64,
}

impl ShapingResult {
    pub fn condition(&self, c: Condition) -> Option<&ConditionResult> {
        self.conditions.iter().find(|r| r.condition == c)
    }
}

/// Success rate of the deterministic policy from `starts`, all episodes stepped together
/// so that the actor runs once per time step on a batch. Also returns the positions of
/// the first `keep` episodes.
fn evaluate(
    agent: &Sac,
    maze: &Maze,
    starts: &[State],
    max_steps: usize,
    keep: usize,
) -> Result<(f64, Vec<Vec<[f32; 2]>>)> {
    let mut states = starts.to_vec();
    let mut done = vec![false; states.len()];
    let mut success = 0usize;
    let mut paths: Vec<Vec<[f32; 2]>> = states
        .iter()
        .take(keep)
        .map(|s| vec![s.position()])
        .collect();
    for _ in 0..max_steps {
        let active: Vec<usize> = (0..states.len()).filter(|&i| !done[i]).collect();
        if active.is_empty() {
            break;
        }
        let obs: Vec<f32> = active
            .iter()
            .flat_map(|&i| states[i].observe(maze))
            .collect();
        let acts = agent.act_deterministic(&obs)?;
        for (k, &i) in active.iter().enumerate() {
            states[i] = states[i].step(maze, [acts[2 * k], acts[2 * k + 1]]);
            if let Some(p) = paths.get_mut(i) {
                p.push(states[i].position());
            }
            if states[i].task_reward(maze) > 0.0 {
                done[i] = true;
                success += 1;
            }
        }
    }
    Ok((success as f64 / states.len() as f64, paths))
}

/// One run's learning curve.
struct Run {
    curve: Vec<f64>,
    training: Training,
    train_successes: usize,
    trajectories: Vec<Vec<[f32; 2]>>,
    updates: usize,
    update_secs: f64,
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    maze: &Maze,
    potential: &mut Potential,
    body: Body,
    condition: Condition,
    cfg: &ShapingConfig,
    seed: u64,
    starts: &[State],
    progress: &ProgressBar,
) -> Result<Run> {
    let mut agent = Sac::new(4, 2, &cfg.sac, seed)?;
    let mut buffer = ReplayBuffer::new(4, 2, cfg.sac.buffer_size.min(cfg.steps))?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xe4_0157);
    let gamma = cfg.sac.gamma as f32;
    let keep = if seed == 0 { cfg.trajectories } else { 0 };
    let mut run = Run {
        curve: vec![],
        training: Training::default(),
        train_successes: 0,
        trajectories: vec![],
        updates: 0,
        update_secs: 0.0,
    };
    let mut state = State::random(maze, body, &mut rng)?;
    let mut phi = potential.phi(state.as_point_mass())?;
    let mut t_episode = 0;
    // Sums of update statistics since the last evaluation.
    let (mut sum_closs, mut sum_logp, mut n_stats) = (0.0f64, 0.0f64, 0usize);
    let record = |run: &mut Run, agent: &Sac, sums: (f64, f64, usize)| {
        let mean = |v: f64| (sums.2 > 0).then(|| v / sums.2 as f64);
        run.training.alpha.push(agent.alpha());
        run.training.critic_loss.push(mean(sums.0));
        run.training.entropy.push(mean(-sums.1));
    };
    for t in 0..cfg.steps {
        if t % cfg.eval_every == 0 {
            run.curve
                .push(evaluate(&agent, maze, starts, cfg.max_episode_steps, 0)?.0);
            record(&mut run, &agent, (sum_closs, sum_logp, n_stats));
            (sum_closs, sum_logp, n_stats) = (0.0, 0.0, 0);
        }
        let obs = state.observe(maze);
        let a = if t < cfg.sac.random_steps {
            vec![rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0)]
        } else {
            agent.act(&obs)?
        };
        let next = state.step(maze, [a[0], a[1]]);
        let sparse = next.task_reward(maze);
        let terminal = sparse > 0.0;
        t_episode += 1;
        let phi_next = potential.phi(next.as_point_mass())?;
        let (reward, cap) = match condition {
            Condition::Sparse => (cfg.sparse_scale * sparse, cfg.sparse_scale),
            Condition::Shaped => (
                shaped_reward(sparse, cfg.sparse_scale, gamma, phi, phi_next, terminal),
                cfg.sparse_scale - phi,
            ),
        };
        let cap = if cfg.clip_targets { cap } else { f32::INFINITY };
        buffer.push_capped(&obs, &a, reward, &next.observe(maze), terminal, cap)?;
        if t + 1 >= cfg.sac.update_after && (t + 1) % cfg.sac.update_every == 0 {
            let clock = Instant::now();
            let stats = agent.update(&buffer)?;
            sum_closs += stats.critic_loss as f64;
            sum_logp += stats.log_prob as f64;
            n_stats += 1;
            run.update_secs += clock.elapsed().as_secs_f64();
            run.updates += 1;
        }
        if terminal || t_episode >= cfg.max_episode_steps {
            run.train_successes += terminal as usize;
            state = State::random(maze, body, &mut rng)?;
            phi = potential.phi(state.as_point_mass())?;
            t_episode = 0;
        } else {
            state = next;
            phi = phi_next;
        }
        progress.inc(1);
    }
    let (last, paths) = evaluate(&agent, maze, starts, cfg.max_episode_steps, keep)?;
    run.curve.push(last);
    record(&mut run, &agent, (sum_closs, sum_logp, n_stats));
    run.trajectories = paths;
    Ok(run)
}

/// The behaviour study for one body: `cfg.seeds` SAC runs per condition (sparse, shaped)
/// on `maze`, shaped by the value model `value` (safetensors bytes of the exported
/// format, 4 inputs), each evaluated every `cfg.eval_every` steps. `progress` advances
/// by one per environment step (length [`ShapingConfig::total_steps`]).
pub fn shaping_study(
    maze: &Maze,
    value: &[u8],
    body: Body,
    cfg: &ShapingConfig,
    progress: &ProgressBar,
) -> Result<ShapingResult> {
    cfg.check()?;
    let clock = Instant::now();
    let potential = Potential::new(value, maze).context("loading the potential")?;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.eval_seed);
    let starts = (0..cfg.eval_episodes)
        .map(|_| State::random(maze, body, &mut rng))
        .collect::<Result<Vec<State>>>()?;
    let mut eval_steps: Vec<usize> = (0..cfg.steps).step_by(cfg.eval_every).collect();
    eval_steps.push(cfg.steps);
    // Every (condition, seed) run is independent: they run side by side, as many at once
    // as the cores allow, each with its own potential (its evaluation scratch), and are
    // gathered in a fixed order, so the figures do not depend on how many ran at once.
    let runs: Vec<(Condition, u64)> = [Condition::Sparse, Condition::Shaped]
        .into_iter()
        .flat_map(|c| (0..cfg.seeds as u64).map(move |seed| (c, seed)))
        .collect();
    let jobs = crate::util::parallel::jobs(&candle_core::Device::Cpu);
    let done = crate::util::parallel::map(&runs, jobs, |&(condition, seed)| {
        let mut potential = Potential::new(value, maze).context("loading the potential")?;
        run_one(
            maze,
            &mut potential,
            body,
            condition,
            cfg,
            seed,
            &starts,
            progress,
        )
        .with_context(|| format!("{} {} seed {seed}", body.name(), condition.name()))
    })?;
    let mut done = done.into_iter();
    let (mut updates, mut update_secs) = (0usize, 0.0f64);
    let mut conditions = vec![];
    for condition in [Condition::Sparse, Condition::Shaped] {
        let mut per_seed = vec![];
        let mut train_successes = vec![];
        let mut trajectories = vec![];
        let mut training = vec![];
        for (seed, run) in (0..cfg.seeds as u64).zip(done.by_ref()) {
            updates += run.updates;
            update_secs += run.update_secs;
            if seed == 0 {
                trajectories = run.trajectories;
            }
            per_seed.push(run.curve);
            training.push(run.training);
            train_successes.push(run.train_successes);
        }
        let (mean, stderr) = crate::util::stats::mean_stderr(&per_seed);
        let steps_to_threshold = mean
            .iter()
            .position(|&m| m >= cfg.threshold)
            .map(|j| eval_steps[j]);
        let auc = mean.iter().sum::<f64>() / mean.len().max(1) as f64;
        conditions.push(ConditionResult {
            condition,
            final_mean: mean.last().copied().unwrap_or(0.0),
            final_stderr: stderr.last().copied().unwrap_or(0.0),
            per_seed,
            mean,
            stderr,
            steps_to_threshold,
            auc,
            train_successes,
            trajectories,
            training,
        });
    }
    Ok(ShapingResult {
        body,
        config: cfg.clone(),
        eval_steps,
        conditions,
        value_range: potential.range(),
        updates,
        ms_per_update: 1e3 * update_secs / updates.max(1) as f64,
        seconds: clock.elapsed().as_secs_f64(),
    })
}

/// Success rate against environment steps, both conditions with their standard error.
pub fn success_plot(r: &ShapingResult) -> Result<LinePlot> {
    let x: Vec<f64> = r.eval_steps.iter().map(|&s| s as f64).collect();
    let mut plot = LinePlot::new(
        format!(
            "U-maze, {}: success over {} seeds",
            r.body.name().replace('_', " "),
            r.config.seeds
        ),
        "environment steps",
        "success rate (mean ± s.e.)",
    );
    for c in &r.conditions {
        plot = plot.series(
            Series::new(c.condition.name(), x.clone(), c.mean.clone()).with_err(c.stderr.clone()),
        );
    }
    plot.y_range = Some((-0.02, 1.02));
    // Success curves rise from the left: the upper left corner stays clear longest.
    plot.legend = SeriesLabelPosition::UpperLeft;
    Ok(plot)
}

/// V over the maze at rest, walls masked, with the final shaped policy's paths.
pub fn value_map(maze: &Maze, potential: &mut Potential, r: &ShapingResult) -> Result<Heatmap> {
    let h = 0.05f32;
    let (rows, cols) = (
        (maze.rows as f32 / h).round() as usize,
        (maze.cols as f32 / h).round() as usize,
    );
    let mut values = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            let (x, y) = ((i as f32 + 0.5) * h, (j as f32 + 0.5) * h);
            values.push(if maze.wall_at(x, y) {
                None
            } else {
                Some(potential.value([x, y, 0.0, 0.0])? as f64)
            });
        }
    }
    // The maze's x runs down the rows and y along the columns, as in its layout.
    let mut map = Heatmap::new(rows, cols, values);
    map.x_range = (0.0, maze.cols as f64);
    map.y_range = (0.0, maze.rows as f64);
    map.y_down = true;
    map.title = format!(
        "V(x, y, 0, 0) and shaped {} paths",
        r.body.name().replace('_', " ")
    );
    map.x_label = "y".into();
    map.y_label = "x".into();
    map.colorbar_label = "V".into();
    if let Some(c) = r.condition(Condition::Shaped) {
        map.paths = c
            .trajectories
            .iter()
            .map(|t| t.iter().map(|p| (p[1] as f64, p[0] as f64)).collect())
            .collect();
    }
    let (tx, ty) = maze.target_point();
    map.markers = vec![((ty as f64, tx as f64), "target".into())];
    Ok(map)
}

/// Writes `success_<body>.png` and `value_<body>.png` into `out`.
pub fn write_figures(
    out: &std::path::Path,
    maze: &Maze,
    value: &[u8],
    r: &ShapingResult,
) -> Result<()> {
    success_plot(r)?.save(&out.join(format!("success_{}.png", r.body.name())))?;
    let mut potential = Potential::new(value, maze)?;
    value_map(maze, &mut potential, r)?.save(&out.join(format!("value_{}.png", r.body.name())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/maze2d/value.safetensors"
    ));

    #[test]
    fn shaping_terms_telescope() {
        // The task reward is scaled and the potential difference added.
        let close = |a: f32, b: f32| (a - b).abs() < 1e-6;
        assert!(close(shaped_reward(0.0, 5.0, 0.9, 0.5, 0.5, false), -0.05));
        assert!(close(shaped_reward(1.0, 5.0, 0.9, 0.4, 0.8, false), 5.32));
        // At a terminal the potential of the absorbing state is 0.
        assert!(close(shaped_reward(1.0, 5.0, 0.9, 0.4, 0.8, true), 4.6));
        // Along any episode that ends in the task, the discounted shaping terms sum to
        // -phi(s0): they cannot change which policy is best.
        let phis = [0.3f32, 0.7, 0.1, 0.9, 0.6];
        let gamma = 0.95f32;
        let mut total = 0.0;
        for t in 0..phis.len() - 1 {
            let terminal = t + 2 == phis.len();
            let f = shaped_reward(0.0, 5.0, gamma, phis[t], phis[t + 1], terminal);
            total += gamma.powi(t as i32) * f;
        }
        assert!((total + phis[0]).abs() < 1e-6, "{total}");
    }

    #[test]
    fn potential_is_normalised_and_ranks_the_maze() {
        let maze = Maze::named("umaze").unwrap();
        let mut p = Potential::new(VALUE, &maze).unwrap();
        let (lo, hi) = p.range();
        assert!(hi > lo);
        let grid = open_grid(&maze, 0.05);
        let phis: Vec<f32> = grid
            .iter()
            .map(|&(x, y)| p.phi([x, y, 0.0, 0.0]).unwrap())
            .collect();
        let (pl, ph) = phis
            .iter()
            .fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
        assert!(pl.abs() < 1e-6 && (ph - 1.0).abs() < 1e-6, "{pl} {ph}");
        // The target's cell is worth more than the far end of the U.
        let near = p.phi([1.5, 1.5, 0.0, 0.0]).unwrap();
        let far = p.phi([3.5, 1.5, 0.0, 0.0]).unwrap();
        assert!(near > far, "{near} {far}");
        assert!(p.phi([f32::NAN, 0.0, 0.0, 0.0]).is_err());
        assert!(Potential::new(&VALUE[..100], &maze).is_err());
        let two_inputs = include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../runtime/tests/data/tiny.safetensors"
        ));
        assert!(Potential::new(two_inputs, &maze).is_err());
    }

    fn tiny() -> ShapingConfig {
        ShapingConfig {
            sac: SacConfig {
                hidden: vec![16, 16],
                batch_size: 16,
                random_steps: 100,
                update_after: 100,
                ..Default::default()
            },
            seeds: 2,
            steps: 400,
            eval_every: 200,
            eval_episodes: 3,
            max_episode_steps: 50,
            trajectories: 2,
            ..Default::default()
        }
    }

    #[test]
    fn study_runs_and_is_deterministic() {
        let maze = Maze::named("umaze").unwrap();
        let cfg = tiny();
        let bar = ProgressBar::hidden();
        for body in [Body::PointMass, Body::Unicycle] {
            let a = shaping_study(&maze, VALUE, body, &cfg, &bar).unwrap();
            let b = shaping_study(&maze, VALUE, body, &cfg, &bar).unwrap();
            assert_eq!(a.eval_steps, vec![0, 200, 400]);
            assert_eq!(a.updates, 2 * 2 * 301);
            for c in [Condition::Sparse, Condition::Shaped] {
                let (ra, rb) = (a.condition(c).unwrap(), b.condition(c).unwrap());
                assert_eq!(ra.per_seed, rb.per_seed);
                assert_eq!(ra.train_successes, rb.train_successes);
                assert_eq!(ra.trajectories, rb.trajectories);
                assert_eq!(ra.per_seed.len(), 2);
                assert!(ra
                    .per_seed
                    .iter()
                    .flatten()
                    .all(|s| (0.0..=1.0).contains(s)));
                assert_eq!(ra.trajectories.len(), 2);
                assert!(ra
                    .trajectories
                    .iter()
                    .all(|t| t.len() >= 2 && t.len() <= 51));
            }
            // Sparse and shaped differ only in the reward: with the same seed the
            // untrained policies score the same.
            assert_eq!(
                a.condition(Condition::Sparse).unwrap().per_seed[0][0],
                a.condition(Condition::Shaped).unwrap().per_seed[0][0]
            );
            let json = serde_json::to_string(&a).unwrap();
            let back: ShapingResult = serde_json::from_str(&json).unwrap();
            assert_eq!(back.conditions[1].mean, a.conditions[1].mean);
        }
        let bad = ShapingConfig {
            eval_every: 0,
            ..tiny()
        };
        assert!(shaping_study(&maze, VALUE, Body::PointMass, &bad, &bar).is_err());
        assert!(shaping_study(&maze, &VALUE[..50], Body::PointMass, &tiny(), &bar).is_err());
        // Only the target cell is open: there is nowhere to start.
        let closed = Maze::parse("###\n#G#\n###").unwrap();
        assert!(shaping_study(&closed, VALUE, Body::Unicycle, &tiny(), &bar).is_err());
    }
}
