//! The vocabulary of report rows: [`Amount`], how rows sort ([`sort_rows`]), and a
//! domain as reports name it ([`DomainRef`]).

use serde::Serialize;

use crate::select::SortKey;
use crate::table;
use memreplay_replay::ReplayState;

/// Bytes and allocations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Amount {
    pub bytes: u64,
    pub count: u64,
}

impl Amount {
    pub fn new(bytes: u64, count: u64) -> Amount {
        Amount { bytes, count }
    }

    /// `4.0 MiB in 12 allocations`.
    pub fn text(&self) -> String {
        format!("{} in {}", table::size(self.bytes), table::plural(self.count, "allocation"))
    }
}

/// What rows are sorted by (see [`sort_rows`]).
pub struct Keys<'a> {
    pub bytes: u64,
    pub count: u64,
    pub name: &'a str,
    pub instances: u64,
    pub total: u64,
    /// Bytes at the peak: the tie-break after `bytes` (0 where it does not apply).
    pub peak: u64,
}

/// Sorts rows by `sort` (largest first; names A to Z), then by bytes, bytes at the
/// peak, total bytes and name.
pub fn sort_rows<T>(rows: &mut [T], sort: SortKey, keys: impl Fn(&T) -> Keys<'_>) {
    rows.sort_by(|a, b| {
        let (a, b) = (keys(a), keys(b));
        let primary = match sort {
            SortKey::Bytes => b.bytes.cmp(&a.bytes),
            SortKey::Count => b.count.cmp(&a.count),
            SortKey::Name => a.name.cmp(b.name),
            SortKey::Instances => b.instances.cmp(&a.instances),
            SortKey::Total => b.total.cmp(&a.total),
        };
        primary
            .then(b.bytes.cmp(&a.bytes))
            .then(b.peak.cmp(&a.peak))
            .then(b.total.cmp(&a.total))
            .then_with(|| a.name.cmp(b.name))
    });
}

/// A memory domain as the log defines it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainRef {
    pub id: u32,
    pub name: String,
    /// `heap`, `pool`, `gpu-local`, `gpu-shared`, `other` or `unknown`.
    pub kind: String,
    /// Capacity in bytes (0 when not given).
    pub capacity: u64,
    /// The domain whose memory this one sub-allocates (a pool within the heap), if any.
    pub parent: Option<u32>,
    pub parent_name: Option<String>,
    /// Not within another domain: sums over top-level domains count no byte twice.
    pub top_level: bool,
}

pub fn domain_ref(state: &ReplayState, id: u32) -> DomainRef {
    let info = state.domain_info.get(&id);
    DomainRef {
        id,
        name: state.domain_name(id),
        kind: info
            .map_or(if id == memreplay_format::HEAP_DOMAIN { "heap" } else { "unknown" }, |d| d.kind.name())
            .into(),
        capacity: info.map_or(0, |d| d.capacity),
        parent: info.and_then(|d| d.parent),
        parent_name: info.and_then(|d| d.parent).map(|p| state.domain_name(p)),
        top_level: state.is_top_level_domain(id),
    }
}

impl DomainRef {
    /// `heap`, `entity pool (pool within heap, capacity 18.8 KiB)`.
    pub fn title(&self) -> String {
        let mut facts = vec![self.kind.clone()];
        if let Some(p) = &self.parent_name {
            facts[0] = format!("{} within {p}", self.kind);
        }
        if self.capacity > 0 {
            facts.push(format!("capacity {}", table::size(self.capacity)));
        }
        if facts == ["heap"] && self.name == "heap" {
            return self.name.clone();
        }
        format!("{} ({})", self.name, facts.join(", "))
    }
}
