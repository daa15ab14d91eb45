//! End-to-end tests across crates, one binary: the demo recorded and read back by the
//! format crate, replayed by every report, diffed, checked, exported, symbolicated, and
//! its HTML report driven in a browser. Shared helpers are in the crate's `lib.rs`.

mod cli_agrees;
mod demo_diff;
mod demo_exports;
mod demo_gpu;
mod demo_log;
mod demo_reports;
mod demo_symbols;
mod html_report;
