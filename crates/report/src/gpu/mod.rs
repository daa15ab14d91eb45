//! `gpu`: GPU memory per domain against its capacity and budget, the live resources
//! pivoted as WPA users pivot them, and the block map of every sub-allocating domain.
//!
//! A [`GpuView`] is read from a replayed log at a point (`from_log`) or from a VMA /
//! D3D12MA JSON dump (`vma`); the pivots (`pivots`), the block map (`blockmap`) and the
//! renderers read only the view.

mod blockmap;
pub(crate) mod budget;
mod model;
mod vma;

pub use model::{
    GpuBlock, GpuBudget, GpuDomain, GpuKind, GpuPeak, GpuResource, GpuSource, GpuView, OverBudget, SubAllocation,
};
