//! Checkpoints of a training run, so that `laq train --resume DIR` continues after a kill
//! with no lost progress and ends with exactly the model an uninterrupted run would have
//! written: every piece of state that the remaining steps read (weights, Adam moments,
//! random-number generator positions, running sums) is saved, nothing is re-derived.
//!
//! One file, `DIR/checkpoint.safetensors`, replaced atomically: tensors hold the arrays,
//! the `laq_checkpoint` metadata entry holds JSON (the run's settings, the dataset's
//! fingerprint, the stage and its scalars).

use crate::nn::Adam;
use anyhow::{bail, Context, Result};
use candle_core::{Tensor, Var};
use candle_nn::VarMap;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use safetensors::tensor::{Dtype, TensorView};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The checkpoint file inside a run directory.
pub const FILE: &str = "checkpoint.safetensors";
const META_KEY: &str = "laq_checkpoint";
/// Bumped whenever what a checkpoint holds changes meaning.
const VERSION: u64 = 1;

/// Arrays and JSON of one saved state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    f32s: BTreeMap<String, Vec<f32>>,
    u32s: BTreeMap<String, Vec<u32>>,
    pub meta: serde_json::Map<String, Value>,
}

impl State {
    pub fn put_f32(&mut self, name: &str, v: Vec<f32>) {
        self.f32s.insert(name.to_string(), v);
    }

    pub fn put_u32(&mut self, name: &str, v: Vec<u32>) {
        self.u32s.insert(name.to_string(), v);
    }

    pub fn f32(&self, name: &str) -> Result<&[f32]> {
        self.f32s
            .get(name)
            .map(Vec::as_slice)
            .with_context(|| format!("checkpoint has no array `{name}`"))
    }

    pub fn u32(&self, name: &str) -> Result<&[u32]> {
        self.u32s
            .get(name)
            .map(Vec::as_slice)
            .with_context(|| format!("checkpoint has no array `{name}`"))
    }

    pub fn set(&mut self, key: &str, v: Value) {
        self.meta.insert(key.to_string(), v);
    }

    pub fn get(&self, key: &str) -> Result<&Value> {
        self.meta
            .get(key)
            .with_context(|| format!("checkpoint has no entry `{key}`"))
    }

    pub fn get_u64(&self, key: &str) -> Result<u64> {
        self.get(key)?
            .as_u64()
            .with_context(|| format!("checkpoint entry `{key}` is not an integer"))
    }

    pub fn get_f64(&self, key: &str) -> Result<f64> {
        self.get(key)?
            .as_f64()
            .with_context(|| format!("checkpoint entry `{key}` is not a number"))
    }

    pub fn get_str(&self, key: &str) -> Result<&str> {
        self.get(key)?
            .as_str()
            .with_context(|| format!("checkpoint entry `{key}` is not a string"))
    }

    /// Deserialises entry `key`.
    pub fn get_as<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<T> {
        serde_json::from_value(self.get(key)?.clone())
            .with_context(|| format!("checkpoint entry `{key}` is malformed"))
    }

    /// Saves the values of every variable of `vm` under `prefix`.
    pub fn put_vars(&mut self, prefix: &str, vm: &VarMap) -> Result<()> {
        for (name, var) in crate::nn::sorted_vars(vm)? {
            self.put_f32(
                &format!("{prefix}.{name}"),
                var.flatten_all()?.to_vec1::<f32>()?,
            );
        }
        Ok(())
    }

    /// Restores every variable of `vm` from `prefix`.
    pub fn load_vars(&self, prefix: &str, vm: &VarMap) -> Result<()> {
        for (name, var) in crate::nn::sorted_vars(vm)? {
            set_var(&var, self.f32(&format!("{prefix}.{name}"))?)?;
        }
        Ok(())
    }

    /// Saves an optimiser's full state (parameters, moments, step count, learning rate).
    pub fn put_adam(&mut self, prefix: &str, opt: &Adam) {
        let s = opt.state();
        for (name, p, m, v) in s.tensors {
            self.put_f32(&format!("{prefix}.p.{name}"), p.to_vec());
            self.put_f32(&format!("{prefix}.m.{name}"), m.to_vec());
            self.put_f32(&format!("{prefix}.v.{name}"), v.to_vec());
        }
        self.set(
            &format!("{prefix}.t"),
            json!({"t": s.t, "lr": s.lr, "weight_decay": s.weight_decay}),
        );
    }

    /// Restores what [`State::put_adam`] saved into `opt` and the variables it updates.
    pub fn load_adam(&self, prefix: &str, opt: &mut Adam) -> Result<()> {
        let scalars = self.get(&format!("{prefix}.t"))?;
        let t = scalars["t"]
            .as_i64()
            .context("checkpoint: optimiser step count missing")?;
        let lr = scalars["lr"]
            .as_f64()
            .context("checkpoint: optimiser learning rate missing")?;
        let names: Vec<String> = opt.var_names();
        let mut arrays = vec![];
        for name in &names {
            arrays.push((
                self.f32(&format!("{prefix}.p.{name}"))?.to_vec(),
                self.f32(&format!("{prefix}.m.{name}"))?.to_vec(),
                self.f32(&format!("{prefix}.v.{name}"))?.to_vec(),
            ));
        }
        opt.restore(t as i32, lr, arrays)
    }

    /// Saves a generator's exact position.
    pub fn put_rng(&mut self, key: &str, rng: &ChaCha8Rng) {
        self.set(
            key,
            json!({
                "seed": rng.get_seed().to_vec(),
                "stream": rng.get_stream(),
                // u128 does not fit JSON numbers.
                "word_pos": rng.get_word_pos().to_string(),
            }),
        );
    }

    pub fn get_rng(&self, key: &str) -> Result<ChaCha8Rng> {
        let v = self.get(key)?;
        let seed: Vec<u8> = serde_json::from_value(v["seed"].clone())
            .with_context(|| format!("checkpoint: generator `{key}` has no seed"))?;
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| anyhow::anyhow!("checkpoint: generator `{key}` seed is not 32 bytes"))?;
        let stream = v["stream"]
            .as_u64()
            .with_context(|| format!("checkpoint: generator `{key}` has no stream"))?;
        let pos: u128 = v["word_pos"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("checkpoint: generator `{key}` has no position"))?;
        let mut rng = ChaCha8Rng::from_seed(seed);
        rng.set_stream(stream);
        rng.set_word_pos(pos);
        Ok(rng)
    }

    /// Writes the state to `path` through a temporary file and a rename, so that a kill
    /// during the write leaves the previous checkpoint intact.
    pub fn save(&self, path: &Path) -> Result<()> {
        let f32_bytes: Vec<(&String, Vec<u8>, usize)> = self
            .f32s
            .iter()
            .map(|(k, v)| (k, v.iter().flat_map(|x| x.to_le_bytes()).collect(), v.len()))
            .collect();
        let u32_bytes: Vec<(&String, Vec<u8>, usize)> = self
            .u32s
            .iter()
            .map(|(k, v)| (k, v.iter().flat_map(|x| x.to_le_bytes()).collect(), v.len()))
            .collect();
        let mut views = vec![];
        for (name, bytes, n) in &f32_bytes {
            views.push((
                format!("f32/{name}"),
                TensorView::new(Dtype::F32, vec![*n], bytes)?,
            ));
        }
        for (name, bytes, n) in &u32_bytes {
            views.push((
                format!("u32/{name}"),
                TensorView::new(Dtype::U32, vec![*n], bytes)?,
            ));
        }
        let mut meta = self.meta.clone();
        meta.insert("checkpoint_version".into(), json!(VERSION));
        let info = HashMap::from([(META_KEY.to_string(), Value::Object(meta).to_string())]);
        let bytes = safetensors::serialize(views, Some(info))?;
        crate::io::write_atomic(path, &bytes)
    }

    pub fn load(path: &Path) -> Result<Self> {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let what = || format!("{} is not a laq checkpoint", path.display());
        let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).with_context(what)?;
        let meta = header
            .metadata()
            .as_ref()
            .and_then(|m| m.get(META_KEY))
            .with_context(what)?;
        let meta: serde_json::Map<String, Value> = serde_json::from_str(meta).with_context(what)?;
        if meta.get("checkpoint_version").and_then(Value::as_u64) != Some(VERSION) {
            bail!(
                "{} was written by another version of laq (checkpoint format {:?}, expected {VERSION})",
                path.display(),
                meta.get("checkpoint_version")
            );
        }
        let st = safetensors::SafeTensors::deserialize(&bytes).with_context(what)?;
        let mut out = State {
            meta,
            ..Default::default()
        };
        for (name, view) in st.tensors() {
            let data = view.data();
            match (name.split_once('/'), view.dtype()) {
                (Some(("f32", n)), Dtype::F32) => out.put_f32(
                    n,
                    data.chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect(),
                ),
                (Some(("u32", n)), Dtype::U32) => out.put_u32(
                    n,
                    data.chunks_exact(4)
                        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect(),
                ),
                _ => bail!("{}: unexpected array `{name}`", path.display()),
            }
        }
        Ok(out)
    }
}

fn set_var(var: &Var, values: &[f32]) -> Result<()> {
    if values.len() != var.elem_count() {
        bail!(
            "checkpoint array has {} values, the network expects {}",
            values.len(),
            var.elem_count()
        );
    }
    var.set(&Tensor::from_slice(values, var.dims(), var.device())?)?;
    Ok(())
}

/// Decides when to save and carries the state a resumed run starts from.
pub struct Checkpointer {
    path: PathBuf,
    every: Duration,
    last: Instant,
    /// The run's identity (settings, dataset fingerprint), written into every checkpoint
    /// and compared on resume.
    identity: serde_json::Map<String, Value>,
    /// What finished stages produced (e.g. labels), carried into later checkpoints.
    done: State,
    resumed: Option<State>,
    /// Test hook: stop with [`Interrupted`] right after the checkpoint of this
    /// (stage, step), as a kill at that moment would.
    pub interrupt_at: Option<(String, u64)>,
}

/// The error a run returns when [`Checkpointer::interrupt_at`] stops it.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("run interrupted after a checkpoint")
    }
}

impl std::error::Error for Interrupted {}

impl Checkpointer {
    /// A fresh run writing checkpoints to `dir` at most every `every`.
    pub fn new(dir: &Path, every: Duration, identity: serde_json::Map<String, Value>) -> Self {
        Checkpointer {
            path: dir.join(FILE),
            every,
            last: Instant::now(),
            identity,
            done: State::default(),
            resumed: None,
            interrupt_at: None,
        }
    }

    /// Continues the run whose checkpoint is in `dir`; its identity entries must match
    /// `identity` (same settings, same data).
    pub fn resume(
        dir: &Path,
        every: Duration,
        identity: serde_json::Map<String, Value>,
    ) -> Result<Self> {
        let path = dir.join(FILE);
        let state = State::load(&path)?;
        for (k, v) in &identity {
            if state.meta.get(k) != Some(v) {
                bail!(
                    "{} belongs to another run: its `{k}` differs from this one's",
                    path.display()
                );
            }
        }
        let mut done = State::default();
        // Everything under `done.` survives into later stages.
        for (k, v) in &state.f32s {
            if k.starts_with("done.") {
                done.put_f32(k, v.clone());
            }
        }
        for (k, v) in &state.u32s {
            if k.starts_with("done.") {
                done.put_u32(k, v.clone());
            }
        }
        if let Some(d) = state.meta.get("done") {
            done.set("done", d.clone());
        }
        Ok(Checkpointer {
            path,
            every,
            last: Instant::now(),
            identity,
            done,
            resumed: Some(state),
            interrupt_at: None,
        })
    }

    /// Reads the identity saved in the checkpoint of `dir` (to rebuild the run's settings).
    pub fn identity_of(dir: &Path) -> Result<serde_json::Map<String, Value>> {
        Ok(State::load(&dir.join(FILE))?.meta)
    }

    /// The saved state of `stage` if the run was resumed in it.
    pub fn resumed(&mut self, stage: &str) -> Option<State> {
        match &self.resumed {
            Some(s) if s.meta.get("stage").and_then(Value::as_str) == Some(stage) => {
                self.resumed.take()
            }
            _ => None,
        }
    }

    /// Results of finished stages, under `done.` names.
    pub fn done(&self) -> &State {
        &self.done
    }

    /// Records what a finished stage produced; saved with every later checkpoint.
    pub fn finish_stage(&mut self, stage: &str, produced: State) -> Result<()> {
        for (k, v) in produced.f32s {
            self.done.put_f32(&format!("done.{k}"), v);
        }
        for (k, v) in produced.u32s {
            self.done.put_u32(&format!("done.{k}"), v);
        }
        let mut d = self
            .done
            .meta
            .get("done")
            .cloned()
            .unwrap_or_else(|| json!({}));
        d[stage] = Value::Object(produced.meta);
        self.done.set("done", d);
        let mut s = State::default();
        s.set("stage", json!(format!("after {stage}")));
        self.write(s)
    }

    /// Whether a stage that has finished step `step` should save now.
    pub fn due(&self, stage: &str, step: u64) -> bool {
        self.last.elapsed() >= self.every
            || self.interrupt_at.as_ref() == Some(&(stage.into(), step))
    }

    /// Saves `state` (the current stage's) with the identity and the finished stages.
    /// Returns [`Interrupted`] if the test hook asks to stop here.
    pub fn save(&mut self, stage: &str, step: u64, mut state: State) -> Result<()> {
        state.set("stage", json!(stage));
        state.set("step", json!(step));
        self.write(state)?;
        if self.interrupt_at.as_ref() == Some(&(stage.into(), step)) {
            return Err(Interrupted.into());
        }
        Ok(())
    }

    fn write(&mut self, mut state: State) -> Result<()> {
        for (k, v) in &self.identity {
            state.set(k, v.clone());
        }
        for (k, v) in &self.done.f32s {
            state.put_f32(k, v.clone());
        }
        for (k, v) in &self.done.u32s {
            state.put_u32(k, v.clone());
        }
        if let Some(d) = self.done.meta.get("done") {
            state.set("done", d.clone());
        }
        state.save(&self.path)?;
        self.last = Instant::now();
        Ok(())
    }

    /// Removes the checkpoint once the run's outputs are written.
    pub fn finish(self) -> Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("cannot remove {}", self.path.display()))
            }
            _ => Ok(()),
        }
    }
}

/// FNV-1a over the dataset's arrays: a fingerprint that tells whether a resumed run reads
/// the same data, stable across platforms and versions.
pub fn fingerprint(data: &crate::data::Dataset) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for d in &data.obs_shape {
        eat(&(*d as u64).to_le_bytes());
    }
    for v in data
        .observations
        .iter()
        .chain(&data.next_observations)
        .chain(&data.rewards)
    {
        eat(&v.to_le_bytes());
    }
    for &t in &data.terminals {
        eat(&[t as u8]);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn generator_position_round_trips() {
        let mut a = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..13 {
            a.random::<u32>();
        }
        let mut s = State::default();
        s.put_rng("rng", &a);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.safetensors");
        s.put_f32("x", vec![1.0, f32::MIN_POSITIVE, -0.0]);
        s.put_u32("l", vec![3, 0, u32::MAX]);
        s.save(&p).unwrap();
        let back = State::load(&p).unwrap();
        assert_eq!(back.f32("x").unwrap(), &[1.0, f32::MIN_POSITIVE, -0.0]);
        assert_eq!(back.u32("l").unwrap(), &[3, 0, u32::MAX]);
        let mut b = back.get_rng("rng").unwrap();
        for _ in 0..100 {
            assert_eq!(a.random::<u64>(), b.random::<u64>());
        }
    }

    #[test]
    fn corrupt_and_foreign_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.safetensors");
        std::fs::write(&p, b"not a checkpoint").unwrap();
        assert!(State::load(&p).is_err());
        let bytes = safetensors::serialize(
            vec![(
                "w",
                TensorView::new(Dtype::F32, vec![1], &[0u8, 0, 0, 0]).unwrap(),
            )],
            None,
        )
        .unwrap();
        std::fs::write(&p, bytes).unwrap();
        let e = State::load(&p).unwrap_err().to_string();
        assert!(e.contains("not a laq checkpoint"), "{e}");
    }
}
