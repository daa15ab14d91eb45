//! The C API declared by `include/memreplay.h`.
