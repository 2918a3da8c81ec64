//! Sets `laq_dsp` on targets whose cores all have the DSP extension (ARMv7E-M: Cortex-M4
//! and M7), where `src/arm.rs` uses its dual 16-bit multiply-accumulate for int8
//! layers. The extension is optional on ARMv8-M Mainline (Cortex-M33), and stable Rust
//! does not expose ARM target features to `cfg`, so the target name decides.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(laq_dsp)");
    println!("cargo::rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.starts_with("thumbv7em-") {
        println!("cargo::rustc-cfg=laq_dsp");
    }
}
