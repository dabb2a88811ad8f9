//! The files `pto-wsp run` writes: `--output`, `--trace` (inputs are read by [`crate::inputs`],
//! which never reads past what the header and the tensor allow, so `/dev/zero` is refused).
//!
//! Why: a run can take minutes. An output path that cannot be written should be found before
//! the run, not after it; a write that fails halfway must not leave a truncated file that looks
//! like a result.
//!
//! Promises:
//! - [`Outputs::check`], before the run: every `--output NAME=PATH` is well-formed and names a
//!   declared tensor; no two outputs (nor the trace) share a path (compared after resolving the
//!   directory); each directory exists and a file can be created in it.
//! - [`Outputs::commit`], after the run: every file is first written in full to a temporary
//!   file in its own directory; only when all are written are they renamed over their paths. A
//!   failure removes the temporary files and leaves every path as it was.

use crate::CliError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `NAME=PATH` of `--input` / `--output`.
pub fn split_spec(flag: &str, spec: &str) -> Result<(String, PathBuf), CliError> {
    match spec.split_once('=') {
        Some((name, path)) if !name.trim().is_empty() && !path.trim().is_empty() => {
            Ok((name.trim().to_string(), PathBuf::from(path.trim())))
        }
        _ => Err(CliError::plain(format!(
            "`{flag} {spec}` is not `NAME=PATH.npy`"
        ))),
    }
}

/// One file to write after the run.
#[derive(Debug)]
struct Planned {
    /// The flag and its argument, for messages (`--output X=out.npy`, `--trace t.json`).
    what: String,
    /// The tensor (none for the trace).
    tensor: Option<String>,
    path: PathBuf,
}

/// The files a run will write, checked before it starts (see the module docs).
#[derive(Debug, Default)]
pub struct Outputs {
    files: Vec<Planned>,
}

/// The directory a file goes to (`.` for a bare name).
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

impl Outputs {
    /// Checks `--output` specs (against the declared `tensors`) and the trace path before a run.
    pub fn check(
        specs: &[String],
        trace: Option<&Path>,
        tensors: &[&str],
    ) -> Result<Outputs, CliError> {
        let mut files = Vec::new();
        for spec in specs {
            let (tensor, path) = split_spec("--output", spec)?;
            if !tensors.contains(&tensor.as_str()) {
                return Err(CliError::plain(format!(
                    "in `--output {spec}`: no tensor is named `{tensor}`"
                )));
            }
            files.push(Planned {
                what: format!("--output {spec}"),
                tensor: Some(tensor),
                path,
            });
        }
        if let Some(t) = trace {
            files.push(Planned {
                what: format!("--trace {}", t.display()),
                tensor: None,
                path: t.to_path_buf(),
            });
        }
        let mut seen: Vec<(PathBuf, &str)> = Vec::new();
        for f in &files {
            let dir = dir_of(&f.path);
            let resolved = dir
                .canonicalize()
                .map_err(|e| {
                    CliError::plain(format!(
                        "in `{}`: the directory `{}` cannot be used: {e}",
                        f.what,
                        dir.display()
                    ))
                })?
                .join(f.path.file_name().unwrap_or_default());
            if f.path.file_name().is_none() || resolved.is_dir() {
                return Err(CliError::plain(format!(
                    "in `{}`: `{}` is a directory, not a file",
                    f.what,
                    f.path.display()
                )));
            }
            if let Some((_, first)) = seen.iter().find(|(p, _)| *p == resolved) {
                return Err(CliError::plain(format!(
                    "`{}` and `{first}` write the same file `{}`",
                    f.what,
                    f.path.display()
                )));
            }
            // Can a file be created there? (The temporary file is removed when dropped.)
            tempfile::Builder::new()
                .prefix(".pto-wsp-check")
                .tempfile_in(dir)
                .map_err(|e| {
                    CliError::plain(format!(
                        "in `{}`: cannot create a file in `{}`: {e}",
                        f.what,
                        dir.display()
                    ))
                })?;
            seen.push((resolved, &f.what));
        }
        Ok(Outputs { files })
    }

    /// Writes every file: `tensor(name)` gives an output's bytes, `trace()` the trace's. All
    /// are written to temporary files first, then renamed (see the module docs).
    pub fn commit(
        &self,
        mut tensor: impl FnMut(&str) -> Result<Vec<u8>, String>,
        mut trace: impl FnMut() -> Vec<u8>,
    ) -> Result<(), CliError> {
        let mut written = Vec::with_capacity(self.files.len());
        for f in &self.files {
            let bytes = match &f.tensor {
                Some(t) => {
                    tensor(t).map_err(|e| CliError::plain(format!("in `{}`: {e}", f.what)))?
                }
                None => trace(),
            };
            let cannot = |e: std::io::Error| {
                CliError::plain(format!(
                    "in `{}`: cannot write `{}`: {e}",
                    f.what,
                    f.path.display()
                ))
            };
            let mut tmp = tempfile::Builder::new()
                .prefix(".pto-wsp-out")
                .tempfile_in(dir_of(&f.path))
                .map_err(cannot)?;
            tmp.write_all(&bytes).map_err(cannot)?;
            tmp.as_file().sync_all().map_err(cannot)?;
            written.push(tmp);
        }
        // Every file is complete: put them in place (a rename within one directory).
        for (f, tmp) in self.files.iter().zip(written) {
            tmp.persist(&f.path).map_err(|e| {
                CliError::plain(format!(
                    "in `{}`: cannot write `{}`: {}",
                    f.what,
                    f.path.display(),
                    e.error
                ))
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_every_path_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.npy"), dir.path().join("b.npy"));
        std::fs::write(&a, b"old").unwrap();
        let specs = [format!("A={}", a.display()), format!("B={}", b.display())];
        let outputs = Outputs::check(&specs, None, &["A", "B"]).unwrap();
        let r = outputs.commit(
            |t| match t {
                "A" => Ok(b"new".to_vec()),
                _ => Err("no bytes for B".to_string()),
            },
            Vec::new,
        );
        assert_eq!(
            r.unwrap_err().to_string(),
            format!("error: in `--output {}`: no bytes for B\n", specs[1])
        );
        assert_eq!(std::fs::read(&a).unwrap(), b"old");
        assert!(!b.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        outputs.commit(|_| Ok(b"new".to_vec()), Vec::new).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"new");
        assert_eq!(std::fs::read(&b).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
