//! `laq bench`: time per training step of the paper's networks, against baselines
//! measured in the same run (candle's stock optimiser, and PyTorch when it is installed),
//! and the runtime's single-state inference and controller selection against candle's
//! forward on the same weights.

use crate::export::{Head, Layer, ValueModel};
use crate::nn::{self, Adam, AdamConfig, Mlp};
use crate::stages::mining::{self, ForwardModel, MiningConfig, Predictor};
use crate::stages::qlearn::{self, Batch};
use anyhow::Result;
use candle_core::{Device, Tensor};
use candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::time::Instant;

/// Median milliseconds per call of `f` over `reps` repetitions of `iters` calls each,
/// after `warmup` calls.
fn time_ms(f: impl FnMut() -> Result<()>, warmup: usize, iters: usize, reps: usize) -> Result<f64> {
    time_ms_on(f, warmup, iters, reps, &Device::Cpu)
}

/// [`time_ms`] on `device`, waiting for the device's queued work before each reading.
fn time_ms_on(
    mut f: impl FnMut() -> Result<()>,
    warmup: usize,
    iters: usize,
    reps: usize,
    device: &Device,
) -> Result<f64> {
    for _ in 0..warmup {
        f()?;
    }
    device.synchronize()?;
    let mut samples = vec![];
    for _ in 0..reps {
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        device.synchronize()?;
        samples.push(t.elapsed().as_secs_f64() * 1e3 / iters as f64);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

fn random(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// The grid-world forward model of the paper (K = 8, batch 64), one hard-EM Adam step.
fn mining_steps(iters: usize, reps: usize, device: &Device) -> Result<(f64, f64)> {
    let cfg = MiningConfig::default();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let (b, d) = (64, 2);
    let s = Tensor::from_vec(random(&mut rng, b * d), (b, d), device)?;
    let s2 = Tensor::from_vec(random(&mut rng, b * d), (b, d), device)?;
    let (vm, vb) = nn::new_varmap(device);
    let model = ForwardModel::new(vb, d, &cfg)?;
    nn::init_vars(&vm, 0)?;
    let mut opt = Adam::for_varmap(&vm, AdamConfig::new(1e-3, 1e-5))?;
    let ours = time_ms(
        || mining::train_step(&model, &mut opt, &s, &s2, None, 2, None).map(|_| ()),
        20,
        iters,
        reps,
    )?;

    let mut stock = AdamW::new(
        vm.all_vars(),
        ParamsAdamW {
            lr: 1e-3,
            weight_decay: 0.0,
            ..Default::default()
        },
    )?;
    let baseline = time_ms(
        || {
            let err = model.errors(&s, &s2, None)?;
            let host: Vec<f32> = err.flatten_all()?.to_vec1()?;
            let idx = Tensor::from_vec(mining::assign(&host, 8, 2), (b, 1), device)?;
            stock.backward_step(&err.gather(&idx, 1)?.mean_all()?)?;
            Ok(())
        },
        20,
        iters,
        reps,
    )?;
    Ok((ours, baseline))
}

/// A random Double-DQN batch: states, next states, labels, rewards (every 7th is 1) and
/// terminals (the rewarded rows).
struct RandomBatch {
    s: Vec<f32>,
    s2: Vec<f32>,
    a: Vec<u32>,
    r: Vec<f32>,
    t: Vec<bool>,
}

impl RandomBatch {
    fn new(rng: &mut ChaCha8Rng, b: usize, d: usize, k: usize) -> Self {
        let s = random(rng, b * d);
        let s2 = random(rng, b * d);
        let a = (0..b).map(|_| rng.random_range(0..k as u32)).collect();
        let r: Vec<f32> = (0..b).map(|i| (i % 7 == 0) as u32 as f32).collect();
        let t = r.iter().map(|&x| x > 0.0).collect();
        RandomBatch { s, s2, a, r, t }
    }

    fn batch(&self) -> Batch<'_> {
        Batch {
            s: &self.s,
            s2: &self.s2,
            a: &self.a,
            r: &self.r,
            terminal: &self.t,
            targets: None,
        }
    }
}

/// Median ms of one Double-DQN Adam step of `net` (plain TD loss), with
/// `(warmup, iters, reps)` as in [`time_ms`].
fn time_dqn(
    net: &qlearn::QModel,
    target: &qlearn::QModel,
    opt: &mut Adam,
    batch: &Batch,
    (warmup, iters, reps): (usize, usize, usize),
    device: &Device,
) -> Result<f64> {
    let losses = qlearn::Losses {
        imitation: None,
        cql_alpha: 0.0,
    };
    time_ms_on(
        || qlearn::dqn_step(net, target, opt, batch, 0.99, (0.0, 1.0), &losses, device).map(|_| ()),
        warmup,
        iters,
        reps,
        device,
    )
}

/// The Maze2D Q-network of the paper (4-128-128-8, batch 16), one Double-DQN Adam step.
fn dqn_steps(iters: usize, reps: usize, device: &Device) -> Result<(f64, f64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let (b, d, k) = (16, 4, 8);
    let dims = [d, 128, 128, k];
    let (vm, vb) = nn::new_varmap(device);
    let net = qlearn::QModel::Mlp(Mlp::new(vb, &dims)?);
    nn::init_vars(&vm, 0)?;
    let (tvm, tvb) = nn::new_varmap(device);
    let target = qlearn::QModel::Mlp(Mlp::new(tvb, &dims)?);
    nn::copy_vars(&vm, &tvm)?;
    let rb = RandomBatch::new(&mut rng, b, d, k);
    let mut opt = Adam::for_varmap(&vm, AdamConfig::new(1e-4, 0.0))?;
    let ours = time_dqn(
        &net,
        &target,
        &mut opt,
        &rb.batch(),
        (20, iters, reps),
        device,
    )?;
    let RandomBatch { s, s2, a, r, t } = rb;
    let mut stock = AdamW::new(
        vm.all_vars(),
        ParamsAdamW {
            lr: 1e-4,
            weight_decay: 0.0,
            ..Default::default()
        },
    )?;
    let st = Tensor::from_slice(&s, (b, d), device)?;
    let s2t = Tensor::from_slice(&s2, (b, d), device)?;
    let at = Tensor::from_slice(&a, (b, 1), device)?;
    let rt = Tensor::from_slice(&r, (b, 1), device)?;
    let notdone = Tensor::from_vec(
        t.iter()
            .map(|&x| if x { 0f32 } else { 0.99 })
            .collect::<Vec<_>>(),
        (b, 1),
        device,
    )?;
    let baseline = time_ms(
        || {
            // The same step written with whole-tensor ops, as candle's examples do.
            let best = net.forward(&s2t)?.argmax_keepdim(1)?;
            let next = target.forward(&s2t)?.gather(&best, 1)?;
            let y = (rt.clone() + (next * &notdone)?)?
                .clamp(0f32, 1f32)?
                .detach();
            let q = net.forward(&st)?.gather(&at, 1)?;
            stock.backward_step(&((q - y)?.sqr()?.mean_all()? * 0.5)?)?;
            Ok(())
        },
        20,
        iters,
        reps,
    )?;
    Ok((ours, baseline))
}

/// The image workload of the convolutional steps.
#[derive(Clone, Copy, Debug)]
pub struct ImageBench {
    /// Frame width and height (RGB), at least 8.
    pub size: usize,
    pub batch: usize,
    /// Latent actions.
    pub k: usize,
}

impl Default for ImageBench {
    /// 32x32 RGB frames (the navigation study's), batch 32, K = 8.
    fn default() -> Self {
        ImageBench {
            size: 32,
            batch: 32,
            k: 8,
        }
    }
}

/// One hard-EM step of the convolutional forward model and one Double-DQN step of the
/// convolutional Q-network (ms each), with the default `conv.channels`.
fn conv_steps(iters: usize, reps: usize, img: ImageBench, device: &Device) -> Result<(f64, f64)> {
    let (size, b, k) = (img.size, img.batch, img.k);
    if size < 8 || b == 0 {
        anyhow::bail!(
            "image benchmark: size must be at least 8 and batch positive (got {size} and {b})"
        );
    }
    let shape = crate::nn::conv::ImageShape::new(&[3, size, size], 3)?;
    let d = shape.len();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let s = Tensor::from_vec(random(&mut rng, b * d), (b, d), device)?;
    let s2 = Tensor::from_vec(random(&mut rng, b * d), (b, d), device)?;
    let cfg = MiningConfig {
        latent_actions: k,
        embedding: 16,
        ..Default::default()
    };
    let (vm, vb) = nn::new_varmap(device);
    let model = mining::ConvForwardModel::new(vb, shape, &cfg)?;
    nn::init_vars(&vm, 0)?;
    let mut opt = Adam::for_varmap(&vm, AdamConfig::new(1e-3, 1e-5))?;
    let mine = time_ms_on(
        || mining::train_step(&model, &mut opt, &s, &s2, None, 2, None).map(|_| ()),
        3,
        iters,
        reps,
        device,
    )?;

    let channels = crate::nn::conv::ConvConfig::default().channels;
    let build = |vb| qlearn::QModel::new(vb, d, Some((shape, &channels)), &[128], k);
    let (vm, vb) = nn::new_varmap(device);
    let net = build(vb)?;
    nn::init_vars(&vm, 0)?;
    let (tvm, tvb) = nn::new_varmap(device);
    let target = build(tvb)?;
    nn::copy_vars(&vm, &tvm)?;
    let rb = RandomBatch::new(&mut rng, b, d, k);
    let mut opt = Adam::for_varmap(&vm, AdamConfig::new(5e-4, 0.0))?;
    let dqn = time_dqn(
        &net,
        &target,
        &mut opt,
        &rb.batch(),
        (3, iters, reps),
        device,
    )?;
    Ok((mine, dqn))
}

/// A value model with random weights (biases small, weights scaled by 1/sqrt(fan_in)).
fn random_model(dims: &[usize], rng: &mut ChaCha8Rng) -> ValueModel {
    let layers = dims
        .windows(2)
        .map(|w| Layer {
            out_dim: w[1],
            in_dim: w[0],
            weight: random(rng, w[0] * w[1])
                .iter()
                .map(|v| v / (w[0] as f32).sqrt())
                .collect(),
            bias: random(rng, w[1]).iter().map(|v| v * 0.1).collect(),
        })
        .collect();
    ValueModel {
        mean: random(rng, dims[0]),
        scale: vec![1.0; dims[0]],
        conv: None,
        layers,
        head: Head::MaxQ,
        gamma: 0.99,
        keep_f32: vec![],
        info: Default::default(),
        density: None,
        cost_per_step: None,
    }
}

/// candle's forward on the same weights, tensors built once.
struct CandleValue {
    mean: Tensor,
    scale: Tensor,
    layers: Vec<candle_nn::Linear>,
}

impl CandleValue {
    fn new(m: &ValueModel, device: &Device) -> Result<Self> {
        let d = m.input_dim();
        let layers = m
            .layers
            .iter()
            .map(|l| {
                let w = Tensor::from_slice(&l.weight, (l.out_dim, l.in_dim), device)?;
                let b = Tensor::from_slice(&l.bias, l.out_dim, device)?;
                Ok(candle_nn::Linear::new(w, Some(b)))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(CandleValue {
            mean: Tensor::from_slice(&m.mean, (1, d), device)?,
            scale: Tensor::from_slice(&m.scale, (1, d), device)?,
            layers,
        })
    }

    /// V of `n` states `[n * D]`.
    fn values(&self, states: &[f32], n: usize) -> Result<Tensor> {
        use candle_nn::Module;
        let d = states.len() / n;
        let mut h = Tensor::from_slice(states, (n, d), self.mean.device())?
            .broadcast_sub(&self.mean)?
            .broadcast_mul(&self.scale)?;
        for (i, l) in self.layers.iter().enumerate() {
            h = l.forward(&h)?;
            if i + 1 < self.layers.len() {
                h = h.relu()?;
            }
        }
        Ok(h.max(1)?)
    }
}

/// One inference figure: its key in the JSON, its label in the table, and microseconds per
/// call of the runtime and of candle.
struct InferenceRow {
    key: String,
    label: String,
    runtime_us: f64,
    candle_us: f64,
}

/// Single-state V and selection among 8 predicted states: the runtime against candle.
fn inference(iters: usize, reps: usize, device: &Device) -> Result<Vec<InferenceRow>> {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut rows = vec![];
    for dims in [vec![2, 64, 64, 8], vec![4, 128, 128, 8]] {
        let m = random_model(&dims, &mut rng);
        let owned = laq_runtime::OwnedModel::from_vec(m.to_bytes(false)?)
            .map_err(|e| anyhow::anyhow!("runtime rejected the benchmark model: {e}"))?;
        let rt = owned.model();
        let cv = CandleValue::new(&m, device)?;
        let d = dims[0];
        let state = random(&mut rng, d);
        let mut scratch = vec![0f32; rt.scratch_len()];
        let name = dims
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("-");
        let per_call = |f: &mut dyn FnMut() -> Result<()>| {
            Ok::<f64, anyhow::Error>(time_ms(f, 100, iters * 10, reps)? * 1e3)
        };
        let mut sink = 0f32;
        let ours = per_call(&mut || {
            sink += rt
                .value(&state, &mut scratch)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(())
        })?;
        let theirs = per_call(&mut || {
            sink += cv.values(&state, 1)?.to_vec1::<f32>()?[0];
            Ok(())
        })?;
        let width = dims[1];
        rows.push(InferenceRow {
            key: format!("value_mlp{width}"),
            label: format!("V(s), {name}"),
            runtime_us: ours,
            candle_us: theirs,
        });

        let candidates: Vec<Vec<f32>> = (0..8).map(|_| random(&mut rng, d)).collect();
        let table: Vec<&[f32]> = candidates.iter().map(|c| c.as_slice()).collect();
        let flat: Vec<f32> = candidates.concat();
        let mut report = [laq_runtime::Candidate::default(); 8];
        // Room for the runtime to score the 8 candidates as one batch.
        let mut scratch = vec![0f32; rt.batch_scratch_len()];
        let mut picks = 0usize;
        let ours = per_call(&mut || {
            picks += rt
                .select(&state, &table, &mut scratch, &mut report)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(())
        })?;
        let theirs = per_call(&mut || {
            picks += cv.values(&flat, 8)?.argmax(0)?.to_scalar::<u32>()? as usize;
            Ok(())
        })?;
        rows.push(InferenceRow {
            key: format!("select8_mlp{width}"),
            label: format!("select 1 of 8, {name}"),
            runtime_us: ours,
            candle_us: theirs,
        });
        std::hint::black_box((sink, picks));
    }
    Ok(rows)
}

/// PyTorch's time for the same two steps, when `python3` with torch is installed.
fn pytorch_ms() -> Option<(f64, f64)> {
    let script = include_str!("../../../bench/pytorch_steps.py");
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .env("OMP_NUM_THREADS", "1")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    Some((v["mining_ms"].as_f64()?, v["dqn_ms"].as_f64()?))
}

/// Reference PyTorch figures measured on this machine class (one thread), quoted only
/// when PyTorch is not available to measure in the run.
pub const PYTORCH_REFERENCE_MS: (f64, f64) = (2.08, 1.17);

/// Runs the benchmark; returns metrics and a report. The image steps run on the CPU and,
/// when `gpu` is not the CPU, on it too, in the same run.
pub fn run(quick: bool, img: ImageBench, gpu: &Device) -> Result<(Value, String)> {
    let device = Device::Cpu;
    let (iters, reps) = if quick { (50, 3) } else { (300, 7) };
    let (mine, mine_base) = mining_steps(iters, reps, &device)?;
    let (dqn, dqn_base) = dqn_steps(iters, reps, &device)?;
    let infer = inference(iters, reps, &device)?;
    let torch = pytorch_ms();
    let (torch_m, torch_d, torch_src) = match torch {
        Some((m, d)) => (m, d, "measured in this run"),
        None => (
            PYTORCH_REFERENCE_MS.0,
            PYTORCH_REFERENCE_MS.1,
            "reference figure (PyTorch not installed here)",
        ),
    };
    let threads = threads();
    let mut rep = format!("laq bench (CPU, {threads} thread(s), ms per training step, median of {reps} x {iters})\n\n");
    rep += "step                                   laq     candle stock  speed-up   PyTorch  speed-up\n";
    rep += &format!(
        "mining, grid model K=8 batch 64     {mine:>7.3}  {mine_base:>12.3}  {:>7.2}x  {torch_m:>8.3}  {:>7.2}x\n",
        mine_base / mine,
        torch_m / mine
    );
    rep += &format!(
        "double DQN 4-128-128-8 batch 16     {dqn:>7.3}  {dqn_base:>12.3}  {:>7.2}x  {torch_d:>8.3}  {:>7.2}x\n",
        dqn_base / dqn,
        torch_d / dqn
    );
    rep += &format!("\nPyTorch column: {torch_src}.\n");
    let (images_json, images_rep) = images(quick, img, gpu)?;
    rep += &images_rep;
    rep += "\ninference, one call (microseconds)        runtime     candle  speed-up\n";
    for r in &infer {
        rep += &format!(
            "{:<38} {:>9.3}  {:>9.3}  {:>7.1}x\n",
            r.label,
            r.runtime_us,
            r.candle_us,
            r.candle_us / r.runtime_us
        );
    }
    let step = |ours: f64, stock: f64, torch: f64| {
        json!({
            "laq_ms": ours, "candle_stock_ms": stock, "pytorch_ms": torch,
            "speedup_vs_pytorch": torch / ours,
        })
    };
    let v = json!({
        "threads": threads,
        "pytorch_source": torch_src,
        "steps": {
            "mining": step(mine, mine_base, torch_m),
            "dqn": step(dqn, dqn_base, torch_d),
        },
        "inference": infer
            .iter()
            .map(|r| {
                let v = json!({
                    "runtime_us": r.runtime_us, "candle_us": r.candle_us,
                    "speedup": r.candle_us / r.runtime_us,
                });
                (r.key.clone(), v)
            })
            .collect::<serde_json::Map<_, _>>(),
        "images": images_json,
    });
    Ok((v, rep))
}

fn threads() -> String {
    std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "default".into())
}

/// The image steps alone (`laq bench --images-only`): images per second of convolutional
/// mining and Q-learning on the CPU and, when `gpu` is not the CPU, on it, with the ratio.
pub fn images(quick: bool, img: ImageBench, gpu: &Device) -> Result<(Value, String)> {
    let (ci, cr) = if quick { (5, 3) } else { (20, 5) };
    let (conv_mine, conv_dqn) = conv_steps(ci, cr, img, &Device::Cpu)?;
    let on_gpu = if gpu.is_cpu() {
        None
    } else {
        let (gi, gr) = if quick { (20, 3) } else { (100, 5) };
        Some(conv_steps(gi, gr, img, gpu)?)
    };
    let (size, b, k) = (img.size, img.batch, img.k);
    let mut rep = format!(
        "\nimages ({size}x{size} RGB, batch {b}, K={k}, conv 16-32-32; CPU {} thread(s))\n",
        threads()
    );
    rep += "step                                  CPU ms/step  CPU images/s";
    if on_gpu.is_some() {
        rep += "  GPU ms/step  GPU images/s  GPU/CPU";
    }
    rep += "\n";
    for (what, cpu, gpu_ms) in [
        (
            "mining, convolutional forward model",
            conv_mine,
            on_gpu.map(|g| g.0),
        ),
        (
            "double DQN, convolutional Q-network",
            conv_dqn,
            on_gpu.map(|g| g.1),
        ),
    ] {
        rep += &format!("{what:<37} {cpu:>11.2}  {:>12.0}", b as f64 * 1e3 / cpu);
        if let Some(g) = gpu_ms {
            rep += &format!(
                "  {g:>11.3}  {:>12.0}  {:>6.1}x",
                b as f64 * 1e3 / g,
                cpu / g
            );
        }
        rep += "\n";
    }
    let per_s = |ms: f64| b as f64 * 1e3 / ms;
    let v = json!({
        "size": size, "batch": b, "k": k, "threads": threads(),
        "cpu": {
            "mining_ms": conv_mine, "dqn_ms": conv_dqn,
            "mining_images_per_s": per_s(conv_mine), "dqn_images_per_s": per_s(conv_dqn),
        },
        "gpu": on_gpu.map(|(m, d)| json!({
            "device": crate::device_name(gpu),
            "mining_ms": m, "dqn_ms": d,
            "mining_images_per_s": per_s(m), "dqn_images_per_s": per_s(d),
            "mining_speedup_vs_cpu": conv_mine / m, "dqn_speedup_vs_cpu": conv_dqn / d,
        })),
    });
    Ok((v, rep))
}
