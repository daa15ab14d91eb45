//! The options every report shares (`--domain`, `--thread`, `--at`, `--json`, `--depth`,
//! `--min-bytes`, `--sort`, `--limit`) and their resolution against a replayed log.

use std::path::PathBuf;

use serde::Serialize;

use crate::Error;
use memreplay_replay::{FxMap, Held, Marker, NodeId};
use memreplay_replay::{LabelSnapshots, ReplayOptions, ReplayState};

/// `--sort`: the order of lists and of the tree's children (largest first, names A–Z).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SortKey {
    /// Bytes (at the point shown, or the report's main figure).
    #[default]
    Bytes,
    /// Allocation counts.
    Count,
    /// Context path or name, A to Z.
    Name,
    /// Instances (contexts entered with the instance flag).
    Instances,
    /// Bytes allocated over the whole recording.
    Total,
}

/// `--at`: a label (by name) or the start of a frame (`frame:N`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// At the label of this name.
    Label(String),
    /// At the start of this frame.
    Frame(u64),
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Label(l) => write!(f, "label \"{l}\""),
            At::Frame(n) => write!(f, "frame {n}"),
        }
    }
}

/// Parses `--at`: `frame:N` is a frame, anything else a label name.
pub fn parse_at(s: &str) -> Result<At, String> {
    match s.strip_prefix("frame:") {
        Some(n) => n.trim().parse().map(At::Frame).map_err(|_| format!("`{n}` is not a frame number (frame:N)")),
        None if s.is_empty() => Err("a label name or frame:N".into()),
        None => Ok(At::Label(s.to_owned())),
    }
}

/// Parses a byte count: `4096`, `64k`, `64KiB`, `1.5MiB`, `2g` (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("`{s}` is not a size (bytes, or with a k/KiB, m/MiB, g/GiB suffix)")),
    };
    if mult == 1 {
        return num.parse().map_err(|_| format!("`{s}` is not a whole number of bytes"));
    }
    let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a size"))?;
    Ok((v * mult as f64).round() as u64)
}

/// The options every report takes, and the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportOptions {
    /// The log to read.
    pub log: PathBuf,
    /// Only this memory domain (name or id: heap, vram.local, ...). Default: every domain,
    /// each reported on its own.
    pub domain: Option<String>,
    /// Only allocations made by this thread (its name, stream number or OS thread id).
    pub thread: Option<String>,
    /// Figures at a label (by name) or at the start of frame N (frame:N) instead of at
    /// the end.
    pub at: Option<At>,
    /// Machine-readable JSON output (exact integers; see JSON.md).
    pub json: bool,
    /// Deepest context level shown (1 = top-level contexts only).
    pub depth: Option<u32>,
    /// Hide rows with fewer bytes than this (4096, 64KiB, 1MiB; default 0).
    pub min_bytes: Option<u64>,
    /// Order of lists and of the tree's children (default: bytes).
    pub sort: Option<SortKey>,
    /// Rows per list (default 20; 10 per list in `summarize`; 0: no limit).
    pub limit: Option<usize>,
}

impl ReportOptions {
    /// Default options for the log at `path`.
    pub fn new(path: impl Into<PathBuf>) -> ReportOptions {
        ReportOptions { log: path.into(), ..ReportOptions::default() }
    }

    /// What the replay must keep for these options: a snapshot at the point `--at` names (a
    /// label of that name, or the frame, and a label named `frame:N`, which wins over it),
    /// at no other label.
    pub fn replay_options(&self) -> ReplayOptions {
        ReplayOptions {
            snapshot_frame: match self.at {
                Some(At::Frame(n)) => Some(n),
                _ => None,
            },
            label_snapshots: LabelSnapshots::Evenly {
                count: 0,
                named: match &self.at {
                    None => Vec::new(),
                    Some(At::Label(name)) => vec![name.clone()],
                    Some(At::Frame(n)) => vec![format!("frame:{n}")],
                },
            },
        }
    }
}

/// One of the shared options of [`ReportOptions`], as a command declares what it reads
/// ([`Takes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedOption {
    Domain,
    Thread,
    At,
    Json,
    Depth,
    MinBytes,
    Sort,
    Limit,
}

impl SharedOption {
    /// Every shared option, in the order `--help` lists them.
    pub const ALL: [SharedOption; 8] = [
        SharedOption::Domain,
        SharedOption::Thread,
        SharedOption::At,
        SharedOption::Json,
        SharedOption::Depth,
        SharedOption::MinBytes,
        SharedOption::Sort,
        SharedOption::Limit,
    ];

    /// The option as typed: `--min-bytes`.
    pub fn flag(self) -> &'static str {
        match self {
            SharedOption::Domain => "--domain",
            SharedOption::Thread => "--thread",
            SharedOption::At => "--at",
            SharedOption::Json => "--json",
            SharedOption::Depth => "--depth",
            SharedOption::MinBytes => "--min-bytes",
            SharedOption::Sort => "--sort",
            SharedOption::Limit => "--limit",
        }
    }

    /// Whether `args` gives the option (rather than leaving it to its default).
    pub fn given(self, args: &ReportOptions) -> bool {
        match self {
            SharedOption::Domain => args.domain.is_some(),
            SharedOption::Thread => args.thread.is_some(),
            SharedOption::At => args.at.is_some(),
            SharedOption::Json => args.json,
            SharedOption::Depth => args.depth.is_some(),
            SharedOption::MinBytes => args.min_bytes.is_some(),
            SharedOption::Sort => args.sort.is_some(),
            SharedOption::Limit => args.limit.is_some(),
        }
    }
}

/// What a command does with the shared options: the ones it reads, and why it takes none
/// of the others. [`Takes::check`] refuses every option given that the command does not
/// read, so that none is accepted and then ignored.
#[derive(Debug, Clone, Copy)]
pub struct Takes {
    /// The command as messages name it: `timeline`, `export --format csv`.
    pub command: &'static str,
    /// The shared options it reads.
    pub reads: &'static [SharedOption],
    /// Why it does not take one of the others (what the message says after the option).
    pub why_not: &'static [(SharedOption, &'static str)],
}

impl Takes {
    /// One line per option given in `args` that the command does not read:
    /// `timeline does not take --json: it draws SVG (or PNG); …`.
    pub fn refusals(&self, args: &ReportOptions) -> Vec<String> {
        SharedOption::ALL
            .into_iter()
            .filter(|o| o.given(args) && !self.reads.contains(o))
            .map(|o| match self.why_not.iter().find(|(w, _)| *w == o) {
                Some((_, why)) => format!("{} does not take {}: {why}", self.command, o.flag()),
                None => format!("{} does not take {}", self.command, o.flag()),
            })
            .collect()
    }

    /// Refuses the options given in `args` that the command does not read (all of them,
    /// one line each).
    pub fn check(&self, args: &ReportOptions) -> Result<(), Error> {
        refuse(self.refusals(args))
    }
}

/// A usage error of `refusals`, one line each; `Ok` when there are none.
pub fn refuse(refusals: Vec<String>) -> Result<(), Error> {
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(Error::Usage(refusals.join("\n")))
    }
}

/// Where figures are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Point {
    /// At the end of the log.
    End,
    /// At the label `index` of `ReplayState::labels`.
    Label(usize),
    /// At the start of a frame (the replay's frame snapshot).
    Frame(u64),
}

/// The options, resolved against a replayed state.
#[derive(Debug, Clone)]
pub struct Selection {
    /// Domains reported on, by id.
    pub domains: Vec<u32>,
    /// `--domain`, resolved.
    pub domain: Option<u32>,
    /// `--thread`, resolved to a stream.
    pub thread: Option<u32>,
    pub point: Point,
    pub depth: Option<u32>,
    pub min_bytes: u64,
    pub sort: SortKey,
    /// Rows per list, if `--limit` was given (0: no limit).
    pub limit: Option<usize>,
    /// What each slot held at the point (`None` at the end: read the slots themselves).
    held: Option<FxMap<u32, Held>>,
}

impl Selection {
    /// Resolves `args` against `state`. A domain, thread, label or frame that is not in
    /// the log is an error naming the ones that are.
    pub fn resolve(state: &ReplayState, args: &ReportOptions) -> Result<Selection, Error> {
        let all = all_domains(state);
        let domain = match &args.domain {
            None => None,
            Some(name) => Some(find_domain(state, &all, name)?),
        };
        let thread = match &args.thread {
            None => None,
            Some(name) => Some(find_thread(state, name)?),
        };
        let (point, marker) = match &args.at {
            None => (Point::End, None),
            Some(at) => {
                let (p, m) = find_point(state, at)?;
                (p, Some(m))
            }
        };
        let held = match marker {
            None => None,
            Some(m) => Some(state.held_at(m).ok_or_else(|| {
                Error::Usage(format!("{} has no snapshot: the replay kept none there", args.at.as_ref().expect("--at")))
            })?),
        };
        let held = held.map(|h| h.into_iter().collect());
        Ok(Selection {
            domains: domain.map_or(all, |d| vec![d]),
            domain,
            thread,
            point,
            depth: args.depth,
            min_bytes: args.min_bytes.unwrap_or(0),
            sort: args.sort.unwrap_or_default(),
            limit: args.limit,
            held,
        })
    }

    /// The same selection over other domains.
    pub fn with_domains(&self, domains: Vec<u32>) -> Selection {
        Selection { domains, ..self.clone() }
    }

    /// Rows per list: `--limit`, or `default`; `--limit 0` is no limit (`usize::MAX`).
    pub fn limit_or(&self, default: usize) -> usize {
        match self.limit {
            None => default,
            Some(0) => usize::MAX,
            Some(n) => n,
        }
    }

    /// Whether rows of context `node` are shown under `--depth` (the root, outside any
    /// context, always is).
    pub fn depth_shown(&self, state: &ReplayState, node: NodeId) -> bool {
        self.depth.is_none_or(|max| state.node_depth(node) <= max)
    }

    /// Whether figures are read at the end of the log (no `--at`).
    pub fn at_end(&self) -> bool {
        self.point == Point::End
    }

    /// Whether slot `slot` passes the domain and thread filters (any domain in `domains`).
    pub fn slot_selected(&self, state: &ReplayState, slot: u32) -> bool {
        let s = &state.slots[slot as usize];
        self.thread.is_none_or(|t| s.thread == t) && self.domain.is_none_or(|d| s.domain == d)
    }

    /// What slot `slot` held at the point.
    pub fn held(&self, state: &ReplayState, slot: u32) -> Held {
        match &self.held {
            Some(map) => map.get(&slot).copied().unwrap_or_default(),
            None => held_now(state, slot),
        }
    }

    /// The marker of the point, if it is a label or a frame.
    pub fn marker<'a>(&self, state: &'a ReplayState) -> Option<&'a Marker> {
        match self.point {
            Point::End => None,
            Point::Label(i) => state.labels.get(i),
            Point::Frame(_) => state.frame_snapshot.as_ref(),
        }
    }

    /// The selection as reported in JSON.
    pub fn info(&self, state: &ReplayState, ticks_per_second: u64) -> SelectionInfo {
        let marker = self.marker(state);
        SelectionInfo {
            domain: self.domain.map(|d| state.domain_name(d)),
            thread: self.thread.map(|t| thread_ref(state, t)),
            at: PointInfo {
                kind: match self.point {
                    Point::End => "end",
                    Point::Label(_) => "label",
                    Point::Frame(_) => "frame",
                },
                label: match self.point {
                    Point::Label(i) => Some(state.string(state.labels[i].name)),
                    _ => None,
                },
                frame: match self.point {
                    Point::Frame(n) => Some(n),
                    _ => marker.and_then(|m| m.frame),
                },
                seq: marker.map(|m| m.seq),
                time_ns: marker.map(|m| ticks_to_ns(m.time_ns, ticks_per_second)),
            },
            sort: self.sort,
            min_bytes: self.min_bytes,
            depth: self.depth,
            limit: self.limit,
        }
    }

    /// "at the end", "at label "level loaded" (8.445 ms)", "at frame 10 (3.000 ms)".
    pub fn point_text(&self, state: &ReplayState, ticks_per_second: u64) -> String {
        let ms = |m: &Marker| crate::time::format_ms(ticks_to_ns(m.time_ns, ticks_per_second));
        match (&self.point, self.marker(state)) {
            (Point::Label(i), Some(m)) => format!("at label \"{}\" ({})", state.string(state.labels[*i].name), ms(m)),
            (Point::Frame(n), Some(m)) => format!("at the start of frame {n} ({})", ms(m)),
            _ => "at the end".into(),
        }
    }
}

/// What a slot holds now.
pub fn held_now(state: &ReplayState, slot: u32) -> Held {
    let f = &state.slots[slot as usize].now;
    Held { bytes: f.live_bytes, count: f.live_count, used_bytes: f.used_bytes, usage_capacity: f.usage_capacity }
}

pub use memreplay_replay::ticks_to_ns;

/// The selection, as the JSON reports carry it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelectionInfo {
    /// `--domain` (its name), or null for every domain.
    pub domain: Option<String>,
    /// `--thread`, or null for every thread.
    pub thread: Option<ThreadRef>,
    /// Where the figures called "live" are read.
    pub at: PointInfo,
    pub sort: SortKey,
    pub min_bytes: u64,
    pub depth: Option<u32>,
    pub limit: Option<usize>,
}

/// Where the "live" figures are read: the end, a label or a frame start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PointInfo {
    /// `end`, `label` or `frame`.
    pub kind: &'static str,
    pub label: Option<String>,
    /// The frame started there (`frame`), or in progress at the label.
    pub frame: Option<u64>,
    /// Sequence number of the label or frame start (null at the end).
    pub seq: Option<u64>,
    /// Nanoseconds since the start (null at the end).
    pub time_ns: Option<u64>,
}

/// A thread (event stream).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadRef {
    pub stream: u32,
    pub name: Option<String>,
    pub os_tid: Option<u64>,
}

pub fn thread_ref(state: &ReplayState, stream: u32) -> ThreadRef {
    let t = state.thread(stream);
    ThreadRef {
        stream,
        name: t.filter(|t| t.name != 0).map(|t| state.string(t.name)),
        os_tid: t.map(|t| t.os_tid).filter(|&tid| tid != 0),
    }
}

/// A thread's display name: its name, or what it is.
pub fn thread_display(state: &ReplayState, stream: u32) -> String {
    match thread_ref(state, stream).name {
        Some(n) => n,
        None if stream == 0 => "(recorder metadata)".into(),
        None => format!("(unnamed thread {stream})"),
    }
}

/// Every domain the log defines or allocates in, by id (the heap first).
pub fn all_domains(state: &ReplayState) -> Vec<u32> {
    let mut ids: Vec<u32> = state.domains().map(|d| d.id).chain(state.domain_info.keys().copied()).collect();
    ids.push(memreplay_format::HEAP_DOMAIN);
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn quoted_list(items: impl Iterator<Item = String>) -> String {
    let v: Vec<String> = items.map(|s| format!("\"{s}\"")).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn find_domain(state: &ReplayState, all: &[u32], name: &str) -> Result<u32, Error> {
    if let Some(&d) = all.iter().find(|&&d| state.domain_name(d) == name) {
        return Ok(d);
    }
    if let Some(d) = name.parse::<u32>().ok().filter(|d| all.contains(d)) {
        return Ok(d);
    }
    Err(Error::Usage(format!(
        "no domain \"{name}\" in the log; domains: {}",
        quoted_list(all.iter().map(|&d| state.domain_name(d)))
    )))
}

fn sorted_threads(state: &ReplayState) -> Vec<u32> {
    let mut v: Vec<u32> = state.threads().map(|t| t.id).collect();
    v.sort_unstable();
    v
}

fn find_thread(state: &ReplayState, name: &str) -> Result<u32, Error> {
    let threads = sorted_threads(state);
    if let Some(&t) = threads.iter().find(|&&t| thread_ref(state, t).name.as_deref() == Some(name)) {
        return Ok(t);
    }
    if let Ok(id) = name.parse::<u64>() {
        if let Some(&t) = threads.iter().find(|&&t| u64::from(t) == id) {
            return Ok(t);
        }
        if let Some(&t) = threads.iter().find(|&&t| thread_ref(state, t).os_tid == Some(id)) {
            return Ok(t);
        }
    }
    Err(Error::Usage(format!(
        "no thread \"{name}\" in the log; threads: {}",
        threads.iter().map(|&t| format!("{t} \"{}\"", thread_display(state, t))).collect::<Vec<_>>().join(", ")
    )))
}

fn find_point<'a>(state: &'a ReplayState, at: &At) -> Result<(Point, &'a Marker), Error> {
    let label_named = |name: &str| state.labels.iter().position(|m| state.string(m.name) == name);
    let labels = || quoted_list(state.labels.iter().map(|m| state.string(m.name)));
    match at {
        At::Label(name) => match label_named(name) {
            Some(i) => Ok((Point::Label(i), &state.labels[i])),
            None => Err(Error::Usage(format!("no label \"{name}\" in the log; labels: {}", labels()))),
        },
        At::Frame(n) => {
            // A label literally named "frame:N" wins over the frame.
            if let Some(i) = label_named(&format!("frame:{n}")) {
                return Ok((Point::Label(i), &state.labels[i]));
            }
            match &state.frame_snapshot {
                Some(m) => Ok((Point::Frame(*n), m)),
                None => {
                    let frames = match (state.frames.first(), state.frames.last()) {
                        (Some(a), Some(b)) => format!("frames {}..={}", a.frame, b.frame),
                        _ => "no frames".into(),
                    };
                    Err(Error::Usage(format!("no frame {n} in the log ({frames}); labels: {}", labels())))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_and_sizes_parse() {
        assert_eq!(parse_at("frame:12"), Ok(At::Frame(12)));
        assert_eq!(parse_at("level loaded"), Ok(At::Label("level loaded".into())));
        assert!(parse_at("frame:x").is_err());
        assert!(parse_at("").is_err());
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64KiB"), Ok(65536));
        assert_eq!(parse_bytes("1.5m"), Ok(1_572_864));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("12 parsecs").is_err());
    }
}
