//! Random workloads (filled in below).
