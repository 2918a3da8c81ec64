#!/usr/bin/env bash
# Builds the C grid guide (grid_guide.c against runtime-c's laq.h) twice, for the host
# and for the Cortex-M4F, runs it natively and in QEMU (mps2-an386, semihosting), and
# passes only if both runs pass and print exactly the same lines (values as bit
# patterns: the target's arithmetic is the host's, bit for bit). If the Rust firmware's
# grid_guide has been built, also runs it and requires the same path.
#
# Needs: cc, arm-none-eabi-gcc with newlib (Debian: gcc-arm-none-eabi
# libnewlib-arm-none-eabi), qemu-system-arm, the thumbv7em-none-eabihf Rust target;
# .ci/firmware.sh installs them. The model is models/gridworld/value.safetensors, or
# the file named by LAQ_GRID_MODEL.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
model="${LAQ_GRID_MODEL:-$root/models/gridworld/value.safetensors}"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
out="$target_dir/firmware-c"
mkdir -p "$out"

# The library for both, without image models (as the Rust grid firmware).
cargo build -p laq-runtime-c --release --lib --no-default-features
cargo build -p laq-runtime-c --release --lib --no-default-features --target thumbv7em-none-eabihf

sources=("$here/grid_guide.c" "$here/model.S")
common=(-std=c99 -Wall -Wextra -Werror -Os -I "$root/runtime-c/include" -I "$here"
        "-DLAQ_GRID_MODEL=\"$model\"")

"${CC:-cc}" "${common[@]}" "${sources[@]}" "$here/host.c" \
    "$target_dir/release/liblaq_runtime_c.a" -lpthread -ldl -lm -o "$out/grid_guide_host"

arm-none-eabi-gcc "${common[@]}" -mcpu=cortex-m4 -mthumb -mfloat-abi=hard \
    -mfpu=fpv4-sp-d16 -ffunction-sections -fdata-sections -nostartfiles \
    --specs=nano.specs --specs=nosys.specs -T "$here/link.ld" -Wl,--gc-sections,-z,noexecstack \
    "${sources[@]}" "$here/startup.c" \
    "$target_dir/thumbv7em-none-eabihf/release/liblaq_runtime_c.a" -o "$out/grid_guide.elf"
arm-none-eabi-size "$out/grid_guide.elf"

status=0
"$out/grid_guide_host" >"$out/host.txt" || status=1
timeout 120 qemu-system-arm -cpu cortex-m4 -machine mps2-an386 -nographic \
    -semihosting-config enable=on,target=native -kernel "$out/grid_guide.elf" \
    >"$out/target.txt" || status=1
cat "$out/target.txt"
if ! diff -u "$out/host.txt" "$out/target.txt"; then
    echo "the Cortex-M4F output differs from the host's" >&2
    status=1
fi
# The Rust firmware's choices, when it has been built (.ci/firmware.sh builds it first):
# the same moves to the same cells, and the same outcome.
fw_target="${CARGO_TARGET_DIR:-target}"
[[ "$fw_target" = /* ]] || fw_target="$root/firmware-examples/$fw_target"
rust_guide="${LAQ_RUST_GRID_GUIDE:-$fw_target/thumbv7em-none-eabihf/release/grid_guide}"
if [[ -f "$rust_guide" ]]; then
    timeout 120 qemu-system-arm -cpu cortex-m4 -machine mps2-an386 -nographic \
        -semihosting-config enable=on,target=native -kernel "$rust_guide" \
        >"$out/rust.txt" || status=1
    choices() { grep -E '^  step |^goal reached' "$1" | sed 's/  score .*//'; }
    if ! diff -u <(choices "$out/rust.txt") <(choices "$out/target.txt"); then
        echo "the C guide's path differs from the Rust firmware's" >&2
        status=1
    else
        echo "same path as the Rust firmware ($rust_guide)"
    fi
fi
if [[ $status -ne 0 ]]; then
    echo "C grid guide: FAIL" >&2
    exit 1
fi
echo "C grid guide: host and Cortex-M4F agree, PASS"
