//! `pto-wsp run --input NAME=PATH.npy`: numpy files read straight into the tensors.
//!
//! Why: inputs can be gigabytes (a KV cache for a large batch). Reading a file into memory,
//! parsing it into an array and copying that into the tensor touched every byte three times,
//! after the seeded fill had already written the same tensor once. Here a file's header is read
//! and checked first ([`Input::open`], before anything is allocated), and after allocation its
//! data goes from the file into the tensor's buffer in one copy, in parallel chunks
//! ([`read_all`]); the seeded fill skips the tensors an input supplies.
//!
//! Promises: every check of [`pto_wsp::kernels::npy`] (element type, shape, format) is made
//! before any data is read, and errors name the flag and the file; a file shorter than its
//! header says is an error; data in the other byte order is converted; an integer input's
//! values are also returned for the bindings ([`Input::values`]).

use crate::CliError;
use crate::files::split_spec;
use pto_wsp::ir::{Bindings, Module};
use pto_wsp::kernels::TensorStore;
use pto_wsp::kernels::npy::{NpyArray, NpyHeader, shape_text};
use std::fs::File;
use std::path::PathBuf;
use std::sync::Mutex;

/// Bytes one thread reads at a time.
const CHUNK: usize = 16 << 20;

/// One `--input`, its header read and checked.
#[derive(Debug)]
pub struct Input {
    /// The flag's text.
    pub spec: String,
    /// The tensor it replaces.
    pub tensor: String,
    /// The file.
    pub path: PathBuf,
    /// Its header.
    pub header: NpyHeader,
    file: File,
}

impl Input {
    /// Opens `path`, reads its header and checks it against tensor `tensor` of `probe` (a store
    /// allocated for the same bindings; nothing in it is touched).
    pub fn open(
        spec: &str,
        tensor: &str,
        path: PathBuf,
        probe: &TensorStore,
    ) -> Result<Input, CliError> {
        let err = |m: String| CliError::plain(format!("in `--input {spec}`: {m}"));
        let cannot = |e: std::io::Error| err(format!("cannot read `{}`: {e}", path.display()));
        let mut file = File::open(&path).map_err(cannot)?;
        let header = NpyHeader::read(&mut file).map_err(|e| err(e.to_string()))?;
        let len = file.metadata().map_err(cannot)?.len();
        let need = (header.data_offset + header.data_len) as u64;
        if len < need {
            return Err(err(format!(
                "not a .npy file numpy wrote: the data is cut off: {} byte(s) for a shape {} of {}-byte elements, which needs {}",
                len.saturating_sub(header.data_offset as u64),
                shape_text(&header.shape),
                header.size,
                header.data_len
            )));
        }
        if len > need {
            let body = (len - header.data_offset as u64) as usize;
            return Err(err(format!(
                "not a .npy file numpy wrote: {}",
                pto_wsp::kernels::npy::trailing(body, &header)
            )));
        }
        probe
            .check_npy_header(tensor, &header)
            .map_err(|e| err(e.to_string()))?;
        Ok(Input {
            spec: spec.to_string(),
            tensor: tensor.to_string(),
            path,
            header,
            file,
        })
    }

    /// The elements as `i64` if they are integers that fit (read from the file now: meant for
    /// the small integer tensors that control flow reads).
    pub fn values(&self) -> Result<Option<Vec<i64>>, CliError> {
        let mut data = vec![0u8; self.header.data_len];
        read_at(&self.file, self.header.data_offset as u64, &mut data).map_err(|e| {
            CliError::plain(format!(
                "in `--input {}`: cannot read `{}`: {e}",
                self.spec,
                self.path.display()
            ))
        })?;
        self.header.to_native(&mut data);
        let array = NpyArray {
            descr: self.header.descr.clone(),
            kind: self.header.kind,
            size: self.header.size,
            shape: self.header.shape.clone(),
            data,
        };
        Ok(array.to_i64s())
    }
}

/// Opens every `--input NAME=PATH.npy` of `specs` and checks it against its tensor's
/// declaration before anything is allocated for real (a probe store costs nothing: untouched
/// tensors are never paged in). An input wins over bound contents (a `//@ bind` default or
/// `--bind`): those are dropped from `bindings` first, so an input of another length is checked
/// against the tensor alone; an integer input's values are bound in their place, so a
/// generator's `load` reads them.
pub fn open_all(
    name: &str,
    module: &Module,
    bindings: &mut Bindings,
    specs: &[String],
) -> Result<Vec<Input>, CliError> {
    let mut inputs = Vec::new();
    if specs.is_empty() {
        return Ok(inputs);
    }
    for spec in specs {
        bindings.arrays.remove(&split_spec("--input", spec)?.0);
    }
    let probe =
        TensorStore::new(module, bindings).map_err(|e| CliError::plain(format!("{name}: {e}")))?;
    for spec in specs {
        let (tensor, path) = split_spec("--input", spec)?;
        let input = Input::open(spec, &tensor, path, &probe)?;
        let integer = module
            .tensors
            .iter()
            .any(|t| t.name.name == tensor && t.dtype.is_integer());
        if integer && let Some(values) = input.values()? {
            bindings.arrays.insert(tensor.clone(), values);
        }
        inputs.push(input);
    }
    Ok(inputs)
}

/// Reads every input's data into its tensor of `store`: one copy from each file, in chunks
/// spread over the machine's cores. Returns the bytes read.
pub fn read_all(inputs: &[Input], store: &mut TensorStore) -> Result<u64, CliError> {
    let named: Vec<(&str, &NpyHeader)> = inputs
        .iter()
        .map(|i| (i.tensor.as_str(), &i.header))
        .collect();
    let targets = store
        .npy_targets(&named)
        .map_err(|e| CliError::plain(format!("in `--input`: {e}")))?;
    let mut chunks = Vec::new();
    let mut total = 0u64;
    for (input, target) in inputs.iter().zip(targets) {
        total += target.len() as u64;
        let base = input.header.data_offset as u64;
        let mut at = 0u64;
        // Each chunk a whole number of elements, so byte-order conversion works per chunk.
        let step = CHUNK - CHUNK % input.header.size.max(1);
        for c in target.chunks_mut(step) {
            let n = c.len() as u64;
            chunks.push((input, base + at, c));
            at += n;
        }
    }
    // Elsewhere than on Unix the fallback `read_at` moves a shared file position: one thread.
    let cores = if cfg!(unix) {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        1
    };
    let threads = cores.min(chunks.len().max(1));
    let work = Mutex::new(chunks);
    let failed: Mutex<Option<CliError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let next = work.lock().unwrap_or_else(|p| p.into_inner()).pop();
                    let Some((input, offset, buf)) = next else {
                        return;
                    };
                    if let Err(e) = read_at(&input.file, offset, buf) {
                        let e = CliError::plain(format!(
                            "in `--input {}`: cannot read `{}`: {e}",
                            input.spec,
                            input.path.display()
                        ));
                        failed
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(e);
                        return;
                    }
                    input.header.to_native(buf);
                }
            });
        }
    });
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(total),
    }
}

/// Fills `buf` from `file` at `offset`, without moving a shared file position.
#[cfg(unix)]
fn read_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Fills `buf` from `file` at `offset` (through a clone of the handle, seeked; callers read from
/// one thread).
#[cfg(not(unix))]
fn read_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file.try_clone()?;
    f.seek(SeekFrom::Start(offset))?;
    f.read_exact(buf)
}
