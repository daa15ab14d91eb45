//! `replay-cli`'s integration tests, one binary (one link): the reports, `check` and
//! `diff`, the HTML page and the command line through the binary; hostile logs;
//! release-built programs. Each module says what it covers; `common` holds what they
//! share. (The engine's own tests, against a model and a reference merge, are in
//! `crates/replay/tests/all/`.)

mod common;

mod check;
mod cli;
mod gpu;
mod hostile;
mod html;
mod record;
mod release_builds;
mod reports;
