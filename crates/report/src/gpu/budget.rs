//! Budget samples of a replayed log, per domain: [`super::GpuBudget`]. (Owned by the
//! budget work.)
