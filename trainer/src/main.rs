use clap::Parser;

// Candle allocates a fresh buffer for every intermediate tensor; mimalloc reuses them
// instead of returning memory to the kernel, which halves a small training step.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    if let Err(e) = laq::cli::Cli::parse().run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
