//! Arrays given to a run, made the memory of their tensors without a copy.
//!
//! Why: a run reads and writes the caller's arrays in place — numpy arrays, and any object with
//! `__dlpack__` on the CPU (torch tensors, JAX arrays, ...) — so a 1 GiB input costs no copy and
//! an output array the caller passed (`out=`) is what the run writes.
//!
//! Promises:
//! - [`given`] turns each `(name, object)` into a [`Given`]: its element type and shape as a
//!   `.npy` header would state them, its data pointer and length, whether it is read-only,
//!   C-contiguous and in native byte order, and a handle keeping the memory alive (the numpy
//!   array, or the imported DLPack tensor whose deleter runs when the `Given` is dropped, with
//!   the GIL held).
//! - [`attach`] checks every array against its tensor before making it the tensor's memory,
//!   with the `--input` wording; a mistake of type is an `ArgumentTypeError` (a `TypeError`),
//!   one of shape, layout or name an `ArgumentValueError` (a `ValueError`). A read-only array is
//!   accepted for a tensor no task writes (and refused for one a task writes, naming it).
//!   What was attached before a failure is recorded, so [`detach`] gives it back.

// Reading a numpy array's flags and data pointer, and handing array memory to the tensor store.
#![allow(unsafe_code)]

use std::ptr::NonNull;

use dlpark::ffi::{DLDataTypeCode, DLDeviceType};
use dlpark::python::{ImportedDlpack, from_dlpack};
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods, npyffi};
use pto_wsp::ir::DType;
use pto_wsp::kernels::TensorStore;
use pto_wsp::kernels::npy::{NpyError, NpyHeader};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{ArgumentTypeError, ArgumentValueError, RunError};

/// Keeps an array's memory alive while a run uses it.
enum Keep {
    /// A numpy array.
    Numpy(#[allow(dead_code)] Py<PyAny>),
    /// A tensor imported through DLPack; dropping it runs the producer's deleter.
    Dlpack(#[allow(dead_code)] Imported),
}

/// An imported DLPack tensor, movable between threads.
struct Imported(#[allow(dead_code)] ImportedDlpack);

// SAFETY: the imported tensor is only read (its descriptor, once, in `dlpack`) and dropped; the
// deleter DLPack producers install may touch Python objects, and every `Given` (hence every
// `Imported`) is dropped by this crate with the GIL held (pyclass fields and locals of methods).
unsafe impl Send for Imported {}
// SAFETY: no method of `Imported` is called through a shared reference.
unsafe impl Sync for Imported {}

/// One array given to a run, as the checks need it.
pub(crate) struct Given {
    pub(crate) name: String,
    header: NpyHeader,
    /// `ml_dtypes.bfloat16` or DLPack's bfloat16: binds only to a `bf16` tensor.
    bfloat16: bool,
    ptr: usize,
    read_only: bool,
    contiguous: bool,
    native: bool,
    _keep: Keep,
}

/// One array bound to a tensor for a run.
pub(crate) struct Attached {
    pub(crate) tensor: u32,
    /// The array's data address (only compared, never dereferenced here).
    addr: usize,
    len: usize,
}

/// The arrays of a call, by tensor name, each a numpy array or a DLPack producer.
pub(crate) fn given(arrays: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<Given>> {
    let mut out = Vec::new();
    if let Some(arrays) = arrays {
        for (k, v) in arrays.iter() {
            let name: String = k.extract()?;
            out.push(one(name, &v)?);
        }
    }
    Ok(out)
}

fn one(name: String, v: &Bound<'_, PyAny>) -> PyResult<Given> {
    if let Ok(array) = v.cast::<PyUntypedArray>() {
        return numpy_array(name, array);
    }
    if v.hasattr("__dlpack__")? {
        return dlpack(name, v);
    }
    let type_name = v
        .get_type()
        .name()
        .map_or_else(|_| "unknown type".to_string(), |n| n.to_string());
    Err(ArgumentTypeError::new_err(format!(
        "{name}=: a tensor is given as an array (numpy, or any object with `__dlpack__` such as \
         a torch tensor), not {type_name}"
    )))
}

fn numpy_array(name: String, array: &Bound<'_, PyUntypedArray>) -> PyResult<Given> {
    let dtype = array.dtype();
    let size = dtype.itemsize();
    // `ml_dtypes.bfloat16` (numpy has no bf16) is a bf16 tensor's 16-bit patterns, exactly
    // what `<u2` bits are.
    let bfloat16 = size == 2 && dtype.getattr("name")?.extract::<String>()? == "bfloat16";
    let (descr, kind) = if bfloat16 {
        ("<u2".to_string(), 'u')
    } else {
        (
            dtype.getattr("str")?.extract::<String>()?,
            char::from(dtype.kind()),
        )
    };
    let raw = array.as_array_ptr();
    // SAFETY: `raw` is the live array object `array` holds a reference to.
    let (flags, data) = unsafe { ((*raw).fields.flags, (*raw).fields.data) };
    Ok(Given {
        header: NpyHeader {
            descr,
            kind,
            size,
            shape: array.shape().iter().map(|&d| d as u64).collect(),
            swapped: false,
            data_offset: 0,
            data_len: array.len() * size,
        },
        bfloat16,
        ptr: data as usize,
        read_only: flags & npyffi::NPY_ARRAY_WRITEABLE == 0,
        contiguous: flags & npyffi::NPY_ARRAY_C_CONTIGUOUS != 0,
        native: size == 1 || dtype.is_native_byteorder().unwrap_or(true),
        _keep: Keep::Numpy(array.clone().into_any().unbind()),
        name,
    })
}

fn dlpack(name: String, v: &Bound<'_, PyAny>) -> PyResult<Given> {
    // `copy=None` (the producer's choice): CPU producers share their memory, and a legacy
    // (unversioned) capsule, which JAX gives, cannot say so, which `Some(false)` would refuse.
    let imported = from_dlpack(v.as_borrowed(), None, None).map_err(|e| {
        ArgumentTypeError::new_err(format!(
            "{name}=: the object's `__dlpack__` gave no tensor this run can use without a copy: {e}"
        ))
    })?;
    let read_only = imported.flags().contains(dlpark::DlpackFlags::READ_ONLY);
    let t = imported.validate().map_err(|e| {
        ArgumentValueError::new_err(format!("{name}=: not a valid DLPack tensor: {e}"))
    })?;
    let device = t.device();
    if device.device_type != DLDeviceType::CPU && device.device_type != DLDeviceType::CUDAHOST {
        return Err(ArgumentValueError::new_err(format!(
            "{name}=: the tensor is on device type {} (DLPack), not in CPU memory: move it \
             first (`t.cpu()` in torch)",
            device.device_type.0
        )));
    }
    let dt = t.dtype();
    let size = usize::from(dt.bits) / 8;
    let (kind, bfloat16) = match dt.code {
        DLDataTypeCode::FLOAT => ('f', false),
        DLDataTypeCode::INT => ('i', false),
        DLDataTypeCode::UINT => ('u', false),
        DLDataTypeCode::BFLOAT => ('u', true),
        DLDataTypeCode::BOOL => ('b', false),
        _ => ('V', false),
    };
    if dt.lanes != 1 || usize::from(dt.bits) % 8 != 0 || kind == 'V' {
        return Err(ArgumentTypeError::new_err(format!(
            "{name}=: the tensor's element type (DLPack code {}, {} bits, {} lanes) is none a \
             tensor can hold (f32, f16, bf16, i32, u32, i64, u64, u8)",
            dt.code.0, dt.bits, dt.lanes
        )));
    }
    let contiguous = t.is_compact().unwrap_or(false);
    let shape: Vec<u64> = t.shape().iter().map(|&d| d.max(0) as u64).collect();
    let ptr = t.data_ptr() as usize + t.byte_offset() as usize;
    let data_len = t.num_bytes();
    Ok(Given {
        header: NpyHeader {
            descr: format!("<{kind}{size}"),
            kind,
            size,
            shape,
            swapped: false,
            data_offset: 0,
            data_len,
        },
        bfloat16,
        ptr,
        read_only,
        contiguous,
        native: true,
        _keep: Keep::Dlpack(Imported(imported)),
        name,
    })
}

/// `--input`'s check of an array against its tensor, as the Python exception it is.
fn npy_error(name: &str, e: NpyError) -> PyErr {
    let m = format!("{name}=: {e}");
    match e {
        NpyError::DType { .. } | NpyError::Unsupported { .. } => ArgumentTypeError::new_err(m),
        _ => ArgumentValueError::new_err(m),
    }
}

/// Checks every array against its tensor of `store` and makes it the tensor's memory, recording
/// each in `attached` as it goes (so a failure part-way can be undone with [`detach`]).
/// `written[t]`: whether a task writes tensor `t` (a read-only array is refused for it).
pub(crate) fn attach(
    store: &mut TensorStore,
    given: &[Given],
    written: &[bool],
    attached: &mut Vec<Attached>,
) -> PyResult<()> {
    for g in given {
        let name = &g.name;
        if g.bfloat16
            && let Some(t) = store.index_of(name)
            && store.info(t).dtype != DType::Bf16
        {
            return Err(ArgumentTypeError::new_err(format!(
                "{name}=: the array holds bfloat16, but tensor `{name}` is {}",
                store.info(t).dtype
            )));
        }
        let tensor = store
            .check_npy_header(name, &g.header)
            .map_err(|e| npy_error(name, e))?;
        if !g.native {
            return Err(ArgumentValueError::new_err(format!(
                "{name}=: the array's byte order (`{}`) is not this machine's; pass \
                 `array.astype(array.dtype.newbyteorder('='))`",
                g.header.descr
            )));
        }
        if !g.contiguous {
            return Err(ArgumentValueError::new_err(format!(
                "{name}=: the array is not C-contiguous; pass `numpy.ascontiguousarray(array)` \
                 (a tensor no task writes is copied for you by `Program.__call__`)"
            )));
        }
        if g.read_only && written.get(tensor as usize).copied().unwrap_or(true) {
            return Err(ArgumentValueError::new_err(format!(
                "{name}=: the array is read-only, but tasks write tensor `{name}`; pass a \
                 writeable array (a read-only one is fine for a tensor the tasks only read)"
            )));
        }
        let len = g.header.data_len;
        let ptr = NonNull::new(g.ptr as *mut u8).unwrap_or(NonNull::dangling());
        let overlaps = attached.iter().any(|a| {
            let (s, e) = (a.addr, a.addr + a.len);
            let (s2, e2) = (g.ptr, g.ptr + len);
            len > 0 && a.len > 0 && s < e2 && s2 < e
        });
        if overlaps {
            return Err(ArgumentValueError::new_err(format!(
                "{name}=: the array shares memory with another array of this run"
            )));
        }
        // SAFETY: `ptr` is the data of a C-contiguous array of `len` bytes whose memory the
        // `Given` keeps alive (its numpy array or imported DLPack tensor) until `detach`
        // below returns it: a run holds its `Given`s until it has detached them, whether or not
        // it succeeds. Its element type and shape were checked against the tensor just above.
        // A read-only array is attached only to a tensor no task writes: nothing writes
        // through it.
        unsafe { store.attach_external(tensor, ptr, len) }
            .map_err(|e| RunError::new_err(format!("{name}=: {e}")))?;
        attached.push(Attached {
            tensor,
            addr: g.ptr,
            len,
        });
    }
    Ok(())
}

/// Gives every tensor in `attached` its own memory back.
pub(crate) fn detach(store: &mut TensorStore, attached: &[Attached]) -> PyResult<()> {
    for a in attached {
        store
            .detach_external(a.tensor)
            .map_err(|e| RunError::new_err(e.to_string()))?;
    }
    Ok(())
}

/// As with `--input`, binds the values of each given integer array too (control flow and plan
/// generators may read them): a copy of the (small) integer arrays only.
pub(crate) fn bind_integers(
    module: &pto_wsp::ir::Module,
    given: &[Given],
    bindings: &mut pto_wsp::ir::Bindings,
) {
    for g in given {
        let integer = module
            .tensors
            .iter()
            .any(|t| t.name.name == g.name && t.dtype.is_integer());
        if !integer || !g.native || !g.contiguous || !matches!(g.header.kind, 'i' | 'u') {
            continue;
        }
        let n = g.header.data_len / g.header.size.max(1);
        let values: Option<Vec<i64>> = (0..n)
            .map(|i| {
                // SAFETY: `g` keeps the array alive and it holds `n` elements of `size` bytes
                // at `ptr` (checked contiguous above); unaligned reads of plain integers.
                let p = (g.ptr + i * g.header.size) as *const u8;
                unsafe {
                    Some(match (g.header.kind, g.header.size) {
                        ('i', 1) => i64::from(p.cast::<i8>().read_unaligned()),
                        ('u', 1) => i64::from(p.read_unaligned()),
                        ('i', 2) => i64::from(p.cast::<i16>().read_unaligned()),
                        ('u', 2) => i64::from(p.cast::<u16>().read_unaligned()),
                        ('i', 4) => i64::from(p.cast::<i32>().read_unaligned()),
                        ('u', 4) => i64::from(p.cast::<u32>().read_unaligned()),
                        ('i', 8) => p.cast::<i64>().read_unaligned(),
                        ('u', 8) => p.cast::<u64>().read_unaligned() as i64,
                        _ => return None,
                    })
                }
            })
            .collect();
        if let Some(values) = values {
            bindings.arrays.insert(g.name.clone(), values);
        }
    }
}
