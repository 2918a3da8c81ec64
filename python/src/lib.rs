//! The `laq._laq` extension module: reading datasets, training and evaluating value
//! models for the pure-Python `laq` package, which checks and converts its arguments
//! first and documents the API.
//!
//! Errors come back as Python exceptions with the reason: `ValueError` for bad data or
//! settings, `FileNotFoundError` for a missing file, `RuntimeError` for a failure inside
//! training. A panic in the trainer is caught here and raised as `RuntimeError`, so it
//! never unwinds into the interpreter.

use anyhow::Context as _;
use laq::data::frames::FrameLayout;
use laq::data::read::{ReadOptions, RewardSource};
use laq::data::{Actions, DType, Dataset, Observations, RawArray};
use laq::run::config::TrainConfig;
use laq::run::launch::{launch, Start};
use laq_runtime::{Candidate, Controller, Outcome, OwnedModel, Predicted, MAX_LOOKAHEAD};
use numpy::{
    PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArray1, PyReadonlyArrayDyn,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::Duration;

/// The file a run directory holds its exported model in.
const VALUE_FILE: &str = "value.safetensors";

/// An error of the trainer as the Python exception that fits it: a missing file is
/// `FileNotFoundError`, anything else (bad data, bad settings) `ValueError`. The message
/// holds the whole chain of causes, as the CLI prints it.
fn py_err(e: anyhow::Error) -> PyErr {
    let not_found = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
    });
    let msg = format!("{e:#}");
    if not_found {
        PyFileNotFoundError::new_err(msg)
    } else {
        PyValueError::new_err(msg)
    }
}

/// Runs `f`, turning a panic into a `RuntimeError`, so no unwind crosses into Python.
fn guarded<T>(what: &str, f: impl FnOnce() -> anyhow::Result<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(py_err),
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown cause".into());
            Err(PyRuntimeError::new_err(format!(
                "{what} failed unexpectedly: {why}"
            )))
        }
    }
}

fn read_options(obs_keys: Option<Vec<String>>, reward: Option<String>) -> PyResult<ReadOptions> {
    let reward = match reward {
        None => RewardSource::default(),
        Some(r) => r.parse().map_err(PyValueError::new_err)?,
    };
    Ok(ReadOptions {
        obs_keys,
        reward,
        ..ReadOptions::default()
    })
}

/// Observations as a numpy array of shape `[N, *shape]`, in the storage they were read in
/// (f32, or u8 for images).
fn obs_array<'py>(
    py: Python<'py>,
    obs: Observations,
    n: usize,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let mut full = vec![n];
    full.extend_from_slice(shape);
    Ok(match obs {
        Observations::F32(v) => PyArray1::from_vec(py, v).reshape(full)?.into_any(),
        Observations::U8(v) => PyArray1::from_vec(py, v).reshape(full)?.into_any(),
    })
}

/// Reads a dataset in any format laq reads; returns `(arrays, report)`: the arrays under
/// the keys of the dataset format, and what reading did (lines for people).
#[pyfunction]
#[pyo3(signature = (path, obs_keys=None, reward=None))]
fn load<'py>(
    py: Python<'py>,
    path: PathBuf,
    obs_keys: Option<Vec<String>>,
    reward: Option<String>,
) -> PyResult<(Bound<'py, PyDict>, Vec<String>)> {
    let opts = read_options(obs_keys, reward)?;
    let loaded = py.detach(|| guarded("reading", || laq::data::read::read(&path, &opts)))?;
    let report = loaded.report_lines();
    let d = loaded.data;
    let n = d.len();
    let out = PyDict::new(py);
    out.set_item(
        "observations",
        obs_array(py, d.observations, n, &d.obs_shape)?,
    )?;
    out.set_item(
        "next_observations",
        obs_array(py, d.next_observations, n, &d.obs_shape)?,
    )?;
    out.set_item("rewards", PyArray1::from_vec(py, d.rewards))?;
    out.set_item("terminals", PyArray1::from_vec(py, d.terminals))?;
    if let Some(t) = d.timeouts {
        out.set_item("timeouts", PyArray1::from_vec(py, t))?;
    }
    if let Some(m) = d.next_missing {
        out.set_item("next_missing", PyArray1::from_vec(py, m))?;
    }
    match d.actions {
        Some(Actions::Discrete(a)) => out.set_item("actions", PyArray1::from_vec(py, a))?,
        Some(Actions::Continuous { dim, values }) => out.set_item(
            "actions",
            PyArray1::from_vec(py, values).reshape(vec![n, dim])?,
        )?,
        None => {}
    }
    Ok((out, report))
}

/// The element type of a numpy dtype string (`dtype.str`, little-endian or unordered).
fn dtype_of(s: &str) -> Option<DType> {
    Some(match s {
        "|b1" => DType::Bool,
        "|u1" => DType::U8,
        "|i1" => DType::I8,
        "<u2" => DType::U16,
        "<i2" => DType::I16,
        "<u4" => DType::U32,
        "<i4" => DType::I32,
        "<u8" => DType::U64,
        "<i8" => DType::I64,
        "<f2" => DType::F16,
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        _ => return None,
    })
}

/// A dataset from `{key: (dtype.str, shape, bytes)}`, C-ordered little-endian bytes as
/// the wrapper lays them out; validated as a file of the dataset format is.
fn dataset_of(arrays: &Bound<'_, PyDict>) -> PyResult<Dataset> {
    let mut raw = BTreeMap::new();
    for (k, v) in arrays.iter() {
        let key: String = k.extract()?;
        let (dtype, shape, bytes): (String, Vec<usize>, Bound<'_, PyBytes>) = v.extract()?;
        let Some(dt) = dtype_of(&dtype) else {
            return Err(PyTypeError::new_err(format!(
                "`{key}`: unsupported dtype {dtype}; laq reads bool, integers and floats"
            )));
        };
        raw.insert(
            key,
            RawArray {
                dtype: dt,
                shape,
                bytes: bytes.as_bytes().to_vec(),
            },
        );
    }
    // Arrays without `next_observations` take each row's from the next row of its episode.
    laq::data::following::next_from_rows(&mut raw)
        .and_then(|_| Dataset::from_arrays(raw))
        .context("invalid dataset")
        .map_err(py_err)
}

/// A Python setting value as TOML (booleans before integers: `True` is an `int` too).
fn toml_of(key: &str, v: &Bound<'_, PyAny>) -> PyResult<toml::Value> {
    Ok(if v.is_instance_of::<PyBool>() {
        toml::Value::Boolean(v.extract()?)
    } else if v.is_instance_of::<PyInt>() {
        toml::Value::Integer(v.extract()?)
    } else if v.is_instance_of::<PyFloat>() {
        toml::Value::Float(v.extract()?)
    } else if v.is_instance_of::<PyString>() {
        toml::Value::String(v.extract()?)
    } else if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Vec<Bound<'_, PyAny>> = v.extract()?;
        toml::Value::Array(
            items
                .iter()
                .map(|x| toml_of(key, x))
                .collect::<PyResult<_>>()?,
        )
    } else if let Ok(d) = v.cast::<PyDict>() {
        let mut t = toml::Table::new();
        for (k, x) in d.iter() {
            t.insert(k.extract()?, toml_of(key, &x)?);
        }
        toml::Value::Table(t)
    } else {
        return Err(PyTypeError::new_err(format!(
            "setting `{key}`: a {} is not a setting value (bool, int, float, str, list, dict)",
            v.get_type().name()?
        )));
    })
}

/// Trains on a dataset file (`path`) or on arrays (`arrays`, as `dataset_of` takes
/// them) into the run directory `out`; returns the path of the exported model. The GIL
/// is released while training.
#[pyfunction]
#[pyo3(signature = (out, settings, path=None, arrays=None, obs_keys=None, reward=None))]
fn train(
    py: Python<'_>,
    out: PathBuf,
    settings: &Bound<'_, PyDict>,
    path: Option<PathBuf>,
    arrays: Option<&Bound<'_, PyDict>>,
    obs_keys: Option<Vec<String>>,
    reward: Option<String>,
) -> PyResult<PathBuf> {
    let mut pairs = vec![];
    for (k, v) in settings.iter() {
        let key: String = k.extract()?;
        let value = toml_of(&key, &v)?;
        pairs.push((key, value));
    }
    let with = move |cfg: TrainConfig| {
        let refs: Vec<(&str, toml::Value)> =
            pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        cfg.with_settings(&refs)
    };
    let device = candle_core::Device::Cpu;
    match (path, arrays) {
        (Some(data), None) => {
            let read = read_options(obs_keys, reward)?;
            let start = Start::Fresh {
                data,
                read,
                out: out.clone(),
            };
            py.detach(|| {
                guarded("training", || {
                    launch(&start, with, Duration::from_secs(60), &device)
                })
            })?;
        }
        (None, Some(arrays)) => {
            if obs_keys.is_some() || reward.is_some() {
                return Err(PyValueError::new_err(
                    "obs_keys and reward apply to a dataset file; arrays are taken as given",
                ));
            }
            let data = dataset_of(arrays)?;
            py.detach(|| {
                guarded("training", || {
                    laq::run::launch::refuse_foreign(&out)?;
                    let cfg = with(TrainConfig::for_data(&data))?;
                    log::info!(
                        target: "laq",
                        "{} transitions, observation shape {:?}",
                        data.len(),
                        data.obs_shape
                    );
                    let trained = laq::run::train::train(&data, &cfg, &device, None)?;
                    let fingerprint = data.fingerprint();
                    laq::run::dir::write_run(
                        &out,
                        &data,
                        &trained,
                        "numpy arrays",
                        &fingerprint,
                        &[],
                    )?;
                    Ok(())
                })
            })?;
        }
        _ => {
            return Err(PyValueError::new_err(
                "give exactly one of a dataset path or arrays",
            ))
        }
    }
    let summary = out.join("summary.txt");
    if let Ok(text) = std::fs::read_to_string(&summary) {
        for line in text.lines() {
            log::info!(target: "laq", "{line}");
        }
    }
    Ok(out.join(VALUE_FILE))
}

/// Controller `index` of `Model.select_ahead`: the wrapper's `step(index, state)`, which
/// returns `None` (unavailable from `state`) or `(next, reward, terminal)` with `next` a
/// float32 array. The first exception stops the search: it is kept in `error`, to be
/// raised once the runtime returns, and every later prediction fails without a call.
struct PyController<'a, 'py> {
    index: usize,
    step: &'a Bound<'py, PyAny>,
    error: &'a RefCell<Option<PyErr>>,
}

impl PyController<'_, '_> {
    fn call(&self, state: &[f32], next: &mut [f32]) -> PyResult<Option<Outcome>> {
        let state = PyArray1::from_slice(self.step.py(), state);
        let out = self.step.call1((self.index, state))?;
        if out.is_none() {
            return Ok(None);
        }
        let (predicted, reward, terminal): (PyReadonlyArray1<'_, f32>, f32, bool) =
            out.extract()?;
        let predicted = predicted.as_array();
        if predicted.len() != next.len() {
            return Err(PyValueError::new_err(format!(
                "controller {} predicted a state of {} values; the model's states have {}",
                self.index,
                predicted.len(),
                next.len()
            )));
        }
        for (n, p) in next.iter_mut().zip(predicted.iter()) {
            *n = *p;
        }
        Ok(Some(Outcome { reward, terminal }))
    }
}

impl Controller for PyController<'_, '_> {
    fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, laq_runtime::Error> {
        if self.error.borrow().is_some() {
            return Err(laq_runtime::Error::Controller);
        }
        match self.call(state, next) {
            Ok(Some(outcome)) => Ok(outcome),
            Ok(None) => Err(laq_runtime::Error::Controller),
            Err(e) => {
                *self.error.borrow_mut() = Some(e);
                Err(laq_runtime::Error::Controller)
            }
        }
    }
}

/// Why selection found nothing (or failed), with each candidate's status.
fn selection_error(e: laq_runtime::Error, report: &[Candidate]) -> String {
    let why: Vec<String> = report
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{i}: {:?}", c.status))
        .collect();
    format!("{e} ({})", why.join(", "))
}

/// A value model exported by laq (`value.safetensors`), evaluated by the runtime crate,
/// the code that ships to robots.
#[pyclass(module = "laq._laq", frozen)]
struct Model {
    owned: OwnedModel,
    path: PathBuf,
}

impl Model {
    /// The shape of one observation as the model reads it.
    fn obs_shape(&self) -> Vec<usize> {
        let m = self.owned.model();
        match m.input_shape() {
            Some(s) => s.to_vec(),
            None => vec![m.input_dim()],
        }
    }

    /// Rows of `x` (`[N, *obs_shape]`, or one observation), flattened, with their count
    /// and whether `x` was one observation.
    fn layout_rows(
        &self,
        x: &PyReadonlyArrayDyn<'_, f32>,
        what: &str,
    ) -> PyResult<(Vec<f32>, usize, bool)> {
        let shape = x.shape();
        let want = self.obs_shape();
        let d: usize = want.iter().product();
        // Frames stored as other tools store them (channels-last, grey without a channel
        // axis, stacks), read as the model's `[C, H, W]` as `laq train` reads them.
        let stored =
            |s: &[usize]| FrameLayout::of(s, want.len() == 3).filter(|l| want[..] == l.shape()[..]);
        let single = shape == want.as_slice();
        let batch = shape.len() >= 2
            && shape[1..].iter().product::<usize>() == d
            && (want.len() == 1 || shape[1..] == want[..]);
        let layout = match (single || batch, stored(shape)) {
            (true, _) => None,
            (false, Some(l)) => Some((l, true)),
            (false, None) => shape.get(1..).and_then(stored).map(|l| (l, false)),
        };
        if !single && !batch && layout.is_none() {
            return Err(PyValueError::new_err(format!(
                "{what} of shape {shape:?}: the model takes observations of shape {want:?}, \
                 one or a batch [N, {}]",
                want.iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let single = single || layout.is_some_and(|(_, one)| one);
        let n = if single { 1 } else { shape[0] };
        let mut flat: Vec<f32> = match x.as_slice() {
            Ok(s) => s.to_vec(),
            Err(_) => x.as_array().iter().copied().collect(),
        };
        if let Some((l, _)) = layout.filter(|(l, _)| l.moves_values()) {
            let mut read = vec![0f32; d];
            for row in flat.chunks_exact_mut(d) {
                l.to_channels_first(row, &mut read);
                row.copy_from_slice(&read);
            }
        }
        Ok((flat, n, single))
    }

    /// [`Model::layout_rows`], every value finite.
    fn rows(
        &self,
        x: &PyReadonlyArrayDyn<'_, f32>,
        what: &str,
    ) -> PyResult<(Vec<f32>, usize, bool)> {
        let (flat, n, single) = self.layout_rows(x, what)?;
        let d = flat.len() / n.max(1);
        if let Some(i) = flat.iter().position(|v| !v.is_finite()) {
            return Err(PyValueError::new_err(format!(
                "{what}: {} holds NaN or infinity (row {})",
                if single {
                    "the observation"
                } else {
                    "the batch"
                },
                i / d.max(1)
            )));
        }
        Ok((flat, n, single))
    }
}

#[pymethods]
impl Model {
    /// Loads `value.safetensors`, or the one in a run directory.
    #[new]
    fn new(path: PathBuf) -> PyResult<Self> {
        let file = if path.is_dir() {
            path.join(VALUE_FILE)
        } else {
            path
        };
        let bytes = std::fs::read(&file)
            .with_context(|| format!("cannot read {}", file.display()))
            .map_err(py_err)?;
        if laq::stages::qlearn::is_qnet_file(&bytes) {
            return Err(PyValueError::new_err(format!(
                "{} is a trainer-only Q-network file; load a run's {VALUE_FILE}",
                file.display()
            )));
        }
        let owned = OwnedModel::from_vec(bytes).map_err(|e| {
            PyValueError::new_err(format!("{}: not a valid model: {e}", file.display()))
        })?;
        Ok(Model { owned, path: file })
    }

    /// Path of the model file.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Shape of one observation (`[C, H, W]` for image models).
    #[getter(obs_shape)]
    fn obs_shape_py(&self) -> Vec<usize> {
        self.obs_shape()
    }

    /// The discount the model was trained with.
    #[getter]
    fn gamma(&self) -> f32 {
        self.owned.model().gamma()
    }

    /// The cost a step that V was learned above (a log that pays it until its episodes
    /// end), or `None` where V is in the log's own units.
    #[getter]
    fn cost_per_step(&self) -> Option<f32> {
        self.owned.model().cost_per_step()
    }

    /// V of each observation of a batch `[N, *obs_shape]` (float32, shape `[N]`), or of
    /// one observation (shape `[]`). With `in_data_units`, each in the units of the
    /// log's rewards: the same for most models; where V was learned above a cost per
    /// step `c`, the return `c (1 - gamma V) / (1 - gamma)`.
    #[pyo3(signature = (obs, in_data_units=false))]
    fn values<'py>(
        &self,
        py: Python<'py>,
        obs: PyReadonlyArrayDyn<'py, f32>,
        in_data_units: bool,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let (flat, n, single) = self.rows(&obs, "observations")?;
        let d = flat.len() / n.max(1);
        let values = py.detach(|| {
            let model = self.owned.model();
            let mut scratch = vec![0f32; model.scratch_len()];
            (0..n)
                .map(|i| {
                    model
                        .value(&flat[i * d..(i + 1) * d], &mut scratch)
                        .map(|v| match in_data_units {
                            true => model.value_in_data_units(v),
                            false => v,
                        })
                        .map_err(|e| format!("observation {i}: {e}"))
                })
                .collect::<Result<Vec<f32>, String>>()
        });
        let values = values.map_err(PyValueError::new_err)?;
        let shape: Vec<usize> = if single { vec![] } else { vec![n] };
        PyArray1::from_vec(py, values).reshape(shape)
    }

    /// Index of the best of `candidates` (predicted next states, `[M, *obs_shape]`) by
    /// `reward + gamma * V(next)`, `V := 0` for terminal ones; candidates that are not
    /// finite or fall outside the density gate never win; ties go to the lowest index.
    #[pyo3(signature = (candidates, rewards=None, terminals=None))]
    fn select(
        &self,
        py: Python<'_>,
        candidates: PyReadonlyArrayDyn<'_, f32>,
        rewards: Option<Vec<f32>>,
        terminals: Option<Vec<bool>>,
    ) -> PyResult<usize> {
        let shape = candidates.shape().to_vec();
        let want = self.obs_shape();
        let d: usize = want.iter().product();
        // The rows `values` reads (frames in the layouts `laq train` reads, too), as a
        // batch; a candidate that is not finite never wins, rather than failing the call.
        let (flat, m, single) = self.layout_rows(&candidates, "candidates")?;
        if single {
            return Err(PyValueError::new_err(format!(
                "candidates of shape {shape:?}: give a batch [M, *{want:?}] of next states"
            )));
        }
        if m == 0 {
            return Err(PyValueError::new_err("no candidates"));
        }
        for (name, len) in [
            ("rewards", rewards.as_ref().map(Vec::len)),
            ("terminals", terminals.as_ref().map(Vec::len)),
        ] {
            if let Some(len) = len.filter(|&l| l != m) {
                return Err(PyValueError::new_err(format!(
                    "{name} has {len} entries for {m} candidates"
                )));
            }
        }
        let result = py.detach(|| {
            let model = self.owned.model();
            let table: Vec<Predicted<'_>> = (0..m)
                .map(|i| Predicted {
                    next: &flat[i * d..(i + 1) * d],
                    outcome: Outcome {
                        reward: rewards.as_ref().map_or(0.0, |r| r[i]),
                        terminal: terminals.as_ref().is_some_and(|t| t[i]),
                    },
                })
                .collect();
            // Predicted candidates ignore the current state; any finite one of the right
            // length passes the model's check.
            let state = vec![0f32; d];
            let mut scratch = vec![0f32; model.scratch_len()];
            let mut report = vec![Candidate::default(); m];
            model
                .select(&state, &table, &mut scratch, &mut report)
                .map_err(|e| selection_error(e, &report))
        });
        result.map_err(PyValueError::new_err)
    }

    /// Index of the first of `count` controllers in the best sequence of `depth` of them
    /// from `state`, by `r1 + gamma * (r2 + ... + gamma * V(s_depth))`: `step(i, s)` (the
    /// wrapper's) predicts controller `i` from `s`. The GIL is held throughout (the
    /// controllers are Python); the first exception of `step` is raised as it is.
    fn select_ahead(
        &self,
        state: PyReadonlyArrayDyn<'_, f32>,
        step: &Bound<'_, PyAny>,
        count: usize,
        depth: usize,
    ) -> PyResult<usize> {
        if depth == 0 || depth > MAX_LOOKAHEAD {
            return Err(PyValueError::new_err(format!(
                "depth {depth}: look 1 to {MAX_LOOKAHEAD} controllers ahead"
            )));
        }
        if count == 0 {
            return Err(PyValueError::new_err("no controllers"));
        }
        let (state, _, single) = self.rows(&state, "state")?;
        if !single {
            return Err(PyValueError::new_err(format!(
                "state: give one observation of shape {:?}, not a batch",
                self.obs_shape()
            )));
        }
        let error = RefCell::new(None);
        let controllers: Vec<PyController<'_, '_>> = (0..count)
            .map(|index| PyController {
                index,
                step,
                error: &error,
            })
            .collect();
        let model = self.owned.model();
        // Room for the last step's candidates to go through the network together.
        let batch_room = model
            .batch_scratch_len()
            .saturating_sub(model.scratch_len());
        let mut scratch = vec![0f32; model.lookahead_scratch_len(depth) + batch_room];
        let mut report = vec![Candidate::default(); count];
        let result = model.select_ahead(&state, &controllers, depth, &mut scratch, &mut report);
        if let Some(e) = error.take() {
            return Err(e);
        }
        result.map_err(|e| PyValueError::new_err(selection_error(e, &report)))
    }

    fn __repr__(&self) -> String {
        format!(
            "laq.Model({:?}, obs_shape={:?})",
            self.path.display().to_string(),
            self.obs_shape()
        )
    }
}

/// How `laq` reads one stored u8 observation of shape `shape` as a `[C, H, W]` frame:
/// `(frames, channels, height, width, channels_last)` of the stored stack, or `None` where
/// it is read as it is. The package's conversions follow this rule, not a copy of it.
#[pyfunction]
fn frame_layout(shape: Vec<usize>) -> Option<(usize, usize, usize, usize, bool)> {
    let l = FrameLayout::of(&shape, true)?;
    let ([frames, channels], [_, height, width]) = (l.stack(), l.shape());
    Some((frames, channels, height, width, l.moves_values()))
}

#[pymodule]
fn _laq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Trainer messages go to Python's `logging`, under the `laq` logger names. Levels are
    // looked up at each message (loggers only are cached), so that `logging` configured
    // after the import takes effect; debug messages are never sent.
    let logger =
        pyo3_log::Logger::new(m.py(), pyo3_log::Caching::Loggers)?.filter(log::LevelFilter::Info);
    let _ = logger.install();
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(train, m)?)?;
    m.add_function(wrap_pyfunction!(frame_layout, m)?)?;
    m.add_class::<Model>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_LOOKAHEAD", MAX_LOOKAHEAD)?;
    Ok(())
}
