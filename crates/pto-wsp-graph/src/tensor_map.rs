//! STUB — being written.
