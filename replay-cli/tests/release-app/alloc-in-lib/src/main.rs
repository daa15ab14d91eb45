//! The recorder's allocator declared in a library crate (`global`).

use global::oracle;

#[path = "../../sites.rs"]
mod sites;
#[path = "../../app.rs"]
mod app;

fn main() {
    app::main()
}
