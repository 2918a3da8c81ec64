//! Checkpoints of a training run, so that `laq train --resume DIR` continues after a kill
//! with no lost progress and ends with exactly the model an uninterrupted run would have
//! written: every piece of state that the remaining steps read (weights, Adam moments,
//! random-number generator positions, running sums) is saved, nothing is re-derived.
//!
//! One file, `DIR/checkpoint.safetensors`, replaced atomically: tensors hold the arrays,
//! the `laq_checkpoint` metadata entry holds a [`Header`] as JSON (the run's identity, the
//! stage, its step and its typed records, and what finished stages produced).

use crate::nn::Adam;
use crate::util::safetensors::{to_bytes, Entry};
use anyhow::{bail, Context, Result};
use candle_core::{Tensor, Var};
use candle_nn::VarMap;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use safetensors::tensor::Dtype;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The checkpoint file inside a run directory.
pub const FILE: &str = "checkpoint.safetensors";
const META_KEY: &str = "laq_checkpoint";
/// Bumped whenever what a checkpoint holds changes meaning.
const VERSION: u64 = 2;

/// The JSON part of a checkpoint file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub checkpoint_version: u64,
    /// The stage in progress, or `after STAGE` between stages.
    pub stage: Option<String>,
    /// Steps the stage has finished.
    pub step: Option<u64>,
    /// What a resumed run must share with this one (settings, dataset fingerprint).
    pub identity: Value,
    /// The records of each finished stage.
    pub done: BTreeMap<String, BTreeMap<String, Value>>,
    /// The stage's own records.
    pub records: BTreeMap<String, Value>,
}

/// Arrays and typed records of one saved state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    f32s: BTreeMap<String, Vec<f32>>,
    u32s: BTreeMap<String, Vec<u32>>,
    header: Header,
}

/// A generator's exact position.
#[derive(Serialize, Deserialize)]
struct RngRecord {
    seed: Vec<u8>,
    stream: u64,
    /// u128 does not fit JSON numbers.
    word_pos: String,
}

/// An optimiser's scalars (its arrays are saved beside).
#[derive(Serialize, Deserialize)]
struct AdamRecord {
    t: i32,
    lr: f64,
    weight_decay: f64,
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

    /// Saves `value` as the record `key`.
    pub fn set_record<T: Serialize>(&mut self, key: &str, value: &T) -> Result<()> {
        self.header
            .records
            .insert(key.to_string(), serde_json::to_value(value)?);
        Ok(())
    }

    /// The record `key`, as saved by [`State::set_record`].
    pub fn record<T: DeserializeOwned>(&self, key: &str) -> Result<T> {
        let v = self
            .header
            .records
            .get(key)
            .with_context(|| format!("checkpoint has no record `{key}`"))?;
        serde_json::from_value(v.clone())
            .with_context(|| format!("checkpoint record `{key}` is malformed"))
    }

    /// Record `key` of the finished stage `stage`, if that stage finished.
    pub fn done_record<T: DeserializeOwned>(&self, stage: &str, key: &str) -> Option<Result<T>> {
        let v = self.header.done.get(stage)?.get(key)?;
        Some(
            serde_json::from_value(v.clone())
                .with_context(|| format!("checkpoint record `{key}` of `{stage}` is malformed")),
        )
    }

    /// Steps the saved stage had finished.
    pub fn step(&self) -> Result<u64> {
        self.header.step.context("checkpoint has no step")
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
    pub fn put_adam(&mut self, prefix: &str, opt: &Adam) -> Result<()> {
        let s = opt.state();
        for (name, p, m, v) in s.tensors {
            self.put_f32(&format!("{prefix}.p.{name}"), p.to_vec());
            self.put_f32(&format!("{prefix}.m.{name}"), m.to_vec());
            self.put_f32(&format!("{prefix}.v.{name}"), v.to_vec());
        }
        let rec = AdamRecord {
            t: s.t,
            lr: s.lr,
            weight_decay: s.weight_decay,
        };
        self.set_record(prefix, &rec)
    }

    /// Restores what [`State::put_adam`] saved into `opt` and the variables it updates.
    pub fn load_adam(&self, prefix: &str, opt: &mut Adam) -> Result<()> {
        let rec: AdamRecord = self.record(prefix)?;
        let mut arrays = vec![];
        for name in &opt.var_names() {
            arrays.push((
                self.f32(&format!("{prefix}.p.{name}"))?.to_vec(),
                self.f32(&format!("{prefix}.m.{name}"))?.to_vec(),
                self.f32(&format!("{prefix}.v.{name}"))?.to_vec(),
            ));
        }
        opt.restore(rec.t, rec.lr, arrays)
    }

    /// Saves a generator's exact position.
    pub fn put_rng(&mut self, key: &str, rng: &ChaCha8Rng) -> Result<()> {
        let rec = RngRecord {
            seed: rng.get_seed().to_vec(),
            stream: rng.get_stream(),
            word_pos: rng.get_word_pos().to_string(),
        };
        self.set_record(key, &rec)
    }

    pub fn get_rng(&self, key: &str) -> Result<ChaCha8Rng> {
        let rec: RngRecord = self.record(key)?;
        let seed: [u8; 32] = rec
            .seed
            .try_into()
            .map_err(|_| anyhow::anyhow!("checkpoint: generator `{key}` seed is not 32 bytes"))?;
        let pos: u128 = rec
            .word_pos
            .parse()
            .with_context(|| format!("checkpoint: generator `{key}` has no position"))?;
        let mut rng = ChaCha8Rng::from_seed(seed);
        rng.set_stream(rec.stream);
        rng.set_word_pos(pos);
        Ok(rng)
    }

    /// Writes the state to `path` through a temporary file and a rename, so that a kill
    /// during the write leaves the previous checkpoint intact.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut entries = vec![];
        for (name, v) in &self.f32s {
            entries.push(Entry::f32(format!("f32/{name}"), vec![v.len()], v));
        }
        for (name, v) in &self.u32s {
            entries.push(Entry::u32(format!("u32/{name}"), vec![v.len()], v));
        }
        let mut header = self.header.clone();
        header.checkpoint_version = VERSION;
        let meta = BTreeMap::from([(META_KEY.to_string(), serde_json::to_string(&header)?)]);
        crate::util::io::write_atomic(path, &to_bytes(&entries, &meta)?)
    }

    pub fn load(path: &Path) -> Result<Self> {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let what = || format!("{} is not a laq checkpoint", path.display());
        let (_, st_header) = safetensors::SafeTensors::read_metadata(&bytes).with_context(what)?;
        let meta = st_header
            .metadata()
            .as_ref()
            .and_then(|m| m.get(META_KEY))
            .with_context(what)?;
        let raw: Value = serde_json::from_str(meta).with_context(what)?;
        let version = raw.get("checkpoint_version").and_then(Value::as_u64);
        if version != Some(VERSION) {
            bail!(
                "{} was written by another version of laq (checkpoint format {version:?}, \
                 expected {VERSION})",
                path.display()
            );
        }
        let header: Header = serde_json::from_value(raw).with_context(what)?;
        let st = safetensors::SafeTensors::deserialize(&bytes).with_context(what)?;
        let mut out = State {
            header,
            ..Default::default()
        };
        for (name, view) in st.tensors() {
            let data = view.data();
            match (name.split_once('/'), view.dtype()) {
                (Some(("f32", n)), Dtype::F32) => {
                    out.put_f32(n, crate::util::safetensors::f32_values(data))
                }
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
    identity: Value,
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
    /// A fresh run with this identity, writing checkpoints to `dir` at most every `every`.
    pub fn new(dir: &Path, every: Duration, identity: &impl Serialize) -> Result<Self> {
        Ok(Checkpointer {
            path: dir.join(FILE),
            every,
            last: Instant::now(),
            identity: serde_json::to_value(identity)?,
            done: State::default(),
            resumed: None,
            interrupt_at: None,
        })
    }

    /// Continues the run whose checkpoint is in `dir`; its identity must equal `identity`
    /// (same settings, same data).
    pub fn resume(dir: &Path, every: Duration, identity: &impl Serialize) -> Result<Self> {
        let path = dir.join(FILE);
        let state = State::load(&path)?;
        let identity = serde_json::to_value(identity)?;
        if let (Value::Object(saved), Value::Object(now)) = (&state.header.identity, &identity) {
            for (k, v) in now {
                if saved.get(k) != Some(v) {
                    bail!(
                        "{} belongs to another run: its `{k}` differs from this one's",
                        path.display()
                    );
                }
            }
        } else if state.header.identity != identity {
            bail!("{} belongs to another run", path.display());
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
        done.header.done = state.header.done.clone();
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
    pub fn identity_of<T: DeserializeOwned>(dir: &Path) -> Result<T> {
        let path = dir.join(FILE);
        serde_json::from_value(State::load(&path)?.header.identity)
            .with_context(|| format!("{}: the run's identity is unreadable", path.display()))
    }

    /// The saved state of `stage` if the run was resumed in it.
    pub fn resumed(&mut self, stage: &str) -> Option<State> {
        match &self.resumed {
            Some(s) if s.header.stage.as_deref() == Some(stage) => self.resumed.take(),
            _ => None,
        }
    }

    /// Results of finished stages, under `done.` names.
    pub fn done(&self) -> &State {
        &self.done
    }

    /// Records what a finished stage produced (its arrays and records); saved with every
    /// later checkpoint.
    pub fn finish_stage(&mut self, stage: &str, produced: State) -> Result<()> {
        for (k, v) in produced.f32s {
            self.done.put_f32(&format!("done.{k}"), v);
        }
        for (k, v) in produced.u32s {
            self.done.put_u32(&format!("done.{k}"), v);
        }
        self.done
            .header
            .done
            .insert(stage.to_string(), produced.header.records);
        let mut s = State::default();
        s.header.stage = Some(format!("after {stage}"));
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
        state.header.stage = Some(stage.to_string());
        state.header.step = Some(step);
        self.write(state)?;
        if self.interrupt_at.as_ref() == Some(&(stage.into(), step)) {
            return Err(Interrupted.into());
        }
        Ok(())
    }

    fn write(&mut self, mut state: State) -> Result<()> {
        state.header.identity = self.identity.clone();
        for (k, v) in &self.done.f32s {
            state.put_f32(k, v.clone());
        }
        for (k, v) in &self.done.u32s {
            state.put_u32(k, v.clone());
        }
        state.header.done = self.done.header.done.clone();
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
        s.put_rng("rng", &a).unwrap();
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
        let bytes = to_bytes(&[Entry::f32("w", vec![1], &[0.0])], &BTreeMap::new()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        let e = State::load(&p).unwrap_err().to_string();
        assert!(e.contains("not a laq checkpoint"), "{e}");
    }
}
