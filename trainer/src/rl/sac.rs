//! Soft Actor-Critic (Haarnoja et al., 2018) for small continuous action spaces: a
//! tanh-squashed Gaussian actor, twin Q critics with Polyak-averaged targets and an
//! automatically tuned entropy temperature. Everything is seeded: on the CPU with one
//! thread, a seed gives the same learning curve bit for bit.

use crate::nn::{self, Adam, AdamConfig, Mlp};
use anyhow::{bail, Result};
use candle_core::{Device, Tensor};
use candle_nn::{Module, Optimizer, VarMap};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Bounds of the actor's log standard deviation: below -5 the policy is deterministic
/// for all purposes, above 2 a tanh-squashed sample is a coin flip between the bounds.
const LOG_STD_MIN: f64 = -5.0;
const LOG_STD_MAX: f64 = 2.0;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct SacConfig {
    /// Hidden layer sizes of the actor and of each critic.
    pub hidden: Vec<usize>,
    /// Learning rate of the actor, the critics and the temperature.
    pub lr: f64,
    pub gamma: f64,
    /// Polyak rate of the target critics.
    pub tau: f64,
    pub batch_size: usize,
    /// Initial entropy temperature.
    pub init_alpha: f64,
    /// Entropy the temperature steers towards; `None`: minus the action dimension.
    pub target_entropy: Option<f64>,
    /// Replay capacity in transitions (the oldest are overwritten).
    pub buffer_size: usize,
    /// Environment steps with uniformly random actions before the policy acts.
    pub random_steps: usize,
    /// Environment steps before the first update.
    pub update_after: usize,
    /// Environment steps between updates.
    pub update_every: usize,
}

impl Default for SacConfig {
    /// The paper's learning rate (1e-3) and the usual SAC settings otherwise (gamma 0.99,
    /// tau 0.005, target entropy -|A|). Networks and batch are much smaller than the
    /// usual 256: with candle on one CPU core an update costs about 0.8 ms at 64 x 64 and
    /// batch 64, 1.6 times that at batch 128 and 4 times at 128 x 128, and the study's
    /// budget is counted in updates.
    fn default() -> Self {
        SacConfig {
            hidden: vec![64, 64],
            lr: 1e-3,
            gamma: 0.99,
            tau: 0.005,
            batch_size: 64,
            init_alpha: 0.1,
            target_entropy: None,
            buffer_size: 1_000_000,
            random_steps: 1000,
            update_after: 1000,
            update_every: 1,
        }
    }
}

impl SacConfig {
    pub(crate) fn check(&self) -> Result<()> {
        if self.hidden.is_empty() || self.hidden.contains(&0) {
            bail!("SAC needs at least one non-empty hidden layer");
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            bail!("SAC learning rate must be positive, got {}", self.lr);
        }
        if !(0.0..1.0).contains(&self.gamma) {
            bail!("SAC gamma must lie in [0, 1), got {}", self.gamma);
        }
        if !(self.tau > 0.0 && self.tau <= 1.0) {
            bail!("SAC tau must lie in (0, 1], got {}", self.tau);
        }
        if !(self.init_alpha > 0.0 && self.init_alpha.is_finite()) {
            bail!("SAC initial temperature must be positive");
        }
        if self.batch_size == 0 || self.buffer_size == 0 || self.update_every == 0 {
            bail!("SAC batch size, buffer size and update interval must be positive");
        }
        Ok(())
    }
}

/// A ring buffer of transitions `(o, a, r, o', terminal)`; `terminal` means the episode
/// ended in the task (no bootstrap), not that it ran out of time. A transition may carry
/// a cap on its critic target (see [`ReplayBuffer::push_capped`]).
#[derive(Clone, Debug)]
pub struct ReplayBuffer {
    obs_dim: usize,
    act_dim: usize,
    capacity: usize,
    obs: Vec<f32>,
    act: Vec<f32>,
    rew: Vec<f32>,
    next: Vec<f32>,
    terminal: Vec<bool>,
    cap: Vec<f32>,
    len: usize,
    pos: usize,
}

/// A sampled batch, row-major.
struct Batch {
    obs: Vec<f32>,
    act: Vec<f32>,
    rew: Vec<f32>,
    next: Vec<f32>,
    not_done: Vec<f32>,
    cap: Vec<f32>,
}

impl ReplayBuffer {
    pub fn new(obs_dim: usize, act_dim: usize, capacity: usize) -> Result<Self> {
        if obs_dim == 0 || act_dim == 0 || capacity == 0 {
            bail!("a replay buffer needs positive dimensions and capacity");
        }
        Ok(ReplayBuffer {
            obs_dim,
            act_dim,
            capacity,
            obs: vec![0.0; capacity * obs_dim],
            act: vec![0.0; capacity * act_dim],
            rew: vec![0.0; capacity],
            next: vec![0.0; capacity * obs_dim],
            terminal: vec![false; capacity],
            cap: vec![f32::INFINITY; capacity],
            len: 0,
            pos: 0,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(
        &mut self,
        obs: &[f32],
        act: &[f32],
        reward: f32,
        next: &[f32],
        terminal: bool,
    ) -> Result<()> {
        self.push_capped(obs, act, reward, next, terminal, f32::INFINITY)
    }

    /// `push` with an upper bound on Q(o, a), where the task gives one (HER clips its
    /// targets the same way). Small critics overestimate; in a task that pays once, at
    /// the end, values above that payment make ending an episode look worse than
    /// wandering, and the policy unlearns the task. The critic target of this transition
    /// is clipped at `cap` (`f32::INFINITY`: no cap).
    pub fn push_capped(
        &mut self,
        obs: &[f32],
        act: &[f32],
        reward: f32,
        next: &[f32],
        terminal: bool,
        cap: f32,
    ) -> Result<()> {
        if cap.is_nan() {
            bail!("a target cap must not be NaN");
        }
        if obs.len() != self.obs_dim || next.len() != self.obs_dim || act.len() != self.act_dim {
            bail!(
                "transition of shape ({}, {}, {}) does not fit a buffer of ({}, {})",
                obs.len(),
                act.len(),
                next.len(),
                self.obs_dim,
                self.act_dim
            );
        }
        if !reward.is_finite() || !obs.iter().chain(act).chain(next).all(|v| v.is_finite()) {
            bail!("non-finite value in a transition");
        }
        let (i, d, a) = (self.pos, self.obs_dim, self.act_dim);
        self.obs[i * d..(i + 1) * d].copy_from_slice(obs);
        self.next[i * d..(i + 1) * d].copy_from_slice(next);
        self.act[i * a..(i + 1) * a].copy_from_slice(act);
        self.rew[i] = reward;
        self.terminal[i] = terminal;
        self.cap[i] = cap;
        self.pos = (self.pos + 1) % self.capacity;
        self.len = (self.len + 1).min(self.capacity);
        Ok(())
    }

    fn sample(&self, n: usize, gamma: f32, rng: &mut impl Rng) -> Batch {
        let (d, a) = (self.obs_dim, self.act_dim);
        let mut b = Batch {
            obs: Vec::with_capacity(n * d),
            act: Vec::with_capacity(n * a),
            rew: Vec::with_capacity(n),
            next: Vec::with_capacity(n * d),
            not_done: Vec::with_capacity(n),
            cap: Vec::with_capacity(n),
        };
        for _ in 0..n {
            let i = rng.random_range(0..self.len);
            b.obs.extend_from_slice(&self.obs[i * d..(i + 1) * d]);
            b.next.extend_from_slice(&self.next[i * d..(i + 1) * d]);
            b.act.extend_from_slice(&self.act[i * a..(i + 1) * a]);
            b.rew.push(self.rew[i]);
            b.not_done.push(if self.terminal[i] { 0.0 } else { gamma });
            b.cap.push(self.cap[i]);
        }
        b
    }
}

/// Losses and temperature after one update.
#[derive(Clone, Copy, Debug)]
pub struct UpdateStats {
    pub critic_loss: f32,
    pub actor_loss: f32,
    pub alpha: f64,
    /// Mean log-probability of the policy's own actions (minus the entropy).
    pub log_prob: f32,
}

/// The agent: actor, twin critics, target critics, optimisers and its own RNG (used for
/// exploration noise and batch sampling, so a seed fixes the whole run).
pub struct Sac {
    cfg: SacConfig,
    obs_dim: usize,
    act_dim: usize,
    actor: Mlp,
    critic1: Mlp,
    critic2: Mlp,
    critic1_t: Mlp,
    critic2_t: Mlp,
    cvm: VarMap,
    tcvm: VarMap,
    aopt: Adam,
    copt: Adam,
    /// log(alpha) and its Adam moments (a scalar is cheaper on the host than as a tensor).
    log_alpha: [f32; 3],
    alpha_t: i32,
    target_entropy: f64,
    rng: ChaCha8Rng,
    device: Device,
}

fn q(critic: &Mlp, s: &Tensor, a: &Tensor) -> candle_core::Result<Tensor> {
    critic.forward(&Tensor::cat(&[s, a], 1)?)
}

/// ln(1 + e^x) without overflow for large |x|.
fn softplus(x: &Tensor) -> candle_core::Result<Tensor> {
    x.relu()? + (x.abs()?.neg()?.exp()? + 1.0)?.log()?
}

impl Sac {
    pub fn new(obs_dim: usize, act_dim: usize, cfg: &SacConfig, seed: u64) -> Result<Self> {
        cfg.check()?;
        if obs_dim == 0 || act_dim == 0 {
            bail!("SAC needs positive observation and action dimensions");
        }
        let device = Device::Cpu;
        let dims = |i: usize, o: usize| {
            let mut v = vec![i];
            v.extend(&cfg.hidden);
            v.push(o);
            v
        };
        let (avm, avb) = nn::new_varmap(&device);
        // One output per action dimension for the mean and one for the log std.
        let actor = Mlp::new(avb.pp("actor"), &dims(obs_dim, 2 * act_dim))?;
        let (cvm, cvb) = nn::new_varmap(&device);
        let critic1 = Mlp::new(cvb.pp("critic1"), &dims(obs_dim + act_dim, 1))?;
        let critic2 = Mlp::new(cvb.pp("critic2"), &dims(obs_dim + act_dim, 1))?;
        nn::init_vars(&avm, seed)?;
        nn::init_vars(&cvm, seed ^ 0x5ac1)?;
        let (tcvm, tcvb) = nn::new_varmap(&device);
        let critic1_t = Mlp::new(tcvb.pp("critic1"), &dims(obs_dim + act_dim, 1))?;
        let critic2_t = Mlp::new(tcvb.pp("critic2"), &dims(obs_dim + act_dim, 1))?;
        nn::copy_vars(&cvm, &tcvm)?;
        let aopt = Adam::for_varmap(&avm, AdamConfig::new(cfg.lr, 0.0))?;
        let copt = Adam::for_varmap(&cvm, AdamConfig::new(cfg.lr, 0.0))?;
        Ok(Sac {
            obs_dim,
            act_dim,
            actor,
            critic1,
            critic2,
            critic1_t,
            critic2_t,
            cvm,
            tcvm,
            aopt,
            copt,
            log_alpha: [cfg.init_alpha.ln() as f32, 0.0, 0.0],
            alpha_t: 0,
            target_entropy: cfg.target_entropy.unwrap_or(-(act_dim as f64)),
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5ac_5eed),
            device,
            cfg: cfg.clone(),
        })
    }

    pub fn alpha(&self) -> f64 {
        (self.log_alpha[0] as f64).exp()
    }

    /// Mean and log std of the pre-squash Gaussian for a batch of observations.
    fn gaussian(&self, s: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let out = self.actor.forward(s)?;
        let mu = out.narrow(1, 0, self.act_dim)?;
        // A smooth squash into the bounds rather than a clamp, so the gradient never
        // vanishes at a bound.
        let raw = out.narrow(1, self.act_dim, self.act_dim)?.tanh()?;
        let log_std = ((raw + 1.0)? * (0.5 * (LOG_STD_MAX - LOG_STD_MIN)))? + LOG_STD_MIN;
        Ok((mu, log_std?))
    }

    /// A reparameterised sample `tanh(mu + std * eps)` and its log-probability `[n, 1]`.
    fn sample_policy(&self, s: &Tensor, eps: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let (mu, log_std) = self.gaussian(s)?;
        let u = (mu + (log_std.exp()? * eps)?)?;
        let a = u.tanh()?;
        let half_log_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
        let gauss = ((eps.sqr()? * -0.5)? - &log_std)?.sum_keepdim(1)?;
        let gauss = (gauss - half_log_2pi * self.act_dim as f64)?;
        // log(1 - tanh(u)^2) = 2 (ln 2 - u - softplus(-2u)), exact where 1 - tanh^2
        // underflows.
        let squash = (((u.neg()? - softplus(&(&u * -2.0)?)?)? + std::f64::consts::LN_2)? * 2.0)?
            .sum_keepdim(1)?;
        Ok((a, (gauss - squash)?))
    }

    fn normal_tensor(&mut self, rows: usize) -> Result<Tensor> {
        let v: Vec<f32> = (0..rows * self.act_dim)
            .map(|_| nn::normal(&mut self.rng))
            .collect();
        Ok(Tensor::from_vec(v, (rows, self.act_dim), &self.device)?)
    }

    fn check_obs(&self, obs: &[f32]) -> Result<usize> {
        let rows = obs.len() / self.obs_dim;
        if rows == 0 || rows * self.obs_dim != obs.len() {
            bail!(
                "observations of length {} are not rows of {}",
                obs.len(),
                self.obs_dim
            );
        }
        if !obs.iter().all(|v| v.is_finite()) {
            bail!("non-finite observation");
        }
        Ok(rows)
    }

    /// One exploratory action (a sample of the policy) for one observation.
    pub fn act(&mut self, obs: &[f32]) -> Result<Vec<f32>> {
        if self.check_obs(obs)? != 1 {
            bail!("`act` takes one observation");
        }
        let s = Tensor::from_slice(obs, (1, self.obs_dim), &self.device)?;
        let (mu, log_std) = self.gaussian(&s)?;
        let (mu, log_std): (Vec<f32>, Vec<f32>) = (
            mu.flatten_all()?.to_vec1()?,
            log_std.flatten_all()?.to_vec1()?,
        );
        Ok(mu
            .iter()
            .zip(&log_std)
            .map(|(m, l)| (m + l.exp() * nn::normal(&mut self.rng)).tanh())
            .collect())
    }

    /// The deterministic policy `tanh(mu)` for a batch of observations `[n * obs_dim]`.
    pub fn act_deterministic(&self, obs: &[f32]) -> Result<Vec<f32>> {
        let n = self.check_obs(obs)?;
        let s = Tensor::from_slice(obs, (n, self.obs_dim), &self.device)?;
        let (mu, _) = self.gaussian(&s)?;
        Ok(mu.tanh()?.flatten_all()?.to_vec1()?)
    }

    /// min(Q1, Q2) of observation-action pairs (`[n * obs_dim]`, `[n * act_dim]`).
    pub fn q_values(&self, obs: &[f32], act: &[f32]) -> Result<Vec<f32>> {
        let n = self.check_obs(obs)?;
        if act.len() != n * self.act_dim || !act.iter().all(|v| v.is_finite()) {
            bail!("{} action values do not match {n} observations", act.len());
        }
        let s = Tensor::from_slice(obs, (n, self.obs_dim), &self.device)?;
        let a = Tensor::from_slice(act, (n, self.act_dim), &self.device)?;
        let v = q(&self.critic1, &s, &a)?.minimum(&q(&self.critic2, &s, &a)?)?;
        Ok(v.flatten_all()?.to_vec1()?)
    }

    /// One gradient step of the critics, the actor and the temperature on a batch drawn
    /// from `buffer`.
    pub fn update(&mut self, buffer: &ReplayBuffer) -> Result<UpdateStats> {
        if buffer.is_empty() {
            bail!("cannot update from an empty replay buffer");
        }
        if buffer.obs_dim != self.obs_dim || buffer.act_dim != self.act_dim {
            bail!("the replay buffer's shapes do not match the agent's");
        }
        let (n, d, ad, dev) = (
            self.cfg.batch_size,
            self.obs_dim,
            self.act_dim,
            self.device.clone(),
        );
        let b = buffer.sample(n, self.cfg.gamma as f32, &mut self.rng);
        let s = Tensor::from_vec(b.obs, (n, d), &dev)?;
        let s2 = Tensor::from_vec(b.next, (n, d), &dev)?;
        let a = Tensor::from_vec(b.act, (n, ad), &dev)?;
        let r = Tensor::from_vec(b.rew, (n, 1), &dev)?;
        let not_done = Tensor::from_vec(b.not_done, (n, 1), &dev)?;
        let capped = b.cap.iter().any(|c| c.is_finite());
        let cap = Tensor::from_vec(b.cap, (n, 1), &dev)?;
        let alpha = self.alpha();

        // Critics: soft Bellman target with the policy's next action and its entropy.
        let eps2 = self.normal_tensor(n)?;
        let (a2, logp2) = self.sample_policy(&s2, &eps2)?;
        let q_next = q(&self.critic1_t, &s2, &a2)?.minimum(&q(&self.critic2_t, &s2, &a2)?)?;
        let soft = (q_next - (logp2 * alpha)?)?;
        let mut y = (r + (soft * not_done)?)?;
        if capped {
            y = y.minimum(&cap)?;
        }
        let y = y.detach();
        let q1 = q(&self.critic1, &s, &a)?;
        let q2 = q(&self.critic2, &s, &a)?;
        let closs = ((q1 - &y)?.sqr()?.mean_all()? + (q2 - &y)?.sqr()?.mean_all()?)?;
        self.copt.backward_step(&closs)?;

        // Actor: the gradient also reaches the critics' variables, but only the actor's
        // optimiser steps, so the critics stay as the critic step left them.
        let eps = self.normal_tensor(n)?;
        let (pi, logp) = self.sample_policy(&s, &eps)?;
        let q_pi = q(&self.critic1, &s, &pi)?.minimum(&q(&self.critic2, &s, &pi)?)?;
        let aloss = ((logp.clone() * alpha)? - q_pi)?.mean_all()?;
        self.aopt.backward_step(&aloss)?;

        // Temperature: d/d(log alpha) of -log_alpha * (log_prob + target) is
        // -(log_prob + target); one Adam step on the host.
        let log_prob = logp.mean_all()?.to_scalar::<f32>()?;
        let g = -(log_prob as f64 + self.target_entropy);
        self.alpha_t += 1;
        let [p, m, v] = &mut self.log_alpha;
        let cfg = AdamConfig::new(self.cfg.lr, 0.0);
        crate::nn::adam::update(
            &cfg,
            self.alpha_t,
            std::slice::from_mut(p),
            std::slice::from_mut(m),
            std::slice::from_mut(v),
            &[g as f32],
        );

        crate::rl::td3bc::soft_update(&self.cvm, &self.tcvm, self.cfg.tau)?;
        let stats = UpdateStats {
            critic_loss: closs.to_scalar::<f32>()?,
            actor_loss: aloss.to_scalar::<f32>()?,
            alpha: self.alpha(),
            log_prob,
        };
        if !(stats.critic_loss.is_finite() && stats.actor_loss.is_finite()) {
            bail!("SAC diverged (non-finite loss); try a smaller learning rate or reward scale");
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_sac() -> SacConfig {
        SacConfig {
            hidden: vec![32, 32],
            batch_size: 64,
            random_steps: 200,
            update_after: 200,
            ..Default::default()
        }
    }

    /// A point on the plane moved by 0.1 * action, rewarded by minus its distance to
    /// the origin: the policy must learn to push towards the origin from anywhere.
    #[test]
    fn sac_learns_to_reach_the_origin() {
        let cfg = small_sac();
        let mut agent = Sac::new(2, 2, &cfg, 3).unwrap();
        let mut buffer = ReplayBuffer::new(2, 2, 10_000).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let start =
            |rng: &mut ChaCha8Rng| [rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0)];
        let dist = |p: [f32; 2]| (p[0] * p[0] + p[1] * p[1]).sqrt();
        // Mean final distance of the deterministic policy after 20 steps from fixed starts.
        let score = |agent: &Sac| {
            let mut rng = ChaCha8Rng::seed_from_u64(77);
            let mut total = 0.0;
            for _ in 0..20 {
                let mut p = start(&mut rng);
                for _ in 0..20 {
                    let a = agent.act_deterministic(&p).unwrap();
                    p = [p[0] + 0.1 * a[0], p[1] + 0.1 * a[1]];
                }
                total += dist(p);
            }
            total / 20.0
        };
        let before = score(&agent);
        let mut p = start(&mut rng);
        for t in 0..2500 {
            let a = if t < cfg.random_steps {
                vec![rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0)]
            } else {
                agent.act(&p).unwrap()
            };
            let next = [p[0] + 0.1 * a[0], p[1] + 0.1 * a[1]];
            // Every reward is negative, so no return exceeds 0.
            buffer
                .push_capped(&p, &a, -dist(next), &next, false, 0.0)
                .unwrap();
            if t >= cfg.update_after {
                agent.update(&buffer).unwrap();
            }
            p = if t % 20 == 19 { start(&mut rng) } else { next };
        }
        let after = score(&agent);
        assert!(after < 0.15 && after < before / 3.0, "{before} -> {after}");
        let q = agent
            .q_values(&[0.5, 0.5, -0.5, 0.2], &[-1.0, -1.0, 1.0, 0.0])
            .unwrap();
        assert!(q.iter().all(|&v| v < 0.1 && v > -10.0), "{q:?}");
        assert!(agent.q_values(&[0.5, 0.5], &[1.0]).is_err());
        assert!(agent.alpha() > 0.0 && agent.alpha().is_finite());
    }

    #[test]
    fn sac_and_buffer_reject_bad_input() {
        assert!(Sac::new(0, 2, &SacConfig::default(), 0).is_err());
        let bad = SacConfig {
            gamma: 1.5,
            ..Default::default()
        };
        assert!(Sac::new(4, 2, &bad, 0).is_err());

        let mut agent = Sac::new(4, 2, &small_sac(), 0).unwrap();
        assert!(agent.act(&[0.0; 3]).is_err());
        assert!(agent.act(&[0.0; 8]).is_err());
        assert!(agent.act_deterministic(&[f32::NAN; 4]).is_err());
        assert_eq!(agent.act_deterministic(&[0.0; 12]).unwrap().len(), 6);
        let mut buffer = ReplayBuffer::new(4, 2, 3).unwrap();
        assert!(agent.update(&buffer).is_err());
        assert!(buffer
            .push(&[0.0; 4], &[0.0; 3], 0.0, &[0.0; 4], false)
            .is_err());
        assert!(buffer
            .push(&[0.0; 4], &[0.0; 2], f32::NAN, &[0.0; 4], false)
            .is_err());
        let nan_cap = buffer.push_capped(&[0.0; 4], &[0.0; 2], 0.0, &[0.0; 4], false, f32::NAN);
        assert!(nan_cap.is_err());
        for k in 0..5 {
            buffer
                .push(&[k as f32; 4], &[0.0; 2], k as f32, &[0.0; 4], false)
                .unwrap();
        }
        // A ring: the oldest two were overwritten.
        assert_eq!(buffer.len(), 3);
        let mut rewards = buffer.rew.clone();
        rewards.sort_by(f32::total_cmp);
        assert_eq!(rewards, vec![2.0, 3.0, 4.0]);
        assert!(agent.update(&buffer).is_ok());
        let other = ReplayBuffer::new(3, 2, 3).unwrap();
        assert!(agent.update(&other).is_err());
    }
}
