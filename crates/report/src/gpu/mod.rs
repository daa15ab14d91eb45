//! `gpu`: GPU memory per domain against its capacity and budget, the live resources
//! pivoted as WPA users pivot them, and the block map of every sub-allocating domain.
//!
//! A [`GpuView`] is read from a replayed log at a point (`from_log`) or from a VMA /
//! D3D12MA JSON dump (`vma`); the pivots (`pivots`), the block map (`blockmap`) and the
//! renderers read only the view.

mod blockmap;
mod budget;
mod model;
// Until the crate's root re-exports the dump reader (and `gpu` uses it), only its tests
// do: these two `allow`s go when it does.
#[cfg_attr(not(test), allow(dead_code))]
mod vma;

pub use model::{
    GpuBlock, GpuBudget, GpuDomain, GpuKind, GpuPeak, GpuResource, GpuSource, GpuView, OverBudget, SubAllocation,
};
#[allow(unused_imports)]
pub use vma::{diff_dumps, parse_dump, read_dump, Change, DomainChange, DumpDiff, DumpError};
