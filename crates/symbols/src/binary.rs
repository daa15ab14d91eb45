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
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
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
///
/// A file is never read whole: its headers, notes and symbol table are read through a
/// cache dropped once the symbols are taken, and only the DWARF sections a lookup needs
/// are read, each into its own buffer (see `dwarf_context`).
pub fn load(module: &Module, dirs: &[PathBuf], system_debug: bool) -> Result<Binary, LoadError> {
    let mut mismatch = None;
    let mut unreadable = None;
    let debug_dirs: Vec<PathBuf> =
        dirs.iter().cloned().chain(system_debug.then(|| PathBuf::from(SYSTEM_DEBUG_DIR))).collect();
    for path in binary_candidates(module, dirs) {
        if !path.is_file() {
            continue;
        }
        let mut file = match ObjectFile::open(&path) {
            Ok(f) => f,
            Err(e) => {
                unreadable.get_or_insert(LoadError::Unreadable(path, e.to_string()));
                continue;
            }
        };
        let cache = object::ReadCache::new(file.cache_handle);
        let obj = match object::File::parse(&cache) {
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
        match dwarf_context(&obj, &mut file.sections) {
            Ok(Some(dwarf)) => return Ok(Binary { path, debug_path: None, dwarf: Some(dwarf), symbols }),
            Ok(None) => {}
            Err(e) => {
                unreadable.get_or_insert(LoadError::Unreadable(path, e.to_string()));
                continue;
            }
        }
        // No DWARF in the binary: a separate debug file.
        let link = obj.gnu_debuglink().ok().flatten().map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
        // The binary's headers and symbol table are not needed any more.
        drop(obj);
        drop(cache);
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
    let mut file = ObjectFile::open(path).ok()?;
    let cache = object::ReadCache::new(file.cache_handle);
    let obj = object::File::parse(&cache).ok()?;
    if !build_id_matches(module, &obj) {
        return None;
    }
    let dwarf = dwarf_context(&obj, &mut file.sections).ok()??;
    Some((dwarf, function_symbols(&obj)))
}

/// A file matches a module when either has no build id or both have the same.
fn build_id_matches<'data, R: object::ReadRef<'data>>(module: &Module, obj: &object::File<'data, R>) -> bool {
    match obj.build_id() {
        Ok(Some(id)) if !module.build_id.is_empty() => id == module.build_id.as_slice(),
        _ => true,
    }
}

/// An object file opened twice over one open file description: one handle for the
/// `object::ReadCache` that parses headers, notes and symbols (it keeps what it read
/// until dropped), one for reading DWARF sections into their own buffers. Both seek
/// before every read, so sharing the file offset is harmless.
struct ObjectFile {
    cache_handle: File,
    sections: Sections,
}

/// Where DWARF sections are read from: the file and its length when opened.
struct Sections {
    file: File,
    len: u64,
}

impl ObjectFile {
    fn open(path: &Path) -> std::io::Result<ObjectFile> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(ObjectFile { cache_handle: file.try_clone()?, sections: Sections { file, len } })
    }
}

/// The most a zlib stream can inflate to per byte (deflate's limit is 1032:1): a section
/// header claiming more is damaged, and its section is read as missing.
const MAX_ZLIB_RATIO: u64 = 1032;

impl Sections {
    /// `size` bytes at `offset`, in a buffer of their own; `None` when the range is not
    /// inside the file (a damaged header: the section reads as missing).
    fn read(&mut self, offset: u64, size: u64) -> std::io::Result<Option<Arc<[u8]>>> {
        let Some(size) = offset.checked_add(size).filter(|&end| end <= self.len).map(|_| size) else {
            return Ok(None);
        };
        let Ok(size) = usize::try_from(size) else { return Ok(None) };
        // Allocated once at its final size (the iterator knows its length), then filled.
        let mut buf: Arc<[u8]> = std::iter::repeat_n(0u8, size).collect();
        let Some(bytes) = Arc::get_mut(&mut buf) else { return Ok(None) };
        self.file.seek(SeekFrom::Start(offset))?;
        self.file.read_exact(bytes)?;
        Ok(Some(buf))
    }

    /// A zlib-compressed section: its `compressed` bytes at `offset`, inflated into a
    /// buffer of `size` bytes; `None` when they are not inside the file or do not inflate
    /// to `size` bytes (the section reads as missing).
    fn read_zlib(&mut self, offset: u64, compressed: u64, size: u64) -> std::io::Result<Option<Arc<[u8]>>> {
        if size > compressed.saturating_mul(MAX_ZLIB_RATIO).saturating_add(64) {
            return Ok(None);
        }
        let Some(stream) = self.read(offset, compressed)? else { return Ok(None) };
        let Ok(size) = usize::try_from(size) else { return Ok(None) };
        let mut buf: Arc<[u8]> = std::iter::repeat_n(0u8, size).collect();
        let Some(bytes) = Arc::get_mut(&mut buf) else { return Ok(None) };
        // Bytes past `size` are ignored, as a shorter stream is refused.
        if flate2::read::ZlibDecoder::new(&*stream).read_exact(bytes).is_err() {
            return Ok(None);
        }
        Ok(Some(buf))
    }
}

/// The DWARF sections `addr2line` reads. Location lists and macro information, often
/// the biggest part of full debug info, describe variables and macros, which a lookup
/// never reads: they are not loaded.
fn needed(id: gimli::SectionId) -> bool {
    use gimli::SectionId as S;
    !matches!(id, S::DebugLoc | S::DebugLocLists | S::DebugMacinfo | S::DebugMacro)
}

/// The DWARF of `obj`, if it has any: each section `addr2line` needs read from
/// `sections` into its own buffer (inflated, if zlib-compressed), so that nothing else
/// of the file stays in memory. An I/O error while reading is returned; a section
/// whose header is damaged (out of the file, or a stream that does not inflate to its
/// size) and a zstd-compressed one read as missing.
fn dwarf_context<'data, R: object::ReadRef<'data>>(
    obj: &object::File<'data, R>,
    sections: &mut Sections,
) -> std::io::Result<Option<addr2line::Context<Reader>>> {
    let has = |name: &str| obj.section_by_name(name).is_some_and(|s| s.size() > 0);
    if !has(".debug_info") && !has(".debug_line") {
        return Ok(None);
    }
    let endian = if obj.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
    let empty = gimli::EndianArcSlice::new(Arc::from(&[][..]), endian);
    let load = |id: gimli::SectionId| -> std::io::Result<Reader> {
        let range = obj.section_by_name(id.name()).filter(|_| needed(id)).and_then(|s| s.compressed_file_range().ok());
        let Some(r) = range else { return Ok(empty.clone()) };
        let bytes = match r.format {
            object::CompressionFormat::None => sections.read(r.offset, r.compressed_size)?,
            object::CompressionFormat::Zlib => sections.read_zlib(r.offset, r.compressed_size, r.uncompressed_size)?,
            // Zstandard (or unknown): read as missing.
            _ => None,
        };
        Ok(bytes.map_or_else(|| empty.clone(), |b| gimli::EndianArcSlice::new(b, endian)))
    };
    let dwarf = gimli::Dwarf::load(load)?;
    Ok(addr2line::Context::from_dwarf(dwarf).ok())
}

/// The function symbols of `obj` (its symbol table, else its dynamic one), by address.
fn function_symbols<'data, R: object::ReadRef<'data>>(obj: &object::File<'data, R>) -> Vec<Symbol> {
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

    fn module(path: &Path) -> Module {
        Module { base: 0, size: u64::MAX, load_bias: 0, path: path.display().to_string(), build_id: vec![] }
    }

    /// A scratch directory of this test run.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("memreplay-symbols-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Addresses to look up in `b`: inside its function symbols, evenly spread (at most
    /// about 3000).
    fn probes(b: &Binary) -> Vec<u64> {
        let step = (b.symbols.len() / 1500).max(1);
        b.symbols.iter().step_by(step).flat_map(|s| [s.addr, s.addr + s.size / 2]).collect()
    }

    /// What `probes` give when the context is built over the whole file in memory, as
    /// it was before sections were read one by one.
    fn whole_file_lookups(path: &Path, probes: &[u64]) -> Vec<Vec<Found>> {
        let data: Arc<[u8]> = Arc::from(std::fs::read(path).unwrap());
        let obj = object::File::parse(&*data).unwrap();
        let endian = if obj.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
        let whole = gimli::EndianArcSlice::new(data.clone(), endian);
        let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
            let Some(r) = obj.section_by_name(id.name()).and_then(|s| s.compressed_file_range().ok()) else {
                return Ok(whole.range(0..0));
            };
            let (start, len) = (r.offset as usize, r.compressed_size as usize);
            Ok(match r.format {
                object::CompressionFormat::None => whole.range(start..start + len),
                _ => {
                    let mut out = Vec::new();
                    flate2::read::ZlibDecoder::new(&data[start..start + len]).read_to_end(&mut out).unwrap();
                    gimli::EndianArcSlice::new(Arc::from(out), endian)
                }
            })
        };
        let dwarf = addr2line::Context::from_dwarf(gimli::Dwarf::load(load).unwrap()).unwrap();
        let b = Binary { path: path.into(), debug_path: None, dwarf: Some(dwarf), symbols: function_symbols(&obj) };
        probes.iter().map(|&p| b.lookup(p)).collect()
    }

    /// Sections read one by one give the frames the whole file gave, and so does a copy
    /// whose DWARF sections are zlib-compressed (`objcopy --compress-debug-sections`).
    #[test]
    fn sections_read_one_by_one_give_the_same_frames() {
        let exe = std::env::current_exe().unwrap();
        let b = load(&module(&exe), &[], false).unwrap();
        assert!(b.has_dwarf() && b.debug_path.is_none());
        let probes = probes(&b);
        assert!(probes.len() > 100, "{} probes", probes.len());
        let found: Vec<Vec<Found>> = probes.iter().map(|&p| b.lookup(p)).collect();
        assert!(found.iter().filter(|f| f.iter().any(|f| f.dwarf && f.line.is_some())).count() > probes.len() / 2);
        assert!(found == whole_file_lookups(&exe, &probes), "frames differ from the whole file's");

        let dir = scratch("zlib");
        let zlib = dir.join("zlib-copy");
        let out = std::process::Command::new("objcopy")
            .args(["--compress-debug-sections=zlib", exe.to_str().unwrap(), zlib.to_str().unwrap()])
            .output()
            .expect("objcopy (binutils) is needed");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let data = std::fs::read(&zlib).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let info = obj.section_by_name(".debug_info").unwrap().compressed_file_range().unwrap();
        assert_eq!(info.format, object::CompressionFormat::Zlib);
        let z = load(&module(&zlib), &[], false).unwrap();
        assert!(z.has_dwarf());
        assert!(probes.iter().map(|&p| z.lookup(p)).eq(found.iter().cloned()), "the compressed copy's frames differ");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file cut short is refused with its reason, not read as one without DWARF.
    #[test]
    fn a_truncated_binary_is_unreadable() {
        let exe = std::env::current_exe().unwrap();
        let dir = scratch("cut");
        let cut = dir.join("cut");
        let data = std::fs::read(&exe).unwrap();
        std::fs::write(&cut, &data[..4096]).unwrap();
        match load(&module(&cut), &[], false) {
            Err(LoadError::Unreadable(p, why)) => assert!(p == cut && !why.is_empty(), "{why}"),
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
