//! Small vocabulary types shared by every part of the IR: element types of tensors, types of
//! scalar expressions, execution pools and parameter access modes.
//!
//! Promise: every type here has one spelling in the text format (`keyword()`), and `parse_keyword`
//! is its exact inverse.

macro_rules! keyword_impl {
    ($name:ident { $($var:ident = $kw:literal),+ $(,)? }) => {
        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$var),+];

            /// The keyword that spells this value in the text format.
            pub fn keyword(self) -> &'static str {
                match self { $($name::$var => $kw),+ }
            }

            /// The value spelled by `kw`, if any.
            pub fn parse_keyword(kw: &str) -> Option<$name> {
                match kw { $($kw => Some($name::$var),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.keyword())
            }
        }
    };
}
pub(crate) use keyword_impl;

macro_rules! keyword_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident = $kw:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$vm])* $var),+ }
        keyword_impl!($name { $($var = $kw),+ });
    };
}

keyword_enum! {
    /// Element type of a tensor.
    DType {
        /// IEEE half precision.
        F16 = "f16",
        /// bfloat16.
        Bf16 = "bf16",
        /// IEEE single precision.
        F32 = "f32",
        /// Signed 32-bit integer.
        I32 = "i32",
        /// Unsigned 32-bit integer.
        U32 = "u32",
        /// Signed 64-bit integer.
        I64 = "i64",
        /// Unsigned 64-bit integer.
        U64 = "u64",
        /// Unsigned byte.
        U8 = "u8",
    }
}

impl DType {
    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::F16 | DType::Bf16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::I64 | DType::U64 => 8,
        }
    }

    /// Whether elements are integers (so a tensor of this type can feed ragged lengths, sparse
    /// index arrays and slot loads).
    pub fn is_integer(self) -> bool {
        match self {
            DType::I32 | DType::U32 | DType::I64 | DType::U64 | DType::U8 => true,
            DType::F16 | DType::Bf16 | DType::F32 => false,
        }
    }

    /// Whether elements are floats (`f32`, `f16`, `bf16`).
    pub fn is_float(self) -> bool {
        !self.is_integer()
    }
}

keyword_enum! {
    /// Type of a scalar expression, symbol, slot or scalar kernel parameter.
    ScalarType {
        /// Boolean.
        Bool = "bool",
        /// Signed 64-bit integer (loop variables are always `i64`).
        I64 = "i64",
        /// Unsigned 64-bit integer.
        U64 = "u64",
    }
}

keyword_enum! {
    /// Type of a scalar *kernel parameter*: the expression types plus the float types a kernel
    /// may take (`eps: f64`, `scale: f32`). A float parameter's argument is a float literal
    /// (`1.0`, `1e-6`, `-0.5`); at run time every scalar parameter travels as 64 raw bits, a
    /// float one as the bits of its `f64` value ([`ParamType::carrier`]).
    ParamType {
        /// Boolean.
        Bool = "bool",
        /// Signed 64-bit integer.
        I64 = "i64",
        /// Unsigned 64-bit integer.
        U64 = "u64",
        /// IEEE single precision (passed as the `f64` bits of the literal; the kernel rounds).
        F32 = "f32",
        /// IEEE double precision.
        F64 = "f64",
    }
}

impl ParamType {
    /// Whether this is `f32` or `f64`.
    pub fn is_float(self) -> bool {
        matches!(self, ParamType::F32 | ParamType::F64)
    }

    /// The expression type whose 64 bits carry a value of this type at run time: itself for
    /// `bool` / `i64` / `u64`, `u64` (the `f64` bits) for the float types.
    pub fn carrier(self) -> ScalarType {
        match self {
            ParamType::Bool => ScalarType::Bool,
            ParamType::I64 => ScalarType::I64,
            ParamType::U64 | ParamType::F32 | ParamType::F64 => ScalarType::U64,
        }
    }
}

impl From<ScalarType> for ParamType {
    fn from(t: ScalarType) -> ParamType {
        match t {
            ScalarType::Bool => ParamType::Bool,
            ScalarType::I64 => ParamType::I64,
            ScalarType::U64 => ParamType::U64,
        }
    }
}

keyword_enum! {
    /// The pool of executors a kernel runs on (Ascend: cube = AIC, vector = AIV).
    ExecPool {
        /// Vector units.
        Vector = "vector",
        /// Cube (matrix) units.
        Cube = "cube",
        /// Either pool.
        Any = "any",
    }
}

keyword_enum! {
    /// How a kernel parameter uses its tile.
    Access {
        /// Read only.
        In = "in",
        /// Written (previous contents are not read).
        Out = "out",
        /// Read and written.
        InOut = "inout",
    }
}

impl Access {
    /// Whether the kernel reads the region.
    pub fn reads(self) -> bool {
        matches!(self, Access::In | Access::InOut)
    }

    /// Whether the kernel writes the region.
    pub fn writes(self) -> bool {
        matches!(self, Access::Out | Access::InOut)
    }
}
