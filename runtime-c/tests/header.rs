//! `include/laq.h` is generated from `src/lib.rs` by cbindgen and committed, so that C
//! users need no Rust tooling to read it; this test fails while the committed file
//! differs from what the source generates. `LAQ_BLESS=1` rewrites it instead.

use std::path::Path;

#[test]
fn committed_header_is_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/lib.rs"))
        .generate()
        .expect("cbindgen parses src/lib.rs");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let path = root.join("include/laq.h");
    if std::env::var_os("LAQ_BLESS").is_some_and(|v| v != "0" && !v.is_empty()) {
        std::fs::write(&path, &generated).expect("write include/laq.h");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "runtime-c/include/laq.h is stale (it differs from what src/lib.rs generates); \
         regenerate it with `LAQ_BLESS=1 cargo test -p laq-runtime-c --test header` and \
         commit it"
    );
}
