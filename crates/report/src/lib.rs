//! `memreplay-report`: the reports on a replayed memreplay log, built and rendered.
//!
//! Data flows one way: the engine (`memreplay-replay`) replays a log into a
//! [`memreplay_replay::ReplayState`]; [`load`] does that and resolves the shared options
//! against it ([`Loaded`]); a builder reads the state and returns a serializable report
//! (`build_summary`, `build_tree`, ...); the report renders itself as text (`to_text`) or
//! JSON ([`to_json`], schema in `replay-cli/JSON.md`).
//!
//! - [`Info::read`] summarizes a log in one pass, a block at a time (header, totals,
//!   threads, event counts, domains, contexts, labels, integrity);
//! - the commands ([`run`], [`run_top`], [`run_html`], [`run_diff`], [`run_check`], ...)
//!   check their options, replay, build and return the bytes to print or write;
//! - [`LogIntegrity`] says whether a log is whole, and what was lost if not.
//!
//! **API boundary.** Options are plain structs ([`ReportOptions`], [`TopOptions`], ...);
//! failures are an [`Error`]; what a command says while it works goes to the caller's
//! [`Feedback`]. Nothing here parses a command line, writes to the terminal, picks an
//! exit status or writes a file: the program running a command does (`replay-cli`).
#![warn(missing_docs)]

mod callstacks;
mod check;
mod commands;
mod compare;
mod diff;
mod efficiency;
mod error;
mod export;
mod figures;
mod flame;
mod frees;
mod gpu;
mod html;
mod info;
mod instances;
mod integrity;
mod leaks;
mod loaded;
mod matching;
mod observed;
mod pprof;
mod range;
mod rows;
mod select;
mod series;
mod sites;
mod summarize;
mod table;
mod takes;
#[cfg(test)]
mod testlog;
mod time;
mod timeline_chart;
mod top;
mod tree;
mod unnamed;
mod xml;

pub use callstacks::{check_symbol_dirs, symbolizer};
pub use check::{
    build as build_check, run as run_check, CheckOptions, CheckOutput, CheckReport, Number, RuleResult, Verdict,
};
pub use commands::{
    check_html, run, run_efficiency, run_export, run_flamegraph, run_frees, run_html, run_leaks, run_summarize,
    run_timeline, run_top, ImageFormat, ReportKind,
};
pub use diff::{
    build as build_diff, run as run_diff, BothUnnamed, ContextDiff, Diff, DiffOutput, FigureChanges, SiteDiff, Status,
    UnnamedSites,
};
pub use efficiency::{build as build_efficiency, Efficiency};
pub use error::Error;
pub use export::{ExportFormat, CSV_COLUMNS};
pub use flame::{folded as build_folded, svg as flame_svg, FlameOptions, Folded};
pub use frees::{build as build_frees, Frees, FreesOptions};
pub use gpu::{
    build_gpu, build_gpu_view, domain_figures as gpu_domain_figures, figures as gpu_block_figures, parse_gpu_at,
    parse_screen, run_gpu, svg as gpu_block_map_svg, to_text as gpu_block_map_text, BlockFigures, DimensionsRow,
    DomainBlockFigures, GpuAt, GpuBlock, GpuBudget, GpuDomain, GpuKind, GpuOptions, GpuOutput, GpuPeak, GpuReport,
    GpuResource, GpuSource, GpuView, KindRow, NpotRow, OverBudget, Owner, PaddingRow, Pivots, PowerOfTwo, ResourceRow,
    ScreenRow, ScreenSource, Small, SubAllocation, Unchecked, DEFAULT_GPU_LIMIT, DEFAULT_SMALL,
    TEXT_COLUMNS as GPU_BLOCK_MAP_COLUMNS,
};
pub use gpu::{diff_dumps, parse_dump, read_dump, Change, DomainChange, DumpDiff, DumpError};
pub use html::{HtmlOptions, DEFAULT_MAX_NODES};
pub use info::{CompressionBytes, Info, LogBytes, RecordBytes};
pub use instances::{build as build_instances, Instances};
pub use integrity::{DamageKind, LogIntegrity};
pub use leaks::{build as build_leaks, build_symbolized as build_leaks_symbolized, frames as stack_frames, Leaks};
pub use loaded::{load, to_json, Feedback, Loaded, Progress, SCHEMA_VERSION};
pub use matching::{parse_min_delta, site_unresolved, DiffOptions, MinDelta};
pub use pprof::{decode as decode_pprof, proto as pprof_proto, SAMPLE_TYPES};
pub use range::{build as build_range, RangeDiff};
pub use select::{parse_at, parse_bytes, At, ReportOptions, SortKey};
pub use sites::Metric;
pub use summarize::{build as build_summary, SiteSummary, Summary};
pub use table::size;
pub use timeline_chart::{ChartBy, ChartOptions};
pub use top::{build as build_top, Top, TopOptions, TopRow};
pub use tree::{build as build_tree, Tree, TreeNode};

pub use memreplay_symbols::SymbolOptions;
use rows::{domain_ref, sort_rows, Amount, DomainRef, Keys};
