//! Finding a module's binary and its debug info on this machine, and looking addresses
//! up in them: DWARF (with inlined frames) through `addr2line`, else the symbol table.
//!
//! Where a module's files are looked for, in order (the first whose build id matches the
//! recorded one wins; a file with another build id is never used):
//! 1. in each `--symbols` directory: `.build-id/xx/rest` (the binary filed by build id),
//!    the file's name, and the recorded absolute path below the directory (a sysroot);
//! 2. the recorded path itself.
//!
//! A binary without DWARF gets its debug info from a separate file: by build id,
//! `DIR/.build-id/xx/rest.debug` in each `--symbols` directory and in `/usr/lib/debug`;
//! else by `.gnu_debuglink`: beside the binary, in its `.debug/`, in each `--symbols`
//! directory and under `/usr/lib/debug`. When the binary itself is missing, a debug file
//! found by build id serves alone (it has the symbol table too).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

use super::modules::{hex, Module};

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// The system's directory of separate debug files.
pub const SYSTEM_DEBUG_DIR: &str = "/usr/lib/debug";

/// Why a module's binary could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// No file at the recorded path or in the search directories.
    NotFound,
    /// Files were found, but with another build id (another build of the program).
    BuildIdMismatch(PathBuf),
    /// A file was found but is not an object file this build reads.
    Unreadable(PathBuf, String),
}

/// One function symbol: start, size (0: unknown, up to the next symbol), name.
#[derive(Debug, Clone)]
struct Symbol {
    addr: u64,
    size: u64,
    name: String,
}

/// One frame as found in a binary: function, file, line, and whether DWARF gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Whether the frame came from DWARF (file and line), not the symbol table.
    pub dwarf: bool,
}

/// A module's binary, loaded: its DWARF (if any) and its function symbols.
pub struct Binary {
    /// The file the code was found in, and the separate debug file used, if any.
    pub path: PathBuf,
    /// See `path`.
    pub debug_path: Option<PathBuf>,
    dwarf: Option<addr2line::Context<Reader>>,
    symbols: Vec<Symbol>,
}

impl std::fmt::Debug for Binary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binary")
            .field("path", &self.path)
            .field("debug_path", &self.debug_path)
            .field("dwarf", &self.dwarf.is_some())
            .field("symbols", &self.symbols.len())
            .finish()
    }
}

impl Binary {
    /// Whether the binary has line information (DWARF).
    pub fn has_dwarf(&self) -> bool {
        self.dwarf.is_some()
    }

    /// The frames at file address `probe` (an address inside the call instruction),
    /// innermost (inlined) first; empty when neither DWARF nor a symbol covers it.
    pub fn lookup(&self, probe: u64) -> Vec<Found> {
        let mut out = Vec::new();
        if let Some(ctx) = &self.dwarf {
            if let Ok(mut frames) = ctx.find_frames(probe).skip_all_loads() {
                while let Ok(Some(f)) = frames.next() {
                    let function = f.function.as_ref().and_then(|n| n.demangle().ok()).map(|n| n.into_owned());
                    let (file, line) = match &f.location {
                        Some(l) => (l.file.map(str::to_owned), l.line),
                        None => (None, None),
                    };
                    out.push(Found { function, file, line, dwarf: true });
                }
            }
            if out.is_empty() {
                // A unit with lines but no function entries (assembly, some C runtimes).
                if let Ok(Some(l)) = ctx.find_location(probe) {
                    out.push(Found { function: None, file: l.file.map(str::to_owned), line: l.line, dwarf: true });
                }
            }
        }
        // The outermost frame is the function the address is in: the symbol table has its
        // full path where DWARF (line-tables-only debug info) has a bare name.
        if let Some(f) = out.last_mut().filter(|f| f.function.as_deref().is_some_and(|n| !super::is_qualified(n))) {
            if let Some(name) = self.symbol(probe).filter(|n| super::is_qualified(n)) {
                f.function = Some(name);
            }
        }
        // Names DWARF did not give (or no DWARF at all): the symbol table's.
        if out.last().is_none_or(|f| f.function.is_none()) {
            if let Some(name) = self.symbol(probe) {
                match out.last_mut() {
                    Some(f) => f.function = Some(name),
                    None => out.push(Found { function: Some(name), file: None, line: None, dwarf: false }),
                }
            }
        }
        out.retain(|f| f.function.is_some() || f.file.is_some());
        out
    }

    /// The demangled name of the function symbol covering `probe`.
    fn symbol(&self, probe: u64) -> Option<String> {
        let i = self.symbols.partition_point(|s| s.addr <= probe).checked_sub(1)?;
        let s = &self.symbols[i];
        let end = if s.size > 0 { s.addr + s.size } else { self.symbols.get(i + 1).map_or(u64::MAX, |n| n.addr) };
        (probe < end).then(|| addr2line::demangle_auto(Cow::from(s.name.as_str()), None).into_owned())
    }
}

/// Finds and loads the binary of `module`, looking in `dirs` (the `--symbols`
/// directories) and at the recorded path; `system_debug` adds `/usr/lib/debug` for
/// separate debug files.
pub fn load(module: &Module, dirs: &[PathBuf], system_debug: bool) -> Result<Binary, LoadError> {
    let mut mismatch = None;
    let mut unreadable = None;
    let debug_dirs: Vec<PathBuf> =
        dirs.iter().cloned().chain(system_debug.then(|| PathBuf::from(SYSTEM_DEBUG_DIR))).collect();
    for path in binary_candidates(module, dirs) {
        if !path.is_file() {
            continue;
        }
        let data = match read_file(&path) {
            Ok(d) => d,
            Err(e) => {
                unreadable.get_or_insert(LoadError::Unreadable(path, e.to_string()));
                continue;
            }
        };
        let obj = match object::File::parse(&*data) {
            Ok(o) => o,
            Err(e) => {
                unreadable.get_or_insert(LoadError::Unreadable(path, e.to_string()));
                continue;
            }
        };
        if !build_id_matches(module, &obj) {
            mismatch.get_or_insert(LoadError::BuildIdMismatch(path));
            continue;
        }
        let symbols = function_symbols(&obj);
        if let Some(dwarf) = dwarf_context(&obj, &data) {
            return Ok(Binary { path, debug_path: None, dwarf: Some(dwarf), symbols });
        }
        // No DWARF in the binary: a separate debug file.
        let link = obj.gnu_debuglink().ok().flatten().map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
        for debug in debug_candidates(module, &path, link.as_deref(), &debug_dirs) {
            if let Some((dwarf, debug_symbols)) = load_debug_file(module, &debug) {
                let symbols = if symbols.is_empty() { debug_symbols } else { symbols };
                return Ok(Binary { path, debug_path: Some(debug), dwarf: Some(dwarf), symbols });
            }
        }
        return Ok(Binary { path, debug_path: None, dwarf: None, symbols });
    }
    // No binary: a debug file filed by build id has all that is needed.
    if !module.build_id.is_empty() {
        for debug in build_id_paths(&module.build_id, &debug_dirs, ".debug") {
            if let Some((dwarf, symbols)) = load_debug_file(module, &debug) {
                return Ok(Binary { path: debug.clone(), debug_path: Some(debug), dwarf: Some(dwarf), symbols });
            }
        }
    }
    Err(mismatch.or(unreadable).unwrap_or(LoadError::NotFound))
}

/// Where the binary of `module` may be, in order.
fn binary_candidates(module: &Module, dirs: &[PathBuf]) -> Vec<PathBuf> {
    // Linux names an executable deleted while it ran `path (deleted)`.
    let recorded = Path::new(module.path.strip_suffix(" (deleted)").unwrap_or(&module.path));
    let mut v = Vec::new();
    for d in dirs {
        v.extend(build_id_paths(&module.build_id, std::slice::from_ref(d), ""));
        if let Some(name) = recorded.file_name() {
            v.push(d.join(name));
        }
        if recorded.is_absolute() {
            let rel: PathBuf = recorded.components().skip(1).collect();
            v.push(d.join(rel));
        }
    }
    if !module.path.is_empty() {
        v.push(recorded.to_owned());
    }
    v.dedup();
    v
}

/// `DIR/.build-id/xx/rest{suffix}` for each directory (nothing without a build id).
fn build_id_paths(build_id: &[u8], dirs: &[PathBuf], suffix: &str) -> Vec<PathBuf> {
    if build_id.len() < 2 {
        return Vec::new();
    }
    let h = hex(build_id);
    dirs.iter().map(|d| d.join(".build-id").join(&h[..2]).join(format!("{}{suffix}", &h[2..]))).collect()
}

/// Where the separate debug file of the binary at `binary` may be, in order.
fn debug_candidates(module: &Module, binary: &Path, link: Option<&str>, debug_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut v = build_id_paths(&module.build_id, debug_dirs, ".debug");
    if let Some(link) = link.filter(|l| !l.is_empty() && !l.contains('/')) {
        let dir = binary.parent().unwrap_or(Path::new(""));
        v.push(dir.join(link));
        v.push(dir.join(".debug").join(link));
        for d in debug_dirs {
            v.push(d.join(link));
            if dir.is_absolute() {
                let rel: PathBuf = dir.components().skip(1).collect();
                v.push(d.join(rel).join(link));
            }
        }
    }
    v.retain(|p| p != binary);
    v.dedup();
    v
}

/// A separate debug file's DWARF and symbols, if it is there, matches and has DWARF.
fn load_debug_file(module: &Module, path: &Path) -> Option<(addr2line::Context<Reader>, Vec<Symbol>)> {
    if !path.is_file() {
        return None;
    }
    let data = read_file(path).ok()?;
    let obj = object::File::parse(&*data).ok()?;
    if !build_id_matches(module, &obj) {
        return None;
    }
    let dwarf = dwarf_context(&obj, &data)?;
    Some((dwarf, function_symbols(&obj)))
}

/// A file matches a module when either has no build id or both have the same.
fn build_id_matches(module: &Module, obj: &object::File<'_>) -> bool {
    match obj.build_id() {
        Ok(Some(id)) if !module.build_id.is_empty() => id == module.build_id.as_slice(),
        _ => true,
    }
}

/// A whole file, shared by the DWARF sections read from it.
fn read_file(path: &Path) -> std::io::Result<Arc<[u8]>> {
    Ok(Arc::from(std::fs::read(path)?))
}

/// The DWARF of `obj`, parsed from `data` (its bytes), if it has any. Sections stored as
/// they are share `data`; compressed ones are decompressed into their own buffers.
fn dwarf_context(obj: &object::File<'_>, data: &Arc<[u8]>) -> Option<addr2line::Context<Reader>> {
    let has = |name: &str| obj.section_by_name(name).is_some_and(|s| s.size() > 0);
    if !has(".debug_info") && !has(".debug_line") {
        return None;
    }
    let endian = if obj.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
    let whole = gimli::EndianArcSlice::new(data.clone(), endian);
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let Some(section) = obj.section_by_name(id.name()) else {
            return Ok(whole.range(0..0));
        };
        let Ok(r) = section.compressed_file_range() else {
            return Ok(whole.range(0..0));
        };
        let (start, len) = (r.offset as usize, r.compressed_size as usize);
        if start.checked_add(len).is_none_or(|end| end > data.len()) {
            return Ok(whole.range(0..0));
        }
        match r.format {
            object::CompressionFormat::None => Ok(whole.range(start..start + len)),
            object::CompressionFormat::Zlib => {
                let bytes = inflate(&data[start..start + len], r.uncompressed_size).unwrap_or_default();
                Ok(gimli::EndianArcSlice::new(Arc::from(bytes), endian))
            }
            // Zstandard (or unknown): read as missing.
            _ => Ok(whole.range(0..0)),
        }
    };
    let dwarf = gimli::Dwarf::load(load).ok()?;
    addr2line::Context::from_dwarf(dwarf).ok()
}

/// A zlib stream inflated, if it inflates to `size` bytes.
fn inflate(compressed: &[u8], size: u64) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut out = Vec::with_capacity(usize::try_from(size).ok()?.min(1 << 30));
    flate2::read::ZlibDecoder::new(compressed).take(size).read_to_end(&mut out).ok()?;
    (out.len() as u64 == size).then_some(out)
}

/// The function symbols of `obj` (its symbol table, else its dynamic one), by address.
fn function_symbols(obj: &object::File<'_>) -> Vec<Symbol> {
    let mut syms: Vec<Symbol> = obj
        .symbols()
        .chain(obj.dynamic_symbols())
        .filter(|s| s.kind() == object::SymbolKind::Text && s.is_definition() && s.address() != 0)
        .filter_map(|s| {
            let name = s.name().ok().filter(|n| !n.is_empty())?;
            Some(Symbol { addr: s.address(), size: s.size(), name: name.to_owned() })
        })
        .collect();
    // One symbol per address: the one with a size, then the longest name (an alias
    // like `memcpy` beside `__memcpy_avx_unaligned` says less).
    syms.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)).then(b.name.len().cmp(&a.name.len())));
    syms.dedup_by_key(|s| s.addr);
    syms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_in_order() {
        let m = Module {
            base: 0x1000,
            size: 0x1000,
            load_bias: 0x1000,
            path: "/opt/game/bin/game".into(),
            build_id: vec![0xab, 0xcd, 0xef],
        };
        let dirs = [PathBuf::from("/syms")];
        assert_eq!(
            binary_candidates(&m, &dirs),
            [
                PathBuf::from("/syms/.build-id/ab/cdef"),
                PathBuf::from("/syms/game"),
                PathBuf::from("/syms/opt/game/bin/game"),
                PathBuf::from("/opt/game/bin/game"),
            ]
        );
        let debug = debug_candidates(&m, Path::new("/opt/game/bin/game"), Some("game.debug"), &dirs);
        assert_eq!(
            debug,
            [
                PathBuf::from("/syms/.build-id/ab/cdef.debug"),
                PathBuf::from("/opt/game/bin/game.debug"),
                PathBuf::from("/opt/game/bin/.debug/game.debug"),
                PathBuf::from("/syms/game.debug"),
                PathBuf::from("/syms/opt/game/bin/game.debug"),
            ]
        );
        assert!(build_id_paths(&[], &dirs, ".debug").is_empty());
        let deleted = Module { path: "/opt/game/bin/game (deleted)".into(), build_id: vec![], ..m };
        assert_eq!(binary_candidates(&deleted, &dirs)[0], PathBuf::from("/syms/game"));
    }
}
