//! `export --format pprof`: the allocation sites as a gzipped `profile.proto`, the format
//! of Go's pprof and the viewers that read it.
//!
//! One sample per (callstack, domain), labelled `domain`, with six values:
//! `alloc_objects`/`alloc_space` (allocated over the recording), `inuse_objects`/
//! `inuse_space` (live at the end) and `peak_objects`/`peak_space` (held at the domain's
//! peak); `inuse_space` is the default. Locations are the recorded return addresses, each
//! with its inlined frames as lines (innermost first), in the mapping of its module; the
//! recorder's and the allocator's frames are trimmed from the top, as everywhere.

use std::collections::HashMap;

use prost::Message as _;

use crate::Error;
use memreplay_symbols::{Frame, SymbolOptions, SymbolStats, Symbolizer};

use crate::callstacks::symbolizer;
use crate::sites::{collect, Metric, SiteQuery};
use crate::Loaded;

/// The messages of pprof's `profile.proto` (package `perftools.profiles`), by hand:
/// field numbers and types as in the schema, so no `protoc` is needed. The fields are
/// the schema's, documented there.
#[allow(missing_docs)]
pub mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        #[prost(int64, tag = "7")]
        pub drop_frames: i64,
        #[prost(int64, tag = "8")]
        pub keep_frames: i64,
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        #[prost(int64, tag = "1")]
        pub key: i64,
        #[prost(int64, tag = "2")]
        pub str: i64,
        #[prost(int64, tag = "3")]
        pub num: i64,
        #[prost(int64, tag = "4")]
        pub num_unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub file_offset: u64,
        #[prost(int64, tag = "5")]
        pub filename: i64,
        #[prost(int64, tag = "6")]
        pub build_id: i64,
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
        #[prost(bool, tag = "8")]
        pub has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub has_inline_frames: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub address: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
        #[prost(bool, tag = "5")]
        pub is_folded: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        #[prost(int64, tag = "2")]
        pub line: i64,
        #[prost(int64, tag = "3")]
        pub column: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        #[prost(int64, tag = "4")]
        pub filename: i64,
        #[prost(int64, tag = "5")]
        pub start_line: i64,
    }
}

/// The sample types, in order: (type, unit).
pub const SAMPLE_TYPES: [(&str, &str); 6] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
    ("peak_objects", "count"),
    ("peak_space", "bytes"),
];

/// Builds the profile data (not yet gzipped) and what symbolication found: the selected
/// domain with `--domain` (`domain_given`), else every top-level domain.
pub fn profile(
    l: &Loaded,
    symbols: &SymbolOptions,
    domain_given: bool,
) -> Result<(proto::Profile, SymbolStats), Error> {
    let state = l.state();
    let mut syms = symbolizer(l, symbols)?;
    let rows = collect(l, &SiteQuery { metric: Metric::Total, ..SiteQuery::default() })?;
    let domains: Vec<u32> = if domain_given {
        l.sel.domains.clone()
    } else {
        l.sel.domains.iter().copied().filter(|&d| state.is_top_level_domain(d)).collect()
    };
    let mut b = Builder::new(&syms);
    b.p.sample_type = SAMPLE_TYPES.iter().map(|(t, u)| proto::ValueType { r#type: b.s(t), unit: b.s(u) }).collect();
    b.p.default_sample_type = b.s("inuse_space");
    b.p.period_type = Some(proto::ValueType { r#type: b.s("space"), unit: b.s("bytes") });
    b.p.period = 1;
    b.p.time_nanos = i64::try_from(l.replay.header.start_unix_ns).unwrap_or(i64::MAX);
    b.p.duration_nanos = i64::try_from(l.ns(state.end_time_ns)).unwrap_or(i64::MAX);
    let comment = b.s(&format!("memreplay log {}", l.path));
    b.p.comment.push(comment);
    let domain_key = b.s("domain");
    for r in rows.iter().filter(|r| domains.contains(&r.domain)) {
        let f = r.figures;
        let (total, live, peak) = (f.total.unwrap_or_default(), f.live.unwrap_or_default(), f.peak.unwrap_or_default());
        let site = syms.site(r.stack, state.stacks.get(r.stack));
        let locations = b.locations(&syms, &site.frames);
        let label = proto::Label { key: domain_key, str: b.s(&state.domain_name(r.domain)), num: 0, num_unit: 0 };
        let v = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
        b.p.sample.push(proto::Sample {
            location_id: locations,
            value: vec![v(total.count), v(total.bytes), v(live.count), v(live.bytes), v(peak.count), v(peak.bytes)],
            label: vec![label],
        });
    }
    let p = b.finish(&mut syms);
    let stats = syms.stats();
    tracing::debug!("symbolication: {}", stats.text());
    Ok((p, stats))
}

/// The profile gzipped, as written.
pub fn encode(p: &proto::Profile) -> Vec<u8> {
    use std::io::Write as _;
    let raw = p.encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::with_capacity(raw.len() / 4 + 64), flate2::Compression::default());
    gz.write_all(&raw).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

/// Reads a profile back: gunzips (when gzipped) and decodes `bytes` with the schema.
pub fn decode(bytes: &[u8]) -> Result<proto::Profile, String> {
    use std::io::Read as _;
    let raw = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(bytes).read_to_end(&mut raw).map_err(|e| format!("not gzip: {e}"))?;
        raw
    } else {
        bytes.to_vec()
    };
    proto::Profile::decode(raw.as_slice()).map_err(|e| format!("not a profile.proto: {e}"))
}

/// Interns strings, functions, locations and mappings.
struct Builder {
    p: proto::Profile,
    strings: HashMap<String, i64>,
    functions: HashMap<(String, String), u64>,
    /// (address, lines kept) → location id: a frame whose top was trimmed keeps fewer
    /// of its inlined lines.
    locations: HashMap<(u64, usize), u64>,
    /// Module index → mapping id (index + 1).
    used_modules: Vec<bool>,
}

impl Builder {
    fn new(syms: &Symbolizer) -> Builder {
        let mut b = Builder {
            p: proto::Profile::default(),
            strings: HashMap::new(),
            functions: HashMap::new(),
            locations: HashMap::new(),
            used_modules: vec![false; syms.modules().modules().len()],
        };
        b.s("");
        b
    }

    /// The string table index of `s`.
    fn s(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.p.string_table.len() as i64;
        self.p.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn function(&mut self, f: &Frame) -> u64 {
        let name = f.name();
        let file = f.file.clone().unwrap_or_default();
        if let Some(&id) = self.functions.get(&(name.clone(), file.clone())) {
            return id;
        }
        let id = self.p.function.len() as u64 + 1;
        let (n, fi) = (self.s(&name), self.s(&file));
        self.p.function.push(proto::Function { id, name: n, system_name: n, filename: fi, start_line: 0 });
        self.functions.insert((name, file), id);
        id
    }

    /// Location ids of a trimmed stack, leaf first: one per return address, its inlined
    /// frames as lines.
    fn locations(&mut self, syms: &Symbolizer, frames: &[Frame]) -> Vec<u64> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < frames.len() {
            // The frames of one address: inlined ones, then the one they are inlined into.
            let mut j = i;
            while j + 1 < frames.len() && frames[j].inlined && frames[j + 1].address == frames[i].address {
                j += 1;
            }
            let group = &frames[i..=j];
            let addr = group[0].address;
            let key = (addr, group.len());
            let id = match self.locations.get(&key) {
                Some(&id) => id,
                None => {
                    let id = self.p.location.len() as u64 + 1;
                    let mapping_id = match syms.modules().find(addr) {
                        Some(m) => {
                            self.used_modules[m] = true;
                            m as u64 + 1
                        }
                        None => 0,
                    };
                    let line = group
                        .iter()
                        .map(|f| proto::Line {
                            function_id: self.function(f),
                            line: f.line.map_or(0, i64::from),
                            column: 0,
                        })
                        .collect();
                    self.p.location.push(proto::Location { id, mapping_id, address: addr, line, is_folded: false });
                    self.locations.insert(key, id);
                    id
                }
            };
            out.push(id);
            i = j + 1;
        }
        out
    }

    /// The profile, with a mapping per module used.
    fn finish(mut self, syms: &mut Symbolizer) -> proto::Profile {
        let used: Vec<usize> = (0..self.used_modules.len()).filter(|&i| self.used_modules[i]).collect();
        for i in used {
            let m = syms.modules().get(i).clone();
            let (has_lines, has_functions) = match syms.binary(i) {
                Some(b) => (b.has_dwarf(), true),
                None => (false, false),
            };
            let (filename, build_id) = (self.s(&m.path), self.s(&m.build_id_hex()));
            self.p.mapping.push(proto::Mapping {
                id: i as u64 + 1,
                memory_start: m.base,
                memory_limit: m.base.saturating_add(m.size),
                // Not recorded (the locations are symbolicated already).
                file_offset: 0,
                filename,
                build_id,
                has_functions,
                has_filenames: has_lines,
                has_line_numbers: has_lines,
                has_inline_frames: has_lines,
            });
        }
        self.p
    }
}
