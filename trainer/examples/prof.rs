use laq::data::Dataset;
use laq::mining::*;
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
fn main() -> anyhow::Result<()> {
    std::env::set_var("RAYON_NUM_THREADS", "1");
    let dev = candle_core::Device::Cpu;
    let data = Dataset::load(std::path::Path::new("/tmp/grid.npz"))?;
    let acts = data.discrete_actions("x")?.to_vec();
    let g = laq::envs::gridworld::GridWorld::default();
    let states: Vec<usize> = (0..data.len())
        .map(|i| g.index_of_obs(data.obs(i)).unwrap())
        .collect();
    let variant = std::env::args().nth(1).unwrap();
    for seed in 0..6u64 {
        let mut cfg = MiningConfig {
            restarts: 1,
            ..Default::default()
        };
        match variant.as_str() {
            "base" => {}
            "lr3" => cfg.lr = 3e-3,
            "b256" => cfg.batch_size = 256,
            "f8" => cfg.forced_per_action = 8,
            "always" => cfg.anti_collapse = AntiCollapse::Always,
            "nodrop" => cfg.lr_drops = vec![0.8],
            _ => panic!(),
        }
        let t = std::time::Instant::now();
        let m = mine(&data, &cfg, seed, &dev)?;
        println!(
            "{variant} seed {seed} purity {:.4} loss {:.2e} {:.1}s",
            laq::eval::state_purity(&states, &m.labels, &acts),
            m.loss_curve.last().unwrap(),
            t.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
