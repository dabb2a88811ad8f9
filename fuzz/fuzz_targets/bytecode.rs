//! Fuzz target for the bytecode decoder and interpreter: decoding never panics; whatever decodes
//! disassembles, binds (with no bindings, or small default ones) and runs on two executors under
//! a step limit without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pto_wsp_bytecode::{ExecutorConfig, Interpreter, Program, Task, TaskSink};
use pto_wsp_ir::{Bindings, DataRead, ReadRefused, Value};
use std::ops::ControlFlow;

/// Counts tasks; answers computed reads with small varying values (so `while` and `break`
/// take both ways).
struct Sink(u32);

impl TaskSink for Sink {
    fn task(&mut self, t: &Task<'_>) -> ControlFlow<()> {
        let _ = t.to_expanded();
        self.0 += 1;
        ControlFlow::Continue(())
    }

    fn read(&mut self, read: &DataRead<'_>, out: &mut Vec<i64>) -> Result<(), ReadRefused> {
        let n: i64 = read.size.iter().product();
        out.extend((0..n).map(|i| (i + i64::from(self.0)) % 4));
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(prog) = Program::decode(data) else {
        return;
    };
    let _ = prog.disassemble();
    // Bind every symbol and slot by position to a small value, every array to a short list.
    let symbols: Vec<Option<Value>> = (0..64).map(|i| Some(Value::I64(i % 5))).collect();
    let arrays: Vec<Option<Vec<i64>>> = (0..256).map(|_| Some(vec![1, 2, 0, 3, 1, 2, 3, 4])).collect();
    for bound in [prog.bind(&Bindings::new()), prog.bind_indexed(&symbols, &[], arrays)] {
        let Ok(bound) = bound else {
            continue;
        };
        for executor in [None, Some(1)] {
            let config = ExecutorConfig {
                executor,
                executors: Some(3),
                owners: None,
                max_steps: Some(20_000),
            };
            if let Ok(mut interp) = Interpreter::new(&prog, &bound, config) {
                let _ = interp.run(&mut Sink(0));
            }
        }
    }
});
