//! The C library's allocator, interposed and recorded.
