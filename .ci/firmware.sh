#!/usr/bin/env bash
# Firmware and embedded checks of laq-runtime, for a fresh Debian machine (run as root).
#
# 1. Installs what the firmware tests need: the Cortex-M Rust targets, QEMU,
#    arm-none-eabi binutils (for arm-none-eabi-size), arm-none-eabi-gcc and newlib
#    (the C firmware), flip-link (the firmware's linker) and cargo-fuzz (nightly
#    toolchain).
# 2. Builds and lints the runtime for thumbv6m-none-eabi (Cortex-M0, no FPU) and
#    thumbv7em-none-eabihf (Cortex-M4F, where the assembly kernel is compiled), with
#    and without its `images` feature, and the maze guidance crate (laq-maze).
# 3. Fuzzes the model loader for FUZZ_SECONDS (default 60).
# 4. If the grid and maze models exist, builds the firmware (without and with the
#    runtime's `int8` and `images` features), runs it in QEMU (and `bench_m0` on a Cortex-M0, QEMU
#    microbit) and prints the size and instruction-count figures (tests/tests/firmware.rs
#    asserts on them).
# 5. Builds the C interface (laq-runtime-c) for thumbv7em-none-eabihf and, with the grid
#    model, runs the C grid guide on the host and in QEMU (firmware-examples/c/run.sh).
#
# Run from anywhere; afterwards `cargo test -p laq-tests --test firmware` can run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"

step() { printf '\n== %s\n' "$*"; }

step "toolchain targets"
rustup target add thumbv7em-none-eabihf thumbv6m-none-eabi
rustup component add clippy >/dev/null 2>&1 || true
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi

step "system packages"
if ! command -v qemu-system-arm >/dev/null || ! command -v arm-none-eabi-size >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends qemu-system-arm binutils-arm-none-eabi
fi
if ! command -v arm-none-eabi-gcc >/dev/null \
    || [[ ! -d /usr/lib/arm-none-eabi/newlib ]]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends gcc-arm-none-eabi libnewlib-arm-none-eabi
fi

step "cargo tools"
command -v flip-link >/dev/null || cargo install --locked flip-link
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz

step "runtime for thumbv6m-none-eabi and thumbv7em-none-eabihf"
cargo build -p laq-runtime --target thumbv6m-none-eabi
cargo build -p laq-runtime --target thumbv7em-none-eabihf
cargo build -p laq-runtime --target thumbv7em-none-eabihf --release
cargo build -p laq-runtime --target thumbv7em-none-eabihf --release --no-default-features
cargo clippy -p laq-runtime --target thumbv7em-none-eabihf --features defmt -- -D warnings
cargo clippy -p laq-runtime --target thumbv7em-none-eabihf --no-default-features --features defmt -- -D warnings
cargo clippy -p laq-runtime --target thumbv6m-none-eabi -- -D warnings
cargo clippy -p laq-runtime --target thumbv6m-none-eabi --no-default-features -- -D warnings

step "laq-maze for thumbv6m-none-eabi and thumbv7em-none-eabihf"
cargo build -p laq-maze --target thumbv6m-none-eabi
cargo build -p laq-maze --target thumbv7em-none-eabihf --release
cargo clippy -p laq-maze --target thumbv7em-none-eabihf -- -D warnings
cargo clippy -p laq-maze --target thumbv6m-none-eabi -- -D warnings

step "C interface (laq-runtime-c) for thumbv7em-none-eabihf"
cargo build -p laq-runtime-c --target thumbv7em-none-eabihf --release
cargo build -p laq-runtime-c --target thumbv7em-none-eabihf --release --no-default-features
cargo clippy -p laq-runtime-c --target thumbv7em-none-eabihf -- -D warnings

step "fuzzing the loader for ${FUZZ_SECONDS}s"
(
    cd runtime
    mkdir -p fuzz/corpus/load
    cargo +nightly fuzz build load
    cargo +nightly fuzz run load fuzz/corpus/load tests/data -- \
        -max_total_time="$FUZZ_SECONDS" -dict=fuzz/load.dict
)

model="${LAQ_GRID_MODEL:-$root/models/gridworld/value.safetensors}"
maze_model="${LAQ_MAZE_MODEL:-$root/models/maze2d/value.safetensors}"
if [[ -f "$model" && -f "$maze_model" ]]; then
    step "firmware (QEMU mps2-an386, Cortex-M4F; microbit, Cortex-M0)"
    (
        cd firmware-examples
        cargo clippy --release --bins -- -D warnings
        cargo clippy --release --bins --features int8 -- -D warnings
        cargo clippy --release --bins --features images -- -D warnings
        cargo build --release --bins --features int8
        bin="${CARGO_TARGET_DIR:-target}/thumbv7em-none-eabihf/release"
        qemu=(qemu-system-arm -cpu cortex-m4 -machine mps2-an386 -nographic
              -semihosting-config enable=on,target=native)
        "${qemu[@]}" -kernel "$bin/grid_guide"
        "${qemu[@]}" -icount shift=0 -kernel "$bin/bench_mcu"
        "${qemu[@]}" -icount shift=0 -kernel "$bin/maze_guide"
        echo "with int8:"
        arm-none-eabi-size "$bin/size_base" "$bin/size_eval" "$bin/size_full"
        # Firmware for f32 fully connected models: neither images nor int8 (replaced
        # in place).
        cargo build --release --bin size_base --bin size_eval --bin size_full --bin maze_guide
        echo "without images or int8:"
        arm-none-eabi-size "$bin/size_base" "$bin/size_eval" "$bin/size_full" "$bin/maze_guide"
        # Image models: bench_image, and the size binaries again (replaced in place).
        cargo build --release --features images --bin bench_image \
            --bin size_base --bin size_eval --bin size_full
        "${qemu[@]}" -icount shift=0 -kernel "$bin/bench_image"
        echo "with images:"
        arm-none-eabi-size "$bin/size_base" "$bin/size_eval" "$bin/size_full"
        # Cortex-M0 (no FPU, no DSP extension) on QEMU's microbit: f32 and int8.
        cargo build --release --target thumbv6m-none-eabi --features int8 --bin bench_m0
        qemu-system-arm -machine microbit -nographic \
            -semihosting-config enable=on,target=native -icount shift=0 \
            -kernel "${CARGO_TARGET_DIR:-target}/thumbv6m-none-eabi/release/bench_m0"
    )
else
    step "firmware skipped: $model or $maze_model not found (train the models first)"
fi

if [[ -f "$model" ]]; then
    step "C grid guide (host and QEMU mps2-an386)"
    LAQ_GRID_MODEL="$model" bash firmware-examples/c/run.sh
else
    step "C grid guide skipped: $model not found (train the grid model first)"
fi
