//! Operand kinds: what an instruction's fields hold, and each kind's one binary encoding and
//! one text spelling.
//!
//! Why: the table ([`crate::isa`]) declares each operand by its Rust type; this module gives
//! every such type its encoding (fixed width where a table row holds it), its decoding (every
//! value checked, padding zero, so one program has one encoding), its text form and its parser.
//! Encoder, decoder, assembler and disassembler reach operands only through [`Operand`].
//!
//! Promises: `decode(encode(x)) == x` for every value; `decode` never panics and reports the
//! byte offset of what is wrong; ids are below [`MAX_ID`] (`0xFFFF_FFFF` marks "none").

use crate::binary::DecodeError;
use crate::text::{Arg, AsmError, ParseCx, PrintCx};
use pto_wsp_ir::DType;

/// The largest id plus one: `0xFFFF_FFFF` is reserved for "none".
pub const MAX_ID: u32 = u32::MAX;

/// Most kernels a kernel set (`CA_AFFINITY`, `SY_BARRIER`) may name.
pub const MAX_SET: usize = 4096;

/// Most dimensions of a shape or a box.
pub const MAX_RANK: usize = 4;

/// What an operand holds (for listings and the layout documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An unsigned 32-bit number.
    U32,
    /// An unsigned 64-bit number.
    U64,
    /// An id in a namespace.
    Id(Ns),
    /// An entry symbol (an offset into the string table).
    Symbol,
    /// A value of the named enum.
    Enum(&'static str),
    /// A tensor id or none.
    OptTensor,
    /// An element type and dimensions, or none.
    Shape,
    /// A box of a tensor, or none.
    Box,
    /// An immediate or an element of a tensor.
    ScalarRef,
    /// An immediate or a loop iterator.
    IterVal,
    /// A list of kernels.
    KernelSet,
}

impl Kind {
    /// Whether every value has the same encoded width (so a table row may hold it).
    pub fn fixed_width(self) -> bool {
        !matches!(self, Kind::ScalarRef | Kind::KernelSet)
    }
}

/// The namespaces of ids. Kernel ids are per graph; every other namespace is the program's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ns {
    /// Task graphs.
    Graph = 0,
    /// Kernel nodes (per graph).
    Kernel = 1,
    /// Tensors (allocations).
    Tensor = 2,
    /// Events of `SY_SIGNAL` / `SY_WAIT`.
    Event = 3,
    /// Streams of `TG_LAUNCH`.
    Stream = 4,
    /// Barriers of `SY_BARRIER`.
    Barrier = 5,
    /// Partitions of `CA_PARTITION`.
    Partition = 6,
    /// Notifications of `SY_NOTIFY` / `SY_WAIT_NOTIFY`.
    Notify = 7,
    /// Devices.
    Device = 8,
    /// Loop iterators of `CF_LOOP`.
    Iterator = 9,
}

impl Ns {
    /// Every namespace, by code.
    pub const ALL: [Ns; 10] = [
        Ns::Graph,
        Ns::Kernel,
        Ns::Tensor,
        Ns::Event,
        Ns::Stream,
        Ns::Barrier,
        Ns::Partition,
        Ns::Notify,
        Ns::Device,
        Ns::Iterator,
    ];

    /// The namespace with this code.
    pub fn from_code(c: u8) -> Option<Ns> {
        Ns::ALL.get(c as usize).copied()
    }

    /// The word for one of its ids, in messages (`graph`, `kernel`, ...).
    pub fn word(self) -> &'static str {
        match self {
            Ns::Graph => "graph",
            Ns::Kernel => "kernel",
            Ns::Tensor => "tensor",
            Ns::Event => "event",
            Ns::Stream => "stream",
            Ns::Barrier => "barrier",
            Ns::Partition => "partition",
            Ns::Notify => "notification",
            Ns::Device => "device",
            Ns::Iterator => "iterator",
        }
    }
}

/// Writes operands: the section's bytes and the string table they refer to.
pub(crate) struct Writer<'a> {
    pub(crate) out: &'a mut Vec<u8>,
    pub(crate) strings: &'a mut crate::binary::StringTable,
}

impl Writer<'_> {
    pub(crate) fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Reads operands from one section of the input, at absolute offsets.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
    strings: &'a crate::binary::Strings<'a>,
}

impl<'a> Reader<'a> {
    /// A reader of `data[pos..end]` (offsets stay absolute).
    pub(crate) fn new(
        data: &'a [u8],
        pos: usize,
        end: usize,
        strings: &'a crate::binary::Strings<'a>,
    ) -> Reader<'a> {
        Reader {
            data,
            pos,
            end,
            strings,
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.end
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.end - self.pos < n {
            return Err(DecodeError::new(
                self.pos,
                format!(
                    "needs {n} byte(s), but the section ends {} byte(s) later",
                    self.end - self.pos
                ),
            ));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A value that must be zero (padding, unused slots).
    fn zero32(&mut self, what: &str) -> Result<(), DecodeError> {
        let at = self.pos;
        match self.u32()? {
            0 => Ok(()),
            v => Err(DecodeError::new(at, format!("{what} must be 0, not {v}"))),
        }
    }

    fn id(&mut self, ns: Ns) -> Result<u32, DecodeError> {
        let at = self.pos;
        let v = self.u32()?;
        if v == MAX_ID {
            return Err(DecodeError::new(
                at,
                format!("{} id {v} is reserved (it means none)", ns.word()),
            ));
        }
        Ok(v)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let at = self.pos;
        let off = self.u32()?;
        self.strings.get(off).map_err(|m| DecodeError::new(at, m))
    }
}

/// A field type of the instruction table (see the module docs).
pub(crate) trait Operand: Sized + Clone + PartialEq {
    /// What it holds.
    const KIND: Kind;
    /// Encoded width in bytes (0 when it varies).
    const WIDTH: usize;
    /// Appends the encoding.
    fn encode(&self, w: &mut Writer<'_>);
    /// Reads one value, checked.
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
    /// The text form.
    fn print(&self, p: &PrintCx<'_>) -> String;
    /// Parses the text form.
    fn parse(arg: &Arg<'_>, cx: &mut ParseCx<'_>) -> Result<Self, AsmError>;
    /// Calls `f` on every id the value names.
    fn visit_ids(&self, _f: &mut dyn FnMut(Ns, u32)) {}
}

impl Operand for u32 {
    const KIND: Kind = Kind::U32;
    const WIDTH: usize = 4;
    fn encode(&self, w: &mut Writer<'_>) {
        w.u32(*self);
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u32()
    }
    fn print(&self, _: &PrintCx<'_>) -> String {
        self.to_string()
    }
    fn parse(arg: &Arg<'_>, _: &mut ParseCx<'_>) -> Result<Self, AsmError> {
        let v = arg.number()?;
        u32::try_from(v).map_err(|_| arg.error(format!("{v} does not fit 32 bits")))
    }
}

impl Operand for u64 {
    const KIND: Kind = Kind::U64;
    const WIDTH: usize = 8;
    fn encode(&self, w: &mut Writer<'_>) {
        w.u64(*self);
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u64()
    }
    fn print(&self, _: &PrintCx<'_>) -> String {
        self.to_string()
    }
    fn parse(arg: &Arg<'_>, _: &mut ParseCx<'_>) -> Result<Self, AsmError> {
        arg.bits64()
    }
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $ns:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl Operand for $name {
            const KIND: Kind = Kind::Id(Ns::$ns);
            const WIDTH: usize = 4;
            fn encode(&self, w: &mut Writer<'_>) {
                w.u32(self.0);
            }
            fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                r.id(Ns::$ns).map($name)
            }
            fn print(&self, p: &PrintCx<'_>) -> String {
                p.id(Ns::$ns, self.0, false)
            }
            fn parse(arg: &Arg<'_>, cx: &mut ParseCx<'_>) -> Result<Self, AsmError> {
                cx.id(Ns::$ns, arg).map($name)
            }
            fn visit_ids(&self, f: &mut dyn FnMut(Ns, u32)) {
                f(Ns::$ns, self.0);
            }
        }
    };
}

id_type!(
    /// A task graph's id.
    GraphId, Graph
);
id_type!(
    /// A kernel node's id (unique within its graph).
    KernelId, Kernel
);
id_type!(
    /// A tensor's (allocation's) id.
    TensorId, Tensor
);
id_type!(
    /// An event's id.
    EventId, Event
);
id_type!(
    /// A stream's id.
    StreamId, Stream
);
id_type!(
    /// A barrier's id.
    BarrierId, Barrier
);
id_type!(
    /// A core partition's id.
    PartitionId, Partition
);
id_type!(
    /// A notification's id.
    NotifyId, Notify
);
id_type!(
    /// A device's index.
    DeviceId, Device
);
id_type!(
    /// A loop iterator's id.
    IterId, Iterator
);

/// An entry symbol: a kernel's name in the kernel library.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(pub String);

impl Operand for Symbol {
    const KIND: Kind = Kind::Symbol;
    const WIDTH: usize = 4;
    fn encode(&self, w: &mut Writer<'_>) {
        let off = w.strings.intern(&self.0);
        w.u32(off);
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let at = r.pos();
        let s = r.string()?;
        if s.is_empty() {
            return Err(DecodeError::new(at, "an entry symbol is empty"));
        }
        Ok(Symbol(s))
    }
    fn print(&self, _: &PrintCx<'_>) -> String {
        crate::text::quote_symbol(&self.0)
    }
    fn parse(arg: &Arg<'_>, _: &mut ParseCx<'_>) -> Result<Self, AsmError> {
        arg.symbol().map(Symbol)
    }
}

macro_rules! isa_enum {
    ($(#[$doc:meta])* $name:ident, $what:literal { $( $(#[$vdoc:meta])* $var:ident = $code:literal, $kw:literal; )* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vdoc])* $var = $code, )*
        }

        impl $name {
            /// Every value, by code.
            pub const ALL: &'static [$name] = &[$($name::$var),*];

            /// The value with this code.
            pub fn from_code(c: u8) -> Option<$name> {
                match c { $( $code => Some($name::$var), )* _ => None }
            }

            /// The keyword of the text syntax.
            pub fn keyword(self) -> &'static str {
                match self { $( $name::$var => $kw, )* }
            }

            /// The value spelled `kw`.
            pub fn parse_keyword(kw: &str) -> Option<$name> {
                match kw { $( $kw => Some($name::$var), )* _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.keyword())
            }
        }

        impl Operand for $name {
            const KIND: Kind = Kind::Enum($what);
            const WIDTH: usize = 1;
            fn encode(&self, w: &mut Writer<'_>) {
                w.u8(*self as u8);
            }
            fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                let at = r.pos();
                let c = r.u8()?;
                $name::from_code(c).ok_or_else(|| {
                    DecodeError::new(at, format!(concat!("{} is not a ", $what), c))
                })
            }
            fn print(&self, _: &PrintCx<'_>) -> String {
                self.keyword().to_string()
            }
            fn parse(arg: &Arg<'_>, _: &mut ParseCx<'_>) -> Result<Self, AsmError> {
                $name::parse_keyword(arg.text).ok_or_else(|| {
                    let all: Vec<&str> = $name::ALL.iter().map(|v| v.keyword()).collect();
                    arg.error(format!(
                        concat!("expected a ", $what, " ({}), found `{}`"),
                        all.join(", "),
                        arg.text
                    ))
                })
            }
        }
    };
}

isa_enum!(
    /// The cores a kernel's instances run on.
    CoreType, "core type" {
        /// Cube cores only.
        Aic = 0, "AIC";
        /// Vector cores only.
        Aiv = 1, "AIV";
        /// Cube and vector stages: runs on either kind of core.
        AicAiv = 2, "AIC_AIV";
        /// The AICPU.
        Aicpu = 3, "AICPU";
    }
);

isa_enum!(
    /// What a dependency edge means.
    DependencyType, "dependency type" {
        /// `dst` starts after `src` completes.
        After = 0, "AFTER";
        /// As `AFTER`, and what `src` wrote of the tensor is visible to `dst`.
        Data = 1, "DATA";
        /// Every kernel defined up to `src` completes before any defined from `dst` starts.
        Barrier = 2, "BARRIER";
        /// A hint: not an ordering; the scheduler prefers `dst` next once `src` completes.
        Soft = 3, "SOFT";
    }
);

isa_enum!(
    /// Where an allocation lives (a hint on the CPU simulation).
    MemLocation, "memory location" {
        /// Global memory.
        Gm = 0, "GM";
        /// L2-resident.
        L2 = 1, "L2";
        /// High-bandwidth memory.
        Hbm = 2, "HBM";
        /// A buffer shared across kernels.
        Shared = 3, "SHARED";
    }
);

isa_enum!(
    /// What a memory fence makes visible.
    FenceScope, "fence scope" {
        /// Visible to every core of the device.
        Device = 0, "DEVICE";
        /// Flush L2.
        L2 = 1, "L2";
        /// A full memory barrier.
        Gm = 2, "GM";
    }
);

isa_enum!(
    /// How the kernels of a set are placed.
    AffinityType, "affinity type" {
        /// On the same cores.
        Colocate = 0, "COLOCATE";
        /// On different cores.
        Separate = 1, "SEPARATE";
        /// In one L2 group.
        L2Share = 2, "L2_SHARE";
    }
);

isa_enum!(
    /// How a kernel uses a bound argument (an extension: the runtime checks that no two
    /// kernels running at once write what the other touches).
    Access, "access" {
        /// Read only.
        In = 0, "in";
        /// Written only.
        Out = 1, "out";
        /// Read and written.
        InOut = 2, "inout";
    }
);

isa_enum!(
    /// How a kernel's `blockDim` instances share a bound argument (an extension).
    Split, "split" {
        /// Every instance sees the whole binding.
        Whole = 0, "WHOLE";
        /// Instance `b` of `n` sees rows `⌊b·R/n⌋ .. ⌊(b+1)·R/n⌋` of the binding's `R` rows.
        Rows = 1, "ROWS";
    }
);

impl Access {
    /// The IR's access mode.
    pub fn ir(self) -> pto_wsp_ir::Access {
        match self {
            Access::In => pto_wsp_ir::Access::In,
            Access::Out => pto_wsp_ir::Access::Out,
            Access::InOut => pto_wsp_ir::Access::InOut,
        }
    }

    /// Whether the kernel writes the argument.
    pub fn writes(self) -> bool {
        !matches!(self, Access::In)
    }
}

impl Operand for Option<TensorId> {
    const KIND: Kind = Kind::OptTensor;
    const WIDTH: usize = 4;
    fn encode(&self, w: &mut Writer<'_>) {
        w.u32(self.map_or(MAX_ID, |t| t.0));
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match r.u32()? {
            MAX_ID => None,
            v => Some(TensorId(v)),
        })
    }
    fn print(&self, p: &PrintCx<'_>) -> String {
        match self {
            None => "-".into(),
            Some(t) => p.id(Ns::Tensor, t.0, false),
        }
    }
    fn parse(arg: &Arg<'_>, cx: &mut ParseCx<'_>) -> Result<Self, AsmError> {
        if arg.text == "-" {
            return Ok(None);
        }
        cx.id(Ns::Tensor, arg).map(|t| Some(TensorId(t)))
    }
    fn visit_ids(&self, f: &mut dyn FnMut(Ns, u32)) {
        if let Some(t) = self {
            f(Ns::Tensor, t.0);
        }
    }
}

/// A typed allocation: element type and dimensions (row-major, 1 to [`MAX_RANK`] of them).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// The element type.
    pub dtype: DType,
    /// The extents.
    pub dims: Vec<u32>,
}

impl Shape {
    /// Size in bytes (`None` past 2^64).
    pub fn bytes(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(self.dtype.size_bytes() as u64, |a, &d| {
                a.checked_mul(d as u64)
            })
    }
}

fn dtype_code(d: DType) -> u8 {
    DType::ALL.iter().position(|&x| x == d).unwrap_or(0) as u8
}

impl Operand for Option<Shape> {
    const KIND: Kind = Kind::Shape;
    const WIDTH: usize = 2 + 4 * MAX_RANK;
    fn encode(&self, w: &mut Writer<'_>) {
        match self {
            None => {
                w.u8(0xFF);
                w.u8(0);
                for _ in 0..MAX_RANK {
                    w.u32(0);
                }
            }
            Some(s) => {
                w.u8(dtype_code(s.dtype));
                w.u8(s.dims.len() as u8);
                for i in 0..MAX_RANK {
                    w.u32(s.dims.get(i).copied().unwrap_or(0));
                }
            }
        }
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let at = r.pos();
        let code = r.u8()?;
        let rank_at = r.pos();
        let rank = r.u8()? as usize;
        if code == 0xFF {
            if rank != 0 {
                return Err(DecodeError::new(
                    rank_at,
                    "an untyped allocation has rank 0",
                ));
            }
            for _ in 0..MAX_RANK {
                r.zero32("an unused dimension")?;
            }
            return Ok(None);
        }
        let dtype = *DType::ALL
            .get(code as usize)
            .ok_or_else(|| DecodeError::new(at, format!("{code} is not an element type")))?;
        if !(1..=MAX_RANK).contains(&rank) {
            return Err(DecodeError::new(
                rank_at,
                format!("rank {rank} is not 1 to {MAX_RANK}"),
            ));
        }
        let mut dims = Vec::with_capacity(rank);
        for i in 0..MAX_RANK {
            if i < rank {
                let d_at = r.pos();
                let d = r.u32()?;
                if d == 0 {
                    return Err(DecodeError::new(d_at, format!("dimension {i} is 0")));
                }
                dims.push(d);
            } else {
                r.zero32("an unused dimension")?;
            }
        }
        Ok(Some(Shape { dtype, dims }))
    }
    fn print(&self, _: &PrintCx<'_>) -> String {
        match self {
            None => "-".into(),
            Some(s) => {
                let d: Vec<String> = s.dims.iter().map(u32::to_string).collect();
                format!("{}[{}]", s.dtype, d.join(", "))
            }
        }
    }
    fn parse(arg: &Arg<'_>, _: &mut ParseCx<'_>) -> Result<Self, AsmError> {
        arg.shape()
    }
}

/// A box of a tensor: per dimension a start and a size (at least 1), 1 to [`MAX_RANK`] of
/// them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BoxRegion {
    /// First index per dimension.
    pub start: Vec<u32>,
    /// Extent per dimension.
    pub size: Vec<u32>,
}

impl Operand for Option<BoxRegion> {
    const KIND: Kind = Kind::Box;
    const WIDTH: usize = 1 + 8 * MAX_RANK;
    fn encode(&self, w: &mut Writer<'_>) {
        let rank = self.as_ref().map_or(0, |b| b.start.len());
        w.u8(rank as u8);
        for i in 0..MAX_RANK {
            let (s, n) = self
                .as_ref()
                .and_then(|b| Some((*b.start.get(i)?, *b.size.get(i)?)))
                .unwrap_or((0, 0));
            w.u32(s);
            w.u32(n);
        }
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let at = r.pos();
        let rank = r.u8()? as usize;
        if rank > MAX_RANK {
            return Err(DecodeError::new(
                at,
                format!("box rank {rank} is above {MAX_RANK}"),
            ));
        }
        let mut b = BoxRegion {
            start: Vec::with_capacity(rank),
            size: Vec::with_capacity(rank),
        };
        for i in 0..MAX_RANK {
            if i < rank {
                b.start.push(r.u32()?);
                let n_at = r.pos();
                let n = r.u32()?;
                if n == 0 {
                    return Err(DecodeError::new(n_at, format!("box size {i} is 0")));
                }
                b.size.push(n);
            } else {
                r.zero32("an unused box start")?;
                r.zero32("an unused box size")?;
            }
        }
        Ok((rank > 0).then_some(b))
    }
    fn print(&self, _: &PrintCx<'_>) -> String {
        match self {
            None => "-".into(),
            Some(b) => {
                let d: Vec<String> = b
                    .start
                    .iter()
                    .zip(&b.size)
                    .map(|(s, n)| format!("{s}+:{n}"))
                    .collect();
                format!("[{}]", d.join(", "))
            }
        }
    }
    fn parse(arg: &Arg<'_>, _: &mut ParseCx<'_>) -> Result<Self, AsmError> {
        arg.boxed()
    }
}

/// A condition or count: an immediate, or an element of a tensor that kernels may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarRef {
    /// A constant.
    Imm(u64),
    /// Element `index` of `tensor` (of its element type; bytes when untyped).
    Elem {
        /// The tensor.
        tensor: TensorId,
        /// The element's index (row-major).
        index: u32,
    },
}

impl Operand for ScalarRef {
    const KIND: Kind = Kind::ScalarRef;
    const WIDTH: usize = 0;
    fn encode(&self, w: &mut Writer<'_>) {
        match *self {
            ScalarRef::Imm(v) => {
                w.u8(0);
                w.u64(v);
            }
            ScalarRef::Elem { tensor, index } => {
                w.u8(1);
                w.u32(tensor.0);
                w.u32(index);
            }
        }
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let at = r.pos();
        match r.u8()? {
            0 => Ok(ScalarRef::Imm(r.u64()?)),
            1 => Ok(ScalarRef::Elem {
                tensor: TensorId(r.id(Ns::Tensor)?),
                index: r.u32()?,
            }),
            t => Err(DecodeError::new(
                at,
                format!("scalar kind {t} is neither 0 (immediate) nor 1 (tensor element)"),
            )),
        }
    }
    fn print(&self, p: &PrintCx<'_>) -> String {
        match *self {
            ScalarRef::Imm(v) => v.to_string(),
            ScalarRef::Elem { tensor, index } => {
                let t = p.id(Ns::Tensor, tensor.0, true);
                if index == 0 {
                    t
                } else {
                    format!("{t}[{index}]")
                }
            }
        }
    }
    fn parse(arg: &Arg<'_>, cx: &mut ParseCx<'_>) -> Result<Self, AsmError> {
        if arg.is_number() {
            return arg.bits64().map(ScalarRef::Imm);
        }
        let (name, index) = arg.indexed()?;
        let tensor = TensorId(cx.id(Ns::Tensor, &name)?);
        Ok(ScalarRef::Elem { tensor, index })
    }
    fn visit_ids(&self, f: &mut dyn FnMut(Ns, u32)) {
        if let ScalarRef::Elem { tensor, .. } = self {
            f(Ns::Tensor, tensor.0);
        }
    }
}

/// The iteration of `TG_INVOKE`: an immediate or the current value of a loop iterator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IterVal {
    /// A constant.
    Imm(u32),
    /// The iterator of an enclosing `CF_LOOP`.
    Iter(IterId),
}

impl Operand for IterVal {
    const KIND: Kind = Kind::IterVal;
    const WIDTH: usize = 5;
    fn encode(&self, w: &mut Writer<'_>) {
        match *self {
            IterVal::Imm(v) => {
                w.u8(0);
                w.u32(v);
            }
            IterVal::Iter(i) => {
                w.u8(1);
                w.u32(i.0);
            }
        }
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let at = r.pos();
        match r.u8()? {
            0 => Ok(IterVal::Imm(r.u32()?)),
            1 => Ok(IterVal::Iter(IterId(r.id(Ns::Iterator)?))),
            t => Err(DecodeError::new(
                at,
                format!("iteration kind {t} is neither 0 (immediate) nor 1 (iterator)"),
            )),
        }
    }
    fn print(&self, p: &PrintCx<'_>) -> String {
        match *self {
            IterVal::Imm(v) => v.to_string(),
            IterVal::Iter(i) => p.id(Ns::Iterator, i.0, true),
        }
    }
    fn parse(arg: &Arg<'_>, cx: &mut ParseCx<'_>) -> Result<Self, AsmError> {
        if arg.is_number() {
            let v = arg.number()?;
            return u32::try_from(v)
                .map(IterVal::Imm)
                .map_err(|_| arg.error(format!("{v} does not fit 32 bits")));
        }
        cx.id(Ns::Iterator, arg).map(|i| IterVal::Iter(IterId(i)))
    }
    fn visit_ids(&self, f: &mut dyn FnMut(Ns, u32)) {
        if let IterVal::Iter(i) = self {
            f(Ns::Iterator, i.0);
        }
    }
}

/// A list of kernels of the current graph (`{A, B, ...}`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelSet(pub Vec<KernelId>);

impl Operand for KernelSet {
    const KIND: Kind = Kind::KernelSet;
    const WIDTH: usize = 0;
    fn encode(&self, w: &mut Writer<'_>) {
        w.u32(self.0.len() as u32);
        for k in &self.0 {
            w.u32(k.0);
        }
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let at = r.pos();
        let n = r.u32()? as usize;
        if n > MAX_SET {
            return Err(DecodeError::new(
                at,
                format!("a kernel set of {n} kernels is above the limit of {MAX_SET}"),
            ));
        }
        let mut v = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            v.push(KernelId(r.id(Ns::Kernel)?));
        }
        Ok(KernelSet(v))
    }
    fn print(&self, p: &PrintCx<'_>) -> String {
        let v: Vec<String> = self
            .0
            .iter()
            .map(|k| p.id(Ns::Kernel, k.0, false))
            .collect();
        format!("{{{}}}", v.join(", "))
    }
    fn parse(arg: &Arg<'_>, cx: &mut ParseCx<'_>) -> Result<Self, AsmError> {
        let items = arg.braced()?;
        if items.len() > MAX_SET {
            return Err(arg.error(format!(
                "a kernel set of {} kernels is above the limit of {MAX_SET}",
                items.len()
            )));
        }
        let mut v = Vec::with_capacity(items.len());
        for a in &items {
            v.push(KernelId(cx.id(Ns::Kernel, a)?));
        }
        Ok(KernelSet(v))
    }
    fn visit_ids(&self, f: &mut dyn FnMut(Ns, u32)) {
        for k in &self.0 {
            f(Ns::Kernel, k.0);
        }
    }
}
