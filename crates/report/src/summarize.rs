//! `summarize`: the one-page answer to "where did the memory go?": capture facts, each
//! domain's live, peak and total figures, the top contexts at the peak and at the end,
//! instance averages, container efficiency, leaks, temporaries, and the allocation sites
//! that allocate most with where their blocks were freed from (free callstacks).

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::Serialize;

use memreplay_format::{header_flags, DomainKind};

use crate::time::{format_ms, format_utc};
use memreplay_replay::{Anomalies, CallsBeforeStart, Stacks, ROOT};
use memreplay_symbols::{SiteName, SymbolStats, Symbolizer};

use crate::efficiency::{self, Container, ContextEfficiency, Usage};
use crate::figures::{self, DomainFigures};
use crate::instances::{self, InstanceFigures};
use crate::leaks;
use crate::select::{thread_ref, SelectionInfo};
use crate::table::{percent, plural, size, Align, Table};
use crate::{domain_ref, sort_rows, Amount, DomainRef, Keys, Loaded, SortKey, SCHEMA_VERSION};

/// Rows per list unless `--limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 10;

/// The `summarize` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The JSON schema version (`JSON.md`).
    pub schema_version: u32,
    /// `"summarize"`.
    pub report: &'static str,
    /// The log, as given.
    pub path: String,
    /// The options, resolved.
    pub selection: SelectionInfo,
    /// Where "live" figures are read: `at the end`, `at label "..." (...)`.
    pub at: String,
    /// How the log was recorded: threads, callstacks, time, the recorder's own cost.
    pub capture: Capture,
    /// Whether the log is whole, and what was lost if not.
    pub integrity: Integrity,
    /// What the replay found that does not add up (frees of blocks never allocated, ...).
    pub anomalies: Anomalies,
    /// The allocator calls the process made before recording started (format 1.3):
    /// counted, not recorded one by one, and not a loss. Absent when the log has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_start: Option<CallsBeforeStart>,
    /// Per domain: live, peak and total figures.
    pub domains: Vec<DomainSummary>,
    /// Over the top-level domains only: a pool's blocks are not added to the heap
    /// block that holds them.
    pub total: Total,
    /// Per domain: the top contexts at the peak and at the point.
    pub top_contexts: Vec<TopContexts>,
    /// Per domain: bytes per instance, by context type.
    pub instances: Vec<DomainInstanceTypes>,
    /// Container usage against capacity.
    pub efficiency: EfficiencySummary,
    /// What is still live at the end, by context.
    pub leaks: Vec<LeakGroup>,
    /// Short-lived allocations, by context.
    pub temporaries: Vec<TemporaryGroup>,
    /// Allocation callstacks by bytes allocated, over every thread and context (empty
    /// with `--thread`: sites are not kept per thread).
    pub sites: Vec<SiteSummary>,
    /// What the OS saw of the process, against what the recorder tracked; `null` when the
    /// log has no process memory samples (format 1.0, sampling off, not Linux).
    pub process_memory: Option<ProcessMemorySummary>,
    /// What symbolication of `sites` found; `null` with `--no-symbols`.
    pub symbols: Option<SymbolStats>,
}

impl Summary {
    /// A copy without its labels (the only list of a summary as long as the log).
    pub fn without_labels(&self) -> Summary {
        let Capture {
            format_version,
            recorder,
            os,
            arch,
            pid,
            exe_path,
            start_unix_ns,
            start_utc,
            duration_ns,
            duration_is_lower_bound,
            events,
            frames,
            first_frame,
            last_frame,
            labels: _,
            threads,
            recorded,
        } = &self.capture;
        Summary {
            schema_version: self.schema_version,
            report: self.report,
            path: self.path.clone(),
            selection: self.selection.clone(),
            at: self.at.clone(),
            capture: Capture {
                format_version: format_version.clone(),
                recorder: recorder.clone(),
                os: os.clone(),
                arch: arch.clone(),
                pid: *pid,
                exe_path: exe_path.clone(),
                start_unix_ns: *start_unix_ns,
                start_utc: start_utc.clone(),
                duration_ns: *duration_ns,
                duration_is_lower_bound: *duration_is_lower_bound,
                events: *events,
                frames: *frames,
                first_frame: *first_frame,
                last_frame: *last_frame,
                labels: Vec::new(),
                threads: threads.clone(),
                recorded: recorded.clone(),
            },
            integrity: self.integrity.clone(),
            anomalies: self.anomalies.clone(),
            before_start: self.before_start,
            domains: self.domains.clone(),
            total: self.total.clone(),
            top_contexts: self.top_contexts.clone(),
            instances: self.instances.clone(),
            efficiency: self.efficiency.clone(),
            leaks: self.leaks.clone(),
            temporaries: self.temporaries.clone(),
            sites: self.sites.clone(),
            process_memory: self.process_memory.clone(),
            symbols: self.symbols.clone(),
        }
    }

    /// Names the callstacks of `sites` (and where they were freed from) with `syms`.
    pub fn symbolize(&mut self, stacks: &Stacks, syms: &mut Symbolizer) {
        for s in &mut self.sites {
            s.site = Some((*syms.site(s.stack, stacks.get(s.stack))).clone());
            for f in s.freed_from.iter_mut().filter(|f| f.stack != 0) {
                f.site = Some((*syms.site(f.stack, stacks.get(f.stack))).clone());
            }
        }
        self.symbols = Some(syms.stats());
    }
}

/// Process memory as the OS saw it (the recorder's samples) and the untracked rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessMemorySummary {
    /// Samples in the log.
    pub samples: u64,
    pub resident: ProcessFigure,
    /// `null` when the OS did not tell.
    pub committed: Option<ProcessFigure>,
    /// The top-level CPU-side domains (kinds heap and other) whose live bytes are the
    /// tracked memory; GPU domains are not process memory.
    pub tracked_domains: Vec<String>,
    /// Their live bytes at the end of the recording, when the last sample is taken.
    pub tracked_end: u64,
    /// Resident (committed) at the end minus tracked at the end: memory the process
    /// holds that the recorder did not see (code, static data, other allocators, the
    /// allocator's own overhead and free lists, the recorder's buffers). Negative when
    /// tracked memory was never touched (so not resident).
    pub untracked_resident_end: i64,
    pub untracked_committed_end: Option<i64>,
}

/// A process memory figure: its highest sample and its last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessFigure {
    pub peak: u64,
    pub peak_time_ns: u64,
    pub end: u64,
}

/// One allocation callstack of one domain, over the whole recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SiteSummary {
    /// The domain, by name.
    pub domain: String,
    /// Callstack id in the log (0: allocated without a callstack).
    pub stack: u32,
    /// The callstack's return addresses, in hex, innermost first.
    pub frames: Vec<String>,
    /// The callstack symbolicated; absent with `--no-symbols` (and from the summary
    /// the library builds, [`build`], until [`Summary::symbolize`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<SiteName>,
    /// Allocated over the whole recording.
    pub total: Amount,
    /// Live at the end of the log.
    pub live: Amount,
    /// Held at its domain's peak.
    pub peak: Amount,
    /// Temporaries among them: freed before their thread allocated again.
    pub temporaries: u64,
    /// Where its blocks were freed, most frees first (at most 5; the free callstack is
    /// 0 for frees recorded without one).
    pub freed_from: Vec<FreeSite>,
    /// Free callstacks left out of `freed_from`.
    pub hidden_free_sites: u64,
}

/// Frees of one site's blocks from one free callstack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FreeSite {
    pub stack: u32,
    pub frames: Vec<String>,
    /// The free callstack symbolicated, as the site's own `site`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<SiteName>,
    pub frees: u64,
    pub bytes: u64,
}

/// Labels listed in the text (JSON has them all).
const TEXT_LABELS: usize = 12;

/// Free callstacks listed per allocation site.
const FREE_SITES: usize = 5;

/// What was recorded, when, by what.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capture {
    pub format_version: String,
    pub recorder: String,
    pub os: String,
    pub arch: String,
    pub pid: u64,
    pub exe_path: String,
    pub start_unix_ns: u64,
    pub start_utc: String,
    /// From the start to the end-of-log record, or to the last clock reading of a
    /// truncated log (then `duration_is_lower_bound`).
    pub duration_ns: u64,
    pub duration_is_lower_bound: bool,
    /// Events replayed (a realloc counts once).
    pub events: u64,
    pub frames: u64,
    pub first_frame: Option<u64>,
    pub last_frame: Option<u64>,
    pub labels: Vec<LabelRef>,
    pub threads: Vec<ThreadSummary>,
    pub recorded: Recorded,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabelRef {
    pub name: String,
    pub seq: u64,
    pub time_ns: u64,
    /// The frame in progress at the label.
    pub frame: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadSummary {
    pub stream: u32,
    pub name: Option<String>,
    pub os_tid: Option<u64>,
    pub events: u64,
    /// Contexts still open at the end (pushes without pops).
    pub open_contexts: u64,
}

/// What the header says was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recorded {
    pub callstacks_on_alloc: bool,
    pub callstacks_on_free: bool,
    pub usage_changes: bool,
    pub max_stack_depth: u32,
}

/// Whether the log is whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Integrity {
    /// The end-of-log record is present.
    pub complete: bool,
    /// Complete and undamaged.
    pub clean: bool,
    /// Every damage found, described.
    pub damage: Vec<String>,
    pub bytes_lost: u64,
    /// Events in blocks that failed to decode.
    pub events_in_bad_blocks: u64,
    /// Events the recorder reported lost.
    pub lost_events: u64,
    /// A truncated log: the time of the last clock reading, after which every event is
    /// missing (null for a complete log).
    pub missing_after_ns: Option<u64>,
}

/// One domain's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainSummary {
    pub domain: DomainRef,
    /// Live at the selected point.
    pub live: Amount,
    pub peak: PeakInfo,
    /// Allocated over the whole recording.
    pub total: Amount,
    /// Temporaries: freed before their thread allocated anything else.
    pub temporary: Amount,
}

/// A domain's peak and when it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeakInfo {
    /// Held at the peak (by the selected thread, with `--thread`).
    pub bytes: u64,
    pub count: u64,
    /// Sequence number and time of the allocation that made the peak.
    pub seq: u64,
    pub time_ns: u64,
    /// The frame in progress, and the last label before the peak.
    pub frame: Option<u64>,
    pub after_label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Total {
    /// The top-level domains summed.
    pub domains: Vec<String>,
    pub live: Amount,
    pub total: Amount,
}

/// The biggest contexts of one domain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopContexts {
    pub domain: String,
    pub peak: ContextLists,
    /// At the selected point.
    pub live: ContextLists,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextLists {
    /// With descendants (the domain as a whole is not listed).
    pub inclusive: Vec<ContextAmount>,
    /// Own allocations only (`(no context)`: outside any context).
    pub exclusive: Vec<ContextAmount>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextAmount {
    pub context: String,
    pub bytes: u64,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainInstanceTypes {
    pub domain: String,
    pub types: Vec<InstanceFigures>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EfficiencySummary {
    /// Every reporting container at the selected point, and at the heap's peak.
    pub live: Usage,
    pub peak: Usage,
    /// Live containers at the end, most wasted bytes first.
    pub worst_containers: Vec<Container>,
    /// Contexts by efficiency, lowest first (at the point, else at the peak).
    pub least_efficient_contexts: Vec<ContextEfficiency>,
}

/// Live allocations at the end of one context (own, not descendants').
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeakGroup {
    pub domain: String,
    pub context: String,
    pub bytes: u64,
    pub count: u64,
}

/// Temporaries of one context (own allocations), over the whole recording.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemporaryGroup {
    pub domain: String,
    pub context: String,
    pub bytes: u64,
    pub count: u64,
    /// Of the context's allocations, the share that were temporaries.
    pub share: f64,
}

/// The `summarize` report of a replayed log (sites unnamed: see `Summary::symbolize`).
pub fn build(l: &Loaded) -> Summary {
    let state = l.state();
    let sel = &l.sel;
    let limit = sel.limit_or(DEFAULT_LIMIT);
    let header = &l.replay.header;
    let report = &l.replay.report;
    let figs = figures::compute(state, sel);

    let mut threads: Vec<ThreadSummary> = state
        .threads()
        .map(|t| {
            let stream = t.id;
            let r = thread_ref(state, stream);
            ThreadSummary {
                stream,
                name: r.name,
                os_tid: r.os_tid,
                events: t.events,
                open_contexts: state.open_contexts(stream) as u64,
            }
        })
        .collect();
    threads.sort_by_key(|t| t.stream);
    let capture = Capture {
        format_version: format!("{}.{}", header.version_major, header.version_minor),
        recorder: header.recorder.clone(),
        os: header.os.clone(),
        arch: header.arch.clone(),
        pid: header.pid,
        exe_path: header.exe_path.clone(),
        start_unix_ns: header.start_unix_ns,
        start_utc: format_utc(header.start_unix_ns),
        duration_ns: l.end_ns(),
        duration_is_lower_bound: report.end.is_none(),
        events: state.events,
        frames: state.frames.len() as u64,
        first_frame: state.frames.first().map(|f| f.frame),
        last_frame: state.frames.last().map(|f| f.frame),
        labels: state
            .labels
            .iter()
            .map(|m| LabelRef { name: state.string(m.name), seq: m.seq, time_ns: l.ns(m.time_ns), frame: m.frame })
            .collect(),
        threads,
        recorded: Recorded {
            callstacks_on_alloc: header.has(header_flags::CALLSTACKS_ON_ALLOC),
            callstacks_on_free: header.has(header_flags::CALLSTACKS_ON_FREE),
            usage_changes: header.has(header_flags::USAGE_CHANGES),
            max_stack_depth: header.max_stack_depth,
        },
    };
    let facts = l.integrity();
    let integrity = Integrity {
        complete: facts.complete,
        clean: facts.undamaged(),
        damage: facts.damage_text(),
        bytes_lost: facts.bytes_lost,
        events_in_bad_blocks: facts.events_in_bad_blocks,
        lost_events: facts.recorder_lost_events,
        missing_after_ns: facts.read_until_ns,
    };

    let domains: Vec<DomainSummary> = figs.iter().map(|d| domain_summary(l, d)).collect();
    let top: Vec<&DomainSummary> = domains.iter().filter(|d| d.domain.top_level).collect();
    let total = Total {
        domains: top.iter().map(|d| d.domain.name.clone()).collect(),
        live: Amount::new(
            top.iter().map(|d| d.live.bytes).fold(0, u64::wrapping_add),
            top.iter().map(|d| d.live.count).fold(0, u64::wrapping_add),
        ),
        total: Amount::new(
            top.iter().map(|d| d.total.bytes).fold(0, u64::wrapping_add),
            top.iter().map(|d| d.total.count).fold(0, u64::wrapping_add),
        ),
    };

    // The context lists (a path per context, sorted) and the rest are built side by side.
    let contexts = || -> Vec<TopContexts> {
        figs.iter()
            .filter(|d| !d.total().is_empty())
            .map(|d| TopContexts {
                domain: state.domain_name(d.domain),
                peak: lists(l, d, limit, |a| (a.peak.bytes, a.peak.count)),
                live: lists(l, d, limit, |a| (a.live.bytes, a.live.count)),
            })
            .collect()
    };
    let rest = || {
        let instances = figs
            .iter()
            .filter_map(|d| {
                let (mut types, _) = instances::domain_instances(state, d);
                sort_rows(&mut types, sel.sort, instances::keys);
                types.truncate(limit);
                (!types.is_empty()).then(|| DomainInstanceTypes { domain: state.domain_name(d.domain), types })
            })
            .collect();

        // The heap's figures, computed above (the same selection).
        let eff = efficiency::build_with(l, figs.iter().find(|d| d.domain == memreplay_format::HEAP_DOMAIN));
        let mut least = eff.contexts.clone();
        let key = |c: &ContextEfficiency| {
            let e = c.live.efficiency.or(c.peak.efficiency).unwrap_or(1.0);
            (e, std::cmp::Reverse(c.live.wasted_bytes.max(c.peak.wasted_bytes)))
        };
        least.sort_by(|a, b| key(a).partial_cmp(&key(b)).unwrap_or(std::cmp::Ordering::Equal));
        least.truncate(limit);
        let efficiency = EfficiencySummary {
            live: eff.overall,
            peak: eff.peak,
            worst_containers: eff.containers.into_iter().take(limit).collect(),
            least_efficient_contexts: least,
        };

        // Rows are sorted with their paths borrowed, and only those kept are copied.
        let mut by_context = leaks::by_context(l);
        let mut leak_rows: Vec<(u32, Cow<'_, str>, u64, u64)> = Vec::new();
        for &d in &sel.domains {
            let Some(groups) = by_context.remove(&d) else { continue };
            let mut groups: Vec<(u32, (u64, u64))> = groups.into_iter().collect();
            groups.sort_unstable_by_key(|&(node, _)| node);
            let shown =
                |&(node, (bytes, _)): &(u32, (u64, u64))| bytes >= sel.min_bytes && sel.depth_shown(state, node);
            leak_rows.extend(
                groups
                    .into_iter()
                    .filter(shown)
                    .map(|(node, (bytes, count))| (d, state.node_path_ref(node), bytes, count)),
            );
        }
        sort_rows(&mut leak_rows, sel.sort, |g| context_keys(g.2, g.3, &g.1));
        leak_rows.truncate(limit);
        let leaks: Vec<LeakGroup> = leak_rows
            .into_iter()
            .map(|(d, context, bytes, count)| LeakGroup {
                domain: state.domain_name(d),
                context: context.into_owned(),
                bytes,
                count,
            })
            .collect();

        // (domain, context, bytes, count, share)
        let mut temporary_rows: Vec<(u32, Cow<'_, str>, u64, u64, f64)> = Vec::new();
        for d in &figs {
            for (node, a, _) in d.rows() {
                if a.temp_count > 0 && sel.depth_shown(state, node) {
                    let share = a.temp_count as f64 / a.total_count.max(1) as f64;
                    temporary_rows.push((d.domain, state.node_path_ref(node), a.temp_bytes, a.temp_count, share));
                }
            }
        }
        // Temporaries are a matter of how many: by count unless sorted otherwise.
        let sort = if sel.sort == SortKey::Bytes { SortKey::Count } else { sel.sort };
        sort_rows(&mut temporary_rows, sort, |g| context_keys(g.2, g.3, &g.1));
        temporary_rows.retain(|t| t.2 >= sel.min_bytes);
        temporary_rows.truncate(limit);
        let temporaries: Vec<TemporaryGroup> = temporary_rows
            .into_iter()
            .map(|(d, context, bytes, count, share)| TemporaryGroup {
                domain: state.domain_name(d),
                context: context.into_owned(),
                bytes,
                count,
                share,
            })
            .collect();

        let sites = if sel.thread.is_some() { Vec::new() } else { top_sites(l, limit) };
        (instances, efficiency, leaks, temporaries, sites)
    };
    let (top_contexts, (instances, efficiency, leaks, temporaries, sites)) = rayon::join(contexts, rest);

    Summary {
        schema_version: SCHEMA_VERSION,
        report: "summarize",
        path: l.path.clone(),
        selection: sel.info(state, l.ticks_per_second()),
        at: sel.point_text(state, l.ticks_per_second()),
        capture,
        integrity,
        anomalies: state.anomalies.clone(),
        before_start: state.before_start,
        domains,
        total,
        top_contexts,
        instances,
        efficiency,
        leaks,
        temporaries,
        sites,
        process_memory: process_memory(l),
        symbols: None,
    }
}

fn process_memory(l: &Loaded) -> Option<ProcessMemorySummary> {
    let state = l.state();
    let pm = state.process_memory();
    let last = pm.last?;
    let tracked: Vec<&memreplay_replay::DomainTotals> = state
        .domains()
        .filter(|d| state.is_top_level_domain(d.id))
        .filter(|d| {
            let kind = state.domain_info.get(&d.id).map(|i| i.kind);
            d.id == memreplay_format::HEAP_DOMAIN || matches!(kind, Some(DomainKind::Heap | DomainKind::Other))
        })
        .collect();
    let tracked_end: u64 = tracked.iter().map(|d| d.live_bytes).fold(0, u64::wrapping_add);
    let diff = |os: u64| (i128::from(os) - i128::from(tracked_end)).clamp(i64::MIN.into(), i64::MAX.into()) as i64;
    Some(ProcessMemorySummary {
        samples: pm.recorded,
        resident: ProcessFigure {
            peak: pm.peak_resident.resident,
            peak_time_ns: l.ns(pm.peak_resident.time),
            end: last.resident,
        },
        committed: (pm.peak_committed.committed > 0).then(|| ProcessFigure {
            peak: pm.peak_committed.committed,
            peak_time_ns: l.ns(pm.peak_committed.time),
            end: last.committed,
        }),
        tracked_domains: tracked.iter().map(|d| state.domain_name(d.id)).collect(),
        tracked_end,
        untracked_resident_end: diff(last.resident),
        untracked_committed_end: (last.committed > 0).then(|| diff(last.committed)),
    })
}

/// The sites of the selected domains that allocated most, with their free callstacks.
fn top_sites(l: &Loaded, limit: usize) -> Vec<SiteSummary> {
    let state = l.state();
    let sel = &l.sel;
    let mut rows: Vec<(usize, u64)> = state
        .sites
        .iter()
        .enumerate()
        .filter(|(_, s)| sel.domains.contains(&s.domain) && s.now.total_bytes >= sel.min_bytes)
        .map(|(i, s)| (i, s.now.total_bytes))
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    rows.truncate(limit);
    rows.into_iter()
        .map(|(i, _)| {
            let s = &state.sites[i];
            let peak = state.site_held_at_peak(i);
            let mut freed: Vec<(u32, (u64, u64))> = s.frees_by_stack().collect();
            freed.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(b.1 .1.cmp(&a.1 .1)).then(a.0.cmp(&b.0)));
            let hidden_free_sites = freed.len().saturating_sub(FREE_SITES) as u64;
            freed.truncate(FREE_SITES);
            SiteSummary {
                domain: state.domain_name(s.domain),
                stack: s.stack,
                frames: leaks::frames(state, s.stack),
                site: None,
                total: Amount::new(s.now.total_bytes, s.now.total_count),
                live: Amount::new(s.now.live_bytes, s.now.live_count),
                peak: Amount::new(peak.bytes, peak.count),
                temporaries: s.now.temp_count,
                freed_from: freed
                    .into_iter()
                    .map(|(stack, (frees, bytes))| FreeSite {
                        stack,
                        frames: leaks::frames(state, stack),
                        site: None,
                        frees,
                        bytes,
                    })
                    .collect(),
                hidden_free_sites,
            }
        })
        .collect()
}

fn domain_summary(l: &Loaded, d: &DomainFigures) -> DomainSummary {
    let state = l.state();
    let t = d.total();
    let peak = state.domain(d.domain).map(|d| &d.peak);
    DomainSummary {
        domain: domain_ref(state, d.domain),
        live: Amount::new(t.live.bytes, t.live.count),
        peak: PeakInfo {
            bytes: t.peak.bytes,
            count: t.peak.count,
            seq: peak.map_or(0, |p| p.seq),
            time_ns: peak.map_or(0, |p| l.ns(p.time_ns)),
            frame: peak.and_then(|p| p.frame),
            after_label: peak.and_then(|p| p.after_label).map(|s| state.string(s)),
        },
        total: Amount::new(t.total_bytes, t.total_count),
        temporary: Amount::new(t.temp_bytes, t.temp_count),
    }
}

/// How a list of (context, bytes, count) rows sorts: no instances, no peak, its bytes as total.
fn context_keys(bytes: u64, count: u64, name: &str) -> Keys<'_> {
    Keys { bytes, count, name, instances: 0, total: bytes, peak: 0 }
}

/// The top `limit` contexts of a domain by `figure` (bytes, count), inclusive and
/// exclusive, leaving out empty ones and those under `--min-bytes`.
fn lists(l: &Loaded, d: &DomainFigures, limit: usize, figure: impl Fn(&figures::Agg) -> (u64, u64)) -> ContextLists {
    let state = l.state();
    let sel = &l.sel;
    let list = |inclusive: bool| {
        // Sorted with their paths borrowed; only the rows kept copy theirs.
        let mut rows: Vec<(Cow<'_, str>, u64, u64)> = d
            .rows()
            .map(|(node, exc, inc)| (node, if inclusive { inc } else { exc }))
            .filter(|&(node, a)| (!inclusive || node != ROOT) && sel.depth_shown(state, node) && figure(a).0 > 0)
            .filter(|&(_, a)| figure(a).0 >= sel.min_bytes)
            .map(|(node, a)| {
                let (bytes, count) = figure(a);
                (state.node_path_ref(node), bytes, count)
            })
            .collect();
        sort_rows(&mut rows, sel.sort, |r| context_keys(r.1, r.2, &r.0));
        rows.truncate(limit);
        // A new vector: collected in place, the kept rows would hold the whole list's room.
        let mut kept = Vec::with_capacity(rows.len());
        kept.extend(rows.into_iter().map(|(context, bytes, count)| ContextAmount {
            context: context.into_owned(),
            bytes,
            count,
        }));
        kept
    };
    ContextLists { inclusive: list(true), exclusive: list(false) }
}

impl Summary {
    /// The report as text.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        // Writing to a String cannot fail.
        let _ = self.write_text(&mut o);
        o
    }

    fn write_text(&self, o: &mut String) -> std::fmt::Result {
        let c = &self.capture;
        writeln!(o, "{}", self.path)?;
        writeln!(
            o,
            "  recorded   {}, pid {}{}, by {} (format {})",
            c.start_utc,
            c.pid,
            if c.exe_path.is_empty() { String::new() } else { format!(" {}", c.exe_path) },
            c.recorder,
            c.format_version
        )?;
        let mut what = vec!["allocations"];
        if c.recorded.callstacks_on_alloc {
            what.push("allocation callstacks");
        }
        if c.recorded.callstacks_on_free {
            what.push("free callstacks");
        }
        if c.recorded.usage_changes {
            what.push("usage changes");
        }
        writeln!(o, "  captured   {}; callstacks up to {} frames", what.join(", "), c.recorded.max_stack_depth)?;
        let frames = match (c.first_frame, c.last_frame) {
            (Some(a), Some(b)) => format!(", {} ({a}..={b})", plural(c.frames, "frame")),
            _ => ", no frames".into(),
        };
        writeln!(
            o,
            "  duration   {}{}, {}{frames}",
            if c.duration_is_lower_bound { "at least " } else { "" },
            format_ms(c.duration_ns),
            plural(c.events, "event")
        )?;
        let threads: Vec<String> = c
            .threads
            .iter()
            .filter(|t| t.stream != 0 || t.name.is_some())
            .map(|t| {
                let mut s = format!("{} ({}", t.name.as_deref().unwrap_or("(unnamed)"), plural(t.events, "event"));
                if t.open_contexts > 0 {
                    let _ = write!(s, ", {} open at the end", plural(t.open_contexts, "context"));
                }
                s.push(')');
                s
            })
            .collect();
        writeln!(o, "  threads    {}", threads.join(", "))?;
        if !c.labels.is_empty() {
            let mut labels: Vec<String> = c
                .labels
                .iter()
                .take(TEXT_LABELS)
                .map(|l| format!("\"{}\" at {}", l.name, format_ms(l.time_ns)))
                .collect();
            if c.labels.len() > TEXT_LABELS {
                labels.push(format!("… {} more (--json lists them all)", c.labels.len() - TEXT_LABELS));
            }
            writeln!(o, "  labels     {}", labels.join(", "))?;
        }
        let i = &self.integrity;
        let state = match (i.complete, i.clean) {
            (true, true) => "complete, no damage".to_owned(),
            (true, false) => "complete but DAMAGED".to_owned(),
            (false, _) => "TRUNCATED (no end-of-log record)".to_owned(),
        };
        let mut lost = Vec::new();
        if i.bytes_lost > 0 {
            lost.push(format!("{} lost", size(i.bytes_lost)));
        }
        if i.events_in_bad_blocks > 0 {
            lost.push(format!("{} in damaged blocks", plural(i.events_in_bad_blocks, "event")));
        }
        if i.lost_events > 0 {
            lost.push(format!("{} lost by the recorder", plural(i.lost_events, "event")));
        }
        if lost.is_empty() && i.missing_after_ns.is_none() {
            lost.push("no events lost".into());
        }
        let mut line = format!("  integrity  {state}");
        if !lost.is_empty() {
            let _ = write!(line, "; {}", lost.join(", "));
        }
        if let Some(after) = i.missing_after_ns {
            let _ = write!(
                line,
                "; events after {} missing (a killed recording loses up to one flush interval, 100 ms by \
                 default)",
                format_ms(after)
            );
        }
        writeln!(o, "{line}")?;
        for d in &i.damage {
            writeln!(o, "             damage: {d}")?;
        }
        let a = &self.anomalies;
        let anomalies: Vec<String> = [
            (a.untracked_frees, "free", "of memory allocated before the recording"),
            (a.double_frees, "double free", ""),
            (a.overlapping_allocs, "overlapping allocation", ""),
            (a.unresolved_attaches, "unresolved attach", ""),
            (a.unbalanced_pops, "unbalanced pop", ""),
            (a.usage_without_allocation, "usage report", "without an allocation"),
            (a.impossible_sizes, "allocation", "past the end of the address space (byte figures are wrong)"),
        ]
        .iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, what, tail)| if tail.is_empty() { plural(*n, what) } else { format!("{} {tail}", plural(*n, what)) })
        .collect();
        writeln!(o, "  anomalies  {}", if anomalies.is_empty() { "none".to_owned() } else { anomalies.join(", ") })?;
        if let Some(b) = &self.before_start {
            writeln!(o, "  before     recording started: {}", crate::info::before_start_text(b))?;
        }
        if let Some(t) = &self.selection.thread {
            writeln!(o, "  thread     only allocations made by {}", t.name.as_deref().unwrap_or("(unnamed)"))?;
        }

        let live_col = format!("live {}", instances::short_at(&self.at));
        writeln!(o, "\nmemory by domain")?;
        let mut t = Table::new(&[
            ("domain", Align::Left),
            ("kind", Align::Left),
            ("capacity", Align::Right),
            (&live_col, Align::Right),
            ("count", Align::Right),
            ("peak", Align::Right),
            ("count", Align::Right),
            ("total allocated", Align::Right),
            ("count", Align::Right),
            ("peak at", Align::Left),
        ]);
        // With a thread filter, domains the thread never allocated in are noise.
        let shown: Vec<&DomainSummary> =
            self.domains.iter().filter(|d| d.total.count > 0 || d.peak.count > 0 || d.live.count > 0).collect();
        for d in &shown {
            let kind = match &d.domain.parent_name {
                Some(p) => format!("{} in {p}", d.domain.kind),
                None => d.domain.kind.clone(),
            };
            t.row(vec![
                d.domain.name.clone(),
                kind,
                if d.domain.capacity > 0 { size(d.domain.capacity) } else { "-".into() },
                size(d.live.bytes),
                d.live.count.to_string(),
                size(d.peak.bytes),
                d.peak.count.to_string(),
                size(d.total.bytes),
                d.total.count.to_string(),
                if d.peak.count > 0 { when(&d.peak) } else { "-".into() },
            ]);
        }
        let nested = shown.iter().any(|d| !d.domain.top_level);
        if shown.len() > 1 {
            t.row(vec![
                if nested { "all (top-level)*".into() } else { "all".into() },
                String::new(),
                String::new(),
                size(self.total.live.bytes),
                self.total.live.count.to_string(),
                String::new(),
                String::new(),
                size(self.total.total.bytes),
                self.total.total.count.to_string(),
            ]);
        }
        if shown.is_empty() {
            writeln!(o, "  no allocations")?;
        } else {
            o.push_str(&t.render(2));
        }
        if nested && shown.len() > 1 {
            writeln!(o, "  * domains within another (pools) are left out: their bytes are already in their parent")?;
        }
        if let Some(pm) = &self.process_memory {
            pm.write_text(o)?;
        }

        for tc in &self.top_contexts {
            let d = self.domains.iter().find(|d| d.domain.name == tc.domain);
            let peak_when = d.filter(|d| d.peak.count > 0).map_or_else(String::new, |d| format!(", {}", when(&d.peak)));
            writeln!(
                o,
                "\n{}: top contexts at the peak ({}{peak_when})",
                tc.domain,
                d.map_or_else(String::new, |d| size(d.peak.bytes))
            )?;
            side_by_side(o, &tc.peak)?;
            let live = d.map_or(0, |d| d.live.bytes);
            writeln!(o, "\n{}: top contexts {} ({})", tc.domain, self.at, size(live))?;
            if live == 0 {
                writeln!(o, "  nothing live")?;
            } else {
                side_by_side(o, &tc.live)?;
            }
        }

        writeln!(o, "\ninstances (bytes per instance, sub-contexts included)")?;
        if self.instances.is_empty() {
            writeln!(o, "  no instance contexts")?;
        } else {
            let at = instances::short_at(&self.at);
            let mut t = Table::new(&[
                ("type", Align::Left),
                ("domain", Align::Left),
                ("instances", Align::Right),
                (&at, Align::Right),
                ("at peak", Align::Right),
                ("allocated in all", Align::Right),
            ]);
            for d in &self.instances {
                for f in &d.types {
                    t.row(vec![
                        f.name.clone(),
                        d.domain.clone(),
                        f.instances.to_string(),
                        crate::table::size_f(f.bytes_per_instance),
                        crate::table::size_f(f.peak_bytes_per_instance),
                        crate::table::size_f(f.total_bytes_per_instance),
                    ]);
                }
            }
            o.push_str(&t.render(2));
        }

        let e = &self.efficiency;
        writeln!(o, "\ncontainer efficiency (containers that report their usage)")?;
        let live_at = format!("{}:", self.at);
        let w = live_at.chars().count().max(19) + 1;
        writeln!(o, "  {live_at:<w$}{}", efficiency::usage_text(&e.live))?;
        writeln!(o, "  {:<w$}{}", "at the heap's peak:", efficiency::usage_text(&e.peak))?;
        if !e.least_efficient_contexts.is_empty() {
            let mut t = Table::new(&[
                ("least efficient contexts", Align::Left),
                ("live", Align::Right),
                ("at peak", Align::Right),
                ("wasted at peak", Align::Right),
            ]);
            for c in &e.least_efficient_contexts {
                t.row(vec![
                    c.context.clone(),
                    if c.live.capacity_bytes > 0 { percent(c.live.efficiency) } else { "-".into() },
                    if c.peak.capacity_bytes > 0 { percent(c.peak.efficiency) } else { "-".into() },
                    size(c.peak.wasted_bytes),
                ]);
            }
            o.push_str(&t.render(2));
        }
        if e.worst_containers.is_empty() {
            writeln!(o, "  no container live at the end")?;
        } else {
            let mut t = Table::new(&[
                ("worst live containers", Align::Left),
                ("used", Align::Right),
                ("capacity", Align::Right),
                ("wasted", Align::Right),
                ("efficiency", Align::Right),
            ]);
            for c in &e.worst_containers {
                t.row(vec![
                    format!("{} {}", c.address, c.context),
                    size(c.live.used_bytes),
                    size(c.live.capacity_bytes),
                    size(c.live.wasted_bytes),
                    percent(c.live.efficiency),
                ]);
            }
            o.push_str(&t.render(2));
        }

        writeln!(o, "\nleaks (live at the end, by context)")?;
        if self.leaks.is_empty() {
            writeln!(o, "  none")?;
        } else {
            let mut t = Table::new(&[
                ("bytes", Align::Right),
                ("count", Align::Right),
                ("domain", Align::Left),
                ("context", Align::Left),
            ]);
            for g in &self.leaks {
                t.row(vec![size(g.bytes), g.count.to_string(), g.domain.clone(), g.context.clone()]);
            }
            o.push_str(&t.render(2));
        }

        writeln!(o, "\ntemporaries (freed before their thread allocated again, by context)")?;
        if self.temporaries.is_empty() {
            writeln!(o, "  none")?;
        } else {
            let mut t = Table::new(&[
                ("count", Align::Right),
                ("bytes", Align::Right),
                ("share", Align::Right),
                ("domain", Align::Left),
                ("context", Align::Left),
            ]);
            for g in &self.temporaries {
                t.row(vec![
                    g.count.to_string(),
                    size(g.bytes),
                    percent(Some(g.share)),
                    g.domain.clone(),
                    g.context.clone(),
                ]);
            }
            o.push_str(&t.render(2));
        }

        if self.selection.thread.is_none() {
            self.sites_text(o)?;
        }
        Ok(())
    }
}

impl Summary {
    fn sites_text(&self, o: &mut String) -> std::fmt::Result {
        writeln!(o, "\nallocation sites (by bytes allocated in all, every thread)")?;
        if self.sites.is_empty() {
            return writeln!(o, "  none");
        }
        let free_stacks = self.capture.recorded.callstacks_on_free;
        let mut t = Table::new(&[
            ("allocated", Align::Right),
            ("count", Align::Right),
            ("at peak", Align::Right),
            ("at end", Align::Right),
            ("temporaries", Align::Right),
            ("domain", Align::Left),
            ("callstack", Align::Left),
        ]);
        for s in &self.sites {
            t.row(vec![
                size(s.total.bytes),
                s.total.count.to_string(),
                size(s.peak.bytes),
                size(s.live.bytes),
                s.temporaries.to_string(),
                s.domain.clone(),
                leaks::site_text(s.stack, &s.frames, s.site.as_ref()),
            ]);
            // MemReplay's free callstacks: where this site's blocks were freed from, in
            // the last column under the site.
            if free_stacks {
                let mut under = |text: String| {
                    let mut row = vec![String::new(); 6];
                    row.push(text);
                    t.row(row);
                };
                for f in &s.freed_from {
                    let from = match f.stack {
                        0 => "freed without a callstack".to_string(),
                        n => format!("freed from {}", leaks::site_text(n, &f.frames, f.site.as_ref())),
                    };
                    under(format!("  {} ({}): {from}", plural(f.frees, "free"), size(f.bytes)));
                }
                if s.hidden_free_sites > 0 {
                    under(format!("  … {} more free callstacks", s.hidden_free_sites));
                }
            }
        }
        o.push_str(&t.render(2));
        if let Some(s) = &self.symbols {
            writeln!(o, "\nsymbols: {}", s.text())?;
        }
        Ok(())
    }
}

impl ProcessMemorySummary {
    fn write_text(&self, o: &mut String) -> std::fmt::Result {
        writeln!(o, "\nprocess memory (what the OS saw: {})", plural(self.samples, "sample"))?;
        let figure = |o: &mut String, name: &str, f: &ProcessFigure| {
            writeln!(
                o,
                "  {name:<10} peak {} at {}, at the end {}",
                size(f.peak),
                format_ms(f.peak_time_ns),
                size(f.end)
            )
        };
        figure(o, "resident", &self.resident)?;
        if let Some(c) = &self.committed {
            figure(o, "committed", c)?;
        }
        let signed = |v: i64| if v < 0 { format!("-{}", size(v.unsigned_abs())) } else { size(v as u64) };
        write!(
            o,
            "  tracked    {} at the end ({}); untracked {} of resident",
            size(self.tracked_end),
            self.tracked_domains.join(", "),
            signed(self.untracked_resident_end)
        )?;
        match self.untracked_committed_end {
            Some(c) => writeln!(o, ", {} of committed", signed(c)),
            None => writeln!(o),
        }
    }
}

/// `8.401 ms, frame 3, after "main menu"`.
fn when(p: &PeakInfo) -> String {
    let mut s = format_ms(p.time_ns);
    if let Some(f) = p.frame {
        let _ = write!(s, ", frame {f}");
    }
    if let Some(l) = &p.after_label {
        let _ = write!(s, ", after \"{l}\"");
    }
    s
}

/// Inclusive and exclusive lists as one table: rank, then each list's bytes and context.
fn side_by_side(o: &mut String, lists: &ContextLists) -> std::fmt::Result {
    let mut t = Table::new(&[("inclusive", Align::Right), ("count", Align::Right), ("context", Align::Left)]);
    for r in &lists.inclusive {
        t.row(vec![size(r.bytes), r.count.to_string(), r.context.clone()]);
    }
    o.push_str(&t.render(2));
    let mut t = Table::new(&[("exclusive", Align::Right), ("count", Align::Right), ("context", Align::Left)]);
    for r in &lists.exclusive {
        t.row(vec![size(r.bytes), r.count.to_string(), r.context.clone()]);
    }
    o.push_str(&t.render(2));
    Ok(())
}
