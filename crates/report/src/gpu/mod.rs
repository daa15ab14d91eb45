//! `gpu`: GPU memory per domain against its capacity and budget, the live resources
//! pivoted as WPA users pivot them, and the block map of every sub-allocating domain.
//!
//! A [`GpuView`] is read from a replayed log at a point (`from_log`) or from a VMA /
//! D3D12MA JSON dump (`vma`); the pivots (`pivots`), the block map (`blockmap`) and the
//! renderers read only the view.

mod blockmap;
pub(crate) mod budget;
mod formats;
mod from_log;
pub(crate) mod html;
mod model;
mod pivots;
mod report;
mod vma;

pub use blockmap::{domain_figures, figures, svg, to_text, BlockFigures, DomainBlockFigures, TEXT_COLUMNS};

pub(crate) use from_log::{domain_tree, gpu_domains, view, view_at, ViewPoint};
pub use model::{
    GpuBlock, GpuBudget, GpuDomain, GpuKind, GpuPeak, GpuResource, GpuSource, GpuView, OverBudget, SubAllocation,
};
pub(crate) use pivots::pivots;
pub use pivots::{
    DimensionsRow, KindRow, NpotRow, Owner, PaddingRow, Pivots, PowerOfTwo, ResourceRow, ScreenRow, Small, Unchecked,
    DEFAULT_SMALL,
};
pub use report::{
    build as build_gpu, build_view as build_gpu_view, parse_gpu_at, parse_screen, run as run_gpu, GpuAt, GpuOptions,
    GpuOutput, GpuReport, ScreenSource, DEFAULT_GPU_LIMIT,
};
pub use vma::{diff_dumps, parse_dump, read_dump, Change, DomainChange, DumpDiff, DumpError};
