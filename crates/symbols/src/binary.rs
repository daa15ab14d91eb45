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

use gimli::Reader as _;
use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

use super::dwarf::LazyDwarf;
use super::modules::{hex, Module};
use super::reader::{DwarfFile, Reader, CHUNK_SHIFT, STRING_CHUNK_SHIFT};

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
    /// A file was found but could not be opened: the process (or the system) has as many
    /// files open as it may.
    TooManyOpenFiles(PathBuf),
}

/// Whether opening (or duplicating) a file's descriptor failed for want of a descriptor
/// (`EMFILE`, `ENFILE`), not because of the file.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    const EMFILE: i32 = 24;
    const ENFILE: i32 = 23;
    matches!(e.raw_os_error(), Some(EMFILE | ENFILE))
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
    dwarf: Option<Box<LazyDwarf>>,
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
        if let Some(dwarf) = &self.dwarf {
            if let Ok(frames) = dwarf.find_frames(probe) {
                for f in frames {
                    let function = f.function.and_then(|(name, lang)| {
                        name.to_string_lossy().ok().map(|raw| addr2line::demangle_auto(raw, lang).into_owned())
                    });
                    let (file, line) = f.location.map_or((None, None), |l| (l.file.map(str::to_owned), l.line));
                    out.push(Found { function, file, line, dwarf: true });
                }
            }
            if out.is_empty() {
                // A unit with lines but no function entries (assembly, some C runtimes).
                if let Ok(Some(l)) = dwarf.find_location(probe) {
                    out.push(Found { function: None, file: l.file.map(str::to_owned), line: l.line, dwarf: true });
                }
            }
        }
        self.name_from_symbols(probe, &mut out);
        out
    }

    /// Completes the DWARF frames `out` of `probe` from the symbol table: the outermost
    /// frame's full path where DWARF has a bare name, a name where DWARF has none or
    /// there is no DWARF.
    fn name_from_symbols(&self, probe: u64, out: &mut Vec<Found>) {
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
/// cache dropped once the symbols are taken, and its DWARF as lookups need it, a chunk
/// at a time (see `dwarf_context`); the file stays open while the binary is loaded.
pub fn load(module: &Module, dirs: &[PathBuf], system_debug: bool) -> Result<Binary, LoadError> {
    let mut mismatch = None;
    let mut failed = None;
    let debug_dirs: Vec<PathBuf> =
        dirs.iter().cloned().chain(system_debug.then(|| PathBuf::from(SYSTEM_DEBUG_DIR))).collect();
    for path in binary_candidates(module, dirs) {
        if !path.is_file() {
            continue;
        }
        let file = match ObjectFile::open(&path) {
            Ok(f) => f,
            Err(e) if out_of_descriptors(&e) => return Err(LoadError::TooManyOpenFiles(path)),
            Err(e) => {
                failed.get_or_insert(LoadError::Unreadable(path, e.to_string()));
                continue;
            }
        };
        let cache = object::ReadCache::new(file.cache_handle);
        let obj = match object::File::parse(&cache) {
            Ok(o) => o,
            Err(e) => {
                failed.get_or_insert(LoadError::Unreadable(path, e.to_string()));
                continue;
            }
        };
        if !build_id_matches(module, &obj) {
            mismatch.get_or_insert(LoadError::BuildIdMismatch(path));
            continue;
        }
        let symbols = function_symbols(&obj);
        match dwarf_context(&obj, &file.dwarf, file.len) {
            Ok(Some(dwarf)) => return Ok(Binary { path, debug_path: None, dwarf: Some(dwarf), symbols }),
            Ok(None) => {}
            Err(e) if out_of_descriptors(&e) => return Err(LoadError::TooManyOpenFiles(path)),
            Err(e) => {
                failed.get_or_insert(LoadError::Unreadable(path, e.to_string()));
                continue;
            }
        }
        // No DWARF in the binary: a separate debug file.
        let link = obj.gnu_debuglink().ok().flatten().map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
        // The binary's headers and symbol table are not needed any more.
        drop(obj);
        drop(cache);
        for debug in debug_candidates(module, &path, link.as_deref(), &debug_dirs) {
            if let Some((dwarf, debug_symbols)) = load_debug_file(module, &debug)? {
                let symbols = if symbols.is_empty() { debug_symbols } else { symbols };
                return Ok(Binary { path, debug_path: Some(debug), dwarf: Some(dwarf), symbols });
            }
        }
        return Ok(Binary { path, debug_path: None, dwarf: None, symbols });
    }
    // No binary: a debug file filed by build id has all that is needed.
    if !module.build_id.is_empty() {
        for debug in build_id_paths(&module.build_id, &debug_dirs, ".debug") {
            if let Some((dwarf, symbols)) = load_debug_file(module, &debug)? {
                return Ok(Binary { path: debug.clone(), debug_path: Some(debug), dwarf: Some(dwarf), symbols });
            }
        }
    }
    Err(mismatch.or(failed).unwrap_or(LoadError::NotFound))
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

/// A separate debug file's DWARF and symbols.
type DebugFile = (Box<LazyDwarf>, Vec<Symbol>);

/// A separate debug file's DWARF and symbols, if it is there, matches and has DWARF; an
/// error only when no descriptor was left to open it with.
fn load_debug_file(module: &Module, path: &Path) -> Result<Option<DebugFile>, LoadError> {
    if !path.is_file() {
        return Ok(None);
    }
    let file = match ObjectFile::open(path) {
        Ok(f) => f,
        Err(e) if out_of_descriptors(&e) => return Err(LoadError::TooManyOpenFiles(path.to_owned())),
        Err(_) => return Ok(None),
    };
    let cache = object::ReadCache::new(file.cache_handle);
    let Ok(obj) = object::File::parse(&cache) else { return Ok(None) };
    if !build_id_matches(module, &obj) {
        return Ok(None);
    }
    match dwarf_context(&obj, &file.dwarf, file.len) {
        Ok(dwarf) => Ok(dwarf.map(|dwarf| (dwarf, function_symbols(&obj)))),
        Err(e) if out_of_descriptors(&e) => Err(LoadError::TooManyOpenFiles(path.to_owned())),
        Err(_) => Ok(None),
    }
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
/// until dropped), one that the DWARF sections are read through. Both seek before every
/// read, so sharing the file offset is harmless.
struct ObjectFile {
    cache_handle: File,
    dwarf: File,
    /// The file's length when opened.
    len: u64,
}

impl ObjectFile {
    fn open(path: &Path) -> std::io::Result<ObjectFile> {
        let dwarf = File::open(path)?;
        let len = dwarf.metadata()?.len();
        Ok(ObjectFile { cache_handle: dwarf.try_clone()?, dwarf, len })
    }
}

/// The most a zlib stream can inflate to per byte (deflate's limit is 1032:1): a section
/// header claiming more is damaged, and its section is read as missing.
const MAX_ZLIB_RATIO: u64 = 1032;

/// The DWARF sections `addr2line`'s lookup reads. Location lists and macro information,
/// often the biggest part of full debug info, describe variables and macros, which a
/// lookup never reads: they are not loaded.
fn needed(id: gimli::SectionId) -> bool {
    use gimli::SectionId as S;
    !matches!(id, S::DebugLoc | S::DebugLocLists | S::DebugMacinfo | S::DebugMacro)
}

/// The DWARF of `obj` (`file`, `len` bytes long), if it has any, its units indexed (see
/// [`LazyDwarf`]). Each section a lookup needs is read from `file` as lookups go, a
/// chunk at a time (see [`DwarfFile`]); a zlib-compressed one is inflated now and kept
/// LZ4-compressed. An I/O error while reading is returned; a section whose header is
/// damaged (out of the file, or a stream that does not inflate to its size) and a
/// zstd-compressed one read as missing; DWARF that does not parse reads as none.
fn dwarf_context<'data, R: object::ReadRef<'data>>(
    obj: &object::File<'data, R>,
    file: &File,
    len: u64,
) -> std::io::Result<Option<Box<LazyDwarf>>> {
    let has = |name: &str| obj.section_by_name(name).is_some_and(|s| s.size() > 0);
    if !has(".debug_info") && !has(".debug_line") {
        return Ok(None);
    }
    let endian = if obj.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
    let data = Arc::new(DwarfFile::new(file.try_clone()?, endian));
    let inside = |offset: u64, size: u64| offset.checked_add(size).is_some_and(|end| end <= len);
    let load = |id: gimli::SectionId| -> std::io::Result<Reader> {
        let range = obj.section_by_name(id.name()).filter(|_| needed(id)).and_then(|s| s.compressed_file_range().ok());
        // Names are read all over the string sections, a few bytes each: small chunks.
        let shift = if matches!(id, gimli::SectionId::DebugStr | gimli::SectionId::DebugLineStr) {
            STRING_CHUNK_SHIFT
        } else {
            CHUNK_SHIFT
        };
        let index = match range {
            Some(r) if r.format == object::CompressionFormat::None && inside(r.offset, r.compressed_size) => {
                usize::try_from(r.compressed_size).ok().map(|size| data.add_file_range(r.offset, size, shift))
            }
            Some(r)
                if r.format == object::CompressionFormat::Zlib
                    && inside(r.offset, r.compressed_size)
                    && r.uncompressed_size <= r.compressed_size.saturating_mul(MAX_ZLIB_RATIO).saturating_add(64) =>
            {
                let mut f = file;
                f.seek(SeekFrom::Start(r.offset))?;
                match usize::try_from(r.uncompressed_size) {
                    Ok(size) => data.add_zlib(std::io::BufReader::new(f.take(r.compressed_size)), size, shift),
                    Err(_) => None,
                }
            }
            // Missing, damaged, or compressed with Zstandard (or unknown): read as missing.
            _ => None,
        };
        Ok(data.reader(index.unwrap_or_else(|| data.add_empty())))
    };
    let dwarf = gimli::Dwarf::load(load)?;
    let index = LazyDwarf::new(dwarf);
    data.forget_recent();
    match index {
        Ok(d) => Ok(Some(Box::new(d))),
        Err(gimli::Error::Io) => Err(std::io::Error::other("reading its DWARF failed")),
        Err(_) => Ok(None),
    }
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

    /// What `probes` give through `addr2line::Context` built over the whole file in
    /// memory, as lookups were made before units were parsed on demand and sections
    /// read a chunk at a time.
    fn whole_file_lookups(path: &Path, probes: &[u64]) -> Vec<Vec<Found>> {
        type Whole = gimli::EndianArcSlice<gimli::RunTimeEndian>;
        let data: Arc<[u8]> = Arc::from(std::fs::read(path).unwrap());
        let obj = object::File::parse(&*data).unwrap();
        let endian = if obj.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
        let whole = gimli::EndianArcSlice::new(data.clone(), endian);
        let load = |id: gimli::SectionId| -> Result<Whole, gimli::Error> {
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
        let ctx = addr2line::Context::from_dwarf(gimli::Dwarf::load(load).unwrap()).unwrap();
        let b = Binary { path: path.into(), debug_path: None, dwarf: None, symbols: function_symbols(&obj) };
        let lookup = |probe: u64| {
            // `Binary::lookup` as it was over an `addr2line::Context`.
            let mut out = Vec::new();
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
                if let Ok(Some(l)) = ctx.find_location(probe) {
                    out.push(Found { function: None, file: l.file.map(str::to_owned), line: l.line, dwarf: true });
                }
            }
            b.name_from_symbols(probe, &mut out);
            out
        };
        probes.iter().map(|&p| lookup(p)).collect()
    }

    /// Units parsed on demand and sections read a chunk at a time give the frames that
    /// `addr2line` over the whole file gave, and so does a copy whose DWARF sections are
    /// zlib-compressed (`objcopy --compress-debug-sections`); a few lookups parse a few
    /// units.
    #[test]
    fn lazy_units_give_the_same_frames() {
        let exe = std::env::current_exe().unwrap();
        let b = load(&module(&exe), &[], false).unwrap();
        assert!(b.has_dwarf() && b.debug_path.is_none());
        let probes = probes(&b);
        assert!(probes.len() > 100, "{} probes", probes.len());
        let dwarf = b.dwarf.as_ref().unwrap();
        assert_eq!(dwarf.parsed_count(), 0);
        for &p in &probes[..10] {
            b.lookup(p);
        }
        // (Units are a few hundred in an incremental build, 16 codegen units per crate in
        // a clean one: CI has about 60.)
        let units = dwarf.unit_count();
        assert!(units > 20 && dwarf.parsed_count() < units / 4, "{} of {units} units parsed", dwarf.parsed_count());
        let found: Vec<Vec<Found>> = probes.iter().map(|&p| b.lookup(p)).collect();
        assert!(found.iter().filter(|f| f.iter().any(|f| f.dwarf && f.line.is_some())).count() > probes.len() / 2);
        assert!(found.iter().any(|f| f.len() > 1), "no inlined frames among the probes");
        assert_same(&found, &whole_file_lookups(&exe, &probes), &probes, "the test binary");

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
        let zfound: Vec<Vec<Found>> = probes.iter().map(|&p| z.lookup(p)).collect();
        assert_same(&zfound, &found, &probes, "the compressed copy");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Probes of `b`: every function symbol at its start, a third, the middle and two
    /// thirds of it.
    fn all_probes(b: &Binary) -> Vec<u64> {
        b.symbols
            .iter()
            .flat_map(|s| [s.addr, s.addr + s.size / 3, s.addr + s.size / 2, s.addr + s.size * 2 / 3])
            .collect()
    }

    /// The same comparison on C++ programs built by the system's compiler, optimized:
    /// DWARF 5 and DWARF 4, and link-time optimized (units that refer into each other).
    #[test]
    fn lazy_units_give_the_same_frames_in_cpp_programs() {
        let dir = scratch("cpp");
        let main = dir.join("main.cpp");
        std::fs::write(
            &main,
            r#"#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>
namespace game {
struct Mesh { std::vector<float> v; std::string name; };
template <class T> struct Pool {
  std::vector<std::unique_ptr<T>> items;
  T* make() { items.emplace_back(new T()); return items.back().get(); }
};
static inline int helper(int x) { return x * 3 + 1; }
__attribute__((noinline)) int work(std::map<std::string, int>& m, int n) {
  int s = 0;
  for (int i = 0; i < n; i++) { m[std::to_string(i)] = helper(i); s += (int)m.size(); }
  return s;
}
}
int other(int);
int main(int argc, char**) {
  std::map<std::string, int> m;
  game::Pool<game::Mesh> p;
  for (int i = 0; i < argc * 10; i++) p.make()->v.resize(i);
  std::vector<int> v(argc * 100);
  std::sort(v.begin(), v.end());
  std::printf("%d %d\n", game::work(m, argc * 100), other(argc));
}
"#,
        )
        .unwrap();
        let other = dir.join("other.cpp");
        std::fs::write(
            &other,
            r#"#include <string>
#include <unordered_map>
static std::unordered_map<int, std::string> table;
int other(int x) {
  for (int i = 0; i < x * 50; i++) table[i] = std::string(i % 40, 'x');
  return (int)table.size();
}
"#,
        )
        .unwrap();
        for (name, flags) in [("dwarf5", &["-g"][..]), ("dwarf4", &["-gdwarf-4"]), ("lto", &["-g", "-flto"])] {
            let exe = dir.join(name);
            let out = std::process::Command::new("c++")
                .args(["-O2"])
                .args(flags)
                .arg("-o")
                .arg(&exe)
                .arg(&main)
                .arg(&other)
                .output()
                .expect("a C++ compiler (c++) is needed");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let b = load(&module(&exe), &[], false).unwrap();
            assert!(b.has_dwarf(), "{name}");
            let probes = all_probes(&b);
            let found: Vec<Vec<Found>> = probes.iter().map(|&p| b.lookup(p)).collect();
            assert!(
                found.iter().any(|f| f.len() > 1 && f.iter().all(|f| f.line.is_some())),
                "{name}: no inlined frames"
            );
            let work = |f: &Found| f.function.as_deref().is_some_and(|n| n.starts_with("game::work(std::map<"));
            assert!(found.iter().flatten().any(work), "{name}: no frame in game::work, demangled");
            assert_same(&found, &whole_file_lookups(&exe, &probes), &probes, name);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn assert_same(found: &[Vec<Found>], expected: &[Vec<Found>], probes: &[u64], what: &str) {
        let differ: Vec<String> = probes
            .iter()
            .zip(found.iter().zip(expected))
            .filter(|(_, (f, e))| f != e)
            .take(3)
            .map(|(p, (f, e))| format!("{p:#x}: {f:?}\n  expected {e:?}"))
            .collect();
        assert!(
            differ.is_empty(),
            "{what}: frames differ from addr2line's over the whole file:\n{}",
            differ.join("\n")
        );
    }

    /// The same comparison on other files: `MEMREPLAY_SYMBOLS_COMPARE=FILE:FILE...`
    /// (binaries or separate debug files), at `all_probes`.
    #[test]
    #[ignore = "compares files named in MEMREPLAY_SYMBOLS_COMPARE"]
    fn lazy_units_give_the_same_frames_on_other_files() {
        let files = std::env::var("MEMREPLAY_SYMBOLS_COMPARE").expect("MEMREPLAY_SYMBOLS_COMPARE=FILE:FILE...");
        for path in std::env::split_paths(&files) {
            let b = load(&module(&path), &[], false).unwrap();
            assert!(b.has_dwarf(), "{}: no DWARF", path.display());
            let probes = all_probes(&b);
            let start = std::time::Instant::now();
            let found: Vec<Vec<Found>> = probes.iter().map(|&p| b.lookup(p)).collect();
            let lazy = start.elapsed();
            let start = std::time::Instant::now();
            let expected = whole_file_lookups(&path, &probes);
            let whole = start.elapsed();
            let with_lines = found.iter().filter(|f| f.iter().any(|f| f.line.is_some())).count();
            let inlined = found.iter().filter(|f| f.len() > 1).count();
            println!(
                "{}: {} probes, {with_lines} with lines, {inlined} with inlined frames; {} units; {:.2} s lazy, {:.2} s addr2line",
                path.display(),
                probes.len(),
                b.dwarf.as_ref().unwrap().unit_count(),
                lazy.as_secs_f64(),
                whole.as_secs_f64()
            );
            assert_same(&found, &expected, &probes, &path.display().to_string());
        }
    }

    /// A binary cut short after it was loaded (rebuilt in place while a report runs):
    /// its DWARF can no longer be read, and its addresses are named from the symbol
    /// table, as in a binary without DWARF; nothing panics.
    #[test]
    fn a_binary_cut_short_after_loading_reads_as_without_dwarf() {
        let exe = std::env::current_exe().unwrap();
        let dir = scratch("cut-later");
        let copy = dir.join("copy");
        std::fs::copy(&exe, &copy).unwrap();
        let b = load(&module(&copy), &[], false).unwrap();
        assert!(b.has_dwarf());
        std::fs::OpenOptions::new().write(true).open(&copy).unwrap().set_len(4096).unwrap();
        let probes = probes(&b);
        for &p in &probes {
            let found = b.lookup(p);
            let name = b.symbol(p);
            assert!(name.is_some());
            assert_eq!(found, [Found { function: name, file: None, line: None, dwarf: false }], "{p:#x}");
        }
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
