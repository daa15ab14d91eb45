//! `libmemreplay`: memreplay's recorder for C and C++ programs.
//!
//! - `api`: the C API that `include/memreplay.h` declares.
//! - `preload`: the C library's allocator (`malloc` and its family) recorded, when the
//!   library is preloaded (`replay-cli record`) or linked.

mod api;
mod preload;
