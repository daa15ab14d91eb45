//! The recorder's allocator declared in the binary crate, where the allocation sites are:
//! its shim is inlined into them.

#[path = "../../oracle.rs"]
mod oracle;
#[path = "../../sites.rs"]
mod sites;
#[path = "../../app.rs"]
mod app;

#[global_allocator]
static ALLOC: memreplay::Allocator<oracle::Counting> = memreplay::Allocator::new(oracle::Counting);

fn main() {
    app::main()
}
