//! Guides a differential-drive robot through the U-maze with the Maze2D value model
//! (learned from a point mass's state-only logs), choosing among 8 motion primitives
//! with `Model::select_ahead` (the `laq-maze` crate, which `laq::studies::guidance` on the host uses too;
//! see docs/runtime.md).
//!
//! From each of `MAZE_STARTS` fixed starts, prints the outcome (success, decisions,
//! distance travelled, geodesic shortest path, SPL, the choices), then the totals,
//! instructions per decision (under `-icount shift=0`) and the stack used. Exits with
//! success only if every start's outcome equals the build script's host run of the same
//! code on the same model, bit for bit.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use laq_firmware_examples::{exit, stack, systick, MAZE_MODEL};
use laq_maze::{
    choose_by_value, fixed_starts, run_episode, spl, Executed, Geodesic, Pose, Primitive, Settings,
    NUM_PRIMITIVES, U_MAZE,
};
use laq_runtime::{Candidate, Model, Scratch, Status};
use panic_semihosting as _;

include!(concat!(env!("OUT_DIR"), "/maze_expected.rs"));

/// The settings of the host study (`laq::studies::guidance::GuideConfig::default()`).
const SETTINGS: Settings = Settings::DEFAULT;
/// Room for the decisions of one episode.
const BUDGET: usize = SETTINGS.budget;
/// Room for the U-maze's visibility graph (it has 24 free corners).
type MazeGeodesic = Geodesic<'static, 32>;

fn fail(what: &str, e: laq_runtime::Error) -> ! {
    hprintln!("error: {}: {}", what, e);
    exit(false)
}

/// What an application does, without printing: load the model, build the geodesic
/// graph, guide one episode. Measured for the stack high-water mark.
#[inline(never)]
fn episode_work() -> Option<bool> {
    let model = Model::new_checked(core::hint::black_box(&MAZE_MODEL.0)).ok()?;
    let geodesic = MazeGeodesic::new(&U_MAZE).ok()?;
    let mut scratch = Scratch::<MAZE_SCRATCH>::new();
    let mut report = [Candidate::default(); NUM_PRIMITIVES];
    let mut choices = [0u8; BUDGET];
    let start = *fixed_starts::<MAZE_STARTS>(&U_MAZE, MAZE_SEED)?.first()?;
    let mut n = 0;
    let ep = run_episode(
        &U_MAZE,
        &SETTINGS,
        start,
        |pose, prims| {
            choose_by_value(
                &model,
                pose,
                prims,
                SETTINGS.lookahead,
                &mut scratch,
                &mut report,
            )
        },
        |k, _| {
            if let Some(slot) = choices.get_mut(n) {
                *slot = k as u8;
            }
            n += 1;
        },
    )
    .ok()?;
    geodesic.to_target(start.x, start.y)?;
    core::hint::black_box(&choices);
    Some(ep.success)
}

/// Runs every start; returns whether all outcomes agree with the host.
fn guide(per_tick: f32, overhead: u32) -> bool {
    let model = match Model::new_checked(&MAZE_MODEL.0) {
        Ok(m) => m,
        Err(e) => fail("loading the model", e),
    };
    hprintln!(
        "maze model: {} bytes, {} layers, {} MACs, aligned {}",
        MAZE_MODEL.0.len(),
        model.num_layers(),
        model.macs(),
        model.is_aligned()
    );
    hprintln!(
        "config: drive_length {} budget {} heading_tolerance {} wall_margin {} lookahead {} goal_check {}",
        SETTINGS.drive_length,
        SETTINGS.budget,
        SETTINGS.heading_tolerance,
        SETTINGS.wall_margin,
        SETTINGS.lookahead,
        u8::from(SETTINGS.goal_check)
    );
    let geodesic = match MazeGeodesic::new(&U_MAZE) {
        Ok(g) => g,
        Err(e) => fail("building the geodesic graph", e),
    };
    let Some(starts) = fixed_starts::<MAZE_STARTS>(&U_MAZE, MAZE_SEED) else {
        fail("drawing the starts", laq_runtime::Error::InvalidArgument)
    };
    let mut scratch = Scratch::<MAZE_SCRATCH>::new();
    let mut report = [Candidate::default(); NUM_PRIMITIVES];
    let (mut agree, mut successes, mut spl_sum) = (true, 0usize, 0.0f32);
    let (mut decisions, mut selections, mut evaluations, mut ticks) =
        (0usize, 0usize, 0usize, 0u32);
    for (i, (start, expected)) in starts.iter().zip(MAZE_EXPECTED).enumerate() {
        let Some(shortest) = geodesic.to_target(start.x, start.y) else {
            fail(
                "start outside the free space",
                laq_runtime::Error::InvalidArgument,
            )
        };
        let (mut choices, mut n) = ([0u8; BUDGET], 0);
        // Times each decision by V and counts the primitives available as a first step
        // (the others fail to predict).
        let choose = |pose: Pose, prims: &[Primitive<'_>]| {
            let t0 = systick::now();
            let depth = SETTINGS.lookahead;
            let chosen = choose_by_value(&model, pose, prims, depth, &mut scratch, &mut report);
            let dt = systick::elapsed(t0, systick::now()).saturating_sub(overhead);
            ticks = ticks.saturating_add(dt);
            selections += 1;
            evaluations += report
                .iter()
                .take(prims.len())
                .filter(|c| c.status != Status::Failed)
                .count();
            chosen
        };
        let record = |k: usize, _: &Executed| {
            if let Some(slot) = choices.get_mut(n) {
                *slot = k as u8;
            }
            n += 1;
        };
        let ep = match run_episode(&U_MAZE, &SETTINGS, *start, choose, record) {
            Ok(ep) => ep,
            Err(e) => fail("guiding", e),
        };
        let used = choices.get(..ep.decisions).unwrap_or(&choices);
        let spl = spl(ep.success, shortest, ep.travelled);
        let (success, steps, travelled, geodesic_bits, host_choices) = expected;
        let same = (
            ep.success,
            ep.decisions,
            ep.travelled.to_bits(),
            shortest.to_bits(),
        ) == (success, steps, travelled, geodesic_bits)
            && used == host_choices;
        agree &= same;
        successes += usize::from(ep.success);
        spl_sum += spl;
        decisions += ep.decisions;
        // Choices as digits 0-7 (primitive k heads k * 45 degrees).
        let mut digits = [b'?'; BUDGET];
        for (d, &k) in digits.iter_mut().zip(used) {
            *d = b'0' + k;
        }
        let digits = core::str::from_utf8(digits.get(..used.len()).unwrap_or(&[])).unwrap_or("?");
        hprintln!(
            "start {}: x {} y {} heading {} shortest {} -> success {} decisions {} travelled {} spl {} stuck {} host {} choices {}",
            i,
            start.x,
            start.y,
            start.heading,
            shortest,
            ep.success,
            ep.decisions,
            ep.travelled,
            spl,
            ep.stuck,
            if same { "same" } else { "DIFFERENT" },
            digits
        );
    }
    hprintln!(
        "reached the target from {} of {} starts, mean SPL {}, {} decisions",
        successes,
        MAZE_STARTS,
        spl_sum / MAZE_STARTS as f32,
        decisions
    );
    hprintln!("decisions agree with the host build: {}", agree);
    if selections > 0 {
        hprintln!(
            "select_ahead over {} primitives, {} ahead: {} of the decisions (the others by the goal check), {:.0} instructions each, {:.2} first primitives available (V: {} MACs per evaluation)",
            NUM_PRIMITIVES,
            SETTINGS.lookahead,
            selections,
            ticks as f32 * per_tick / selections as f32,
            evaluations as f32 / selections as f32,
            MAZE_MACS
        );
    }
    agree
}

#[entry]
fn main() -> ! {
    let Some(mut p) = cortex_m::Peripherals::take() else {
        exit(false)
    };
    let painted = stack::paint();
    let work = episode_work();
    let used = stack::high_water(painted);

    systick::start(&mut p.SYST);
    let (per_tick, overhead) = systick::calibrate();
    if (per_tick - 40.0).abs() > 0.5 {
        hprintln!(
            "note: not running with -icount shift=0; instruction counts below are not counts"
        );
    }
    let ok = guide(per_tick, overhead) && work.is_some();
    hprintln!(
        "stack used by load + geodesic graph + one episode, incl. scratch and report: {} bytes",
        used
    );
    hprintln!("maze_guide: {}", if ok { "PASS" } else { "FAIL" });
    exit(ok)
}
