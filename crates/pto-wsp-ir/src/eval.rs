//! Scalar expression evaluation. STUB — to be implemented.
