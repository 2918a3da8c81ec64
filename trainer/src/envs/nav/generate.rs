//! The data mix and its generation: episodes of rendered frames with poses in `infos`.

use super::*;

/// Episode types of the data mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// To G_far by the shortest path.
    Far,
    /// To G_near through the waypoint: the long way round the ring.
    Detour,
    /// To G_near by the shortest path.
    Direct,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Far, Kind::Detour, Kind::Direct];

    pub fn index(self) -> usize {
        match self {
            Kind::Far => 0,
            Kind::Detour => 1,
            Kind::Direct => 2,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct GenConfig {
    pub episodes: usize,
    /// Frame width and height in pixels.
    pub size: usize,
    /// Frames stacked along channels per observation.
    pub frames: usize,
    pub epsilon: f64,
    pub max_steps: usize,
    /// Shares of far, detour and direct episodes (normalised).
    pub mix: [f64; 3],
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            episodes: EPISODES,
            size: SIZE,
            frames: 1,
            epsilon: EPSILON,
            max_steps: MAX_STEPS,
            mix: MIX,
        }
    }
}

/// One generated episode: its type, where its transitions start, how many there are and
/// the goal it ended at (`None`: cut by the step limit).
#[derive(Clone, Debug, PartialEq)]
pub struct Episode {
    pub kind: Kind,
    pub start: usize,
    pub len: usize,
    pub goal: Option<Goal>,
}

/// Generated transitions with u8 frames (a quarter of the f32 dataset's memory) and the
/// poses behind them.
#[derive(Clone, Debug, PartialEq)]
pub struct NavData {
    /// `[3 * frames, size, size]`.
    pub obs_shape: Vec<usize>,
    pub observations: Vec<u8>,
    pub next_observations: Vec<u8>,
    pub rewards: Vec<f32>,
    pub terminals: Vec<bool>,
    pub timeouts: Vec<bool>,
    pub actions: Vec<i64>,
    pub poses: Vec<Pose>,
    pub next_poses: Vec<Pose>,
    pub episodes: Vec<Episode>,
}

impl NavData {
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// The transitions as a dataset; the frames stay u8 (pixel values 0..=255).
    pub fn to_dataset(&self) -> Dataset {
        Dataset {
            obs_shape: self.obs_shape.clone(),
            observations: self.observations.clone().into(),
            next_observations: self.next_observations.clone().into(),
            rewards: self.rewards.clone(),
            terminals: self.terminals.clone(),
            timeouts: Some(self.timeouts.clone()),
            next_missing: None,
            actions: Some(Actions::Discrete(self.actions.clone())),
        }
    }

    pub(super) fn infos(&self) -> Vec<f32> {
        let mut episode = vec![0usize; self.len()];
        let mut kind = vec![0usize; self.len()];
        for (e, ep) in self.episodes.iter().enumerate() {
            for i in ep.start..ep.start + ep.len {
                episode[i] = e;
                kind[i] = ep.kind.index();
            }
        }
        (0..self.len())
            .flat_map(|i| {
                let (p, q) = (self.poses[i], self.next_poses[i]);
                [
                    p.x(),
                    p.y(),
                    p.h() as f32,
                    q.x(),
                    q.y(),
                    q.h() as f32,
                    episode[i] as f32,
                    kind[i] as f32,
                ]
            })
            .collect()
    }

    /// The dataset's arrays, observations as u8, with poses in `infos`; consumes the data
    /// so the frames are moved, not copied.
    pub fn into_arrays(self) -> BTreeMap<String, RawArray> {
        let n = self.len();
        let mut shape = vec![n];
        shape.extend(&self.obs_shape);
        let mut m = BTreeMap::new();
        m.insert(
            "infos".into(),
            RawArray::from_f32(vec![n, 8], &self.infos()),
        );
        m.insert("rewards".into(), RawArray::from_f32(vec![n], &self.rewards));
        m.insert(
            "terminals".into(),
            RawArray::from_bool(vec![n], &self.terminals),
        );
        m.insert(
            "timeouts".into(),
            RawArray::from_bool(vec![n], &self.timeouts),
        );
        m.insert("actions".into(), RawArray::from_i64(vec![n], &self.actions));
        m.insert(
            "observations".into(),
            RawArray::from_u8(shape.clone(), self.observations),
        );
        m.insert(
            "next_observations".into(),
            RawArray::from_u8(shape, self.next_observations),
        );
        m
    }

    /// Writes `.npz` or `.safetensors` (by extension), observations as u8. This copies the
    /// frames; `into_arrays` with `data::write_arrays` does not.
    pub fn save(&self, path: &Path) -> Result<()> {
        write_arrays(path, &self.clone().into_arrays())
    }

    /// V* of every transition's first pose.
    pub fn optimal_values(&self, nav: &Nav) -> Vec<f64> {
        self.poses.iter().map(|&p| nav.optimal_value(p)).collect()
    }
}

/// Poses `(pose, next pose)` per transition from a dataset's `infos` array.
pub fn poses_from_infos(infos: &RawArray) -> Result<Vec<(Pose, Pose)>> {
    if infos.shape.len() != 2 || infos.shape[1] < 6 {
        bail!(
            "`infos` of shape {:?} holds no poses (expected [N, 8])",
            infos.shape
        );
    }
    let w = infos.shape[1];
    let v = infos.to_f32();
    v.chunks_exact(w)
        .enumerate()
        .map(|(i, r)| {
            let pose = |x: f32, y: f32, h: f32| {
                if !(x.is_finite() && y.is_finite() && h >= 0.0 && h < HEADINGS as f32) {
                    bail!("`infos` row {i} holds no valid pose ({x}, {y}, {h})");
                }
                Ok(Pose::from_xy(x, y, h as usize))
            };
            Ok((pose(r[0], r[1], r[2])?, pose(r[3], r[4], r[5])?))
        })
        .collect()
}

/// Poses of a saved navigation dataset, read from its `infos`.
pub fn load_poses(path: &Path) -> Result<Vec<(Pose, Pose)>> {
    let arrays = read_arrays(path)?;
    let infos = arrays
        .get("infos")
        .with_context(|| format!("{} has no `infos` array", path.display()))?;
    poses_from_infos(infos).with_context(|| format!("in {}", path.display()))
}

pub(super) fn validate(cfg: &GenConfig) -> Result<()> {
    if cfg.episodes == 0 {
        bail!("episodes must be at least 1");
    }
    if !(8..=1024).contains(&cfg.size) {
        bail!("frame size {} out of range (8..=1024 pixels)", cfg.size);
    }
    if !(1..=16).contains(&cfg.frames) {
        bail!("frames {} out of range (1..=16)", cfg.frames);
    }
    if !(0.0..=1.0).contains(&cfg.epsilon) {
        bail!("epsilon {} out of range [0, 1]", cfg.epsilon);
    }
    if cfg.max_steps == 0 {
        bail!("max_steps must be at least 1");
    }
    if cfg.mix.iter().any(|m| !m.is_finite() || *m < 0.0) || cfg.mix.iter().sum::<f64>() <= 0.0 {
        bail!(
            "mix {:?}: shares must be non-negative with a positive sum",
            cfg.mix
        );
    }
    Ok(())
}

/// Episodes per kind: the shares of `episodes`, rounded by largest remainders (kind order
/// on ties) so that the counts add up.
pub(super) fn allocate(episodes: usize, mix: [f64; 3]) -> [usize; 3] {
    let total: f64 = mix.iter().sum();
    let exact = mix.map(|m| m / total * episodes as f64);
    let mut n = exact.map(|e| e.floor() as usize);
    let left = episodes.saturating_sub(n.iter().sum());
    let mut order = [0, 1, 2];
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    for &k in order.iter().take(left) {
        n[k] += 1;
    }
    n
}

/// The default navigation data: `episodes` episodes of the paper's protocol at `size` x
/// `size` pixels, as a dataset (u8 pixel values 0..=255). [`Nav::generate`] also gives
/// the poses.
pub fn generate(episodes: usize, seed: u64, size: usize) -> Result<Dataset> {
    let cfg = GenConfig {
        episodes,
        size,
        ..GenConfig::default()
    };
    Ok(Nav::branching()?.generate(&cfg, seed)?.to_dataset())
}
