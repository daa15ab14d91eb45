//! What reports ask of the replay state: threads, domains, names and paths, what was
//! held at a label or at the peak, the live allocations, and the state's own size.

use memreplay_format::{ResourceDesc, HEAP_DOMAIN};

use super::ids::{NodeId, ROOT};
use super::model::{DomainTotals, FrameMark, Held, Marker, Node, PointsHeld, Site, Slot, ThreadState};
use super::state::ReplayState;
use super::timeline::{BudgetSample, BudgetSamples, ProcessMemory, Timeline};

impl ReplayState {
    /// Depth of a node: 0 for the root, 1 for a top-level context.
    pub fn node_depth(&self, node: NodeId) -> u32 {
        let mut d = 0;
        let mut n = node;
        while n != ROOT {
            d += 1;
            n = self.nodes[n as usize].parent;
        }
        d
    }

    /// The children of `node`, in creation order.
    pub fn children(&self, node: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        let first = self.nodes[node as usize].first_child;
        std::iter::successors((first != ROOT).then_some(first), |&c| {
            let next = self.nodes[c as usize].next_sibling;
            (next != ROOT).then_some(next)
        })
    }

    /// Heap in use and the ceiling, if the replay stopped at the memory ceiling: its
    /// figures cover only the events before.
    pub fn out_of_room(&self) -> Option<(u64, u64)> {
        self.out_of_room
    }

    /// What the state holds, by part: (what, bytes of heap, how many), largest first.
    /// Estimated from lengths and capacities (allocator overhead not counted), to say
    /// what grew when a log takes more memory than a command may use.
    pub fn memory_by_part(&self) -> Vec<(&'static str, u64, u64)> {
        use std::mem::size_of;
        let n = |v: usize| v as u64;
        // A hash map entry, with a load factor of 7/8 and a control byte.
        let map = |len: usize, entry: usize| n(len) * (n(entry) + 1) * 8 / 7;
        let vec_bytes = |cap: usize, each: usize| n(cap) * n(each);
        let mut parts = vec![
            (
                "live allocations",
                self.live.iter().map(|l| l.heap_bytes()).sum::<u64>() + map(self.used.len(), 16),
                self.live.iter().map(|l| n(l.entries())).sum(),
            ),
            ("callstacks", self.stacks.heap_bytes(), n(self.stacks.len())),
            (
                "strings",
                self.strings.values().map(|t| n(t.capacity())).sum::<u64>()
                    + map(self.strings.len(), 4 + size_of::<String>()),
                n(self.strings.len()),
            ),
            (
                "context nodes",
                vec_bytes(self.nodes.capacity(), size_of::<Node>())
                    + map(self.children.len(), 16)
                    + map(self.slot_index.len(), 16),
                n(self.nodes.len()),
            ),
            ("context slots", vec_bytes(self.slots.capacity(), size_of::<Slot>()), n(self.slots.len())),
            (
                "allocation sites",
                vec_bytes(self.sites.capacity(), size_of::<Site>())
                    + vec_bytes(self.heap_sites.capacity(), 4)
                    + map(self.site_index.len(), 12),
                n(self.sites.len()),
            ),
            (
                "labels",
                vec_bytes(self.labels.capacity(), size_of::<Marker>())
                    + vec_bytes(self.points_held.capacity(), size_of::<PointsHeld>()),
                n(self.labels.len()),
            ),
            ("frame markers", vec_bytes(self.frames.capacity(), size_of::<FrameMark>()), n(self.frames.len())),
            (
                "budget samples",
                self.budgets.values().map(|b| vec_bytes(b.samples().len(), size_of::<BudgetSample>())).sum::<u64>()
                    + map(self.budgets.len(), 4 + size_of::<BudgetSamples>()),
                self.budgets.values().map(|b| n(b.samples().len())).sum(),
            ),
            (
                "resource descriptors",
                map(self.resources.len(), 12 + size_of::<ResourceDesc>()),
                n(self.resources.len()),
            ),
        ];
        parts.sort_by_key(|&(_, bytes, _)| std::cmp::Reverse(bytes));
        parts
    }

    /// Memory over time, per domain and per top-level context.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// What the OS saw of the process over time, if the recorder sampled it.
    pub fn process_memory(&self) -> &ProcessMemory {
        &self.process_memory
    }

    /// The driver budget samples of `domain` applied so far, by time (empty when it has
    /// none); thinned past [`crate::BUDGET_SAMPLES_KEPT`] (see [`BudgetSamples`]).
    pub fn budget_samples(&self, domain: u32) -> &[BudgetSample] {
        self.budgets.get(&domain).map_or(&[], |b| b.samples())
    }

    /// The budget samples of `domain` with their exact count, smallest budget, highest
    /// usage and latest sample; `None` when it has none.
    pub fn budget_series(&self, domain: u32) -> Option<&BudgetSamples> {
        self.budgets.get(&domain)
    }

    /// The domains that have budget samples, ascending.
    pub fn budget_domains(&self) -> Vec<u32> {
        let mut d: Vec<u32> = self.budgets.keys().copied().collect();
        d.sort_unstable();
        d
    }

    /// The display (swap chain or screen) size, width × height in pixels, that the
    /// last `Display` record applied so far set: at a replay stopped at a point, the
    /// size then. `None` if none was recorded.
    pub fn display_size(&self) -> Option<(u32, u32)> {
        self.display
    }

    /// (slot, what it held) at `marker`, for every slot that held something, by slot; `None`
    /// if the replay kept no snapshot there ([`crate::ReplayOptions::label_snapshots`]).
    pub fn held_at(&self, marker: &Marker) -> Option<Vec<(u32, Held)>> {
        let p = marker.point?;
        let mut held: Vec<(u32, Held)> = self
            .points_held
            .iter()
            .filter(|h| h.from <= p && p < h.to)
            .map(|h| (h.slot, h.held))
            .chain(
                // Unchanged since the point.
                self.slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.points_seen <= p && s.now.live_count > 0)
                    .map(|(i, s)| (i as u32, Held::of(&s.now))),
            )
            .collect();
        held.sort_unstable_by_key(|&(slot, _)| slot);
        Some(held)
    }

    /// What slot `slot` held at its domain's peak.
    pub fn held_at_peak(&self, slot: u32) -> Held {
        let s = &self.slots[slot as usize];
        s.at_peak.get(&s.now, self.domains[s.dom.get()].epoch)
    }

    /// What site `site` (an index in [`ReplayState::sites`]) held at its domain's peak.
    pub fn site_held_at_peak(&self, site: usize) -> Held {
        let s = &self.sites[site];
        s.at_peak.get(&s.now, self.domains[s.dom.get()].epoch)
    }

    /// Live heap allocations that reported their usage: (address, capacity, used, slot, stack).
    pub fn live_containers(&self) -> impl Iterator<Item = (u64, u64, u64, u32, u32)> + '_ {
        let heap = self.domain_index(HEAP_DOMAIN).map(|d| &self.live[d.get()]);
        self.used.iter().filter_map(move |(&addr, &used)| {
            let l = heap?.get(addr)?;
            Some((addr, l.size, used, l.slot, self.sites[l.site as usize].stack))
        })
    }

    /// Every live allocation: (domain, address, size, slot, stack, seq).
    pub fn live_allocations(&self) -> impl Iterator<Item = (u32, u64, u64, u32, u32, u64)> + '_ {
        self.live.iter().zip(&self.domains).flat_map(move |(m, d)| {
            m.iter().map(move |(addr, l)| (d.id, addr, l.size, l.slot, self.sites[l.site as usize].stack, l.seq))
        })
    }

    /// Threads, in order of first appearance in the replay.
    pub fn threads(&self) -> impl Iterator<Item = &ThreadState> + '_ {
        self.threads.iter()
    }

    /// Thread `id` (a stream id of the log), if it had events.
    pub fn thread(&self, id: u32) -> Option<&ThreadState> {
        self.thread_index.get(&id).map(|&i| &self.threads[i as usize])
    }

    /// Domains that allocated, in order of first allocation.
    pub fn domains(&self) -> impl Iterator<Item = &DomainTotals> + '_ {
        self.domains.iter().filter(|d| d.total_count > 0)
    }

    /// The totals of domain `id`, if it allocated.
    pub fn domain(&self, id: u32) -> Option<&DomainTotals> {
        self.domain_index(id).map(|i| &self.domains[i.get()]).filter(|d| d.total_count > 0)
    }

    /// A string by id, or a placeholder naming the id when the log never defined it.
    pub fn string(&self, id: u32) -> String {
        match self.strings.get(&id) {
            Some(s) => s.clone(),
            None if id == 0 => String::new(),
            None => format!("<string #{id}>"),
        }
    }

    /// A context node's type and name.
    pub fn node_label(&self, node: NodeId) -> (String, String) {
        if node == ROOT {
            return (String::new(), "(no context)".into());
        }
        let n = &self.nodes[node as usize];
        let ty = self.context_types.get(&n.ty).map_or_else(|| format!("<type #{}>", n.ty), |&s| self.string(s));
        (ty, self.string(n.name))
    }

    /// A node's path from the root: "Level:Forest/Textures:rock.dds".
    pub fn node_path(&self, node: NodeId) -> String {
        self.node_path_ref(node).into_owned()
    }

    /// [`ReplayState::node_path`] without a copy once the replay is finished: a report
    /// that sorts thousands of contexts by path and keeps ten copies ten paths.
    pub fn node_path_ref(&self, node: NodeId) -> std::borrow::Cow<'_, str> {
        if self.finished {
            return std::borrow::Cow::Borrowed(&self.paths.get_or_init(|| self.all_node_paths())[node as usize]);
        }
        let mut parts = Vec::new();
        let mut n = node;
        while n != ROOT {
            let (ty, name) = self.node_label(n);
            parts.push(format!("{ty}:{name}"));
            n = self.nodes[n as usize].parent;
        }
        parts.reverse();
        std::borrow::Cow::Owned(if parts.is_empty() { "(no context)".into() } else { parts.join("/") })
    }

    /// The deepest context nesting of the log, if it is deeper than [`crate::MAX_CONTEXT_DEPTH`]:
    /// the replay did not follow it, and its figures must not be reported.
    pub fn too_deep(&self) -> Option<u64> {
        (self.deepest_refused > 0).then_some(self.deepest_refused)
    }

    /// The path of every node, by id (a parent is always created before its children).
    fn all_node_paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = Vec::with_capacity(self.nodes.len());
        for (i, n) in self.nodes.iter().enumerate() {
            let path = if i == ROOT as usize {
                "(no context)".to_owned()
            } else {
                let (ty, name) = self.node_label(i as NodeId);
                match n.parent {
                    ROOT => format!("{ty}:{name}"),
                    p => format!("{}/{ty}:{name}", paths[p as usize]),
                }
            };
            paths.push(path);
        }
        paths
    }

    /// A domain's name ("heap" for domain 0).
    pub fn domain_name(&self, domain: u32) -> String {
        match self.domain_info.get(&domain) {
            Some(d) => self.string(d.name),
            None if domain == HEAP_DOMAIN => "heap".into(),
            None => format!("<domain #{domain}>"),
        }
    }

    /// Domains that are not sub-allocators of another: their sum counts no byte twice.
    pub fn is_top_level_domain(&self, domain: u32) -> bool {
        self.domain_info.get(&domain).is_none_or(|d| d.parent.is_none())
    }

    /// Time of a thread's latest clock reading.
    pub fn thread_time(&self, thread: u32) -> u64 {
        self.thread(thread).map_or(0, |t| t.time_ns)
    }

    /// Context depth of a thread at the end (unbalanced pushes show as non-zero).
    pub fn open_contexts(&self, thread: u32) -> usize {
        self.thread(thread).map_or(0, |t| t.contexts.len())
    }
}
