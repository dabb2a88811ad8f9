//! Tests of the task-graph ISA: text and binary round trips, malformed input, execution of
//! every instruction, the DeepSeek example.

mod common;
mod deepseek;
mod errors;
mod exec;
mod lower;
mod programs;
mod roundtrip;
mod smoke;
