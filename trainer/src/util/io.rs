//! Output files are written whole or not at all: a temporary file beside the target,
//! then a rename, so an interrupted run never leaves a half-written file behind.

use anyhow::{Context, Result};
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create directory {}", dir.display()))?;
    let name = path.file_name().context("output path has no file name")?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let res = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, path));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res.with_context(|| format!("cannot write {}", path.display()))
}

/// An error when `out` is one of `inputs` (the same file by another name included) or
/// ends in one of the extensions of `not`: writing there would replace a dataset or a
/// model with something else. `what` names the output for the message.
///
/// ```
/// use std::path::Path;
/// let dir = tempfile::tempdir()?;
/// let data = dir.path().join("d.npz");
/// std::fs::write(&data, b"x")?;
/// let again = dir.path().join(".").join("d.npz");
/// let e = laq::util::io::refuse_overwriting(&again, &[&data], &[], "the CSV").unwrap_err();
/// assert!(e.to_string().contains("d.npz"), "{e}");
/// assert!(laq::util::io::refuse_overwriting(Path::new("v.npz"), &[&data], &["npz"], "the CSV").is_err());
/// assert!(laq::util::io::refuse_overwriting(Path::new("v.csv"), &[&data], &["npz"], "the CSV").is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn refuse_overwriting(out: &Path, inputs: &[&Path], not: &[&str], what: &str) -> Result<()> {
    if let Some(ext) = out.extension().and_then(|e| e.to_str()) {
        if not.iter().any(|n| n.eq_ignore_ascii_case(ext)) {
            anyhow::bail!(
                "--out {}: {what} would be written under a `.{ext}` name; choose another \
                 name",
                out.display()
            );
        }
    }
    let Ok(target) = std::fs::canonicalize(out) else {
        // Nothing there yet: nothing to replace.
        return Ok(());
    };
    for input in inputs {
        if std::fs::canonicalize(input).is_ok_and(|p| p == target) {
            anyhow::bail!(
                "--out {} is the input {}: writing {what} there would replace it",
                out.display(),
                input.display()
            );
        }
    }
    Ok(())
}

/// `write_atomic` for text.
pub fn write_text(path: &Path, text: &str) -> Result<()> {
    write_atomic(path, text.as_bytes())
}
