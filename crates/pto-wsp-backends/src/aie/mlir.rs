//! MLIR emission of a placed design, in mlir-aie's custom assembly form or the generic op form.
//!
//! Why: mlir-aie's tools take a design in the `aie` / `aiex` dialects; the custom form is what
//! they print and what its examples are written in, the generic form is what any MLIR tool
//! parses with `--allow-unregistered-dialect` (Debian's `mlir-opt`, which the tests run).
//!
//! Promise: both printers walk the same [`AieDesign`] in the same order (kernel declarations,
//! tiles by column then row, fifos in creation order, links, cores by tile, the runtime
//! sequence) and spell every op from the one table [`SPELLING`], so the two forms describe one
//! design. The spellings are one generation of mlir-aie's dialects, the one of its 2025 sources
//! (`aie.device(npu1_4col)`, `aie.objectfifo.acquire` returning an
//! `!aie.objectfifosubview` read with `aie.objectfifo.subview.access`, `aiex.runtime_sequence`,
//! `aiex.npu.dma_memcpy_nd` without the `x, y` operands, `aiex.npu.dma_wait`, `link_with` on
//! the core), as in `programming_examples/basic/vector_scalar_mul`,
//! `programming_examples/basic/matrix_multiplication/whole_array` (generated `aie.mlir` files)
//! and `test/npu-xrt/matrix_multiplication_using_cascade/aie_plainx1.mlir` of
//! `Xilinx/mlir-aie`. Same design, same bytes: no name depends on hash order.

use super::design::*;
use pto_wsp_ir::DType;
use pto_wsp_ir::value::Value;
use std::fmt::Write as _;

/// The op names and fixed words of one generation of mlir-aie's dialects.
pub struct Spelling {
    /// The device op.
    pub device: &'static str,
    /// The tile op.
    pub tile: &'static str,
    /// The fifo op.
    pub objectfifo: &'static str,
    /// The fifo's type constructor.
    pub fifo_type: &'static str,
    /// The link op.
    pub link: &'static str,
    /// The core op.
    pub core: &'static str,
    /// Acquire.
    pub acquire: &'static str,
    /// The acquire result's type constructor.
    pub subview_type: &'static str,
    /// Reading one object of an acquired subview.
    pub access: &'static str,
    /// Release.
    pub release: &'static str,
    /// The terminator of cores and the device.
    pub end: &'static str,
    /// The host program.
    pub sequence: &'static str,
    /// A host transfer.
    pub memcpy: &'static str,
    /// Waiting for a host transfer.
    pub wait: &'static str,
    /// The producer / consumer port words and numbers (`ObjectFifoPort`).
    pub ports: [(&'static str, u32); 2],
    /// The trip count of a core's outer loop ("forever", as mlir-aie's examples write it).
    pub forever: u64,
}

/// The spelling generation the emitter writes.
pub const SPELLING: Spelling = Spelling {
    device: "aie.device",
    tile: "aie.tile",
    objectfifo: "aie.objectfifo",
    fifo_type: "!aie.objectfifo",
    link: "aie.objectfifo.link",
    core: "aie.core",
    acquire: "aie.objectfifo.acquire",
    subview_type: "!aie.objectfifosubview",
    access: "aie.objectfifo.subview.access",
    release: "aie.objectfifo.release",
    end: "aie.end",
    sequence: "aiex.runtime_sequence",
    memcpy: "aiex.npu.dma_memcpy_nd",
    wait: "aiex.npu.dma_wait",
    ports: [("Produce", 0), ("Consume", 1)],
    forever: i64::MAX as u64,
};

/// The MLIR element type of `d`.
pub fn elem(d: DType) -> &'static str {
    match d {
        DType::F16 => "f16",
        DType::Bf16 => "bf16",
        DType::F32 => "f32",
        DType::I32 => "i32",
        DType::U32 => "ui32",
        DType::I64 => "i64",
        DType::U64 => "ui64",
        DType::U8 => "ui8",
    }
}

/// `memref<32x64xf32>`.
pub fn memref(o: &ObjType) -> String {
    let dims: Vec<String> = o.shape.iter().map(u64::to_string).collect();
    format!("memref<{}x{}>", dims.join("x"), elem(o.dtype))
}

fn host_memref(h: &HostArg) -> String {
    format!("memref<{}x{}>", h.elements(), elem(h.dtype))
}

fn arg_type(a: &ArgType) -> String {
    match a {
        ArgType::Object(o) => memref(o),
        ArgType::Scalar(s) => (*s).to_string(),
    }
}

/// A float as MLIR prints it: `3.000000e+00` when that reads back exactly, else the bits in
/// hexadecimal.
pub fn float_literal(v: f64, ty: &str) -> String {
    let s = format!("{v:.6e}");
    let (mant, exp) = s.split_once('e').expect("exponent");
    let e: i32 = exp.parse().expect("exponent");
    let text = format!("{mant}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    let exact = match ty {
        "f32" => text.parse::<f32>().ok().map(f32::to_bits) == Some((v as f32).to_bits()),
        _ => text.parse::<f64>().ok().map(f64::to_bits) == Some(v.to_bits()),
    };
    match (exact, ty) {
        (true, _) => text,
        (false, "f32") => format!("0x{:08X}", (v as f32).to_bits()),
        (false, _) => format!("0x{:016X}", v.to_bits()),
    }
}

/// A scalar constant's literal and type.
fn scalar_literal(v: &Value, ty: &str) -> String {
    match (ty, v) {
        ("f32" | "f64", Value::U64(bits)) => float_literal(f64::from_bits(*bits), ty),
        ("i1", Value::Bool(b)) => (if *b { "true" } else { "false" }).to_string(),
        (_, Value::I64(x)) => x.to_string(),
        (_, Value::U64(x)) => x.to_string(),
        (_, Value::Bool(b)) => u8::from(*b).to_string(),
    }
}

/// Prints `d` in the custom form (`generic == false`) or the generic op form; every core links
/// `object` (the kernels' object file).
pub fn print(d: &AieDesign, object: &str, generic: bool) -> String {
    let mut p = Printer {
        d,
        g: generic,
        out: String::new(),
        object,
    };
    p.module();
    p.out
}

struct Printer<'a> {
    d: &'a AieDesign,
    g: bool,
    out: String,
    object: &'a str,
}

fn tile_ssa(t: TileId) -> String {
    format!("%tile_{}_{}", t.0, t.1)
}

impl Printer<'_> {
    fn line(&mut self, indent: usize, s: &str) {
        for _ in 0..indent {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn module(&mut self) {
        let d = self.d;
        let s = &SPELLING;
        if self.g {
            self.line(0, "\"builtin.module\"() ({");
            self.line(
                1,
                &format!(
                    "\"{}\"() <{{device = {} : i32}}> ({{",
                    s.device, d.device.enum_value
                ),
            );
        } else {
            self.line(0, "module {");
            self.line(1, &format!("{}({}) {{", s.device, d.device.name));
        }
        for k in &d.kernels {
            let tys: Vec<String> = k.params.iter().map(arg_type).collect();
            if self.g {
                self.line(
                    2,
                    &format!(
                        "\"func.func\"() <{{function_type = ({}) -> (), sym_name = \"{}\", sym_visibility = \"private\"}}> ({{",
                        tys.join(", "),
                        k.name
                    ),
                );
                self.line(2, "}) : () -> ()");
            } else {
                self.line(
                    2,
                    &format!("func.func private @{}({})", k.name, tys.join(", ")),
                );
            }
        }
        for &t in &d.tiles {
            if self.g {
                self.line(
                    2,
                    &format!(
                        "{} = \"{}\"() <{{col = {} : i32, row = {} : i32}}> : () -> index",
                        tile_ssa(t),
                        s.tile,
                        t.0,
                        t.1
                    ),
                );
            } else {
                self.line(
                    2,
                    &format!("{} = {}({}, {})", tile_ssa(t), s.tile, t.0, t.1),
                );
            }
        }
        for f in &d.fifos {
            self.fifo(f);
        }
        for l in &d.links {
            self.link(l);
        }
        for c in &d.cores {
            self.core(c);
        }
        self.sequence();
        if self.g {
            self.line(2, &format!("\"{}\"() : () -> ()", s.end));
            self.line(1, "}) : () -> ()");
            self.line(0, "}) : () -> ()");
        } else {
            self.line(1, "}");
            self.line(0, "}");
        }
    }

    fn fifo(&mut self, f: &Fifo) {
        let s = &SPELLING;
        let ty = format!("{}<{}>", s.fifo_type, memref(&f.obj));
        let cons: Vec<String> = f.consumers.iter().map(|&c| tile_ssa(c)).collect();
        if self.g {
            let per: Vec<&str> = f.consumers.iter().map(|_| "[]").collect();
            let operands = std::iter::once(tile_ssa(f.producer))
                .chain(cons.iter().cloned())
                .collect::<Vec<_>>();
            let types: Vec<&str> = operands.iter().map(|_| "index").collect();
            self.line(
                2,
                &format!(
                    "\"{}\"({}) <{{dimensionsFromStreamPerConsumer = #aie<bd_dim_layout_array_array[{}]>, dimensionsToStream = #aie<bd_dim_layout_array[]>, disable_synchronization = false, elemNumber = {} : i32, elemType = {ty}, plio = false, sym_name = \"{}\", via_DMA = false}}> : ({}) -> ()",
                    s.objectfifo,
                    operands.join(", "),
                    per.join(", "),
                    f.depth,
                    f.name,
                    types.join(", ")
                ),
            );
        } else {
            self.line(
                2,
                &format!(
                    "{} @{}({}, {{{}}}, {} : i32) : {ty}",
                    s.objectfifo,
                    f.name,
                    tile_ssa(f.producer),
                    cons.join(", "),
                    f.depth
                ),
            );
        }
    }

    fn link(&mut self, l: &Link) {
        let names = |v: &[usize]| -> String {
            v.iter()
                .map(|&i| format!("@{}", self.d.fifos[i].name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let offs: Vec<String> = l.src_offsets.iter().map(u64::to_string).collect();
        let (ins, outs) = (names(&l.ins), names(&l.outs));
        let s = &SPELLING;
        if self.g {
            self.line(
                2,
                &format!(
                    "\"{}\"() <{{dst_offsets = [], fifoIns = [{ins}], fifoOuts = [{outs}], src_offsets = [{}]}}> : () -> ()",
                    s.link,
                    offs.join(", ")
                ),
            );
        } else {
            self.line(
                2,
                &format!("{} [{ins}] -> [{outs}]([{}] [])", s.link, offs.join(", ")),
            );
        }
    }

    fn core(&mut self, c: &Core) {
        let s = &SPELLING;
        let t = c.tile;
        let name = format!("%core_{}_{}", t.0, t.1);
        if self.g {
            self.line(
                2,
                &format!(
                    "{name} = \"{}\"({}) <{{stack_size = {} : i32}}> ({{",
                    s.core,
                    tile_ssa(t),
                    self.d.device.stack
                ),
            );
        } else {
            self.line(2, &format!("{name} = {}({}) {{", s.core, tile_ssa(t)));
        }
        let mut counts = vec![0u64, 1, s.forever];
        collect_counts(&c.program, &mut counts);
        let mut seen = Vec::new();
        for n in counts {
            if !seen.contains(&n) {
                seen.push(n);
                self.constant(3, &format!("%c{n}"), &n.to_string(), "index");
            }
        }
        let mut cx = CoreCx {
            next: 0,
            ivs: 0,
            held: Vec::new(),
        };
        let body = c.program.clone();
        self.loop_open(3, s.forever, &mut cx);
        self.steps(4, &body, &mut cx);
        self.loop_close(3);
        if self.g {
            self.line(3, &format!("\"{}\"() : () -> ()", s.end));
            self.line(
                2,
                &format!("}}) {{link_with = \"{}\"}} : (index) -> index", self.object),
            );
        } else {
            self.line(3, s.end);
            self.line(2, &format!("}} {{link_with = \"{}\"}}", self.object));
        }
    }

    fn constant(&mut self, indent: usize, name: &str, lit: &str, ty: &str) {
        if self.g {
            self.line(
                indent,
                &format!("{name} = \"arith.constant\"() <{{value = {lit} : {ty}}}> : () -> {ty}"),
            );
        } else {
            self.line(indent, &format!("{name} = arith.constant {lit} : {ty}"));
        }
    }

    fn loop_open(&mut self, indent: usize, count: u64, cx: &mut CoreCx) {
        let iv = format!("%iv{}", cx.ivs);
        cx.ivs += 1;
        if self.g {
            self.line(indent, &format!("\"scf.for\"(%c0, %c{count}, %c1) ({{"));
            self.line(indent, &format!("^bb0({iv}: index):"));
        } else {
            self.line(
                indent,
                &format!("scf.for {iv} = %c0 to %c{count} step %c1 {{"),
            );
        }
    }

    fn loop_close(&mut self, indent: usize) {
        if self.g {
            self.line(indent + 1, "\"scf.yield\"() : () -> ()");
            self.line(indent, "}) : (index, index, index) -> ()");
        } else {
            self.line(indent, "}");
        }
    }

    fn steps(&mut self, indent: usize, steps: &[Step], cx: &mut CoreCx) {
        let s = &SPELLING;
        for st in steps {
            match st {
                Step::Loop { count, body } => {
                    self.loop_open(indent, *count, cx);
                    self.steps(indent + 1, body, cx);
                    self.loop_close(indent);
                }
                Step::Acquire { fifo, port } => {
                    let f = &self.d.fifos[*fifo];
                    let (pw, pn) = port_word(*port);
                    let mr = memref(&f.obj);
                    let sv = format!("{}<{mr}>", s.subview_type);
                    let (a, b) = (format!("%{}", cx.next), format!("%{}", cx.next + 1));
                    cx.next += 2;
                    if self.g {
                        self.line(indent, &format!("{a} = \"{}\"() <{{objFifo_name = @{}, port = {pn} : i32, size = 1 : i32}}> : () -> {sv}", s.acquire, f.name));
                        self.line(
                            indent,
                            &format!(
                                "{b} = \"{}\"({a}) <{{index = 0 : i32}}> : ({sv}) -> {mr}",
                                s.access
                            ),
                        );
                    } else {
                        self.line(
                            indent,
                            &format!("{a} = {} @{}({pw}, 1) : {sv}", s.acquire, f.name),
                        );
                        self.line(indent, &format!("{b} = {} {a}[0] : {sv} -> {mr}", s.access));
                    }
                    cx.held.retain(|h| h.0 != (*fifo, *port));
                    cx.held.push(((*fifo, *port), b));
                }
                Step::Release { fifo, port } => {
                    let f = &self.d.fifos[*fifo];
                    let (pw, pn) = port_word(*port);
                    if self.g {
                        self.line(indent, &format!("\"{}\"() <{{objFifo_name = @{}, port = {pn} : i32, size = 1 : i32}}> : () -> ()", s.release, f.name));
                    } else {
                        self.line(indent, &format!("{} @{}({pw}, 1)", s.release, f.name));
                    }
                }
                Step::Call { kernel, args } => {
                    let k = &self.d.kernels[*kernel];
                    let mut vals = Vec::new();
                    for a in args {
                        match a {
                            CallArg::Object { fifo, port } => {
                                let v = cx
                                    .held
                                    .iter()
                                    .find(|h| h.0 == (*fifo, *port))
                                    .map(|h| h.1.clone())
                                    .expect("acquired before the call");
                                vals.push(v);
                            }
                            CallArg::Scalar(v, ty) => {
                                let name = format!("%{}", cx.next);
                                cx.next += 1;
                                self.constant(indent, &name, &scalar_literal(v, ty), ty);
                                vals.push(name);
                            }
                        }
                    }
                    let tys: Vec<String> = k.params.iter().map(arg_type).collect();
                    if self.g {
                        self.line(
                            indent,
                            &format!(
                                "\"func.call\"({}) <{{callee = @{}}}> : ({}) -> ()",
                                vals.join(", "),
                                k.name,
                                tys.join(", ")
                            ),
                        );
                    } else {
                        self.line(
                            indent,
                            &format!(
                                "func.call @{}({}) : ({}) -> ()",
                                k.name,
                                vals.join(", "),
                                tys.join(", ")
                            ),
                        );
                    }
                }
            }
        }
    }

    fn sequence(&mut self) {
        let s = &SPELLING;
        let d = self.d;
        let args: Vec<String> = d
            .host
            .iter()
            .enumerate()
            .map(|(i, h)| format!("%arg{i}: {}", host_memref(h)))
            .collect();
        if self.g {
            self.line(2, &format!("\"{}\"() ({{", s.sequence));
            self.line(2, &format!("^bb0({}):", args.join(", ")));
        } else {
            self.line(2, &format!("{}({}) {{", s.sequence, args.join(", ")));
        }
        let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        for (id, t) in d.transfers.iter().enumerate() {
            let f = &d.fifos[t.fifo];
            let h = &d.host[t.host];
            let mr = host_memref(h);
            let offsets = [0, 0, 0, t.offset];
            let token = if t.output { "issue_token = true, " } else { "" };
            if self.g {
                self.line(
                    3,
                    &format!(
                        "\"{}\"(%arg{}) <{{id = {id} : i64, {token}metadata = @{}, operandSegmentSizes = array<i32: 1, 0, 0, 0>, static_offsets = array<i64: {}>, static_sizes = array<i64: {}>, static_strides = array<i64: {}>}}> : ({mr}) -> ()",
                        s.memcpy,
                        t.host,
                        f.name,
                        list(&offsets),
                        list(&t.sizes),
                        list(&t.strides)
                    ),
                );
            } else {
                self.line(
                    3,
                    &format!(
                        "{}(%arg{}[{}][{}][{}]) {{id = {id} : i64, {token}metadata = @{}}} : {mr}",
                        s.memcpy,
                        t.host,
                        list(&offsets),
                        list(&t.sizes),
                        list(&t.strides),
                        f.name
                    ),
                );
            }
        }
        for t in d.transfers.iter().filter(|t| t.output) {
            let f = &d.fifos[t.fifo];
            if self.g {
                self.line(
                    3,
                    &format!("\"{}\"() <{{symbol = @{}}}> : () -> ()", s.wait, f.name),
                );
            } else {
                self.line(3, &format!("{} {{symbol = @{}}}", s.wait, f.name));
            }
        }
        if self.g {
            self.line(2, "}) : () -> ()");
        } else {
            self.line(2, "}");
        }
    }
}

struct CoreCx {
    next: usize,
    ivs: usize,
    /// (fifo, port) → the SSA value of the object held.
    held: Vec<((usize, Port), String)>,
}

fn port_word(p: Port) -> (&'static str, u32) {
    match p {
        Port::Produce => SPELLING.ports[0],
        Port::Consume => SPELLING.ports[1],
    }
}

fn collect_counts(steps: &[Step], out: &mut Vec<u64>) {
    for s in steps {
        if let Step::Loop { count, body } = s {
            out.push(*count);
            collect_counts(body, out);
        }
    }
}

/// The kernels' object file a design links: `OUT.kernels.o` for `OUT.mlir`.
pub fn object_name(stem: &str) -> String {
    let mut s = String::new();
    let _ = write!(s, "{stem}.kernels.o");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_read_back_exactly() {
        assert_eq!(float_literal(3.0, "f32"), "3.000000e+00");
        assert_eq!(float_literal(0.0, "f32"), "0.000000e+00");
        assert_eq!(float_literal(-0.125, "f32"), "-1.250000e-01");
        assert_eq!(float_literal(f64::from(0.1f32), "f32"), "1.000000e-01");
        assert_eq!(
            float_literal(f64::from(std::f32::consts::PI), "f32"),
            "0x40490FDB"
        );
    }
}
