//! The text format printer. STUB — to be implemented.
