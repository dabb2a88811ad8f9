//! Decoder robustness (filled in below).
