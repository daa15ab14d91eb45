//! Offline symbolication: recorded return addresses → functions, files and lines.
//!
//! The recorder stores raw return addresses and the module map (path, load address, load
//! bias, build id of every image). [`Symbolizer`] finds each module's binary and debug
//! info on this machine ([`load`] says where it looks), and resolves each distinct
//! address once (DWARF with inlined frames, Rust and C++ names demangled; the symbol
//! table when there is no DWARF), caching the result. An address it cannot resolve
//! becomes `module+0xoffset` (the offset is the file address, `ip − load bias`, as
//! `addr2line -e module` takes it) or, outside every module, the bare address; each such
//! address is counted with its reason in [`SymbolStats`].
//!
//! [`Symbolizer::site`] turns a callstack into a [`SiteName`]: its frames, innermost
//! first, with the recorder's and the allocator wrapper's frames trimmed from the top
//! ([`is_recorder_frame`]), and the *allocating function*: the first frame outside the
//! Rust standard library ([`is_library_frame`]). Its keys ([`SiteName::function_key`],
//! [`SiteName::stack_key`]) name a site the same way in two recordings of the same
//! program whatever the addresses (ASLR), which is what comparing two logs needs.
//!
//! Symbolication reads binaries and the log's module map, never the events: the reports
//! call it on the replayed state's callstacks.

#![warn(missing_docs)]

mod binary;
mod dwarf;
mod modules;
mod reader;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

pub use binary::{load, Binary, LoadError, SYSTEM_DEBUG_DIR};
pub use modules::{Module, ModuleMap};

/// Where to look for binaries and debug files, and what to do with the stacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolOptions {
    /// `--symbols DIR`, in order: searched before the recorded paths.
    pub search_dirs: Vec<PathBuf>,
    /// Also look for separate debug files in `/usr/lib/debug`.
    pub system_debug_dir: bool,
    /// Load no binary: every frame stays `module+0xoffset` (`--no-symbols`).
    pub disabled: bool,
}

impl Default for SymbolOptions {
    fn default() -> Self {
        SymbolOptions { search_dirs: Vec::new(), system_debug_dir: true, disabled: false }
    }
}

/// How a frame was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resolution {
    /// From DWARF: function, file and line.
    Dwarf,
    /// From the symbol table: the function only.
    Symbol,
    /// Not resolved: `module+0xoffset`.
    None,
}

/// Why a frame has no file and line (or no function).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// `--no-symbols`.
    SymbolicationOff,
    /// The address is in no module the log recorded.
    NoModule,
    /// The module's binary is neither at its recorded path nor in a `--symbols` directory.
    BinaryNotFound,
    /// The files found are of another build (their build id differs).
    BuildIdMismatch,
    /// The file found is not an object file this build reads.
    UnreadableBinary,
    /// The file found could not be opened: the analyzer had as many files open as it
    /// may (its limit on open files; see the crate's README).
    TooManyOpenFiles,
    /// The binary has neither DWARF nor a symbol for the address (stripped).
    NoSymbols,
    /// The binary has a symbol table but no DWARF for the address: the function, without
    /// file and line.
    NoDebugInfo,
}

impl Reason {
    /// How the reason reads in a report ("no debug info", ...).
    pub fn text(self) -> &'static str {
        match self {
            Reason::SymbolicationOff => "symbolication off",
            Reason::NoModule => "in no recorded module",
            Reason::BinaryNotFound => "binary not found",
            Reason::BuildIdMismatch => "build id mismatch",
            Reason::UnreadableBinary => "unreadable binary",
            Reason::TooManyOpenFiles => "too many open files",
            Reason::NoSymbols => "no symbols",
            Reason::NoDebugInfo => "no line info",
        }
    }
}

/// One frame of a callstack. An address whose code was inlined gives several frames, the
/// innermost first; all but the last of them have `inlined` set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Frame {
    /// The return address as recorded.
    #[serde(serialize_with = "hex_u64")]
    pub address: u64,
    /// The module's file name (`libc.so.6`), if the address is in one.
    pub module: Option<String>,
    /// The file address in the module: `address − load bias`.
    #[serde(serialize_with = "hex_u64")]
    pub offset: u64,
    /// Demangled, without the Rust hash.
    pub function: Option<String>,
    /// The source file, if the debug info says.
    pub file: Option<String>,
    /// The line in it.
    pub line: Option<u32>,
    /// Inlined into the frame that follows.
    pub inlined: bool,
    /// How far the address was resolved.
    pub resolution: Resolution,
    /// Why the frame lacks file and line (null when it has them).
    pub reason: Option<Reason>,
}

fn hex_u64<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{v:#x}"))
}

impl Frame {
    /// The function's name, or `module+0xoffset`, or the bare address.
    pub fn name(&self) -> String {
        match (&self.function, &self.module) {
            (Some(f), _) => f.clone(),
            (None, Some(m)) => format!("{m}+{:#x}", self.offset),
            (None, None) => format!("{:#x}", self.address),
        }
    }

    /// `game.rs:42` style location: the file (as recorded in the debug info) and line.
    pub fn location(&self) -> Option<String> {
        let file = self.file.as_ref()?;
        Some(match self.line {
            Some(l) => format!("{file}:{l}"),
            None => file.clone(),
        })
    }

    /// `function (file:line)`, or `function`, or `module+0xoffset`.
    pub fn text(&self) -> String {
        match self.location() {
            Some(loc) => format!("{} ({})", self.name(), short_path(&loc)),
            None => self.name(),
        }
    }
}

/// A path as shown in tables: relative to the current directory when under it; the
/// standard library's `/rustc/<hash>/library/…` as `library/…`; a crate from the cargo
/// registry as `crate-1.0.0/src/…`.
pub fn short_path(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("/rustc/") {
        if let Some(i) = rest.find("/library/") {
            return rest[i + 1..].to_owned();
        }
    }
    if let Some(i) = path.find("/registry/src/") {
        let rest = &path[i + "/registry/src/".len()..];
        if let Some(j) = rest.find('/') {
            return rest[j + 1..].to_owned();
        }
    }
    if let Ok(cwd) = std::env::current_dir() {
        if let Ok(rel) = Path::new(path).strip_prefix(&cwd) {
            return rel.display().to_string();
        }
    }
    path.to_owned()
}

/// A callstack, symbolicated and trimmed: what the reports show for an allocation site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SiteName {
    /// Callstack id in the log (0: none recorded).
    pub stack: u32,
    /// The allocating function (see [`is_library_frame`]): its name, or
    /// `module+0xoffset` when unresolved; `(no callstack)` for stack 0.
    pub function: String,
    /// The file and line in it the allocation came from (null when unknown).
    pub file: Option<String>,
    /// See `file`.
    pub line: Option<u32>,
    /// Frames, innermost first, recorder and allocator frames trimmed.
    pub frames: Vec<Frame>,
    /// Frames trimmed from the top.
    pub trimmed: u32,
    /// Index in `frames` of the allocating function's frame.
    pub site_frame: u32,
}

impl SiteName {
    /// The "by function" key: the allocating function's name; for a bare name (an inlined
    /// function under line-tables-only debug info: `load_texture`, `{closure#0}`), with
    /// its file: `{closure#0} @ /src/game.rs`. The same in two recordings of the same
    /// program.
    pub fn function_key(&self) -> String {
        match &self.file {
            Some(file) if !is_qualified(&self.function) && !self.frames.is_empty() => {
                format!("{} @ {file}", self.function)
            }
            _ => self.function.clone(),
        }
    }

    /// The "whole stack" key: every frame's `function (file:line)`, innermost first,
    /// joined by `;`. The same in two recordings of the same program.
    pub fn stack_key(&self) -> String {
        if self.frames.is_empty() {
            return self.function.clone();
        }
        let mut s = String::new();
        for (i, f) in self.frames.iter().enumerate() {
            if i > 0 {
                s.push(';');
            }
            s.push_str(&f.name());
            if let Some(loc) = f.location() {
                s.push_str(" (");
                s.push_str(&loc);
                s.push(')');
            }
        }
        s
    }

    /// `function (file:line)` of the allocating function.
    pub fn text(&self) -> String {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{} ({}:{l})", self.function, short_path(f)),
            (Some(f), None) => format!("{} ({})", self.function, short_path(f)),
            _ => self.function.clone(),
        }
    }
}

/// Addresses that could not be fully resolved, for one reason and module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unresolved {
    /// Why they could not be resolved.
    pub reason: Reason,
    /// The module's path (null for addresses in no module).
    pub module: Option<String>,
    /// Distinct addresses.
    pub addresses: u64,
}

/// What symbolication found and what it cost, over the distinct addresses resolved.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SymbolStats {
    /// Modules in the log's map, and how many of them had a binary loaded.
    pub modules: u64,
    /// See `modules`.
    pub modules_loaded: u64,
    /// Distinct addresses resolved (each once).
    pub addresses: u64,
    /// With function, file and line.
    pub with_lines: u64,
    /// With the function only (symbol table).
    pub function_only: u64,
    /// Not resolved: `module+0xoffset`.
    pub unresolved: u64,
    /// Why the `function_only` and `unresolved` ones are so, by module.
    pub reasons: Vec<Unresolved>,
    /// Time spent reading the module map, loading binaries and resolving, in seconds.
    pub seconds: f64,
}

impl SymbolStats {
    /// One line: `412 addresses: 380 with file and line, 20 function only, 12 unresolved
    /// (binary not found: linux-vdso.so.1 (2 addresses)); 0.084 s`.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{} {}: {} with file and line, {} function only, {} unresolved",
            self.addresses,
            if self.addresses == 1 { "address" } else { "addresses" },
            self.with_lines,
            self.function_only,
            self.unresolved
        );
        if !self.reasons.is_empty() {
            let why: Vec<String> = self
                .reasons
                .iter()
                .map(|r| match r.module.as_deref() {
                    Some(m) => format!("{}: {} ({})", r.reason.text(), m.rsplit('/').next().unwrap_or(m), r.addresses),
                    None => format!("{} ({})", r.reason.text(), r.addresses),
                })
                .collect();
            s.push_str(&format!(" ({})", why.join("; ")));
        }
        s.push_str(&format!("; {:.3} s", self.seconds));
        s
    }
}

/// A module's binary, once looked for.
enum Loaded {
    Binary(Binary),
    Failed(Reason),
}

/// Resolves addresses and callstacks of one log, each distinct one once.
pub struct Symbolizer {
    modules: ModuleMap,
    options: SymbolOptions,
    binaries: Vec<Option<Loaded>>,
    addresses: HashMap<u64, Arc<[Frame]>>,
    sites: HashMap<u32, Arc<SiteName>>,
    /// (reason, module index) → distinct addresses.
    reasons: HashMap<(Reason, Option<usize>), u64>,
    counts: [u64; 3],
    time: Duration,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("modules", &self.modules.modules().len())
            .field("addresses", &self.addresses.len())
            .finish()
    }
}

impl Symbolizer {
    /// A symbolizer for addresses of the processes whose modules are `modules`.
    pub fn new(modules: ModuleMap, options: SymbolOptions) -> Symbolizer {
        let binaries = (0..modules.modules().len()).map(|_| None).collect();
        Symbolizer {
            modules,
            options,
            binaries,
            addresses: HashMap::new(),
            sites: HashMap::new(),
            reasons: HashMap::new(),
            counts: [0; 3],
            time: Duration::ZERO,
        }
    }

    /// A symbolizer for the log at `path`: reads the log's module map (a pass over its
    /// metadata blocks), naming module paths with `string` (the log's strings, by id).
    pub fn for_log(
        path: &Path,
        string: impl Fn(u32) -> String,
        options: SymbolOptions,
    ) -> Result<Symbolizer, memreplay_format::FormatError> {
        let start = Instant::now();
        let modules = ModuleMap::read(path, string)?;
        tracing::debug!("read {} modules in {:.3} s", modules.modules().len(), start.elapsed().as_secs_f64());
        let mut s = Symbolizer::new(modules, options);
        s.time += start.elapsed();
        Ok(s)
    }

    /// The log's module map.
    pub fn modules(&self) -> &ModuleMap {
        &self.modules
    }

    /// The loaded binary of module `index`, if it was found (loading it on first use).
    pub fn binary(&mut self, index: usize) -> Option<&Binary> {
        self.load(index).ok()
    }

    /// Whether module `index` was looked for and loaded (`Some(true)`), looked for in vain
    /// (`Some(false)`), or never needed (`None`). Loads nothing.
    pub fn module_loaded(&self, index: usize) -> Option<bool> {
        match self.binaries.get(index)? {
            Some(Loaded::Binary(_)) => Some(true),
            Some(Loaded::Failed(_)) => Some(false),
            None => None,
        }
    }

    fn load(&mut self, index: usize) -> Result<&Binary, Reason> {
        if self.binaries[index].is_none() {
            let start = Instant::now();
            let module = self.modules.get(index);
            let loaded = if self.options.disabled {
                Loaded::Failed(Reason::SymbolicationOff)
            } else {
                match binary::load(module, &self.options.search_dirs, self.options.system_debug_dir) {
                    Ok(b) => {
                        tracing::debug!(
                            "module {}: {}{}{}, in {:.3} s",
                            module.path,
                            b.path.display(),
                            b.debug_path.as_ref().map(|p| format!(", debug info {}", p.display())).unwrap_or_default(),
                            if b.has_dwarf() { "" } else { " (no DWARF)" },
                            start.elapsed().as_secs_f64()
                        );
                        Loaded::Binary(b)
                    }
                    Err(e) => {
                        tracing::debug!("module {}: {e:?}", module.path);
                        Loaded::Failed(match e {
                            LoadError::NotFound => Reason::BinaryNotFound,
                            LoadError::BuildIdMismatch(_) => Reason::BuildIdMismatch,
                            LoadError::Unreadable(..) => Reason::UnreadableBinary,
                            LoadError::TooManyOpenFiles(_) => Reason::TooManyOpenFiles,
                        })
                    }
                }
            };
            self.binaries[index] = Some(loaded);
        }
        match &self.binaries[index] {
            Some(Loaded::Binary(b)) => Ok(b),
            Some(Loaded::Failed(r)) => Err(*r),
            None => Err(Reason::BinaryNotFound),
        }
    }

    /// The frames of return address `addr`, innermost (inlined) first; at least one.
    pub fn resolve(&mut self, addr: u64) -> Arc<[Frame]> {
        if let Some(f) = self.addresses.get(&addr) {
            return f.clone();
        }
        let start = Instant::now();
        let frames: Arc<[Frame]> = self.resolve_uncached(addr).into();
        self.time += start.elapsed();
        self.addresses.insert(addr, frames.clone());
        frames
    }

    fn resolve_uncached(&mut self, addr: u64) -> Vec<Frame> {
        let Some(index) = self.modules.find(addr) else {
            self.count(Resolution::None, Some(Reason::NoModule), None);
            return vec![unresolved(addr, None, addr, Reason::NoModule)];
        };
        let m = self.modules.get(index);
        let (name, offset) = (m.name().to_owned(), addr.wrapping_sub(m.load_bias));
        let found = match self.load(index) {
            // A return address: the call is the instruction before it.
            Ok(b) => b.lookup(offset.wrapping_sub(1)),
            Err(reason) => {
                self.count(Resolution::None, Some(reason), Some(index));
                return vec![unresolved(addr, Some(name), offset, reason)];
            }
        };
        if found.is_empty() {
            self.count(Resolution::None, Some(Reason::NoSymbols), Some(index));
            return vec![unresolved(addr, Some(name), offset, Reason::NoSymbols)];
        }
        let dwarf = found.iter().any(|f| f.dwarf && f.line.is_some());
        let (resolution, reason) =
            if dwarf { (Resolution::Dwarf, None) } else { (Resolution::Symbol, Some(Reason::NoDebugInfo)) };
        self.count(resolution, reason, Some(index));
        let n = found.len();
        found
            .into_iter()
            .enumerate()
            .map(|(i, f)| Frame {
                address: addr,
                module: Some(name.clone()),
                offset,
                function: f.function,
                file: f.file,
                line: f.line,
                inlined: i + 1 < n,
                resolution,
                reason,
            })
            .collect()
    }

    fn count(&mut self, resolution: Resolution, reason: Option<Reason>, module: Option<usize>) {
        self.counts[resolution as usize] += 1;
        if let Some(r) = reason {
            *self.reasons.entry((r, module)).or_default() += 1;
        }
    }

    /// Callstack `stack`, whose return addresses are `addrs` (innermost first; `None`
    /// where the log does not define it), symbolicated and trimmed (cached per stack id:
    /// `addrs` is read the first time only).
    pub fn site(&mut self, stack: u32, addrs: Option<&[u64]>) -> Arc<SiteName> {
        if let Some(s) = self.sites.get(&stack) {
            return s.clone();
        }
        let site = match addrs {
            Some(addrs) => self.site_of(stack, addrs),
            // A damaged log can use a callstack whose definition was lost.
            None if stack != 0 => {
                SiteName { function: format!("(callstack {stack} not in the log)"), ..self.site_of(stack, &[]) }
            }
            None => self.site_of(stack, &[]),
        };
        let site = Arc::new(site);
        self.sites.insert(stack, site.clone());
        site
    }

    /// The site of a callstack given by its return addresses, innermost first.
    pub fn site_of(&mut self, stack: u32, addrs: &[u64]) -> SiteName {
        if addrs.is_empty() {
            return SiteName {
                stack,
                function: "(no callstack)".into(),
                file: None,
                line: None,
                frames: Vec::new(),
                trimmed: 0,
                site_frame: 0,
            };
        }
        let mut frames: Vec<Frame> = Vec::with_capacity(addrs.len() + 4);
        for &a in addrs {
            frames.extend(self.resolve(a).iter().cloned());
        }
        let trimmed = trimmed_frames(&frames);
        frames.drain(..trimmed);
        let site = frames.iter().position(|f| !is_library(f)).unwrap_or(0);
        let f = &frames[site];
        SiteName {
            stack,
            function: f.name(),
            file: f.file.clone(),
            line: f.line,
            site_frame: site as u32,
            trimmed: trimmed as u32,
            frames,
        }
    }

    /// What symbolication found so far.
    pub fn stats(&self) -> SymbolStats {
        let mut reasons: Vec<Unresolved> = self
            .reasons
            .iter()
            .map(|(&(reason, module), &addresses)| Unresolved {
                reason,
                module: module.map(|i| self.modules.get(i).path.clone()),
                addresses,
            })
            .collect();
        reasons
            .sort_by(|a, b| b.addresses.cmp(&a.addresses).then(a.reason.cmp(&b.reason)).then(a.module.cmp(&b.module)));
        SymbolStats {
            modules: self.modules.modules().len() as u64,
            modules_loaded: self.binaries.iter().filter(|b| matches!(b, Some(Loaded::Binary(_)))).count() as u64,
            addresses: self.addresses.len() as u64,
            with_lines: self.counts[Resolution::Dwarf as usize],
            function_only: self.counts[Resolution::Symbol as usize],
            unresolved: self.counts[Resolution::None as usize],
            reasons,
            seconds: self.time.as_secs_f64(),
        }
    }
}

fn unresolved(address: u64, module: Option<String>, offset: u64, reason: Reason) -> Frame {
    Frame {
        address,
        module,
        offset,
        function: None,
        file: None,
        line: None,
        inlined: false,
        resolution: Resolution::None,
        reason: Some(reason),
    }
}

/// How many frames to trim from the top of a stack (innermost first): the recorder's and
/// the allocator wrapper's. A return address whose own (outermost) frame is the
/// recorder's goes whole, with whatever was inlined into it (with line-tables-only debug
/// info, inlined frames have bare names like `alloc`); then inlined frames go while they
/// are the recorder's or the allocator's by name or by file. A stack that is all recorder
/// frames is kept whole.
pub fn trimmed_frames(frames: &[Frame]) -> usize {
    let mut n = 0;
    while n < frames.len() {
        // The frames of one return address: inlined ones, then their caller.
        let mut end = n;
        while end + 1 < frames.len() && frames[end].inlined && frames[end + 1].address == frames[n].address {
            end += 1;
        }
        if frames[end].function.as_deref().is_some_and(is_recorder_frame) {
            n = end + 1;
            continue;
        }
        while n < end && is_recorder(&frames[n]) {
            n += 1;
        }
        break;
    }
    if n == frames.len() {
        0
    } else {
        n
    }
}

/// A recorder or allocator frame, by name, or by file for a bare (unqualified) name.
fn is_recorder(f: &Frame) -> bool {
    match f.function.as_deref() {
        Some(name) if is_recorder_frame(name) => true,
        Some(name) if is_qualified(name) => false,
        _ => f.file.as_deref().is_some_and(|file| is_allocator_file(file) || is_recorder_file(file)),
    }
}

/// A source file of the recorder crate, as a game builds it: `…/memreplay-<version>/src/…`
/// (from crates.io or vendored) or this repository's `recorder/src/…`. Bare-named frames
/// inlined from it (`Domain::free` as `free`) are the recorder's, like the allocator's.
fn is_recorder_file(file: &str) -> bool {
    let path = file.replace('\\', "/");
    let Some(at) = path.rfind("/src/") else { return false };
    let dir = &path[..at];
    let name = dir.rsplit('/').next().unwrap_or(dir);
    name == "recorder" || name.strip_prefix("memreplay-").is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
}

/// A standard-library frame, by name, or by file for a bare (unqualified) name.
fn is_library(f: &Frame) -> bool {
    match f.function.as_deref() {
        Some(name) if is_library_frame(name) => true,
        Some(name) if is_qualified(name) => false,
        None if f.resolution == Resolution::None => false,
        _ => f.file.as_deref().is_some_and(is_library_file),
    }
}

/// Whether a function name has its path (`alloc::vec::Vec<T>::push`, `<X as Y>::f`), not
/// just its own name (`push<u8>`, as line-tables-only debug info gives inlined frames).
pub fn is_qualified(name: &str) -> bool {
    name.starts_with('<') || name.split('<').next().is_some_and(|head| head.contains("::"))
}

/// A source file of the Rust standard library (`/rustc/<hash>/library/alloc/src/…`, or
/// the rust-src component's `…/lib/rustlib/src/rust/library/…`).
pub fn is_library_file(file: &str) -> bool {
    ["library/alloc/src/", "library/core/src/", "library/std/src/"].iter().any(|l| file.contains(l))
}

/// The standard library's allocator plumbing: `alloc::alloc`, `std::alloc`, `core::alloc`.
fn is_allocator_file(file: &str) -> bool {
    file.ends_with("library/alloc/src/alloc.rs")
        || file.ends_with("library/std/src/alloc.rs")
        || file.contains("library/core/src/alloc/")
}

/// The path of a demangled name, without a leading `<` (and `&`, `&mut `, `dyn `).
fn name_path(name: &str) -> &str {
    let mut n = name.trim_start_matches('<');
    loop {
        let t = n.trim_start_matches('&').trim_start_matches("mut ").trim_start_matches("dyn ");
        if t.len() == n.len() {
            return n;
        }
        n = t;
    }
}

/// Whether a frame belongs to the recorder or the allocator wrapper, trimmed from the
/// top of every stack: `memreplay::…` (the recorder, its `Allocator` and
/// `<memreplay::Allocator<A> as GlobalAlloc>::alloc`), the global allocator shims
/// (`__rust_alloc`, `__rdl_alloc`, `__rg_alloc` and friends), `alloc::alloc::…`
/// (`alloc`, `exchange_malloc`, `Global`'s impls) and `std::alloc::` / `core::alloc::`.
pub fn is_recorder_frame(function: &str) -> bool {
    let f = function.strip_prefix("__rustc::").unwrap_or(function);
    if ["__rust_alloc", "__rust_dealloc", "__rust_realloc", "__rdl_", "__rg_", "__rust_no_alloc_shim"]
        .iter()
        .any(|p| f.starts_with(p))
    {
        return true;
    }
    const PATHS: [&str; 4] = ["memreplay::", "alloc::alloc::", "std::alloc::", "core::alloc::"];
    let p = name_path(f);
    // `<&A as core::alloc::Allocator>::deallocate`: a generic or primitive type, the trait decides.
    let p = match p.split_once(" as ") {
        Some((ty, tr)) if !ty.contains("::") => tr,
        _ => p,
    };
    PATHS.iter().any(|pre| p.starts_with(pre))
}

/// Whether a frame is the Rust standard library's (`alloc`, `core`, `std`, and
/// `hashbrown` as std uses it): containers and runtime between the code that allocated
/// and the allocator. The allocating function of a site is its first frame that is not.
/// `<T as alloc::string::ToString>::to_string` counts by its trait; `<[T]>::to_vec`,
/// `<str>::…` are the library's.
pub fn is_library_frame(function: &str) -> bool {
    const LIBS: [&str; 4] = ["alloc::", "core::", "std::", "hashbrown::"];
    let p = name_path(function);
    if p.starts_with('[') || p.starts_with("str>") || p.starts_with("str as ") {
        return true;
    }
    // `<T as Trait>::f`, `<u8 as Trait>::f`: for a generic parameter or a primitive
    // type, the trait decides.
    if let Some((ty, rest)) = p.split_once(" as ") {
        if !ty.contains("::") {
            // The trait may be a slice's own (`<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec`).
            return is_library_frame(rest);
        }
    }
    LIBS.iter().any(|l| p.starts_with(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_frames() {
        for f in [
            "memreplay::imp::thread::record_alloc",
            "<memreplay::Allocator<A> as core::alloc::global::GlobalAlloc>::alloc",
            "__rust_alloc",
            "__rustc::__rust_alloc_zeroed",
            "__rdl_alloc",
            "alloc::alloc::alloc",
            "alloc::alloc::exchange_malloc",
            "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
            "alloc::alloc::Global::alloc_impl",
            "std::alloc::System::alloc",
            "<&A as core::alloc::Allocator>::deallocate",
        ] {
            assert!(is_recorder_frame(f), "{f}");
        }
        for f in [
            "memreplay_demo::game::leak_level_script_cache",
            "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
            "alloc::vec::Vec<T>::with_capacity",
            "main",
        ] {
            assert!(!is_recorder_frame(f), "{f}");
        }
    }

    #[test]
    fn library_frames() {
        for f in [
            "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
            "<alloc::vec::Vec<T> as core::clone::Clone>::clone",
            "<T as alloc::string::ToString>::to_string",
            "<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem",
            "<[T]>::to_vec",
            "<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec::<alloc::alloc::Global>",
            "core::iter::traits::iterator::Iterator::collect",
            "std::thread::spawn",
            "hashbrown::raw::RawTable<T,A>::reserve_rehash",
        ] {
            assert!(is_library_frame(f), "{f}");
        }
        for f in [
            "memreplay_demo::game::load_mesh",
            "<memreplay_demo::game::MainMenu as core::ops::drop::Drop>::drop",
            "<T as memreplay_demo::Thing>::make",
            "memreplay_demo::workers::Streamer::spawn::{{closure}}",
            "main",
        ] {
            assert!(!is_library_frame(f), "{f}");
        }
    }

    fn frame(address: u64, function: &str, file: &str, inlined: bool) -> Frame {
        Frame {
            address,
            module: Some("game".into()),
            offset: address,
            function: Some(function.into()),
            file: Some(file.into()),
            line: Some(1),
            inlined,
            resolution: Resolution::Dwarf,
            reason: None,
        }
    }

    /// Release builds with line-tables-only debug info: inlined frames have bare names.
    #[test]
    fn trims_by_address_group_and_by_file() {
        let frames = vec![
            // Inlined into the recorder's `__rust_alloc`: trimmed with it.
            frame(1, "on_alloc", "/src/memreplay/recorder/src/imp/thread.rs", true),
            frame(1, "alloc", "/src/memreplay/recorder/src/lib.rs", true),
            frame(1, "__rust_alloc", "/src/game/src/main.rs", false),
            // The caller, with the allocator and Vec inlined into it.
            frame(2, "alloc", "/rustc/abc/library/alloc/src/alloc.rs", true),
            frame(2, "with_capacity<u8>", "/rustc/abc/library/alloc/src/vec/mod.rs", true),
            frame(2, "game::level::load_scripts", "/src/game/src/level.rs", false),
            frame(3, "game::main", "/src/game/src/main.rs", false),
        ];
        assert_eq!(trimmed_frames(&frames), 4);
        assert!(is_library(&frames[4]) && !is_library(&frames[5]));
        assert!(!is_qualified("try_allocate_in<alloc::alloc::Global>") && is_qualified("a::b<c::D>"));
        assert!(is_qualified("<alloc::vec::Vec<T> as core::clone::Clone>::clone") && !is_qualified("main"));
        // All recorder: nothing trimmed.
        assert_eq!(trimmed_frames(&frames[..3]), 0);
        // The recorder's `Domain::free`, inlined into the game's GPU allocator's free, with
        // a bare name: trimmed by its file, from this repository or from crates.io.
        for file in ["recorder/src/domain.rs", "/home/u/.cargo/registry/src/index/memreplay-0.1.0/src/domain.rs"] {
            let frames = vec![
                frame(1, "free", file, true),
                frame(1, "game::gpu::Heap::free", "/src/game/src/gpu.rs", false),
                frame(2, "game::main", "/src/game/src/main.rs", false),
            ];
            assert_eq!(trimmed_frames(&frames), 1, "{file}");
        }
        assert!(!is_recorder_file("/src/game/src/domain.rs") && !is_recorder_file("/x/memreplay-tools/src/a.rs"));
        // Full debug info: by name.
        let frames = vec![
            frame(1, "memreplay::imp::thread::record_alloc", "/r/thread.rs", false),
            frame(2, "alloc::alloc::alloc", "/rustc/abc/library/alloc/src/alloc.rs", true),
            frame(
                2,
                "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
                "/rustc/abc/library/alloc/src/raw_vec.rs",
                false,
            ),
            frame(3, "game::main", "/src/game/src/main.rs", false),
        ];
        assert_eq!(trimmed_frames(&frames), 2);
    }

    #[test]
    fn unresolved_frames_name_their_module_and_reason() {
        let map = ModuleMap::new(vec![Module {
            base: 0x10_0000,
            size: 0x1_0000,
            load_bias: 0x10_0000,
            path: "/nowhere/to/be/found/game".into(),
            build_id: vec![1, 2, 3, 4],
        }]);
        let mut s = Symbolizer::new(map, SymbolOptions { system_debug_dir: false, ..SymbolOptions::default() });
        let f = s.resolve(0x10_1234);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].name(), "game+0x1234");
        assert_eq!(f[0].reason, Some(Reason::BinaryNotFound));
        let f = s.resolve(0x42);
        assert_eq!(f[0].name(), "0x42");
        assert_eq!(f[0].reason, Some(Reason::NoModule));
        // Cached: resolved once.
        s.resolve(0x10_1234);
        let st = s.stats();
        assert_eq!((st.addresses, st.unresolved, st.with_lines), (2, 2, 0));
        assert_eq!(st.reasons.len(), 2);
        let site = s.site_of(7, &[0x10_1234, 0x42]);
        assert_eq!(site.function, "game+0x1234");
        assert_eq!(site.stack_key(), "game+0x1234;0x42");
        assert_eq!(s.site(9, None).function, "(callstack 9 not in the log)");
        assert_eq!(s.site(0, None).function, "(no callstack)");
    }
}
