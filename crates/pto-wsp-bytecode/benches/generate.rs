//! Placeholder (the benchmark comes later).
fn main() {}
