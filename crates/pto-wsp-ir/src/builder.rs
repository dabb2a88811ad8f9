//! The Rust builder API. STUB — to be implemented.
