//! The generator of small modules shared by the fuzz targets: the fuzzer's bytes choose three
//! workloads calling down the list, loops over axes of 1–4 iterations, ifs, tasks of the kernels
//! `inc`, `acc` and `cp` (the built-ins `counter`, `accumulate` and `copy`) on overlapping slices
//! of two `f32[4, 64]` tensors, and a schedule (dependency mode, ready policy, executors, window).
//! Every choice is bounded, so every module is small and generates at most a few thousand tasks.

/// Reads choices from the fuzzer's bytes (zeros once they run out).
pub struct Choices<'a>(pub &'a [u8]);

impl Choices<'_> {
    pub fn pick(&mut self, n: u8) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b % n
    }
}

/// A region of `A` or `B` (both `f32[4, 64]`): a row and a slice of `w` columns, offsets drawn
/// from the enclosing loop variables so that tasks overlap in many ways.
fn region(c: &mut Choices<'_>, vars: &[String], w: u32) -> String {
    let t = if c.pick(2) == 0 { "A" } else { "B" };
    let v = |c: &mut Choices<'_>| -> String {
        if vars.is_empty() {
            c.pick(4).to_string()
        } else {
            vars[c.pick(vars.len() as u8) as usize].clone()
        }
    };
    let row = format!("({} + {}) % 4", v(c), c.pick(4));
    let col = format!("({} * {} + {}) % {}", v(c), c.pick(9), c.pick(16), 65 - w);
    format!("{t}[{row}, {col} +: {w}]")
}

/// Statements of one body, at most `budget` of them, nested at most `depth` deep.
fn body(c: &mut Choices<'_>, vars: &mut Vec<String>, depth: u32, callees: &[String], out: &mut String) {
    let n = 1 + c.pick(3);
    for _ in 0..n {
        match c.pick(if depth == 0 { 2 } else { 6 }) {
            0 | 1 => {
                let w = [1u32, 4, 8, 16][c.pick(4) as usize];
                match c.pick(3) {
                    0 => out.push_str(&format!("task inc({});\n", region(c, vars, w))),
                    1 => out.push_str(&format!(
                        "task acc({}, {});\n",
                        region(c, vars, w),
                        region(c, vars, w)
                    )),
                    _ => out.push_str(&format!(
                        "task cp({}, {});\n",
                        region(c, vars, w),
                        region(c, vars, w)
                    )),
                }
            }
            2 | 3 => {
                let var = format!("v{}", vars.len());
                let kind = if c.pick(2) == 0 { "parallel_for" } else { "for_each" };
                let axis = ["I", "J"][c.pick(2) as usize];
                out.push_str(&format!("{kind} {var} in {axis} {{\n"));
                vars.push(var);
                body(c, vars, depth - 1, callees, out);
                vars.pop();
                out.push_str("}\n");
            }
            4 => {
                let cond = match vars.last() {
                    Some(v) => format!("{v} % 2 == {}", c.pick(2)),
                    None => "true".to_string(),
                };
                out.push_str(&format!("if {cond} {{\n"));
                body(c, vars, depth - 1, callees, out);
                out.push_str("} else {\n");
                body(c, vars, depth - 1, callees, out);
                out.push_str("}\n");
            }
            _ => {
                if let Some(w) = callees.get(c.pick(callees.len().max(1) as u8) as usize) {
                    out.push_str(&format!("call {w}();\n"));
                }
            }
        }
    }
}

pub fn module_text(c: &mut Choices<'_>) -> String {
    let mut s = format!(
        "tensor A: f32[4, 64];\ntensor B: f32[4, 64];\naxis I = dense({});\naxis J = dense({});\n\
         kernel inc(inout a: f32[1, ?]);\nkernel acc(in x: f32[1, ?], inout y: f32[1, ?]);\n\
         kernel cp(in x: f32[1, ?], out y: f32[1, ?]);\n",
        1 + c.pick(3),
        1 + c.pick(4)
    );
    // Workloads w2, w1, main: each may call the ones declared before it (no cycles).
    let mut callees: Vec<String> = Vec::new();
    for name in ["w2", "w1", "main"] {
        let mut b = String::new();
        body(c, &mut Vec::new(), 3, &callees, &mut b);
        s.push_str(&format!("workload {name}() {{\n{b}}}\n"));
        callees.push(name.to_string());
    }
    let deps = ["exact", "overlap", "hybrid"][c.pick(3) as usize];
    let ready = ["fifo", "work_steal", "priority(0)"][c.pick(3) as usize];
    s.push_str(&format!(
        "schedule for main {{\n    executors {};\n    task_window {} stall;\n    task_graph {{ deps {deps}; ready {ready}; }}\n}}\n",
        1 + c.pick(4),
        1 + c.pick(64)
    ));
    s
}
