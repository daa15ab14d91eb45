//! Which allocation sites of two logs `diff` can compare, and what it says about those it
//! cannot.
//!
//! `diff` keys a site by its allocating function (or, `--stacks`, its whole callstack):
//! names that mean the same in any build. A site whose key has a frame left unresolved
//! (`module+0xoffset`: its binary not found, another build, stripped, `--no-symbols`) is
//! *unnamed*: keyed by raw frames, which mean the same only in the same build of their
//! module. An unnamed site is compared with the other log only when the other log has the
//! same build of the module of each of its unresolved frames (same file name and build
//! id) and resolves it no better (`Naming::Raw`: two runs of one build whose binary is
//! gone). Otherwise (`Naming::Unmatched`) it is left out, never "new" or "vanished", and
//! so is every site found only in the other log that may be it: one whose allocating
//! frame is in a module that the unnamed site's frames, from its allocating frame down,
//! pass through (`Cover`). The other sites still compare: a log that cannot name libc's
//! frames loses only the sites that allocate from libc.
//!
//! [`UnnamedSites`] is what `diff` says about a log's unnamed sites, once per log.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

use memreplay_symbols::{Module, Reason, Resolution, SiteName, Symbolizer};

use crate::table::size;

/// How a site of one log may be matched with the other log's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Naming {
    /// Keyed by names (or recorded without a callstack): matches any log.
    Named,
    /// Keyed by raw frames that the other log leaves raw too, in the same build.
    Raw,
    /// Keyed by raw frames that the other log cannot match: left out, with the other
    /// log's sites it may be.
    Unmatched(Cover),
}

/// The other log's sites that unmatched sites may be: those whose allocating frame is in
/// one of these modules (file name, build id), or any (`all`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Cover {
    all: bool,
    modules: Vec<(String, Vec<u8>)>,
}

impl Cover {
    pub(crate) fn add(&mut self, other: &Cover) {
        self.all |= other.all;
        for m in &other.modules {
            if !self.modules.contains(m) {
                self.modules.push(m.clone());
            }
        }
    }

    /// Whether a site allocating in `module` (of the other log; `None`: outside every
    /// module) may be one of the sites covered.
    pub(crate) fn covers(&self, module: Option<&Module>) -> bool {
        self.all
            || module.is_some_and(|m| {
                self.modules.iter().any(|(name, id)| name == m.name() || (!id.is_empty() && *id == m.build_id))
            })
    }
}

/// Why a site is unnamed: the module (index in its log's map) and reason of the first
/// unresolved frame of its key.
pub(crate) type Why = (Option<usize>, Reason);

/// The frames `site`'s key is made of: all of them (`whole`: keyed by its stack), else its
/// allocating frame.
fn key_frames(site: &SiteName, whole: bool) -> &[memreplay_symbols::Frame] {
    if whole {
        &site.frames
    } else {
        let i = site.site_frame as usize;
        site.frames.get(i..=i).unwrap_or_default()
    }
}

/// How `site` of the log symbolicated by `this` (keyed by its whole stack when `whole`,
/// else by its allocating function) matches the log symbolicated by `other`, and, when
/// unnamed, why. Call it once both logs' sites are symbolicated (it reads which binaries
/// each loaded).
pub(crate) fn naming(site: &SiteName, whole: bool, this: &Symbolizer, other: &Symbolizer) -> (Naming, Option<Why>) {
    let (mine, theirs) = (this.modules(), other.modules());
    let mut why = None;
    let mut comparable = true;
    for f in key_frames(site, whole).iter().filter(|f| f.resolution == Resolution::None) {
        let index = mine.find(f.address);
        why.get_or_insert((index, f.reason.unwrap_or(Reason::NoSymbols)));
        comparable &= match index {
            // A bare address: the other log must not place it in a module either.
            None => theirs.find(f.address).is_none(),
            Some(i) => {
                let m = mine.get(i);
                let same = theirs.modules().iter().position(|o| o.name() == m.name() && o.build_id == m.build_id);
                same.is_some_and(|j| other.module_loaded(j).is_none_or(|l| Some(l) == this.module_loaded(i)))
            }
        };
    }
    let Some(why) = why else { return (Naming::Named, None) };
    if comparable {
        return (Naming::Raw, Some(why));
    }
    let mut cover = Cover::default();
    for f in site.frames.iter().skip(site.site_frame as usize) {
        match mine.find(f.address).map(|i| mine.get(i)) {
            Some(m)
                if theirs
                    .modules()
                    .iter()
                    .any(|o| o.name() == m.name() || (!m.build_id.is_empty() && o.build_id == m.build_id)) =>
            {
                let entry = (m.name().to_owned(), m.build_id.clone());
                if !cover.modules.contains(&entry) {
                    cover.modules.push(entry);
                }
            }
            // Outside every module, or in one the other log does not have (renamed?).
            _ => cover.all = true,
        }
    }
    (Naming::Unmatched(cover), Some(why))
}

/// The module of `site`'s allocating frame in its log's map.
pub(crate) fn allocating_module<'a>(site: &SiteName, syms: &'a Symbolizer) -> Option<&'a Module> {
    let f = site.frames.get(site.site_frame as usize)?;
    syms.modules().find(f.address).map(|i| syms.modules().get(i))
}

/// A log's allocation sites that cannot be named, as `diff` reports them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnnamedSites {
    /// Site rows (domain and key) whose key has unresolved frames: the allocating
    /// function (with `--stacks`, any frame).
    pub sites: u64,
    /// Allocations and bytes they made over the whole recording, in the top-level
    /// domains (with `--domain`, in that one).
    pub allocations: u64,
    /// Bytes at the sites left out.
    pub bytes: u64,
    /// Why, by the module of each site's first unresolved frame, most bytes first.
    pub reasons: Vec<UnnamedReason>,
    /// Of `sites`, those compared by their raw frames (the other log has the same build
    /// of their modules and leaves them unresolved too).
    pub compared: u64,
    /// Of `sites`, those left out of the site rows: never reported new or vanished.
    pub left_out: u64,
    /// Sites of the other log left out because they may be among these.
    pub other_sites_left_out: u64,
}

/// Unnamed sites for one reason in one module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnnamedReason {
    pub reason: Reason,
    /// The module's recorded path (null outside every module).
    pub module: Option<String>,
    /// Its build id in hex (null outside every module or without one).
    pub build_id: Option<String>,
    pub sites: u64,
    pub bytes: u64,
}

/// What `diff` says about each log's unnamed sites (null: every site named).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BothUnnamed {
    /// In the log before (`None`: every site named).
    pub before: Option<UnnamedSites>,
    /// In the log after.
    pub after: Option<UnnamedSites>,
}

/// Counts one log's unnamed sites as `diff` matches them.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    sites: u64,
    allocations: u64,
    bytes: u64,
    by_reason: HashMap<Why, (u64, u64)>,
    compared: u64,
    pub(crate) other_left_out: u64,
}

impl Tally {
    /// One unnamed site: why, its allocations and bytes (`counted`: they count in the
    /// sums), and whether it was compared.
    pub(crate) fn add(&mut self, why: Why, allocations: u64, bytes: u64, counted: bool, compared: bool) {
        let bytes = if counted { bytes } else { 0 };
        self.sites += 1;
        self.allocations = self.allocations.wrapping_add(if counted { allocations } else { 0 });
        self.bytes = self.bytes.wrapping_add(bytes);
        let e = self.by_reason.entry(why).or_default();
        e.0 += 1;
        e.1 = e.1.wrapping_add(bytes);
        self.compared += u64::from(compared);
    }

    /// The report, naming modules from `syms` (`None` when every site was named).
    pub(crate) fn finish(self, syms: &Symbolizer) -> Option<UnnamedSites> {
        if self.sites == 0 {
            return None;
        }
        let mut reasons: Vec<UnnamedReason> = self
            .by_reason
            .into_iter()
            .map(|((module, reason), (sites, bytes))| {
                let m = module.map(|i| syms.modules().get(i));
                UnnamedReason {
                    reason,
                    module: m.map(|m| m.path.clone()),
                    build_id: m.map(Module::build_id_hex).filter(|id| !id.is_empty()),
                    sites,
                    bytes,
                }
            })
            .collect();
        reasons.sort_by(|a, b| {
            b.bytes
                .cmp(&a.bytes)
                .then(b.sites.cmp(&a.sites))
                .then(a.module.cmp(&b.module))
                .then(a.reason.cmp(&b.reason))
        });
        Some(UnnamedSites {
            sites: self.sites,
            allocations: self.allocations,
            bytes: self.bytes,
            reasons,
            compared: self.compared,
            left_out: self.sites - self.compared,
            other_sites_left_out: self.other_left_out,
        })
    }
}

fn sites(n: u64) -> String {
    format!("{n} {}", if n == 1 { "site" } else { "sites" })
}

impl UnnamedSites {
    /// The note on one log (`this`, `other`: "before", "after"), several lines, each
    /// indented by two spaces after the first.
    pub fn text(&self, this: &str, other: &str, by_stack: bool) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "note: the log {this} cannot name {} of its allocation sites ({} allocated): {}",
            self.sites,
            size(self.bytes),
            if by_stack {
                "their callstacks have unresolved frames"
            } else {
                "their allocating function is unresolved"
            }
        );
        for r in &self.reasons {
            let name = r.module.as_deref().map_or("(no module)", |p| p.rsplit(['/', '\\']).next().unwrap_or(p));
            let mut what = Vec::new();
            if let Some(id) = &r.build_id {
                what.push(format!("build id {id}"));
            }
            if let Some(p) = &r.module {
                what.push(format!("recorded as {p}"));
            }
            let what = if what.is_empty() { String::new() } else { format!(" ({})", what.join(", ")) };
            let _ = writeln!(o, "  {name}: {}{what}: {}, {}", r.reason.text(), sites(r.sites), size(r.bytes));
        }
        let others = if self.other_sites_left_out > 0 {
            let n = self.other_sites_left_out;
            format!(
                ", and so {} {} of the log {other} that may be among them",
                if n == 1 { "is" } else { "are" },
                sites(n)
            )
        } else {
            String::new()
        };
        let raw =
            format!("by their raw module+0xoffset frames (the same build in the log {other}, unresolved there too)");
        match (self.compared, self.left_out) {
            (_, 0) => {
                let _ = writeln!(o, "  compared {raw}");
            }
            (0, _) => {
                let _ = writeln!(o, "  left out of the allocation sites below{others}");
            }
            (c, l) => {
                let _ = writeln!(o, "  {c} compared {raw}; {l} left out of the allocation sites below{others}");
            }
        }
        if let Some(fix) = self.fix() {
            let _ = writeln!(o, "  {fix}");
        }
        o
    }

    /// How to name them, if anything can.
    fn fix(&self) -> Option<String> {
        if self.reasons.iter().any(|r| r.reason == Reason::TooManyOpenFiles) {
            return Some("to name them: allow more open files (`ulimit -n`, the hard limit)".into());
        }
        let files = self.reasons.iter().find(|r| {
            matches!(
                r.reason,
                Reason::BinaryNotFound | Reason::BuildIdMismatch | Reason::UnreadableBinary | Reason::NoSymbols
            )
        });
        let off = self.reasons.iter().any(|r| r.reason == Reason::SymbolicationOff);
        match (files, off) {
            (Some(r), _) => {
                let example = match &r.build_id {
                    Some(id) if id.len() > 2 => {
                        format!(" (by build id: DIR/.build-id/{}/{}.debug)", &id[..2], &id[2..])
                    }
                    _ => String::new(),
                };
                Some(format!(
                    "to name them: --symbols DIR, with the binary of the build that was recorded, or its debug \
                     file, in DIR{example}"
                ))
            }
            (None, true) => Some("to name them: leave out --no-symbols".into()),
            (None, false) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memreplay_symbols::{Frame, ModuleMap, SymbolOptions};

    const GAME: u64 = 0x10_0000;
    const LIBC: u64 = 0x70_0000;

    fn module(base: u64, path: &str, id: u8) -> Module {
        Module { base, size: 0x1_0000, load_bias: base, path: path.into(), build_id: vec![id; 20] }
    }

    /// A symbolizer over `modules` that finds no binary: every frame is unresolved.
    fn symbolizer(modules: Vec<Module>) -> Symbolizer {
        Symbolizer::new(
            ModuleMap::new(modules),
            SymbolOptions { search_dirs: Vec::new(), system_debug_dir: false, disabled: false },
        )
    }

    fn named(address: u64, function: &str) -> Frame {
        Frame {
            address,
            module: Some("m".into()),
            offset: 0,
            function: Some(function.into()),
            file: None,
            line: None,
            inlined: false,
            resolution: Resolution::Symbol,
            reason: Some(Reason::NoDebugInfo),
        }
    }

    /// A site of these frames (named where given a name), its allocating frame the first.
    fn site(s: &mut Symbolizer, frames: &[(u64, Option<&str>)]) -> SiteName {
        let frames = frames
            .iter()
            .map(|&(a, f)| match f {
                Some(f) => named(a, f),
                None => s.resolve(a)[0].clone(),
            })
            .collect();
        SiteName { stack: 1, function: String::new(), file: None, line: None, frames, trimmed: 0, site_frame: 0 }
    }

    #[test]
    fn raw_frames_compare_only_in_the_same_build_unresolved_in_both() {
        let game = |id| module(GAME, "/bin/game", id);
        let libc = || module(LIBC, "/lib/libc.so.6", 9);
        // Two runs of one build, its binary gone: raw, compared.
        let mut a = symbolizer(vec![game(1), libc()]);
        let mut b = symbolizer(vec![game(1), libc()]);
        let sa = site(&mut a, &[(GAME + 0x10, None), (LIBC + 0x20, Some("__libc_start_main"))]);
        site(&mut b, &[(GAME + 0x10, None)]);
        assert_eq!(naming(&sa, false, &a, &b), (Naming::Raw, Some((Some(0), Reason::BinaryNotFound))));
        // Named: nothing to say.
        let sn = site(&mut a, &[(GAME + 0x10, Some("game::load"))]);
        assert_eq!(naming(&sn, false, &a, &b), (Naming::Named, None));
        // By stack, a raw libc frame at the bottom makes it unnamed; libc is the same
        // build in both but never looked up by `b`: still raw.
        let sl = site(&mut a, &[(GAME + 0x10, Some("game::load")), (LIBC + 0x20, None)]);
        assert_eq!(naming(&sl, true, &a, &b).0, Naming::Raw);
        assert_eq!(naming(&sl, false, &a, &b).0, Naming::Named, "by function, only the allocating frame counts");

        // Another build of the game: unmatched, and it may be any site of `c` allocating
        // in the game or in libc (frames from its allocating frame down).
        let c = symbolizer(vec![game(2), libc()]);
        let (n, why) = naming(&sa, false, &a, &c);
        assert_eq!(why, Some((Some(0), Reason::BinaryNotFound)));
        let Naming::Unmatched(cover) = n else { panic!("{n:?}") };
        assert!(cover.covers(Some(&game(2))) && cover.covers(Some(&libc())));
        assert!(!cover.covers(Some(&module(0x90_0000, "/lib/libm.so.6", 7))) && !cover.covers(None));

        // The same build, named in the other log (here: this test's own binary, loaded
        // by `d`; `e` has symbolication off): unmatched too, raw against names.
        let exe = std::env::current_exe().unwrap().display().to_string();
        let own = || Module { build_id: Vec::new(), ..module(GAME, &exe, 0) };
        let mut d = symbolizer(vec![own()]);
        d.resolve(GAME + 0x10);
        assert_eq!(d.module_loaded(0), Some(true));
        let mut e =
            Symbolizer::new(ModuleMap::new(vec![own()]), SymbolOptions { disabled: true, ..SymbolOptions::default() });
        let se = site(&mut e, &[(GAME + 0x10, None)]);
        assert_eq!(se.frames[0].reason, Some(Reason::SymbolicationOff));
        assert!(matches!(naming(&se, false, &e, &d).0, Naming::Unmatched(_)));
        // A bare address compares only with a log that places it in no module either.
        let sx = site(&mut e, &[(0x42, None)]);
        assert_eq!(naming(&sx, false, &e, &symbolizer(Vec::new())), (Naming::Raw, Some((None, Reason::NoModule))));
        let low = symbolizer(vec![module(0, "/lib/low.so", 5)]);
        let Naming::Unmatched(cover) = naming(&sx, false, &e, &low).0 else { panic!() };
        assert!(cover.covers(None) && cover.covers(Some(&game(3))), "outside every module: it may be any site");
    }

    /// What the note tells a user to do: give the binaries, or, when the analyzer ran out
    /// of descriptors before it could open them, allow more open files.
    #[test]
    fn the_fix_fits_the_reason() {
        let reason = |reason| UnnamedReason {
            reason,
            module: Some("/lib/libpart9.so".into()),
            build_id: None,
            sites: 1,
            bytes: 64,
        };
        let note = |reasons| UnnamedSites {
            sites: 1,
            allocations: 1,
            bytes: 64,
            reasons,
            compared: 0,
            left_out: 1,
            other_sites_left_out: 0,
        };
        let missing = note(vec![reason(Reason::BinaryNotFound)]);
        assert_eq!(
            missing.fix().as_deref(),
            Some("to name them: --symbols DIR, with the binary of the build that was recorded, or its debug file, in DIR")
        );
        let out_of_files = note(vec![reason(Reason::BinaryNotFound), reason(Reason::TooManyOpenFiles)]);
        let text = out_of_files.text("before", "after", false);
        assert!(
            text.contains("  libpart9.so: too many open files (recorded as /lib/libpart9.so): 1 site, 64 B\n"),
            "{text}"
        );
        assert!(text.ends_with("  to name them: allow more open files (`ulimit -n`, the hard limit)\n"), "{text}");
    }
}
