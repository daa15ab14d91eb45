//! The scenario of the release fixtures, shared by both binaries.
//!
//! `APP start LOG [OPTIONS]`: records with `memreplay::start` (OPTIONS as in
//! `MEMREPLAY_OPTIONS`), the oracle counting from the moment it returns.
//! `APP env`: recording is started by `MEMREPLAY_LOG` on the process's first allocation,
//! the oracle counting from the process's start.
//! Either way the program stops the recording itself and then prints the oracle's tally
//! of the calls it made while recording, one `key=value` a line.

use crate::{oracle, sites};

pub fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("start") => {
            let options = args.get(3).map_or("", String::as_str);
            let config = memreplay::Config::new(&args[2]).with_options(options).expect("options");
            memreplay::start(config).expect("start");
            // Everything the program allocated before (its arguments) stays live until
            // the end, so nothing freed while recording predates it.
            oracle::reset();
        }
        Some("env") => assert!(memreplay::is_recording(), "MEMREPLAY_LOG did not start a recording"),
        _ => panic!("usage: APP start LOG [OPTIONS] | APP env"),
    }
    std::hint::black_box(scenario());
    let tally = oracle::tally();
    memreplay::stop().expect("a recording to stop");
    for (key, value) in tally {
        println!("{key}={value}");
    }
    drop(args);
}

/// Every site once; each call's line ends with a `// call: NAME` marker. Returns a count
/// read after the last call, so that no call here is a tail call.
#[inline(never)]
fn scenario() -> u64 {
    let b = sites::box_site(3); // call: box_site
    let v = sites::vec_site(); // call: vec_site
    let s = sites::string_site(); // call: string_site
    let r = sites::raw_alloc_site(); // call: raw_alloc_site
    let z = sites::zeroed_site(); // call: zeroed_site
    let r = sites::realloc_site(r); // call: realloc_site
    sites::leak_known_block(); // call: leak_known_block
    sites::free_box(b); // call: free_box
    sites::free_vec(v); // call: free_vec
    sites::free_string(s); // call: free_string
    sites::free_raw(r, sites::REALLOC_BYTES); // call: free_raw
    sites::free_raw(z, sites::ZEROED_BYTES);
    sites::freed()
}
