//! `info`: what a log holds and how whole it is, in one pass over its events.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use memreplay_format::{
    context_flags, header_flags, Block, BlockError, Compression, Damage, Event, FileHeader, FormatError, LogReader,
    ReadReport, HEAP_DOMAIN,
};
use rayon::prelude::*;
use serde::Serialize;

use crate::integrity::LogIntegrity;
use crate::table::{plural, size};
use crate::time::{format_ms, format_utc};
use memreplay_replay::CallsBeforeStart;

/// Everything `info` reports. Serializes to the `--json` output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Info {
    /// The log, as given.
    pub path: String,
    /// What its header says.
    pub header: HeaderInfo,
    /// Events, bytes and time in all.
    pub totals: Totals,
    /// Per thread (event stream).
    pub threads: Vec<ThreadInfo>,
    /// Events by kind.
    pub events: EventCounts,
    /// Where the file's bytes go: frames, payloads, and the raw payload bytes by record.
    pub bytes: LogBytes,
    /// The memory domains defined.
    pub domains: Vec<DomainInfo>,
    /// The context types defined.
    pub context_types: Vec<ContextTypeInfo>,
    /// Labels, in order.
    pub labels: Vec<LabelInfo>,
    /// Frame markers.
    pub frames: u64,
    /// Whether the log is whole, and what was lost if not.
    pub integrity: Integrity,
    /// The allocator calls made before recording started (format 1.3 `BeforeStart`
    /// records, summed): counted, not recorded one by one, and not a loss. Absent when
    /// the log has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_start: Option<CallsBeforeStart>,
}

/// The file header's facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeaderInfo {
    /// `major.minor`.
    pub format_version: String,
    pub recorder: String,
    pub os: String,
    pub arch: String,
    pub pid: u64,
    pub pointer_width: u8,
    pub exe_path: String,
    pub start_unix_ns: u64,
    /// The start time as `YYYY-MM-DD HH:MM:SS.mmm UTC`.
    pub start_utc: String,
    pub flags: u32,
    pub callstacks_on_alloc: bool,
    pub callstacks_on_free: bool,
    pub usage_changes: bool,
    pub max_stack_depth: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Totals {
    /// Event blocks decoded (damaged ones are not counted here).
    pub blocks: u64,
    /// Events decoded.
    pub events: u64,
    /// Bytes of the file.
    pub bytes: u64,
    pub bytes_per_event: f64,
    /// Nanoseconds from the start to the end-of-log record, or to the last clock reading
    /// of a truncated log (then `duration_is_lower_bound`).
    pub duration_ns: u64,
    pub duration_is_lower_bound: bool,
}

/// One event stream: a recorded thread (stream 0 holds the recorder's metadata).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadInfo {
    pub stream: u32,
    /// The last name the thread gave itself (`ThreadInfo` records), if any.
    pub name: Option<String>,
    pub os_tid: Option<u64>,
    pub blocks: u64,
    pub events: u64,
}

/// How many events of each kind the log holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventCounts {
    /// Heap allocations (domain 0). Allocations in other domains are under `domains`.
    pub alloc: u64,
    pub free: u64,
    pub realloc: u64,
    pub domain_alloc: u64,
    pub domain_free: u64,
    pub usage: u64,
    pub context_push: u64,
    pub context_pop: u64,
    pub attach_push: u64,
    pub attach_pop: u64,
    pub label: u64,
    pub frame_start: u64,
    pub time: u64,
    pub thread_info: u64,
    pub resource: u64,
    pub define_string: u64,
    pub define_stack: u64,
    pub define_context_type: u64,
    pub define_domain: u64,
    pub module: u64,
    /// `ProcessMemory` samples (format 1.1).
    pub process_memory: u64,
    /// `Budget` samples (format 1.2).
    pub budget: u64,
    /// `Display` sizes (format 1.2).
    pub display: u64,
    /// `BeforeStart` records (format 1.3).
    pub before_start: u64,
    /// `Lost` records, and the events they say were lost.
    pub lost: u64,
    pub lost_events: u64,
}

/// Where a log's bytes go. Raw bytes are the decompressed payloads: what each kind of
/// record costs before compression (the kinds are named as in `Info::events`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogBytes {
    /// Block frames (48 bytes each) of the event blocks decoded.
    pub frames: u64,
    /// Their payloads as stored (compressed).
    pub stored: u64,
    /// Their payloads decompressed.
    pub raw: u64,
    /// Raw payload bytes by record kind, in the order of `Info::events`; `unknown`:
    /// records of a newer minor version, skipped. They sum to `raw`.
    pub raw_by_record: Vec<RecordBytes>,
    /// The blocks by how their payload is stored (`lz4`, `zstd`, `lz4-columns`,
    /// `zstd-columns`, `none`: as is, when compressing did not make it smaller), in that
    /// order, each method present.
    pub compression: Vec<CompressionBytes>,
}

/// The event blocks stored one way, and their payloads' bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompressionBytes {
    /// `lz4`, `zstd`, `lz4-columns`, `zstd-columns`, `lz4-columns-size-deltas`,
    /// `zstd-columns-size-deltas` or `none`.
    pub method: &'static str,
    /// Event blocks stored this way.
    pub blocks: u64,
    /// Their payloads as stored.
    pub stored: u64,
    /// Their payloads decompressed.
    pub raw: u64,
}

/// The methods of [`LogBytes::compression`], by the frame's compression byte (SPEC.md
/// §4.2); a block of any other decodes nowhere, so is never counted.
const COMPRESSION_METHODS: [(Compression, &str); 7] = [
    (Compression::Lz4, "lz4"),
    (Compression::Zstd, "zstd"),
    (Compression::Lz4Columns, "lz4-columns"),
    (Compression::ZstdColumns, "zstd-columns"),
    (Compression::Lz4ColumnsSizeDeltas, "lz4-columns-size-deltas"),
    (Compression::ZstdColumnsSizeDeltas, "zstd-columns-size-deltas"),
    (Compression::None, "none"),
];

/// The raw payload bytes of one kind of record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordBytes {
    /// The kind, as named in `Info::events`.
    pub record: &'static str,
    /// Records of this kind.
    pub count: u64,
    /// Their raw bytes (tag, fields, and a sized record's length).
    pub bytes: u64,
}

/// The record kinds of [`LogBytes::raw_by_record`], by [`record_kind`].
const RECORD_KINDS: [&str; 26] = [
    "alloc",
    "free",
    "realloc",
    "domain_alloc",
    "domain_free",
    "usage",
    "context_push",
    "context_pop",
    "attach_push",
    "attach_pop",
    "label",
    "frame_start",
    "time",
    "thread_info",
    "resource",
    "define_string",
    "define_stack",
    "define_context_type",
    "define_domain",
    "module",
    "process_memory",
    "budget",
    "display",
    "before_start",
    "lost",
    "unknown",
];

/// The index in [`RECORD_KINDS`] of an event's record.
fn record_kind(e: &Event) -> usize {
    match e {
        Event::Alloc { domain: HEAP_DOMAIN, .. } => 0,
        Event::Free { domain: HEAP_DOMAIN, .. } => 1,
        Event::Realloc { .. } => 2,
        Event::Alloc { .. } => 3,
        Event::Free { .. } => 4,
        Event::Usage { .. } => 5,
        Event::ContextPush { .. } => 6,
        Event::ContextPop => 7,
        Event::AttachPush { .. } => 8,
        Event::AttachPop => 9,
        Event::Label { .. } => 10,
        Event::FrameStart { .. } => 11,
        Event::Time { .. } => 12,
        Event::ThreadInfo { .. } => 13,
        Event::Resource { .. } => 14,
        Event::DefineString { .. } => 15,
        Event::DefineStack { .. } => 16,
        Event::DefineContextType { .. } => 17,
        Event::DefineDomain { .. } => 18,
        Event::Module { .. } => 19,
        Event::ProcessMemory { .. } => 20,
        Event::Budget { .. } => 21,
        Event::Display { .. } => 22,
        Event::BeforeStart { .. } => 23,
        Event::Lost { .. } => 24,
        Event::Unknown { .. } => 25,
    }
}

/// A memory domain and what happened in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainInfo {
    pub id: u32,
    pub name: String,
    pub kind: String,
    pub capacity: u64,
    pub parent: Option<u32>,
    pub allocs: u64,
    pub frees: u64,
    /// Sum of the sizes of its allocations.
    pub alloc_bytes: u64,
    pub resources: u64,
}

/// A context type and how often it was entered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextTypeInfo {
    pub id: u32,
    pub name: String,
    pub pushes: u64,
    /// Pushes flagged as instances (one texture, one mesh).
    pub instances: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabelInfo {
    pub name: String,
    pub seq: u64,
    pub stream: u32,
    /// Nanoseconds since the start: the last clock reading before the label in its stream.
    pub time_ns: Option<u64>,
}

/// Whether the log is whole, and what was lost if not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Integrity {
    /// The end-of-log record is present (the recording was stopped cleanly and the file
    /// was not cut short).
    pub complete: bool,
    /// Complete and nothing damaged.
    pub clean: bool,
    /// Every damage the reader found, described.
    pub damage: Vec<String>,
    /// Bytes lost to truncation and corruption.
    pub bytes_lost: u64,
    /// Events known lost: those of blocks that failed to decode, those the recorder
    /// reported lost, and (with an end-of-log record) any other shortfall against its
    /// event count. Events in a cut-off tail cannot be counted.
    pub events_lost: u64,
    /// Events in blocks that failed to decode.
    pub events_in_bad_blocks: u64,
    /// Events the recorder itself could not record.
    pub recorder_lost_events: u64,
    /// The end-of-log record's totals.
    pub end: Option<EndInfo>,
    /// A truncated log: the time of the last clock reading, after which every event is
    /// missing (null for a complete log).
    pub missing_after_ns: Option<u64>,
}

/// What a truncated log is known to miss: everything after `after_ns`. The log does not
/// say which flush interval its recorder ran with.
pub(crate) fn missing_tail(after_ns: u64) -> String {
    format!(
        "events after {} (the last one read) are missing: a recording killed there loses up to one \
         flush interval of the recorder (100 ms by default); a file cut short otherwise (a full disk, a partial copy) may miss more",
        format_ms(after_ns)
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EndInfo {
    pub blocks: u64,
    pub events: u64,
    pub lost_events: u64,
    pub end_ns: u64,
}

impl Info {
    /// Summarizes the log `src` in one pass over the file, a few blocks at a time: each
    /// batch is decoded in parallel while the next one is read, then its events are counted
    /// in file order and dropped; only what the report lists (strings, labels) is kept.
    /// `path` is only displayed.
    pub fn read(path: &str, src: impl std::io::Read + Send) -> Result<Info, FormatError> {
        let mut reader = LogReader::new(src)?;
        let mut counter = Counter::default();
        // Enough blocks to keep every core decoding, few enough that a batch's events
        // (about half a megabyte per block) stay small next to the file.
        let batch_len = 2 * rayon::current_num_threads();
        let read_batch = |reader: &mut LogReader<_>| -> Result<Vec<Block>, FormatError> {
            let mut batch = Vec::with_capacity(batch_len);
            while batch.len() < batch_len {
                match reader.next_block()? {
                    Some(block) => batch.push(block),
                    None => break,
                }
            }
            Ok(batch)
        };
        // Each block's events with their records' lengths, in buffers kept from batch to
        // batch.
        let mut events: Vec<Vec<(Event, u32)>> = Vec::new();
        let mut next = read_batch(&mut reader)?;
        while !next.is_empty() {
            let batch = next;
            events.resize_with(events.len().max(batch.len()), Vec::new);
            // A block that fails to decode counts for nothing: it is decoded whole before
            // its events are counted.
            let (decoded, read) = rayon::join(
                || {
                    batch
                        .par_iter()
                        .zip(events.par_iter_mut())
                        .map_init(Vec::new, |buf, (block, out)| {
                            out.clear();
                            // A columns block is read from its columns, not joined first.
                            block.decode_with_lengths(buf, out)?;
                            // The records' sizes by kind, summed here, on the decoding
                            // threads.
                            let mut bytes = [(0u64, 0u64); RECORD_KINDS.len()];
                            for (event, len) in out.iter() {
                                let kind = &mut bytes[record_kind(event)];
                                kind.0 += 1;
                                kind.1 += u64::from(*len);
                            }
                            Ok(bytes)
                        })
                        .collect::<Vec<Result<[(u64, u64); RECORD_KINDS.len()], BlockError>>>()
                },
                || read_batch(&mut reader),
            );
            next = read?;
            for ((block, result), out) in batch.iter().zip(decoded).zip(&mut events) {
                match result {
                    Ok(bytes) => {
                        counter.stored += block.stored.len() as u64;
                        counter.raw += u64::from(block.frame.raw_len);
                        if let Some(m) = COMPRESSION_METHODS.iter().position(|m| m.0 == block.frame.compression) {
                            let m = &mut counter.by_method[m];
                            m.0 += 1;
                            m.1 += block.stored.len() as u64;
                            m.2 += u64::from(block.frame.raw_len);
                        }
                        for (sum, (count, n)) in counter.record_bytes.iter_mut().zip(bytes) {
                            sum.0 += count;
                            sum.1 += n;
                        }
                        counter.block(block.frame.thread, out.drain(..).map(|(event, _)| event));
                    }
                    Err(e) => reader.report_bad_block(block, e),
                }
            }
        }
        let header = reader.header().clone();
        let mut report = reader.into_report();
        // In file order, as a block-at-a-time read finds it: the next batch's framing
        // damage is found before the bad payloads of this one.
        report.damage.sort_by_key(Damage::offset);
        Ok(counter.finish(path, &header, &report))
    }
}

/// What `info` counts as the blocks go by. Names are kept as string ids until the end:
/// a string may be defined in any stream, after its first use in another.
#[derive(Default)]
struct Counter {
    strings: HashMap<u32, String>,
    counts: EventCounts,
    blocks: u64,
    threads: BTreeMap<u32, ThreadInfo>,
    thread_names: HashMap<u32, u32>,
    domains: BTreeMap<u32, DomainInfo>,
    domain_names: HashMap<u32, u32>,
    context_types: BTreeMap<u32, ContextTypeInfo>,
    context_type_names: HashMap<u32, u32>,
    /// Labels with their name's string id.
    labels: Vec<(u32, LabelInfo)>,
    clock: HashMap<u32, u64>,
    last_time: u64,
    /// Payload bytes of the blocks counted, stored and raw, and raw by record kind.
    stored: u64,
    raw: u64,
    /// Blocks, stored and raw bytes by [`COMPRESSION_METHODS`].
    by_method: [(u64, u64, u64); COMPRESSION_METHODS.len()],
    record_bytes: [(u64, u64); RECORD_KINDS.len()],
    before_start: Option<CallsBeforeStart>,
}

impl Counter {
    fn block(&mut self, stream: u32, events: impl Iterator<Item = Event>) {
        self.blocks += 1;
        let counts = &mut self.counts;
        let t = self.threads.entry(stream).or_insert_with(|| ThreadInfo {
            stream,
            name: None,
            os_tid: None,
            blocks: 0,
            events: 0,
        });
        t.blocks += 1;
        let mut decoded = 0;
        for event in events {
            if matches!(event, Event::Unknown { .. }) {
                continue;
            }
            decoded += 1;
            match &event {
                Event::Alloc { domain, size, .. } => {
                    if *domain == HEAP_DOMAIN {
                        counts.alloc += 1;
                    } else {
                        counts.domain_alloc += 1;
                        let d = domain_entry(&mut self.domains, *domain);
                        d.allocs += 1;
                        d.alloc_bytes = d.alloc_bytes.wrapping_add(*size);
                    }
                }
                Event::Free { domain, .. } => {
                    if *domain == HEAP_DOMAIN {
                        counts.free += 1;
                    } else {
                        counts.domain_free += 1;
                        domain_entry(&mut self.domains, *domain).frees += 1;
                    }
                }
                Event::Realloc { .. } => counts.realloc += 1,
                Event::Usage { .. } => counts.usage += 1,
                Event::ContextPush { ty, flags, .. } => {
                    counts.context_push += 1;
                    let c = context_entry(&mut self.context_types, *ty);
                    c.pushes += 1;
                    if flags & context_flags::INSTANCE != 0 {
                        c.instances += 1;
                    }
                }
                Event::ContextPop => counts.context_pop += 1,
                Event::AttachPush { .. } => counts.attach_push += 1,
                Event::AttachPop => counts.attach_pop += 1,
                Event::Time { ns } => {
                    counts.time += 1;
                    self.clock.insert(stream, *ns);
                    self.last_time = self.last_time.max(*ns);
                }
                Event::FrameStart { .. } => counts.frame_start += 1,
                Event::Label { seq, name } => {
                    counts.label += 1;
                    let time_ns = self.clock.get(&stream).copied();
                    self.labels.push((*name, LabelInfo { name: String::new(), seq: *seq, stream, time_ns }));
                }
                Event::DefineString { id, text } => {
                    counts.define_string += 1;
                    self.strings.insert(*id, text.clone());
                }
                Event::DefineStack { .. } => counts.define_stack += 1,
                Event::DefineContextType { id, name } => {
                    counts.define_context_type += 1;
                    if *name != 0 {
                        context_entry(&mut self.context_types, *id);
                        self.context_type_names.insert(*id, *name);
                    }
                }
                Event::DefineDomain { id, name, kind, capacity, parent } => {
                    counts.define_domain += 1;
                    let d = domain_entry(&mut self.domains, *id);
                    d.kind = kind.name().to_owned();
                    d.capacity = *capacity;
                    d.parent = *parent;
                    if *name != 0 {
                        self.domain_names.insert(*id, *name);
                    }
                }
                Event::Module { .. } => counts.module += 1,
                Event::ProcessMemory { .. } => counts.process_memory += 1,
                Event::Budget { .. } => counts.budget += 1,
                Event::Display { .. } => counts.display += 1,
                e @ Event::BeforeStart { .. } => {
                    counts.before_start += 1;
                    self.before_start.get_or_insert_with(CallsBeforeStart::default).add(e);
                }
                Event::ThreadInfo { os_tid, name } => {
                    counts.thread_info += 1;
                    let t = self.threads.get_mut(&stream).expect("inserted above");
                    t.os_tid = Some(*os_tid);
                    if *name != 0 {
                        self.thread_names.insert(stream, *name);
                    }
                }
                Event::Resource { domain, .. } => {
                    counts.resource += 1;
                    domain_entry(&mut self.domains, *domain).resources += 1;
                }
                Event::Lost { events, .. } => {
                    counts.lost += 1;
                    counts.lost_events = counts.lost_events.saturating_add(*events);
                }
                // Dropped by the decoder; nothing to count.
                Event::Unknown { .. } => {}
            }
        }
        if let Some(t) = self.threads.get_mut(&stream) {
            t.events += decoded;
        }
    }

    fn finish(self, path: &str, h: &FileHeader, report: &ReadReport) -> Info {
        let Counter {
            strings,
            counts,
            blocks,
            mut threads,
            thread_names,
            mut domains,
            domain_names,
            mut context_types,
            context_type_names,
            labels,
            last_time,
            stored,
            raw,
            record_bytes,
            by_method,
            before_start,
            ..
        } = self;
        let bytes = LogBytes {
            frames: blocks * memreplay_format::block::FRAME_LEN as u64,
            stored,
            raw,
            raw_by_record: RECORD_KINDS
                .iter()
                .zip(record_bytes)
                .map(|(&record, (count, bytes))| RecordBytes { record, count, bytes })
                .collect(),
            compression: COMPRESSION_METHODS
                .iter()
                .zip(by_method)
                .filter(|(_, (blocks, ..))| *blocks > 0)
                .map(|(&(_, method), (blocks, stored, raw))| CompressionBytes { method, blocks, stored, raw })
                .collect(),
        };
        let string = |id: u32| strings.get(&id).map_or_else(|| format!("<string {id}>"), |s| s.clone());
        for (stream, name) in thread_names {
            if let Some(t) = threads.get_mut(&stream) {
                t.name = Some(string(name));
            }
        }
        for (id, name) in domain_names {
            if let Some(d) = domains.get_mut(&id) {
                d.name = string(name);
            }
        }
        for (id, name) in context_type_names {
            if let Some(c) = context_types.get_mut(&id) {
                c.name = string(name);
            }
        }
        let mut labels: Vec<LabelInfo> = labels
            .into_iter()
            .map(|(name, mut l)| {
                if name != 0 {
                    l.name = string(name);
                }
                l
            })
            .collect();
        labels.sort_by_key(|l| l.seq);

        let header = HeaderInfo {
            format_version: format!("{}.{}", h.version_major, h.version_minor),
            recorder: h.recorder.clone(),
            os: h.os.clone(),
            arch: h.arch.clone(),
            pid: h.pid,
            pointer_width: h.pointer_width,
            exe_path: h.exe_path.clone(),
            start_unix_ns: h.start_unix_ns,
            start_utc: format_utc(h.start_unix_ns),
            flags: h.flags,
            callstacks_on_alloc: h.has(header_flags::CALLSTACKS_ON_ALLOC),
            callstacks_on_free: h.has(header_flags::CALLSTACKS_ON_FREE),
            usage_changes: h.has(header_flags::USAGE_CHANGES),
            max_stack_depth: h.max_stack_depth,
        };
        let events: u64 = threads.values().map(|t| t.events).fold(0, u64::wrapping_add);
        let end = report.end.map(|e| EndInfo {
            blocks: e.blocks,
            events: e.events,
            lost_events: e.lost_events,
            end_ns: e.end_ns,
        });
        let facts = LogIntegrity::new(report, counts.lost_events, last_time);
        let events_in_bad_blocks = facts.events_in_bad_blocks;
        let recorder_lost_events = facts.recorder_lost_events;
        // With the end record, anything short of its event count is lost, whatever the cause.
        let shortfall = end.map_or(0, |e| e.events.saturating_sub(events + events_in_bad_blocks));
        let integrity = Integrity {
            complete: facts.complete,
            clean: facts.undamaged(),
            damage: facts.damage_text(),
            bytes_lost: facts.bytes_lost,
            events_lost: events_in_bad_blocks.saturating_add(recorder_lost_events).saturating_add(shortfall),
            events_in_bad_blocks,
            recorder_lost_events,
            end,
            missing_after_ns: facts.read_until_ns,
        };

        Info {
            path: path.to_owned(),
            header,
            totals: Totals {
                blocks,
                events,
                bytes: report.bytes,
                bytes_per_event: if events == 0 { 0.0 } else { report.bytes as f64 / events as f64 },
                duration_ns: end.map_or(last_time, |e| e.end_ns),
                duration_is_lower_bound: end.is_none(),
            },
            threads: threads.into_values().collect(),
            domains: domains.into_values().collect(),
            context_types: context_types.into_values().collect(),
            labels,
            frames: counts.frame_start,
            events: counts,
            bytes,
            integrity,
            before_start,
        }
    }
}

impl Info {
    /// The `--json` output: pretty-printed, newline-terminated.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("Info serializes");
        s.push('\n');
        s
    }

    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        // Writing to a String cannot fail.
        let _ = self.write_text(&mut o);
        o
    }

    fn write_text(&self, o: &mut String) -> std::fmt::Result {
        let h = &self.header;
        writeln!(o, "{}", self.path)?;
        writeln!(o, "  format     memreplay log {}, written by {}", h.format_version, h.recorder)?;
        writeln!(o, "  system     {} {}, {}-byte pointers", h.os, h.arch, h.pointer_width)?;
        writeln!(
            o,
            "  process    pid {}, {}",
            h.pid,
            if h.exe_path.is_empty() { "(unknown executable)" } else { &h.exe_path }
        )?;
        writeln!(o, "  started    {}", h.start_utc)?;
        let mut recorded = vec!["allocations"];
        if h.callstacks_on_alloc {
            recorded.push("allocation callstacks");
        }
        if h.callstacks_on_free {
            recorded.push("free callstacks");
        }
        if h.usage_changes {
            recorded.push("usage changes");
        }
        writeln!(o, "  recorded   {}; callstacks up to {} frames", recorded.join(", "), h.max_stack_depth)?;
        let t = &self.totals;
        writeln!(
            o,
            "  duration   {}{}",
            if t.duration_is_lower_bound { "at least " } else { "" },
            format_ms(t.duration_ns)
        )?;

        writeln!(o, "\ntotals")?;
        writeln!(o, "  blocks     {}", t.blocks)?;
        writeln!(o, "  events     {}", t.events)?;
        writeln!(o, "  bytes      {} ({:.2} bytes/event)", t.bytes, t.bytes_per_event)?;
        writeln!(o, "  frames     {}", self.frames)?;

        writeln!(o, "\nthreads ({})", self.threads.len())?;
        writeln!(o, "  {:>6}  {:>10}  {:>9}  name", "stream", "os tid", "events")?;
        for th in &self.threads {
            let name = match (&th.name, th.stream) {
                (Some(n), _) => n.as_str(),
                (None, 0) => "(recorder metadata)",
                (None, _) => "(unnamed)",
            };
            let tid = th.os_tid.map_or_else(|| "-".to_owned(), |t| t.to_string());
            writeln!(o, "  {:>6}  {:>10}  {:>9}  {name}", th.stream, tid, th.events)?;
        }

        let e = &self.events;
        writeln!(o, "\nevents")?;
        let rows: [(&str, u64); 19] = [
            ("alloc", e.alloc),
            ("free", e.free),
            ("realloc", e.realloc),
            ("domain alloc", e.domain_alloc),
            ("domain free", e.domain_free),
            ("usage", e.usage),
            ("context push", e.context_push),
            ("context pop", e.context_pop),
            ("attach push", e.attach_push),
            ("attach pop", e.attach_pop),
            ("label", e.label),
            ("frame start", e.frame_start),
            ("time", e.time),
            ("thread info", e.thread_info),
            ("resource", e.resource),
            ("define string", e.define_string),
            ("define stack", e.define_stack),
            ("define ctx type", e.define_context_type),
            ("define domain", e.define_domain),
        ];
        for (name, n) in rows {
            writeln!(o, "  {name:<16} {n:>9}")?;
        }
        writeln!(o, "  {:<16} {:>9}", "module", e.module)?;
        writeln!(o, "  {:<16} {:>9}", "process memory", e.process_memory)?;
        // Format 1.2 and 1.3 records: said when a log has them.
        for (name, n) in [("budget", e.budget), ("display", e.display), ("before start", e.before_start)] {
            if n > 0 {
                writeln!(o, "  {name:<16} {n:>9}")?;
            }
        }
        writeln!(o, "  {:<16} {:>9}  ({} events lost)", "lost", e.lost, e.lost_events)?;

        let b = &self.bytes;
        let share = |n: u64, of: u64| if of == 0 { 0.0 } else { 100.0 * n as f64 / of as f64 };
        writeln!(o, "\nbytes (of the event blocks decoded)")?;
        // The methods' names, indented under the labels, and the byte counts lined up.
        let names = b.compression.iter().map(|m| m.method.len()).max().unwrap_or(0).max(14);
        let labels = names + 2;
        writeln!(o, "  {:<labels$} {:>12}", "block frames", b.frames)?;
        writeln!(
            o,
            "  {:<labels$} {:>12} stored, {} raw ({:.1} % of raw after compression)",
            "payloads",
            b.stored,
            b.raw,
            share(b.stored, b.raw)
        )?;
        for m in &b.compression {
            writeln!(
                o,
                "    {:<names$} {:>12} stored, {} raw ({:.1} %), {}",
                m.method,
                m.stored,
                m.raw,
                share(m.stored, m.raw),
                plural(m.blocks, "block")
            )?;
        }
        writeln!(o, "  raw payload bytes by record")?;
        writeln!(o, "    {:<20} {:>10}  {:>7}  {:>9}", "record", "bytes", "share", "each")?;
        for r in b.raw_by_record.iter().filter(|r| r.count > 0) {
            writeln!(
                o,
                "    {:<20} {:>10}  {:>5.1} %  {:>9.2}",
                r.record,
                r.bytes,
                share(r.bytes, b.raw),
                r.bytes as f64 / r.count as f64
            )?;
        }

        if !self.domains.is_empty() {
            writeln!(o, "\ndomains")?;
            for d in &self.domains {
                let parent = d.parent.map_or_else(String::new, |p| format!(", within domain {p}"));
                writeln!(o, "  {:>3} {:<16} {:<10} capacity {}{parent}", d.id, d.name, d.kind, d.capacity)?;
                writeln!(
                    o,
                    "      {} allocs ({} bytes), {} frees, {} resources",
                    d.allocs, d.alloc_bytes, d.frees, d.resources
                )?;
            }
        }

        if !self.context_types.is_empty() {
            writeln!(o, "\ncontext types")?;
            for c in &self.context_types {
                let inst = if c.instances > 0 { format!(" ({} instances)", c.instances) } else { String::new() };
                writeln!(o, "  {:<16} {:>6} pushes{inst}", c.name, c.pushes)?;
            }
        }

        writeln!(o, "\nlabels ({})", self.labels.len())?;
        for l in &self.labels {
            let at = l.time_ns.map_or_else(|| "?".to_owned(), format_ms);
            writeln!(o, "  {at:>14}  {}", l.name)?;
        }

        let i = &self.integrity;
        writeln!(o, "\nintegrity")?;
        let state = match (i.complete, i.clean) {
            (true, true) => "complete (end-of-log record present, no damage)",
            (true, false) => "complete but DAMAGED",
            (false, _) => "TRUNCATED (no end-of-log record)",
        };
        writeln!(o, "  {state}")?;
        for d in &i.damage {
            writeln!(o, "  damage: {d}")?;
        }
        writeln!(o, "  {} bytes / {} events lost", i.bytes_lost, i.events_lost)?;
        if let Some(after) = i.missing_after_ns {
            writeln!(o, "  {}", missing_tail(after))?;
        }
        if i.recorder_lost_events > 0 {
            writeln!(o, "  the recorder itself lost {} events", i.recorder_lost_events)?;
        }
        if let Some(b) = &self.before_start {
            writeln!(o, "\nbefore recording started (counted, not recorded one by one; not a loss)")?;
            writeln!(o, "  {}", before_start_text(b))?;
        }
        Ok(())
    }
}

/// What a log says of the calls before recording started, in one line: `3 allocations,
/// 1 free, 0 reallocs (72 KiB asked); 2 blocks still live at the start, recorded without
/// a callstack`.
pub fn before_start_text(b: &CallsBeforeStart) -> String {
    let mut line = format!(
        "{}, {}, {} ({} asked); {} still live at the start, recorded without a callstack",
        plural(b.allocations, "allocation"),
        plural(b.frees, "free"),
        plural(b.reallocs, "realloc"),
        size(b.bytes),
        plural(b.live, "block")
    );
    if b.untracked > 0 {
        let _ = write!(
            line,
            "; {} not kept track of (their frees are frees of unknown blocks)",
            plural(b.untracked, "block")
        );
    }
    line
}

/// The entry of domain `id`, created with placeholder facts if it was never defined.
fn domain_entry(domains: &mut BTreeMap<u32, DomainInfo>, id: u32) -> &mut DomainInfo {
    domains.entry(id).or_insert_with(|| DomainInfo {
        id,
        name: format!("<domain {id}>"),
        kind: "unknown".into(),
        capacity: 0,
        parent: None,
        allocs: 0,
        frees: 0,
        alloc_bytes: 0,
        resources: 0,
    })
}

/// The entry of context type `id`, created with a placeholder name if never defined.
fn context_entry(types: &mut BTreeMap<u32, ContextTypeInfo>, id: u32) -> &mut ContextTypeInfo {
    types.entry(id).or_insert_with(|| ContextTypeInfo { id, name: format!("<type {id}>"), pushes: 0, instances: 0 })
}
