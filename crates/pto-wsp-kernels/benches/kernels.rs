//! Kernel benchmarks (written below).

fn main() {}
