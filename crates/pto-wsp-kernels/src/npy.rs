//! Tensors in numpy's `.npy` format: how users bring real data in and take results out.
//!
//! Why: people who build inference compare against their own numpy or PyTorch code; `.npy` is
//! what `numpy.save` writes and `numpy.load` reads (PyTorch tensors go through `.numpy()`). This
//! module turns the bytes of a `.npy` file into a tensor of a [`TensorStore`] and back; the
//! command-line tool does the file reading and writing.
//!
//! Promises:
//! - [`NpyArray::parse`] reads format versions 1.0, 2.0 and 3.0: the element type, the
//!   C-contiguous shape and the data, converted to this machine's byte order (little- and
//!   big-endian files are read exactly). Anything else — a bad magic, a header that is not the
//!   dictionary numpy writes, a Fortran-ordered array, a type the IR has no element type for,
//!   data shorter or longer than the shape says — is an [`NpyError`] saying what and how to fix it.
//! - [`TensorStore::load_npy`] checks the array against the declared tensor — the element type
//!   exactly (no silent conversion), the shape exactly (as evaluated under the bindings) — and
//!   names the tensor in every error; it then copies the data in, bit for bit.
//! - For large files, [`NpyHeader::read`] reads only the header, and
//!   [`TensorStore::npy_targets`] checks it the same way and hands out the tensors' buffers to
//!   read the data straight into (then [`NpyHeader::to_native`]): no intermediate copy.
//! - [`TensorStore::to_npy`] writes a version 1.0 file byte for byte as `numpy.save` writes the
//!   same array (same header text, padding and alignment), so `numpy.load` gives back the
//!   tensor's element type and shape.
//! - numpy has no `bfloat16`: a `bf16` tensor is written as its raw 16-bit patterns (`<u2`) and
//!   read from `<u2` (view them with `ml_dtypes.bfloat16`, or
//!   `torch.from_numpy(a.view(numpy.int16)).view(torch.bfloat16)`).

use crate::store::TensorStore;
use pto_wsp_ir::DType;

/// The magic string every `.npy` file starts with.
pub const MAGIC: &[u8] = b"\x93NUMPY";

/// Why a `.npy` file could not be read into a tensor, or a tensor written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NpyError {
    /// The bytes are not a `.npy` file numpy can write.
    #[error("not a .npy file numpy wrote: {0}")]
    Format(String),
    /// A numpy type with no tensor element type.
    #[error(
        "the array holds {descr} ({name}), which no tensor element type matches (f32, f16, bf16 as <u2, i32, u32, i64, u64, u8)"
    )]
    Unsupported {
        /// numpy's type string, e.g. `<f8`.
        descr: String,
        /// A readable name, e.g. `float64`.
        name: String,
    },
    /// The array is stored column-major.
    #[error(
        "the array is Fortran-ordered (column-major); save `numpy.ascontiguousarray(a)` instead"
    )]
    FortranOrder,
    /// No tensor has the name.
    #[error("no tensor is named `{0}`")]
    UnknownTensor(String),
    /// The array's element type is not the tensor's.
    #[error(
        "tensor `{tensor}` is declared {expected}, but the array holds {descr} ({name}); convert it first (`a.astype({hint})`)"
    )]
    DType {
        /// The tensor.
        tensor: String,
        /// Its declared element type.
        expected: DType,
        /// The array's numpy type string.
        descr: String,
        /// Its readable name.
        name: String,
        /// The numpy type to convert to.
        hint: &'static str,
    },
    /// The array's shape is not the tensor's.
    #[error(
        "tensor `{tensor}` has shape {} under these bindings, but the array has shape {}",
        shape_text(expected),
        shape_text(found)
    )]
    Shape {
        /// The tensor.
        tensor: String,
        /// The tensor's evaluated shape.
        expected: Vec<u64>,
        /// The array's shape.
        found: Vec<u64>,
    },
}

/// `(2, 3)`, `(5,)`, `()` — a shape as Python writes a tuple.
pub fn shape_text(shape: &[u64]) -> String {
    match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// numpy's type string for a tensor element type (little-endian, as `numpy.save` writes on
/// this machine); `bf16` as its raw bits, `<u2`.
pub fn descr(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::Bf16 => "<u2",
        DType::I32 => "<i4",
        DType::U32 => "<u4",
        DType::I64 => "<i8",
        DType::U64 => "<u8",
        DType::U8 => "|u1",
    }
}

/// What to write in `a.astype(...)` to get an array a tensor of `dtype` accepts.
fn astype_hint(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "numpy.float32",
        DType::F16 => "numpy.float16",
        DType::Bf16 => "ml_dtypes.bfloat16).view(numpy.uint16",
        DType::I32 => "numpy.int32",
        DType::U32 => "numpy.uint32",
        DType::I64 => "numpy.int64",
        DType::U64 => "numpy.uint64",
        DType::U8 => "numpy.uint8",
    }
}

/// Kind and size of a numpy type string without its byte-order character, as a readable name.
fn type_name(kind: char, size: usize) -> String {
    match kind {
        'f' => format!("float{}", size * 8),
        'i' => format!("int{}", size * 8),
        'u' => format!("uint{}", size * 8),
        'b' => "bool".to_string(),
        'c' => format!("complex{}", size * 8),
        'V' => format!("void{}", size * 8),
        other => format!("type `{other}{size}`"),
    }
}

/// A parsed `.npy` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyArray {
    /// numpy's type string as written (`<f4`, `>i4`, `|u1`, ...).
    pub descr: String,
    /// The element kind (`f`, `i`, `u`, ...).
    pub kind: char,
    /// Bytes per element.
    pub size: usize,
    /// The shape (row-major).
    pub shape: Vec<u64>,
    /// The elements in this machine's byte order, row-major.
    pub data: Vec<u8>,
}

/// The header of a `.npy` file: everything [`NpyArray::parse`] reads before the data, so a large
/// file can be checked against a tensor and then read straight into it
/// ([`TensorStore::npy_targets`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// numpy's type string as written (`<f4`, `>i4`, `|u1`, ...).
    pub descr: String,
    /// The element kind (`f`, `i`, `u`, ...).
    pub kind: char,
    /// Bytes per element.
    pub size: usize,
    /// The shape (row-major).
    pub shape: Vec<u64>,
    /// Whether the data is in the other byte order than this machine's (each element must be
    /// reversed, see [`NpyHeader::to_native`]).
    pub swapped: bool,
    /// Where the data starts in the file.
    pub data_offset: usize,
    /// Bytes of data the shape needs.
    pub data_len: usize,
}

/// The most header bytes [`NpyHeader::read`] accepts (numpy writes at most a few hundred).
const MAX_HEADER: usize = 1 << 20;

impl NpyHeader {
    /// Parses the header at the start of `bytes` (which may hold more than the header).
    pub fn parse(bytes: &[u8]) -> Result<NpyHeader, NpyError> {
        let bad = |m: &str| NpyError::Format(m.to_string());
        if bytes.len() < 10 || &bytes[..6] != MAGIC {
            return Err(bad("it does not start with the magic string \\x93NUMPY"));
        }
        let (len, start) = Self::length(bytes)?;
        let end = start
            .checked_add(len)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| bad("the header is longer than the file"))?;
        let header =
            std::str::from_utf8(&bytes[start..end]).map_err(|_| bad("the header is not text"))?;
        let descr = dict_str(header, "descr")?;
        let fortran = match dict_raw(header, "fortran_order")? {
            "False" => false,
            "True" => true,
            other => {
                return Err(NpyError::Format(format!(
                    "fortran_order is `{other}`, not True or False"
                )));
            }
        };
        let shape = parse_shape(dict_raw(header, "shape")?)?;
        let mut chars = descr.chars();
        let (order, kind) = match (chars.next(), chars.next()) {
            (Some(o @ ('<' | '>' | '|' | '=')), Some(k)) => (o, k),
            _ => {
                return Err(NpyError::Unsupported {
                    name: "a structured or unknown type".into(),
                    descr,
                });
            }
        };
        let size: usize = chars.as_str().parse().map_err(|_| NpyError::Unsupported {
            name: "a structured or unknown type".into(),
            descr: descr.clone(),
        })?;
        let data_len = shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| n.checked_mul(size))
            .ok_or_else(|| bad("the shape is too large for this machine"))?;
        if fortran && shape.iter().filter(|&&d| d > 1).count() > 1 {
            return Err(NpyError::FortranOrder);
        }
        let big = order == '>' || (order == '=' && cfg!(target_endian = "big"));
        Ok(NpyHeader {
            descr,
            kind,
            size,
            shape,
            swapped: size > 1 && big != cfg!(target_endian = "big"),
            data_offset: end,
            data_len,
        })
    }

    /// The header's length and where it starts, from the first 10 or 12 bytes.
    fn length(bytes: &[u8]) -> Result<(usize, usize), NpyError> {
        let (major, minor) = (bytes[6], bytes[7]);
        match major {
            1 => Ok((u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)),
            2 | 3 => {
                if bytes.len() < 12 {
                    return Err(NpyError::Format("the header length is cut off".into()));
                }
                Ok((
                    u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                    12,
                ))
            }
            _ => Err(NpyError::Format(format!(
                "format version {major}.{minor} is not one of 1.0, 2.0, 3.0"
            ))),
        }
    }

    /// Reads exactly the header from `r` (positioned at the start of a `.npy` file), leaving it
    /// at the first data byte.
    pub fn read(r: &mut impl std::io::Read) -> Result<NpyHeader, NpyError> {
        let io = |e: std::io::Error| NpyError::Format(format!("the header cannot be read: {e}"));
        let mut bytes = vec![0u8; 10];
        r.read_exact(&mut bytes).map_err(io)?;
        if &bytes[..6] != MAGIC {
            return Err(NpyError::Format(
                "it does not start with the magic string \\x93NUMPY".into(),
            ));
        }
        if matches!(bytes[6], 2 | 3) {
            bytes.resize(12, 0);
            r.read_exact(&mut bytes[10..]).map_err(io)?;
        }
        let (len, start) = Self::length(&bytes)?;
        if len > MAX_HEADER {
            return Err(NpyError::Format(format!(
                "the header claims {len} bytes; numpy writes a few hundred"
            )));
        }
        bytes.resize(start + len, 0);
        r.read_exact(&mut bytes[start..]).map_err(io)?;
        NpyHeader::parse(&bytes)
    }

    /// Puts data read as it is in the file (`data`, whole elements) into this machine's byte
    /// order.
    pub fn to_native(&self, data: &mut [u8]) {
        if self.swapped {
            for e in data.chunks_exact_mut(self.size) {
                e.reverse();
            }
        }
    }

    /// The tensor element type the data holds, as [`NpyArray::dtype`].
    pub fn dtype(&self) -> Option<DType> {
        dtype_of(self.kind, self.size)
    }
}

/// The tensor element type of numpy's kind and size (`u2` counts as `bf16` bits only where a
/// `bf16` tensor asks for it).
fn dtype_of(kind: char, size: usize) -> Option<DType> {
    Some(match (kind, size) {
        ('f', 4) => DType::F32,
        ('f', 2) => DType::F16,
        ('i', 4) => DType::I32,
        ('u', 4) => DType::U32,
        ('i', 8) => DType::I64,
        ('u', 8) => DType::U64,
        ('u', 1) => DType::U8,
        _ => return None,
    })
}

/// The message for `body` bytes after the header where `h` needs fewer: numpy writes exactly
/// the data the shape needs, so anything after it is a damaged or concatenated file.
pub fn trailing(body: usize, h: &NpyHeader) -> String {
    format!(
        "{} byte(s) after the data: a shape {} of {}-byte elements needs {} (numpy writes nothing after the data)",
        body - h.data_len,
        shape_text(&h.shape),
        h.size,
        h.data_len
    )
}

impl NpyArray {
    /// Parses the bytes of a `.npy` file (see the module docs).
    pub fn parse(bytes: &[u8]) -> Result<NpyArray, NpyError> {
        let h = NpyHeader::parse(bytes)?;
        let body = &bytes[h.data_offset..];
        if body.len() < h.data_len {
            return Err(NpyError::Format(format!(
                "the data is cut off: {} byte(s) for a shape {} of {}-byte elements, which needs {}",
                body.len(),
                shape_text(&h.shape),
                h.size,
                h.data_len
            )));
        }
        if body.len() > h.data_len {
            return Err(NpyError::Format(trailing(body.len(), &h)));
        }
        let mut data = body[..h.data_len].to_vec();
        h.to_native(&mut data);
        Ok(NpyArray {
            descr: h.descr,
            kind: h.kind,
            size: h.size,
            shape: h.shape,
            data,
        })
    }

    /// A readable name of the element type (`float32`, `int32`, ...).
    pub fn type_name(&self) -> String {
        type_name(self.kind, self.size)
    }

    /// The tensor element type the array holds (`u2` counts as `bf16` bits only where a `bf16`
    /// tensor asks for it, see [`TensorStore::load_npy`]).
    pub fn dtype(&self) -> Option<DType> {
        dtype_of(self.kind, self.size)
    }

    /// The elements as `i64`, if the array holds integers that all fit (for the bound contents
    /// of control tensors).
    pub fn to_i64s(&self) -> Option<Vec<i64>> {
        let d = &self.data;
        let n = self.size;
        match (self.kind, n) {
            ('i', 4) => Some(
                d.chunks_exact(4)
                    .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as i64)
                    .collect(),
            ),
            ('u', 4) => Some(
                d.chunks_exact(4)
                    .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as i64)
                    .collect(),
            ),
            ('i', 8) => Some(
                d.chunks_exact(8)
                    .map(|b| i64::from_ne_bytes(b.try_into().expect("8 bytes")))
                    .collect(),
            ),
            ('u', 8) => d
                .chunks_exact(8)
                .map(|b| i64::try_from(u64::from_ne_bytes(b.try_into().expect("8 bytes"))).ok())
                .collect(),
            ('u', 1) => Some(d.iter().map(|&b| b as i64).collect()),
            _ => None,
        }
    }
}

/// The raw text of the value of `key` in numpy's header dictionary. A key written twice is an
/// error: numpy would take the last one, and no file numpy writes has it.
fn dict_raw<'h>(header: &'h str, key: &str) -> Result<&'h str, NpyError> {
    let pat = format!("'{key}'");
    let alt = format!("\"{key}\"");
    // Occurrences of the quoted key followed by `:` (a key, not a string value).
    let keys: Vec<usize> = [&pat, &alt]
        .iter()
        .flat_map(|p| {
            header
                .match_indices(p.as_str())
                .filter(|(i, _)| header[i + p.len()..].trim_start().starts_with(':'))
                .map(|(i, _)| i)
        })
        .collect();
    let at = match keys[..] {
        [] => return Err(NpyError::Format(format!("the header has no `{key}`"))),
        [at] => at,
        _ => {
            return Err(NpyError::Format(format!(
                "the header has `{key}` {} times (numpy would read only the last one)",
                keys.len()
            )));
        }
    };
    let rest = header[at + pat.len()..].trim_start();
    let rest = rest
        .strip_prefix(':')
        .ok_or_else(|| NpyError::Format(format!("no `:` after `{key}` in the header")))?
        .trim_start();
    // The value ends at the comma or brace that closes it (a tuple has its own parentheses).
    let end = if rest.starts_with('(') {
        rest.find(')').map(|i| i + 1)
    } else if let Some(q) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') {
        rest[1..].find(q).map(|i| i + 2)
    } else {
        rest.find([',', '}'])
    };
    let end = end.ok_or_else(|| NpyError::Format(format!("the value of `{key}` is not closed")))?;
    Ok(rest[..end].trim())
}

/// A quoted string value of the header dictionary.
fn dict_str(header: &str, key: &str) -> Result<String, NpyError> {
    let raw = dict_raw(header, key)?;
    let inner = raw
        .strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .or_else(|| raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
        .ok_or_else(|| {
            NpyError::Format(format!(
                "`{key}` is `{raw}`, not a simple type string (structured arrays are not tensors)"
            ))
        })?;
    Ok(inner.to_string())
}

/// `(2, 3)` / `(5,)` / `()` to a shape.
fn parse_shape(raw: &str) -> Result<Vec<u64>, NpyError> {
    let inner = raw
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| NpyError::Format(format!("the shape `{raw}` is not a tuple")))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<u64>()
                .map_err(|_| NpyError::Format(format!("the shape `{raw}` has a bad extent `{s}`")))
        })
        .collect()
}

/// The bytes of a version 1.0 `.npy` file holding `data` (row-major, this machine's byte
/// order, little-endian) as an array of type `dtype` and shape `shape`, exactly as
/// `numpy.save` writes it: the header dictionary with spare room for the first extent to grow
/// (21 digits), padded with spaces and a newline to a multiple of 64 bytes.
pub fn encode(dtype: DType, shape: &[u64], data: &[u8]) -> Vec<u8> {
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        descr(dtype),
        shape_text(shape)
    );
    if let Some(first) = shape.first() {
        let digits = first.to_string().len();
        header.push_str(&" ".repeat(21usize.saturating_sub(digits)));
    }
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    if cfg!(target_endian = "big") && dtype.size_bytes() > 1 {
        for e in data.chunks_exact(dtype.size_bytes()) {
            out.extend(e.iter().rev());
        }
    } else {
        out.extend_from_slice(data);
    }
    out
}

impl TensorStore {
    /// Replaces tensor `name`'s contents with `array` (see the module docs: element type and
    /// shape must be the tensor's exactly; a `bf16` tensor takes `<u2` bits).
    pub fn load_npy(&mut self, name: &str, array: &NpyArray) -> Result<(), NpyError> {
        let t = self.check_npy(name, &array.descr, array.kind, array.size, &array.shape)?;
        self.bytes_mut(t).copy_from_slice(&array.data);
        Ok(())
    }

    /// Checks that a `.npy` file with `header` fits tensor `name` (as [`TensorStore::load_npy`]
    /// checks an array) and returns the tensor's index.
    pub fn check_npy_header(&self, name: &str, header: &NpyHeader) -> Result<u32, NpyError> {
        self.check_npy(name, &header.descr, header.kind, header.size, &header.shape)
    }

    /// The buffers of the tensors `inputs` name, each checked against its `.npy` header, to
    /// read the files' data straight into (then [`NpyHeader::to_native`]): one copy from the
    /// file, none through an intermediate array. Distinct names give disjoint buffers; a name
    /// given twice is an error.
    pub fn npy_targets(
        &mut self,
        inputs: &[(&str, &NpyHeader)],
    ) -> Result<Vec<&mut [u8]>, NpyError> {
        let mut order = Vec::with_capacity(inputs.len());
        for (i, (name, header)) in inputs.iter().enumerate() {
            let t = self.check_npy_header(name, header)?;
            if inputs[..i].iter().any(|(other, _)| other == name) {
                return Err(NpyError::Format(format!(
                    "tensor `{name}` is given more than one input file"
                )));
            }
            order.push(t);
        }
        let mut by_tensor: Vec<Option<&mut [u8]>> = self.buffers_mut(&order).collect();
        Ok(order
            .iter()
            .map(|&t| by_tensor[t as usize].take().expect("distinct tensors"))
            .collect())
    }

    fn check_npy(
        &self,
        name: &str,
        descr: &str,
        kind: char,
        size: usize,
        shape: &[u64],
    ) -> Result<u32, NpyError> {
        let t = self
            .index_of(name)
            .ok_or_else(|| NpyError::UnknownTensor(name.to_string()))?;
        let info = self.info(t);
        let fits = match info.dtype {
            DType::Bf16 => kind == 'u' && size == 2,
            d => dtype_of(kind, size) == Some(d),
        };
        if !fits {
            return Err(NpyError::DType {
                tensor: info.name.clone(),
                expected: info.dtype,
                descr: descr.to_string(),
                name: type_name(kind, size),
                hint: astype_hint(info.dtype),
            });
        }
        if shape != info.shape.as_slice() {
            return Err(NpyError::Shape {
                tensor: info.name.clone(),
                expected: info.shape.clone(),
                found: shape.to_vec(),
            });
        }
        Ok(t)
    }

    /// Tensor `name` as the bytes of a `.npy` file (see [`encode`]).
    ///
    /// Reads through `&self`: call it when no task is running.
    pub fn to_npy(&self, name: &str) -> Result<Vec<u8>, NpyError> {
        let t = self
            .index_of(name)
            .ok_or_else(|| NpyError::UnknownTensor(name.to_string()))?;
        let info = self.info(t);
        Ok(encode(info.dtype, &info.shape, self.bytes(t)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_print_as_python_tuples() {
        assert_eq!(shape_text(&[]), "()");
        assert_eq!(shape_text(&[5]), "(5,)");
        assert_eq!(shape_text(&[2, 3]), "(2, 3)");
    }

    #[test]
    fn header_is_padded_to_64_bytes_and_parses_back() {
        for shape in [vec![], vec![7], vec![2, 3, 4], vec![123_456, 1]] {
            let n: u64 = shape.iter().product();
            let data: Vec<u8> = (0..n as usize * 4).map(|i| i as u8).collect();
            let bytes = encode(DType::F32, &shape, &data);
            let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!((10 + hlen) % 64, 0, "{shape:?}");
            assert_eq!(bytes[10 + hlen - 1], b'\n');
            let a = NpyArray::parse(&bytes).unwrap();
            assert_eq!(a.shape, shape);
            assert_eq!(a.dtype(), Some(DType::F32));
            assert_eq!(a.data, data);
        }
    }

    #[test]
    fn malformed_files_are_errors_not_panics() {
        let good = encode(DType::I32, &[3], &[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
        for cut in 0..good.len() {
            let _ = NpyArray::parse(&good[..cut]);
        }
        assert!(matches!(
            NpyArray::parse(&good[..good.len() - 1]),
            Err(NpyError::Format(m)) if m.contains("cut off")
        ));
        let mut longer = good.clone();
        longer.extend_from_slice(&[7, 7]);
        assert_eq!(
            NpyArray::parse(&longer).unwrap_err().to_string(),
            "not a .npy file numpy wrote: 2 byte(s) after the data: a shape (3,) of 4-byte \
             elements needs 12 (numpy writes nothing after the data)"
        );
        assert!(NpyArray::parse(b"PK\x03\x04 not npy").is_err());
        // A key written twice: numpy reads the last; we refuse rather than read the first.
        let header = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), 'shape': (2,), }";
        let mut twice = b"\x93NUMPY\x01\x00".to_vec();
        twice.extend_from_slice(&(header.len() as u16).to_le_bytes());
        twice.extend_from_slice(header.as_bytes());
        twice.extend_from_slice(&[0; 12]);
        assert_eq!(
            NpyArray::parse(&twice).unwrap_err().to_string(),
            "not a .npy file numpy wrote: the header has `shape` 2 times (numpy would read only the last one)"
        );
        let mut v9 = good.clone();
        v9[6] = 9;
        assert!(matches!(NpyArray::parse(&v9), Err(NpyError::Format(m)) if m.contains("9.0")));
    }
}
