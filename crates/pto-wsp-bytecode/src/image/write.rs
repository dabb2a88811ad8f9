//! The writer half of the byte layout: an [`Image`] to bytes, section by section in the order
//! `docs/BYTECODE.md` gives (header, code, tables, schedule, names, read locations).

use super::{DNodeRec, Image};
use crate::format::{
    FLAG_DEBUG_NAMES, FLAG_READ_LOCS, FLAG_STMT_LOCS, HEADER_LEN, MAGIC, TENSOR_ARRAY, VERSION,
    dnode,
};

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn name(&mut self, s: &str) {
        // Names longer than 255 bytes are cut at a character boundary.
        let mut end = s.len().min(255);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u8(end as u8);
        self.0.extend_from_slice(&s.as_bytes()[..end]);
    }
    fn dnode(&mut self, n: &DNodeRec) {
        match n {
            DNodeRec::RoundRobin(k) => {
                self.u8(dnode::ROUND_ROBIN);
                self.u64(*k);
            }
            DNodeRec::Affinity(s) => {
                self.u8(dnode::AFFINITY);
                self.u8(*s);
            }
            DNodeRec::Hash(s) => {
                self.u8(dnode::HASH);
                self.u8(*s);
            }
            DNodeRec::Threshold {
                metric,
                levels,
                otherwise,
            } => {
                self.u8(dnode::THRESHOLD);
                self.u8(*metric);
                self.u8(levels.len() as u8);
                for (b, n) in levels {
                    self.u64(*b as u64);
                    self.dnode(n);
                }
                self.dnode(otherwise);
            }
            DNodeRec::StaticPartition(starts) => {
                self.u8(dnode::STATIC_PARTITION);
                self.u16(starts.len() as u16);
                for s in starts {
                    self.u64(*s);
                }
            }
            DNodeRec::WorkSteal => self.u8(dnode::WORK_STEAL),
        }
    }
}

impl Image {
    /// The bytes. Counts must fit their fields (the encoder checks).
    pub(crate) fn write(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(1024));
        let len_at = self.write_header(&mut w);
        debug_assert_eq!(w.0.len(), HEADER_LEN);
        self.write_code(&mut w);
        self.write_tables(&mut w);
        self.write_sched(&mut w);
        for &(p, c) in &self.channels {
            w.u8(p);
            w.u8(c);
        }
        self.write_names(&mut w);
        for table in [&self.read_locs, &self.stmt_locs] {
            if !table.is_empty() {
                w.u32(table.len() as u32);
                for &(pc, loc) in table {
                    w.u32(pc);
                    w.u32(loc.start);
                    w.u32(loc.end);
                }
            }
        }
        let total = w.0.len() as u32;
        w.0[len_at..len_at + 4].copy_from_slice(&total.to_le_bytes());
        w.0
    }

    /// The header, with the total length left 0; returns where that length goes.
    fn write_header(&self, w: &mut Writer) -> usize {
        w.0.extend_from_slice(&MAGIC);
        w.u32(VERSION);
        w.u32(self.insns.len() as u32);
        w.u32(self.axes.len() as u32);
        w.u32(self.kernels.len() as u32);
        w.u32(self.tensors.len() as u32);
        w.u16(self.symbols.len() as u16);
        w.u16(self.slots.len() as u16);
        w.u16(self.reg_types.len() as u16);
        w.u16(self.exprs.len() as u16);
        w.u16(self.ops.len() as u16);
        w.u16(self.consts.len() as u16);
        w.u16(self.regions.len() as u16);
        w.u16(self.loops.len() as u16);
        let n_keysets = if self.keyset_len == 0 {
            0
        } else {
            self.keysets.len() / usize::from(self.keyset_len)
        };
        w.u16(n_keysets as u16);
        w.u8(self.keyset_len);
        w.u8(self.channels.len() as u8);
        w.u8(self.n_procs);
        w.u8(if self.debug_names {
            FLAG_DEBUG_NAMES
        } else {
            0
        } | if self.read_locs.is_empty() {
            0
        } else {
            FLAG_READ_LOCS
        } | if self.stmt_locs.is_empty() {
            0
        } else {
            FLAG_STMT_LOCS
        });
        w.u16(self.dimsets.len() as u16);
        let len_at = w.0.len();
        w.u32(0);
        len_at
    }

    /// Instructions, expression ops, the expression table, constants, register, symbol and
    /// slot types.
    fn write_code(&self, w: &mut Writer) {
        for i in self.insns.iter().chain(&self.ops) {
            w.0.extend_from_slice(&i.to_bytes());
        }
        for &(s, l) in &self.exprs {
            w.u16(s);
            w.u16(l);
        }
        for &c in &self.consts {
            w.u64(c);
        }
        w.0.extend_from_slice(&self.reg_types);
        w.0.extend_from_slice(&self.symbols);
        w.0.extend_from_slice(&self.slots);
    }

    /// Axes, loops, tensors, kernels, regions, dimension lists and keysets.
    fn write_tables(&self, w: &mut Writer) {
        for a in &self.axes {
            w.u8(a.kind);
            w.u8(0);
            w.u16(a.extent);
            w.u16(a.arr0);
            w.u16(a.arr1);
        }
        for l in &self.loops {
            for v in [l.axis, l.var0, l.var1, l.keyset, l.count, l.flags] {
                w.u16(v);
            }
        }
        for t in &self.tensors {
            w.u8(t.dtype);
            w.u8(t.flags);
            w.u8(t.dims.len() as u8);
            for &d in &t.dims {
                w.u16(d);
            }
        }
        for k in &self.kernels {
            w.u8(k.pool);
            w.u8(k.params.len() as u8);
            w.0.extend_from_slice(&k.params);
            match &k.tiers {
                None => w.u8(0xFF),
                Some((cases, default)) => {
                    w.u8(cases.len() as u8);
                    for &(c, v) in cases {
                        w.u16(c);
                        w.u16(v);
                    }
                    w.u16(*default);
                }
            }
        }
        for r in &self.regions {
            w.u16(r.tensor);
            w.u16(r.dims);
        }
        for d in &self.dimsets {
            w.u8(d.len() as u8);
            for &(s, z) in d {
                w.u16(s);
                w.u16(z);
            }
        }
        for &k in &self.keysets {
            w.u16(k);
        }
    }

    /// The schedule section.
    fn write_sched(&self, w: &mut Writer) {
        w.u64(self.sched.executors);
        w.u64(self.sched.streams);
        w.dnode(&self.sched.dispatch);
        w.u8(self.sched.stream_by.unwrap_or(0xFF));
        match &self.sched.pools {
            None => w.u8(0),
            Some(p) => {
                w.u8(1);
                w.u8(p.metric);
                w.u8(p.levels.len() as u8);
                for &(b, pool) in &p.levels {
                    w.u64(b as u64);
                    w.u8(pool);
                }
                w.u8(p.otherwise);
            }
        }
        w.u8(self.sched.priority.unwrap_or(0xFF));
        w.u8(self.sched.cost.unwrap_or(0xFF));
    }

    /// The names section (symbols and slots always; tensors with bound contents always; the
    /// rest with debug names).
    fn write_names(&self, w: &mut Writer) {
        let n = &self.names;
        for s in n.symbols.iter().chain(&n.slots) {
            w.name(s);
        }
        for (s, t) in n.tensors.iter().zip(&self.tensors) {
            if self.debug_names || t.flags & TENSOR_ARRAY != 0 {
                w.name(s);
            }
        }
        if self.debug_names {
            for s in n
                .kernels
                .iter()
                .chain(&n.axes)
                .chain(&n.procs)
                .chain(&n.channels)
            {
                w.name(s);
            }
        }
    }
}
