// Wraps PTO-ISA's include/pto/common/type.hpp for the g++ syntax check of tests/device.rs.
// For device builds PTO-ISA defines `AICORE` as `[aicore]`, an attribute only the device compiler
// parses; after including the real header this makes it empty (it is used only in later macro
// expansions, so every PTO-ISA function is then an ordinary inline function for g++).
#include_next <pto/common/type.hpp>
#undef AICORE
#define AICORE
