//! The module map of a log: every image the recorder saw mapped (`MODULE` records, SPEC
//! §7.7), read in a pass of its own over the metadata stream, so that the replay engine
//! need not keep them.

use std::path::Path;

use memreplay_format::block::METADATA_THREAD;
use memreplay_format::{Event, FormatError, LogReader};

/// A loaded image as the recorder saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Where it was mapped: `base .. base + size`.
    pub base: u64,
    /// See `base`.
    pub size: u64,
    /// What the loader added to the file's addresses: file address = `ip − load_bias`.
    pub load_bias: u64,
    /// The path recorded (the executable's own path for the main program).
    pub path: String,
    /// The GNU build id (or Mach-O UUID); empty when the image has none.
    pub build_id: Vec<u8>,
}

impl Module {
    /// The file name of its path (`libc.so.6`), or the path when it has none.
    pub fn name(&self) -> &str {
        let p = self.path.trim_end_matches('/');
        p.rsplit(['/', '\\']).next().filter(|n| !n.is_empty()).unwrap_or(p)
    }

    /// Its build id in lowercase hex (empty when it has none).
    pub fn build_id_hex(&self) -> String {
        hex(&self.build_id)
    }

    /// Whether `addr` lies in the module's range.
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.base && addr - self.base < self.size
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The modules of a log, in the order recorded.
#[derive(Debug, Clone, Default)]
pub struct ModuleMap {
    modules: Vec<Module>,
    /// Indices into `modules` by base address.
    by_base: Vec<usize>,
}

impl ModuleMap {
    /// A map of these modules (later ones win where two overlap: an image unloaded and
    /// another loaded in its place).
    pub fn new(modules: Vec<Module>) -> ModuleMap {
        let mut by_base: Vec<usize> = (0..modules.len()).collect();
        by_base.sort_by_key(|&i| (modules[i].base, i));
        ModuleMap { modules, by_base }
    }

    /// Reads the `MODULE` records of the log at `path` (written to the metadata stream,
    /// whose blocks are the only ones decoded); their paths are string ids, named with
    /// `string`. Damaged blocks are skipped (the replay reports them).
    pub fn read(path: &Path, string: impl Fn(u32) -> String) -> Result<ModuleMap, FormatError> {
        let file = std::fs::File::open(path)?;
        let mut reader = LogReader::new(std::io::BufReader::with_capacity(1 << 20, file))?;
        let (mut modules, mut buf) = (Vec::new(), Vec::new());
        while let Some(block) = reader.next_block()? {
            if block.frame.thread != METADATA_THREAD {
                continue;
            }
            let Ok(decoded) = block.decode_with(&mut buf) else { continue };
            for e in decoded.events {
                if let Event::Module { base, size, load_bias, path, build_id } = e {
                    modules.push(Module { base, size, load_bias, path: string(path), build_id });
                }
            }
        }
        Ok(ModuleMap::new(modules))
    }

    /// The modules, in the order the log recorded them.
    pub fn modules(&self) -> &[Module] {
        &self.modules
    }

    /// Whether the log recorded no module.
    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }

    /// The index of the module whose range holds `addr` (the latest recorded, if several).
    pub fn find(&self, addr: u64) -> Option<usize> {
        // Modules starting at or below `addr`; the one holding it is among the last few
        // (ranges rarely overlap).
        let end = self.by_base.partition_point(|&i| self.modules[i].base <= addr);
        self.by_base[..end].iter().rev().take(64).filter(|&&i| self.modules[i].contains(addr)).max().copied()
    }

    /// The module at `index` (as [`ModuleMap::find`] returns it).
    pub fn get(&self, index: usize) -> &Module {
        &self.modules[index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(base: u64, size: u64, path: &str) -> Module {
        Module { base, size, load_bias: base, path: path.into(), build_id: vec![0xab, 0x01] }
    }

    #[test]
    fn finds_the_module_holding_an_address() {
        let map = ModuleMap::new(vec![m(0x1000, 0x1000, "/bin/game"), m(0x4000, 0x100, "/lib/libc.so.6")]);
        assert_eq!(map.find(0x1000), Some(0));
        assert_eq!(map.find(0x1fff), Some(0));
        assert_eq!(map.find(0x2000), None);
        assert_eq!(map.find(0x40ff), Some(1));
        assert_eq!(map.find(0x0fff), None);
        assert_eq!(map.get(1).name(), "libc.so.6");
        assert_eq!(map.get(1).build_id_hex(), "ab01");
        // A later image in the same range wins.
        let map = ModuleMap::new(vec![m(0x1000, 0x1000, "/a.so"), m(0x1000, 0x800, "/b.so")]);
        assert_eq!(map.find(0x1100), Some(1));
        assert_eq!(map.find(0x1900), Some(0));
    }
}
