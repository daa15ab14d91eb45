//! The engine's integration tests, one binary: the replay against a model of what a log
//! means (`model`), and the merge of threads' blocks against a reference merge
//! (`merge_order`). Logs come from `memreplay-fixtures`.

mod budget;
mod merge_order;
mod model;
