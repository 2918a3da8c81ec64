//! Build script of the firmware examples.
//!
//! - puts the memory layout on the linker search path as `memory.x` (for cortex-m-rt's
//!   `link.x`): `memory-mps2.x`, or `memory-microbit.x` for thumbv6m-none-eabi
//!   (`bench_m0` on QEMU's microbit);
//! - copies the grid model (`../models/gridworld/value.safetensors`, or the file named
//!   by `LAQ_GRID_MODEL`) and the maze model (`../models/maze2d/value.safetensors`, or
//!   `LAQ_MAZE_MODEL`) to `OUT_DIR` for `include_bytes!`;
//! - generates the deterministic 4-128-128-8 benchmark model (f32 and int8) and an
//!   image model of the trainer's default shape (3x32x32, convolutions to 16, 32 and
//!   32 channels, then 512-128-8);
//! - evaluates all of them on the host with the same `laq-runtime` code and writes the
//!   results to `OUT_DIR/host_values.rs`, so the firmware can check itself;
//! - runs the maze guidance (`laq-maze`, the firmware's code, here on the host) from the
//!   firmware's starts and writes the starts and the outcomes to
//!   `OUT_DIR/maze_expected.rs`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

use laq_maze::{Geodesic, Settings, NUM_PRIMITIVES, U_MAZE};
use laq_runtime::{Candidate, Model};

/// `maze_guide`'s starts: how many, and the seed of `laq_maze::fixed_starts`.
const MAZE_STARTS: usize = 10;
const MAZE_SEED: u64 = 0x6d61_7a65;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));

    // Cortex-M0 (thumbv6m, `bench_m0`) runs on QEMU's microbit, whose memory is small.
    // (No `memory.x` in this directory: the linker would find it before OUT_DIR's.)
    let target = env::var("TARGET").unwrap_or_default();
    let memory = if target.starts_with("thumbv6m") {
        "memory-microbit.x"
    } else {
        "memory-mps2.x"
    };
    fs::copy(manifest.join(memory), out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory-mps2.x");
    println!("cargo:rerun-if-changed=memory-microbit.x");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LAQ_GRID_MODEL");

    let grid_path = env::var_os("LAQ_GRID_MODEL")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../models/gridworld/value.safetensors"));
    println!("cargo:rerun-if-changed={}", grid_path.display());
    let grid = fs::read(&grid_path).unwrap_or_else(|e| {
        panic!(
            "cannot read the grid model {}: {e}\n\
             Train it first (see the project README), or point LAQ_GRID_MODEL at a \
             laq-value file with input_dim 2.",
            grid_path.display()
        )
    });
    fs::write(out.join("grid.safetensors"), &grid).expect("write grid model");

    println!("cargo:rerun-if-env-changed=LAQ_MAZE_MODEL");
    let maze_path = env::var_os("LAQ_MAZE_MODEL")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../models/maze2d/value.safetensors"));
    println!("cargo:rerun-if-changed={}", maze_path.display());
    let maze_model = fs::read(&maze_path).unwrap_or_else(|e| {
        panic!(
            "cannot read the maze model {}: {e}\n\
             Train it first (see the project README), or point LAQ_MAZE_MODEL at a \
             laq-value file with input_dim 4 (x, y, vx, vy).",
            maze_path.display()
        )
    });
    fs::write(out.join("maze.safetensors"), &maze_model).expect("write maze model");
    fs::write(
        out.join("maze_expected.rs"),
        maze_expected(&maze_model, &maze_path),
    )
    .expect("write maze expectations");

    let bench = bench_model(&[4, 128, 128, 8], false);
    let bench_i8 = bench_model(&[4, 128, 128, 8], true);
    // Every shape the int8 assembly treats apart: 4 inputs (rows of one word, 25 of
    // them: one past a multiple of four), 25 (not groups of four: the portable
    // fallback), 24 (three pairs of groups: the loop of four pairs entered at its
    // second), 20 (a group alone, then two pairs: entered at the third), 12 (a group
    // alone and a pair: entered at the fourth), 16 (two pairs, no group alone); rows
    // past a multiple of three: 20 (two, even groups: the two-row loop), 16 (one, odd
    // groups: a last pass of three) and 7 (one, even groups: the two-row loop over the
    // last two). The 4-128-128-8 model enters at the first (sixteen pairs).
    let shapes_i8 = bench_model(&[4, 25, 24, 20, 12, 16, 7], true);
    let one_norm = one_norm_model();
    let conv = conv_model();
    fs::write(out.join("conv.safetensors"), &conv).expect("write conv model");
    fs::write(out.join("bench.safetensors"), &bench).expect("write bench model");
    fs::write(out.join("bench_i8.safetensors"), &bench_i8).expect("write bench model");
    fs::write(out.join("shapes_i8.safetensors"), &shapes_i8).expect("write bench model");
    fs::write(out.join("one_norm.safetensors"), &one_norm).expect("write one_norm model");

    let mut code = String::new();
    code.push_str("// Generated by build.rs: values computed on the host with laq-runtime.\n\n");

    let model = load(&grid, &grid_path);
    assert_eq!(model.input_dim(), 2, "the grid model must have input_dim 2");
    let mut scratch = vec![0.0f32; model.scratch_len()];
    code.push_str("/// V(row, col) of every grid cell.\npub const GRID_V: [[f32; 6]; 6] = [\n");
    for r in 0..6 {
        code.push_str("    [");
        for c in 0..6 {
            let v = model
                .value(&[r as f32, c as f32], &mut scratch)
                .unwrap_or_else(|e| panic!("grid model fails at ({r}, {c}): {e}"));
            write!(code, "f32::from_bits(0x{:08x}), ", v.to_bits()).unwrap();
        }
        code.push_str("],\n");
    }
    code.push_str("];\n");
    writeln!(
        code,
        "/// Scratch length for the grid model.\npub const GRID_SCRATCH: usize = {};",
        model.scratch_len()
    )
    .unwrap();
    writeln!(
        code,
        "/// Size of the grid model file in bytes.\npub const GRID_LEN: usize = {};",
        grid.len()
    )
    .unwrap();
    writeln!(
        code,
        "/// Multiply-accumulates per grid model evaluation.\npub const GRID_MACS: usize = {};",
        model.macs()
    )
    .unwrap();

    let state = [0.25f32, -0.5, 1.0, 0.125];
    writeln!(
        code,
        "/// The benchmark input.\npub const BENCH_STATE: [f32; 4] = {state:?};"
    )
    .unwrap();
    for (name, bytes) in [
        ("BENCH", &bench),
        ("BENCH_I8", &bench_i8),
        ("SHAPES_I8", &shapes_i8),
    ] {
        let model = load(bytes, Path::new(name));
        let mut scratch = vec![0.0f32; model.scratch_len()];
        let v = model
            .value(&state, &mut scratch)
            .expect("bench model evaluates");
        writeln!(code, "/// V(BENCH_STATE) for the {name} model.\npub const {name}_V: f32 = f32::from_bits(0x{:08x});", v.to_bits()).unwrap();
        writeln!(
            code,
            "/// Scratch length of the {name} model.\npub const {name}_SCRATCH: usize = {};",
            model.scratch_len()
        )
        .unwrap();
        writeln!(code, "/// Multiply-accumulates per {name} model evaluation.\npub const {name}_MACS: usize = {};", model.macs()).unwrap();
        writeln!(
            code,
            "/// Size of the {name} model file in bytes.\npub const {name}_LEN: usize = {};",
            bytes.len()
        )
        .unwrap();
    }
    let model = load(&one_norm, Path::new("one_norm"));
    let mut scratch = vec![0.0f32; model.scratch_len()];
    let v = model
        .value(&state, &mut scratch)
        .expect("one_norm model evaluates");
    let lp = model.log_density(&state).expect("state").expect("gate");
    writeln!(code, "/// V(BENCH_STATE) for the one_norm model.\npub const ONE_NORM_V: f32 = f32::from_bits(0x{:08x});", v.to_bits()).unwrap();
    writeln!(code, "/// log p(BENCH_STATE) for the one_norm model.\npub const ONE_NORM_LOGP: f32 = f32::from_bits(0x{:08x});", lp.to_bits()).unwrap();
    writeln!(
        code,
        "/// Scratch length of the one_norm model.\npub const ONE_NORM_SCRATCH: usize = {};",
        model.scratch_len()
    )
    .unwrap();
    let model = load(&conv, Path::new("conv"));
    let image: Vec<f32> = (0..model.input_dim()).map(conv_pixel).collect();
    let mut scratch = vec![0.0f32; model.scratch_len()];
    let v = model
        .value(&image, &mut scratch)
        .expect("conv model evaluates");
    writeln!(
        code,
        "/// V of the conv model's test image.\npub const CONV_V: f32 = f32::from_bits(0x{:08x});",
        v.to_bits()
    )
    .unwrap();
    writeln!(
        code,
        "/// Scratch length of the conv model.\npub const CONV_SCRATCH: usize = {};",
        model.scratch_len()
    )
    .unwrap();
    writeln!(
        code,
        "/// State length of the conv model (3 x 32 x 32).\npub const CONV_DIM: usize = {};",
        model.input_dim()
    )
    .unwrap();
    fs::write(out.join("host_values.rs"), code).expect("write host values");
}

/// Pixel `k` of the conv model's test image, `[C, H, W]` order, raw values 0..=255 (the
/// same formula as `bench_mcu`'s, so both evaluate the same image).
fn conv_pixel(k: usize) -> f32 {
    ((k * 37 + 11) % 256) as f32
}

/// An image model of the trainer's default shape: a 3x32x32 image, 4x4 stride-2
/// convolutions to 16, 32 and 32 channels (a 4x4x32 map, 512 values), then 128 and 8
/// outputs (max_q); weights from a fixed seed.
fn conv_model() -> Vec<u8> {
    let mut rng = Lcg(0xc0417);
    let (channels, dense) = ([3usize, 16, 32, 32], [512usize, 128, 8]);
    let mut tensors: Vec<(String, Vec<usize>, Data)> = vec![
        (
            "input.mean".into(),
            vec![3],
            Data::F32((0..3).map(|_| 128.0 + 20.0 * rng.next()).collect()),
        ),
        (
            "input.scale".into(),
            vec![3],
            Data::F32((0..3).map(|_| 1.0 / (60.0 + 10.0 * rng.next())).collect()),
        ),
    ];
    let mut layer = |name: String, rows: usize, cols: usize, tensors: &mut Vec<_>| {
        let bound = 1.0 / (cols as f32).sqrt();
        let weights: Vec<f32> = (0..rows * cols).map(|_| rng.next() * bound).collect();
        let bias: Vec<f32> = (0..rows).map(|_| rng.next() * 0.1).collect();
        tensors.push((
            format!("{name}.weight"),
            vec![rows, cols],
            Data::F32(weights),
        ));
        tensors.push((format!("{name}.bias"), vec![rows], Data::F32(bias)));
    };
    for (i, c) in channels.windows(2).enumerate() {
        layer(format!("conv.{i}"), c[1], 16 * c[0], &mut tensors);
    }
    for (i, d) in dense.windows(2).enumerate() {
        layer(format!("layers.{i}"), d[1], d[0], &mut tensors);
    }
    let meta = [
        ("format", laq_runtime::format::NAME),
        ("version", "2"),
        ("input_dim", "3072"),
        ("input_shape", "[3,32,32]"),
        ("num_conv", "3"),
        ("num_layers", "2"),
        ("activation", "relu"),
        ("head", "max_q"),
        ("gamma", "0.99"),
    ];
    write_safetensors(&meta, tensors)
}

/// The maze guidance from the firmware's starts, on the host: per start, whether it
/// succeeds, the decisions, the distance travelled, the geodesic shortest path and the
/// choices.
fn maze_expected(bytes: &[u8], path: &Path) -> String {
    let model = load(bytes, path);
    assert_eq!(model.input_dim(), 4, "the maze model must have input_dim 4");
    let settings = Settings::DEFAULT;
    let mut scratch = vec![0.0f32; model.lookahead_scratch_len(settings.lookahead)];
    let mut report = [Candidate::default(); NUM_PRIMITIVES];
    let geodesic = Geodesic::<256>::new(&U_MAZE).expect("maze geodesic graph");
    let starts =
        laq_maze::fixed_starts::<MAZE_STARTS>(&U_MAZE, MAZE_SEED).expect("the maze starts");
    let mut code = String::from("// Generated by build.rs: the maze guidance run on the host.\n\n");
    writeln!(
        code,
        "/// Number of starts.\npub const MAZE_STARTS: usize = {MAZE_STARTS};\n\
         /// Seed of `laq_maze::fixed_starts`.\npub const MAZE_SEED: u64 = 0x{MAZE_SEED:x};\n\
         /// Per start: (success, decisions, travelled bits, shortest bits, choices).\n\
         pub const MAZE_EXPECTED: [(bool, usize, u32, u32, &[u8]); {MAZE_STARTS}] = ["
    )
    .unwrap();
    for start in starts {
        let mut choices = Vec::new();
        let ep = laq_maze::run_episode(
            &U_MAZE,
            &settings,
            start,
            |pose, prims| {
                let depth = settings.lookahead;
                laq_maze::choose_by_value(&model, pose, prims, depth, &mut scratch, &mut report)
            },
            |k, _| choices.push(k as u8),
        )
        .unwrap_or_else(|e| panic!("maze guidance from {start:?} fails: {e}"));
        let shortest = geodesic
            .to_target(start.x, start.y)
            .unwrap_or_else(|| panic!("start {start:?} cannot reach the target"));
        writeln!(
            code,
            "    ({}, {}, 0x{:08x}, 0x{:08x}, &{:?}),",
            ep.success,
            ep.decisions,
            ep.travelled.to_bits(),
            shortest.to_bits(),
            choices
        )
        .unwrap();
    }
    code.push_str("];\n");
    writeln!(
        code,
        "/// Scratch length of the maze model's lookahead.\npub const MAZE_SCRATCH: usize = {};",
        model.lookahead_scratch_len(settings.lookahead)
    )
    .unwrap();
    writeln!(
        code,
        "/// Multiply-accumulates per maze model evaluation.\npub const MAZE_MACS: usize = {};",
        model.macs()
    )
    .unwrap();
    code
}

fn load<'a>(bytes: &'a [u8], path: &Path) -> Model<'a> {
    Model::new_checked(bytes)
        .unwrap_or_else(|e| panic!("{} is not a valid laq-value model: {e}", path.display()))
}

/// Deterministic pseudo-random numbers in [-1, 1).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

enum Data {
    F32(Vec<f32>),
    I32(Vec<i32>),
    I8(Vec<i8>),
}

/// A benchmark MLP (max_q) with layer widths `dims` (4 inputs first), weights from a
/// fixed seed; with `int8`, every layer quantised per output row.
fn bench_model(dims: &[usize], int8: bool) -> Vec<u8> {
    let mut rng = Lcg(0x5eed);
    let mut tensors: Vec<(String, Vec<usize>, Data)> = vec![
        (
            "input.mean".into(),
            vec![4],
            Data::F32((0..4).map(|_| rng.next()).collect()),
        ),
        (
            "input.scale".into(),
            vec![4],
            Data::F32((0..4).map(|_| 1.0 + 0.5 * rng.next()).collect()),
        ),
    ];
    for (i, w) in dims.windows(2).enumerate() {
        let (cols, rows) = (w[0], w[1]);
        let bound = 1.0 / (cols as f32).sqrt();
        let weights: Vec<f32> = (0..rows * cols).map(|_| rng.next() * bound).collect();
        let bias: Vec<f32> = (0..rows).map(|_| rng.next() * 0.1).collect();
        if int8 {
            let scales: Vec<f32> = weights
                .chunks(cols)
                .map(|row| row.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0)
                .collect();
            let q: Vec<i8> = weights
                .iter()
                .enumerate()
                .map(|(k, v)| (v / scales[k / cols]).round().clamp(-127.0, 127.0) as i8)
                .collect();
            tensors.push((format!("layers.{i}.weight"), vec![rows, cols], Data::I8(q)));
            tensors.push((format!("layers.{i}.scale"), vec![rows], Data::F32(scales)));
        } else {
            tensors.push((
                format!("layers.{i}.weight"),
                vec![rows, cols],
                Data::F32(weights),
            ));
        }
        tensors.push((format!("layers.{i}.bias"), vec![rows], Data::F32(bias)));
    }
    let layers = (dims.len() - 1).to_string();
    let meta = [
        ("format", laq_runtime::format::NAME),
        ("version", "1"),
        ("input_dim", "4"),
        ("num_layers", &layers),
        ("activation", "relu"),
        ("head", "max_q"),
        ("gamma", "0.95"),
    ];
    write_safetensors(&meta, tensors)
}

/// A small 4-32-16-3 `one_norm` model with a density gate over dims 0 and 2, to check
/// the one_norm head and the gate on the target against the host.
fn one_norm_model() -> Vec<u8> {
    let dims = [4usize, 32, 16, 3];
    let mut rng = Lcg(0x0e0e);
    let mut tensors: Vec<(String, Vec<usize>, Data)> = vec![
        ("input.mean".into(), vec![4], Data::F32(vec![0.0; 4])),
        ("input.scale".into(), vec![4], Data::F32(vec![1.0; 4])),
        (
            "density.weights".into(),
            vec![2],
            Data::F32(vec![0.25, 0.75]),
        ),
        (
            "density.means".into(),
            vec![2, 2],
            Data::F32(vec![0.0, 1.0, 0.5, -0.5]),
        ),
        (
            "density.variances".into(),
            vec![2, 2],
            Data::F32(vec![1.0, 2.0, 0.5, 1.5]),
        ),
        ("density.dims".into(), vec![2], Data::I32(vec![0, 2])),
    ];
    for (i, w) in dims.windows(2).enumerate() {
        let (cols, rows) = (w[0], w[1]);
        let bound = 1.0 / (cols as f32).sqrt();
        let weights: Vec<f32> = (0..rows * cols).map(|_| rng.next() * bound).collect();
        let bias: Vec<f32> = (0..rows).map(|_| rng.next() * 0.1).collect();
        tensors.push((
            format!("layers.{i}.weight"),
            vec![rows, cols],
            Data::F32(weights),
        ));
        tensors.push((format!("layers.{i}.bias"), vec![rows], Data::F32(bias)));
    }
    let meta = [
        ("format", laq_runtime::format::NAME),
        ("version", "1"),
        ("input_dim", "4"),
        ("num_layers", "3"),
        ("activation", "relu"),
        ("head", "one_norm"),
        ("density_threshold", "-20"),
    ];
    write_safetensors(&meta, tensors)
}

/// A minimal safetensors writer: metadata first, 4-byte tensors before 1-byte ones,
/// header padded with spaces to a multiple of 8 (as the reference writer does).
fn write_safetensors(
    meta: &[(&str, &str)],
    mut tensors: Vec<(String, Vec<usize>, Data)>,
) -> Vec<u8> {
    tensors.sort_by_key(|(name, _, d)| (matches!(d, Data::I8(_)), name.clone()));
    let mut header = String::from("{\"__metadata__\":{");
    let items: Vec<String> = meta
        .iter()
        .map(|(k, v)| format!("\"{k}\":\"{v}\""))
        .collect();
    header.push_str(&items.join(","));
    header.push('}');
    let mut data = Vec::new();
    for (name, shape, values) in &tensors {
        let (dtype, bytes): (&str, Vec<u8>) = match values {
            Data::F32(v) => ("F32", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            Data::I32(v) => ("I32", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            Data::I8(v) => ("I8", v.iter().map(|&x| x as u8).collect()),
        };
        let shape: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        write!(
            header,
            ",\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
            shape.join(","),
            data.len(),
            data.len() + bytes.len()
        )
        .unwrap();
        data.extend_from_slice(&bytes);
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&data);
    file
}
