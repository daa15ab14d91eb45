//! `replay-cli`'s integration tests, one binary (one link): the reports, `check` and
//! `diff`, the HTML page and the command line through the binary; the engine against a
//! model and a reference merge; hostile logs; release-built programs. Each module says
//! what it covers; `common` holds what they share.

mod common;

mod check;
mod cli;
mod hostile;
mod html;
mod merge_order;
mod model;
mod release_builds;
mod reports;
