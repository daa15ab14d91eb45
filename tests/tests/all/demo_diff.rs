//! `replay-cli diff` and `check` (through the library) on real demo logs: two runs with a
//! changed parameter (more textures, a second leak) give exactly the deltas the demo's
//! constants fix; a log against itself shows no change; `--from/--to` finds what the
//! level load left behind; the example budget holds for the demo and breaks, rule by
//! rule, when the demo grows. Allocation sites are matched by symbolicated allocating
//! function (or whole callstack with `--stacks`), and by raw `module+0xoffset` frames
//! when the binary is gone: against the same build only, else left out with one note;
//! the CI recipe's stored baseline is named by the debug file kept beside it.

use std::path::{Path, PathBuf};

use memreplay_demo::{
    expected, Expected, CONSOLE_CAPACITY, ENTITY_BYTES, ENTITY_POOL, EXTRA_LEAK_BYTES, EXTRA_LEAK_FUNCTION, LABELS,
    LEAK_BYTES, LEVEL, LEVEL_ENTITIES, VRAM_BUFFERS, VRAM_LOCAL, VRAM_SYSTEM,
};
use memreplay_report::{
    self as report, build_check, build_diff, build_range, run_check, run_diff, site_unresolved, size,
};
use memreplay_report::{At, BothUnnamed, CheckOptions, MinDelta, Number};
use memreplay_report::{
    ContextDiff, Diff, DiffOptions, FigureChanges, Progress, ReportOptions, SiteDiff, Status, Verdict,
};
use memreplay_symbols::{ModuleMap, Reason, Resolution, SymbolOptions, Symbolizer};
use memreplay_tests::{run_demo, temp_log};

const DEMO: &str = env!("CARGO_BIN_EXE_demo-runner");
const LOAD_TEXTURE: &str = "memreplay_demo::game::load_texture";

/// Runs the demo with `args` into a fresh log; returns its path and what to expect.
fn record(name: &str, args: &[&str]) -> (PathBuf, Expected) {
    record_with(DEMO, name, args)
}

/// Runs the demo binary `exe` with `args` into a fresh log.
fn record_with(exe: &str, name: &str, args: &[&str]) -> (PathBuf, Expected) {
    let path = temp_log(name);
    let mut all = vec![path.to_str().unwrap()];
    all.extend_from_slice(args);
    run_demo(exe, &all);
    let Ok(memreplay_demo::Command::Run(opts)) = memreplay_demo::parse_args(all.iter().map(Into::into)) else {
        panic!("the arguments parse")
    };
    (path, expected(&opts))
}

fn diff_of(before: &Path, after: &Path, at: Option<&str>) -> Diff {
    diff_with(before, after, at, |_| {})
}

fn diff_with(before: &Path, after: &Path, at: Option<&str>, f: impl FnOnce(&mut DiffOptions)) -> Diff {
    let mut args = DiffOptions {
        before: before.to_owned(),
        after: Some(after.to_owned()),
        at: at.map(|l| At::Label(l.into())),
        limit: Some(0),
        ..DiffOptions::default()
    };
    f(&mut args);
    build_diff(&args, after, Progress::Hidden).unwrap_or_else(|e| panic!("{e}"))
}

/// The site row of `function` in `domain` (by function: exactly one).
fn site_of<'a>(d: &'a Diff, domain: &str, function: &str) -> &'a SiteDiff {
    let rows: Vec<&SiteDiff> = d.sites.iter().filter(|s| s.domain == domain && s.function == function).collect();
    assert_eq!(rows.len(), 1, "{function} in {domain}: {:#?}", d.sites.iter().map(|s| &s.key).collect::<Vec<_>>());
    rows[0]
}

/// Per domain, the sum of the sites' changes of total bytes must be the domain's (every
/// allocation has one site, listed when it changed: `--limit 0`).
fn sites_add_up(d: &Diff) {
    for dom in &d.domains {
        let of = |f: fn(&SiteDiff) -> i64| d.sites.iter().filter(|s| s.domain == dom.domain).map(f).sum::<i64>();
        assert_eq!(of(|s| s.figures.total.change), dom.figures.total.change, "{} total", dom.domain);
        assert_eq!(of(|s| s.figures.total_count.change), dom.figures.total_count.change, "{} count", dom.domain);
        assert_eq!(of(|s| s.figures.live.change), dom.figures.live.change, "{} live", dom.domain);
    }
}

fn context<'a>(d: &'a Diff, domain: &str, path: &str) -> &'a ContextDiff {
    d.contexts
        .iter()
        .find(|c| c.domain == domain && c.context == path)
        .unwrap_or_else(|| panic!("no change listed for {domain} {path}"))
}

fn textures_path() -> String {
    format!("Level:{LEVEL}/Textures:{LEVEL}")
}

#[test]
fn more_textures_and_a_new_leak_give_the_exact_deltas() {
    let (a, ea) = record("diff-a.mrl", &["--textures", "8", "--frames", "5"]);
    let (b, eb) = record("diff-b.mrl", &["--textures", "12", "--frames", "5", "--extra-leak"]);
    let new_textures = &eb.textures[ea.textures.len()..];
    let new_vram: u64 = new_textures.iter().map(|t| t.vram_bytes).sum();
    assert_eq!(new_vram, eb.texture_vram_bytes - ea.texture_vram_bytes);

    let d = diff_of(&a, &b, None);
    assert!(d.changed);
    // The GPU heap: everything is loaded before anything is freed, so its peak and its
    // total both grow by exactly the new textures' mip chains.
    let vram = d.domains.iter().find(|x| x.domain == VRAM_LOCAL).unwrap();
    assert_eq!(vram.status, Status::Changed);
    assert_eq!(
        (vram.figures.peak.before, vram.figures.peak.after),
        (Some(ea.vram_local_bytes), Some(eb.vram_local_bytes))
    );
    assert_eq!(vram.figures.peak.change, new_vram as i64);
    assert_eq!(vram.figures.peak.relative, Some(new_vram as f64 / ea.vram_local_bytes as f64));
    assert_eq!(vram.figures.total.change, new_vram as i64);
    assert_eq!(vram.figures.total_count.change, new_textures.len() as i64);
    assert_eq!(vram.figures.live.change, 0, "the level unload frees everything");
    let staging = d.domains.iter().find(|x| x.domain == VRAM_SYSTEM).unwrap();
    assert_eq!(staging.status, Status::Unchanged);

    // The textures' context: 8 → 12 instances, their VRAM bytes.
    let t = context(&d, VRAM_LOCAL, &textures_path());
    assert_eq!(t.status, Status::Changed);
    assert_eq!(
        (t.figures.peak.before, t.figures.peak.after),
        (Some(ea.texture_vram_bytes), Some(eb.texture_vram_bytes))
    );
    assert_eq!((t.figures.instances.before, t.figures.instances.after), (Some(8), Some(12)));
    assert_eq!(t.figures.instances.change, 4);
    // Each new texture is a new context holding its mip chain at the peak.
    for spec in new_textures {
        let c = context(&d, VRAM_LOCAL, &format!("{}/Texture:{}", textures_path(), spec.name));
        assert_eq!(c.status, Status::New);
        assert_eq!((c.figures.peak.before, c.figures.peak.after), (None, Some(spec.vram_bytes)));
        assert_eq!((c.figures.total.after, c.figures.total_count.after), (Some(spec.vram_bytes), Some(1)));
        assert_eq!(c.figures.instances.after, Some(1));
        assert_eq!(c.figures.peak.relative, None);
    }
    // Contexts the parameters do not touch are not listed.
    let shadows = format!("Level:{LEVEL}/Renderer:shadows");
    assert!(!d.contexts.iter().any(|c| c.context == shadows), "the shadow atlas did not change");
    assert!(d.unchanged_contexts > 0);

    // The second leak: a new context, live at the end.
    let leak = context(&d, "heap", &format!("Level:{LEVEL}/Shaders:permutations"));
    assert_eq!(leak.status, Status::New);
    assert_eq!((leak.figures.live.after, leak.figures.live_count.after), (Some(EXTRA_LEAK_BYTES as u64), Some(1)));
    assert_eq!(leak.figures.live.change, EXTRA_LEAK_BYTES as i64);
    // The first leak is the same in both.
    assert!(!d.contexts.iter().any(|c| c.context == format!("Level:{LEVEL}/Scripts:cache")));

    // Sites, by allocating function: the GPU heap wrapper allocates the new textures'
    // VRAM; the texture loader their CPU copies and compressed "files" (a quarter of the
    // copy each); the shader table's leak is a new function.
    assert_eq!(d.group, "function");
    assert!(d.sites_keyed_by.starts_with("allocating function"), "{}", d.sites_keyed_by);
    let site = site_of(&d, VRAM_LOCAL, "memreplay_demo::gpu::GpuHeap::alloc");
    assert_eq!(site.figures.total_count.change, new_textures.len() as i64);
    assert_eq!(site.figures.total.change, new_vram as i64);
    assert_eq!(site.figures.peak.change, new_vram as i64);
    assert!(!site.unresolved && site.lines.iter().all(|l| l.file.ends_with("demo/src/gpu.rs")), "{site:#?}");
    assert!(site.stacks_before.len() >= 2, "textures and meshes: two callstacks in one function");
    let new_heap: u64 = new_textures.iter().map(|t| t.heap_bytes).sum();
    let new_files: u64 = new_textures.iter().map(|t| t.heap_bytes / 4).sum();
    let tex = site_of(&d, "heap", LOAD_TEXTURE);
    assert_eq!(tex.status, Status::Changed);
    assert_eq!(tex.figures.total.change, (new_heap + new_files) as i64);
    assert_eq!(tex.figures.total_count.change, 2 * new_textures.len() as i64);
    assert_eq!(tex.figures.live.change, 0, "the level unload frees the copies");
    assert!(tex.file.as_deref().is_some_and(|f| f.ends_with("demo/src/game.rs")) && tex.line.is_some());
    assert!(tex.frames.iter().any(|f| f.function.as_deref() == Some(LOAD_TEXTURE)));
    let leak = site_of(&d, "heap", &format!("memreplay_demo::game::{EXTRA_LEAK_FUNCTION}"));
    assert_eq!(leak.status, Status::New);
    assert_eq!((leak.figures.live.after, leak.figures.live_count.after), (Some(EXTRA_LEAK_BYTES as u64), Some(1)));
    assert!(leak.stacks_before.is_empty() && !leak.stacks_after.is_empty());
    sites_add_up(&d);
    assert!(d.symbols.before.with_lines > 0 && d.symbols.after.with_lines > 0, "{:?}", d.symbols);

    // --stacks: whole callstacks, still adding up to the domains' changes; the loader's
    // stacks add up to its function's row.
    let s = diff_with(&a, &b, None, |a| a.stacks = true);
    assert_eq!(s.group, "stack");
    assert!(s.sites_keyed_by.starts_with("whole callstack"), "{}", s.sites_keyed_by);
    sites_add_up(&s);
    assert!(s.sites.len() > d.sites.len(), "{} stacks, {} functions", s.sites.len(), d.sites.len());
    for site in s.sites.iter().filter(|x| !x.frames.is_empty()) {
        assert_eq!(site.key.split(';').count(), site.frames.len(), "{}", site.key);
        assert_eq!(site.stacks_before.len().max(site.stacks_after.len()), 1, "{}", site.key);
    }
    let loader: Vec<&SiteDiff> = s.sites.iter().filter(|x| x.domain == "heap" && x.function == LOAD_TEXTURE).collect();
    assert!(!loader.is_empty());
    assert_eq!(loader.iter().map(|x| x.figures.total.change).sum::<i64>(), tex.figures.total.change);
    assert!(s.to_text().contains(&format!("{LOAD_TEXTURE} (")), "frames with file and line:\n{}", s.to_text());

    // Largest change first.
    let sizes: Vec<u64> = d.contexts.iter().map(|c| c.figures.magnitude()).collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");

    // At "level loaded": the new textures' CPU copies are live, and the VRAM average per
    // texture moves from 8 to 12 textures' mean.
    let d = diff_of(&a, &b, Some(LABELS[1]));
    assert_eq!(d.before.at.label.as_deref(), Some(LABELS[1]));
    for spec in new_textures {
        let c = context(&d, "heap", &format!("{}/Texture:{}", textures_path(), spec.name));
        assert_eq!(
            (c.status, c.figures.live.after, c.figures.live_count.after),
            (Status::New, Some(spec.heap_bytes), Some(1))
        );
    }
    let t = context(&d, VRAM_LOCAL, &textures_path());
    assert_eq!(t.figures.live.change, new_vram as i64);
    assert_eq!(t.figures.per_instance.before, Some(ea.texture_vram_bytes as f64 / 8.0));
    assert_eq!(t.figures.per_instance.after, Some(eb.texture_vram_bytes as f64 / 12.0));
    // The texture loader's site: exactly the new CPU copies are live there.
    let tex = site_of(&d, "heap", LOAD_TEXTURE);
    assert_eq!(tex.figures.live.change, new_heap as i64);
    assert_eq!(tex.figures.live_count.change, new_textures.len() as i64);
    let text = d.to_text();
    for needle in [
        "domains",
        VRAM_LOCAL,
        "Texture:rock_1.dds (new)",
        "per instance",
        "keyed by allocating function",
        LOAD_TEXTURE,
        "symbols before: ",
        "symbols after: ",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in:\n{text}");
    }

    // --min-delta hides the small rows: nothing under 64 KiB.
    let args = DiffOptions {
        before: a.clone(),
        after: Some(b.clone()),
        min_delta: Some(MinDelta::Bytes(64 << 10)),
        limit: Some(0),
        ..DiffOptions::default()
    };
    let small = build_diff(&args, &b, Progress::Hidden).unwrap();
    assert!(small.contexts.iter().all(|c| c.figures.magnitude() >= 64 << 10));
    assert!(small.hidden_contexts > 0);
    assert!(!small.contexts.iter().any(|c| c.context.ends_with("Shaders:permutations")), "31 KiB is below 64 KiB");

    for p in [a, b] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn a_log_against_itself_shows_no_change() {
    let (a, _) = record("self.mrl", &["--textures", "3", "--frames", "4"]);
    for (at, stacks) in [(None, false), (Some(LABELS[1]), false), (None, true)] {
        let d = diff_with(&a, &a, at, |x| x.stacks = stacks);
        assert!(!d.changed, "{:?}", d.contexts.first());
        assert!(d.contexts.is_empty() && d.sites.is_empty(), "{:#?}", d.sites.first());
        assert!(d.domains.iter().all(|x| x.status == Status::Unchanged && x.figures.peak.change == 0));
        assert!(d.unchanged_contexts > 0 && d.unchanged_sites > 0);
        assert!(d.to_text().contains("no change"), "{}", d.to_text());
    }
    let _ = std::fs::remove_file(a);
}

#[test]
fn from_to_finds_what_the_level_load_left_behind() {
    let (a, e) = record("range.mrl", &["--frames", "6"]);
    let args = DiffOptions { before: a.clone(), limit: Some(0), ..DiffOptions::default() };
    let r = build_range(&args, LABELS[0], LABELS[1], Progress::Hidden).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!((r.from.name.as_str(), r.to.name.as_str()), (LABELS[0], LABELS[1]));
    let domain = |name: &str| r.domains.iter().find(|d| d.domain.name == name);

    // Every VRAM allocation of the level is made after "main menu" and live at "level
    // loaded"; the staging buffer is freed before the label; the pool holds the level's
    // entities.
    let vram = domain(VRAM_LOCAL).expect("VRAM");
    assert_eq!((vram.bytes, vram.count), (e.vram_local_bytes, e.vram_local_allocs as u64));
    assert!(domain(VRAM_SYSTEM).is_none(), "the staging buffer was freed before \"level loaded\"");
    let pool = domain(ENTITY_POOL).expect("the entity pool");
    assert_eq!((pool.bytes, pool.count), (LEVEL_ENTITIES as u64 * ENTITY_BYTES as u64, LEVEL_ENTITIES as u64));

    // In the heap: each texture's CPU copy (the first texture also holds the streaming
    // channel's own allocations), the debug console, the leaked script cache.
    let heap = domain("heap").expect("heap");
    let ctx = |path: &str| heap.contexts.iter().find(|c| c.context == path).unwrap_or_else(|| panic!("{path}"));
    for spec in &e.textures[1..] {
        let c = ctx(&format!("{}/Texture:{}", textures_path(), spec.name));
        assert_eq!((c.bytes, c.count, c.own_bytes), (spec.heap_bytes, 1, spec.heap_bytes), "{}", spec.name);
    }
    let console = ctx("UI:main menu/UI:debug console");
    assert_eq!((console.bytes, console.count), (CONSOLE_CAPACITY as u64, 1));
    let cache = ctx(&format!("Level:{LEVEL}/Scripts:cache"));
    assert_eq!((cache.bytes, cache.count), (LEAK_BYTES as u64, 1));
    let vram_tex = vram.contexts.iter().find(|c| c.context == textures_path()).unwrap();
    assert_eq!(
        (vram_tex.bytes, vram_tex.count, vram_tex.own_bytes),
        (e.texture_vram_bytes, e.textures.len() as u64, 0)
    );
    // Sites, by function: the GPU heap wrapper holds every VRAM allocation of the level;
    // the texture loader the CPU copies (the "files" are freed by then).
    assert_eq!(r.group, "function");
    assert!(r.sites_keyed_by.starts_with("allocating function"), "{}", r.sites_keyed_by);
    assert_eq!(vram.sites.len(), 1, "{:#?}", vram.sites);
    assert_eq!(vram.sites[0].function, "memreplay_demo::gpu::GpuHeap::alloc");
    assert_eq!((vram.sites[0].bytes, vram.sites[0].count), (vram.bytes, vram.count));
    assert!(vram.sites[0].stacks.len() >= 2);
    let loader = heap.sites.iter().find(|s| s.function == LOAD_TEXTURE).expect("the texture loader");
    assert_eq!((loader.bytes, loader.count), (e.texture_heap_bytes, e.textures.len() as u64));
    assert!(r.symbols.with_lines > 0);
    assert!(r.to_text().contains(LOAD_TEXTURE), "{}", r.to_text());
    // By whole callstack: the texture VRAM callstack holds one allocation per texture.
    let stacks = build_range(&DiffOptions { stacks: true, ..args.clone() }, LABELS[0], LABELS[1], Progress::Hidden)
        .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(stacks.group, "stack");
    let svram = stacks.domains.iter().find(|d| d.domain.name == VRAM_LOCAL).unwrap();
    assert!(svram.sites.iter().any(|s| s.bytes == e.texture_vram_bytes && s.count == e.textures.len() as u64));
    assert_eq!(svram.sites.iter().map(|s| s.bytes).sum::<u64>(), vram.bytes);
    assert!(svram.sites.iter().all(|s| s.stacks == [s.stack] && s.key.contains(';')));
    assert_eq!(r.total.bytes, heap.bytes + vram.bytes, "top-level domains only");

    // Gameplay leaves nothing in VRAM or the pool by the time the level is unloaded.
    let r = build_range(&args, LABELS[2], LABELS[3], Progress::Hidden).unwrap();
    assert!(r.domains.iter().all(|d| d.domain.name != VRAM_LOCAL && d.domain.name != ENTITY_POOL), "{:?}", r.domains);
    // Labels in the wrong order, or unknown, are errors naming the labels.
    let err = build_range(&args, LABELS[2], LABELS[0], Progress::Hidden).err().unwrap().to_string();
    assert!(err.contains("no label \"main menu\" after \"gameplay\""), "{err}");
    let err = build_range(&args, "boss fight", LABELS[1], Progress::Hidden).err().unwrap().to_string();
    assert!(err.contains("no label \"boss fight\"") && err.contains("\"level loaded\""), "{err}");
    let _ = std::fs::remove_file(a);
}

/// A copy of the demo binary in a fresh folder `name`/run (to record with and delete),
/// and an empty folder `name`/empty (for `--symbols`).
fn demo_copy(name: &str) -> (PathBuf, PathBuf) {
    let dir = temp_log(name);
    let _ = std::fs::remove_dir_all(&dir);
    let (run, empty) = (dir.join("run"), dir.join("empty"));
    for d in [&run, &empty] {
        std::fs::create_dir_all(d).unwrap();
    }
    let exe = run.join("demo-copy");
    std::fs::copy(DEMO, &exe).unwrap();
    (exe, empty)
}

#[test]
fn a_missing_binary_falls_back_to_raw_frames() {
    // Two runs of a copy of the demo, the copy deleted afterwards, `--symbols` pointing at
    // an empty directory: nothing can be symbolicated.
    let (exe, empty) = demo_copy("diff-missing");
    let (a, ea) = record_with(exe.to_str().unwrap(), "diff-missing-a.mrl", &["--textures", "2", "--frames", "4"]);
    let (b, eb) = record_with(exe.to_str().unwrap(), "diff-missing-b.mrl", &["--textures", "3", "--frames", "4"]);
    let exe = std::fs::canonicalize(&exe).unwrap();
    std::fs::remove_file(&exe).unwrap();
    let new_vram = eb.texture_vram_bytes - ea.texture_vram_bytes;

    for stacks in [false, true] {
        let d = diff_with(&a, &b, None, |x| {
            x.symbols.search_dirs = vec![empty.clone()];
            x.stacks = stacks;
        });
        // Said in words and in the stats of both logs.
        assert!(d.sites_keyed_by.starts_with("callstack frames as module+0xoffset"), "{}", d.sites_keyed_by);
        for st in [&d.symbols.before, &d.symbols.after] {
            assert!(
                st.reasons
                    .iter()
                    .any(|r| r.reason == Reason::BinaryNotFound && r.module.as_deref() == Some(exe.to_str().unwrap())),
                "{st:?}"
            );
            assert!(st.unresolved > 0);
        }
        // Every row keyed by its raw frames, which still match across two runs (ASLR):
        // the texture VRAM callstack grows by exactly the new texture, it is not new.
        assert!(!d.sites.is_empty());
        for s in &d.sites {
            assert!(s.unresolved || s.frames.is_empty(), "{s:#?}");
            // The demo's frames; a deep stack may reach libc's start frames, named.
            let mut demo_frames = s.frames.iter().filter(|f| f.module.as_deref() == Some("demo-copy"));
            assert!(demo_frames.clone().count() > 0 && demo_frames.all(|f| f.resolution == Resolution::None), "{s:#?}");
            let names: Vec<String> = s
                .frames
                .iter()
                .map(|f| f.location().map_or_else(|| f.name(), |at| format!("{} ({at})", f.name())))
                .collect();
            assert_eq!(s.key, if names.is_empty() { s.function.clone() } else { names.join(";") });
        }
        let vram = d
            .sites
            .iter()
            .find(|s| s.domain == VRAM_LOCAL && s.figures.total.change == new_vram as i64)
            .unwrap_or_else(|| panic!("the texture VRAM callstack: {:#?}", d.sites));
        assert_eq!((vram.status, vram.figures.total_count.change), (Status::Changed, 1));
        assert!(vram.key.contains("demo-copy+0x"), "{}", vram.key);
        sites_add_up(&d);
        // Unnamed in both logs, and compared all the same: the same build.
        for u in [&d.sites_unnamed.before, &d.sites_unnamed.after] {
            let u = u.as_ref().expect("unnamed");
            assert_eq!((u.compared, u.left_out, u.other_sites_left_out), (u.sites, 0, 0), "{u:#?}");
        }
        let text = d.to_text();
        for needle in [
            "keyed by callstack frames as module+0xoffset",
            "binary not found",
            "demo-copy+0x",
            "  compared by their raw module+0xoffset frames (the same build in the log after, unresolved there too)\n",
            "  compared by their raw module+0xoffset frames (the same build in the log before, unresolved there too)\n",
        ] {
            assert!(text.contains(needle), "missing `{needle}` in:\n{text}");
        }
    }
    // The same in JSON, through the command.
    let args = DiffOptions {
        before: a.clone(),
        after: Some(b.clone()),
        json: true,
        symbols: SymbolOptions { search_dirs: vec![empty.clone()], ..SymbolOptions::default() },
        ..DiffOptions::default()
    };
    let out = run_diff(&args, Progress::Hidden).unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_str(&out.text).unwrap();
    assert!(v["sites_keyed_by"].as_str().unwrap().contains("module+0xoffset"));
    for side in ["before", "after"] {
        let reasons = v["symbols"][side]["reasons"].as_array().unwrap();
        assert!(reasons.iter().any(|r| r["reason"] == "binary-not-found"), "{reasons:?}");
    }
    let sites = v["sites"].as_array().unwrap();
    assert!(sites.iter().any(|s| s["frames"][0]["module"] == "demo-copy" && s["unresolved"] == true), "{sites:?}");
    let _ = std::fs::remove_dir_all(empty.parent().unwrap());
    for p in [a, b] {
        let _ = std::fs::remove_file(p);
    }
}

/// The example budget, as the README's CI recipe uses it.
fn example_budget() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../replay-cli/budget.example.toml")
}

/// `check`'s options for the example budget.
fn check_options(log: &Path, baseline: &Path) -> CheckOptions {
    let budget = example_budget();
    CheckOptions {
        log: log.to_owned(),
        budget_name: budget.display().to_string(),
        budget: std::fs::read_to_string(&budget).unwrap(),
        baseline: Some(baseline.to_owned()),
        ..CheckOptions::default()
    }
}

#[test]
fn the_example_budget_holds_for_the_demo_and_breaks_when_it_grows() {
    let (base, _) = record("budget-base.mrl", &[]);
    let (same, _) = record("budget-same.mrl", &[]);
    let args = |log: &Path| check_options(log, &base);
    let r = build_check(&args(&same), Progress::Hidden).unwrap_or_else(|e| panic!("{e}"));
    assert!(r.passed, "{}", r.to_text());
    assert_eq!(r.failed, 0);
    assert_eq!(run_check(&args(&same), Progress::Hidden).unwrap().verdict, Verdict::Passed);

    // More textures and a second leak: the rules about those break, the others hold.
    let (grown, e) = record("budget-grown.mrl", &["--textures", "12", "--extra-leak"]);
    let r = build_check(&args(&grown), Progress::Hidden).unwrap();
    assert!(!r.passed);
    let failed: Vec<(&str, &str)> =
        r.results.iter().filter(|x| !x.passed).map(|x| (x.subject.as_str(), x.metric)).collect();
    assert_eq!(
        failed,
        [
            (VRAM_LOCAL, "growth_percent"),
            ("heap", "live"),
            ("Level/Textures", "live"),
            ("**/Shaders", "live"),
            ("top-level domains", "growth_bytes"),
            ("top-level domains", "growth_percent"),
        ],
        "{}",
        r.to_text()
    );
    let shaders = r.results.iter().find(|x| x.subject == "**/Shaders").unwrap();
    assert_eq!(shaders.measured, Some(Number::Int(EXTRA_LEAK_BYTES as i64)));
    let textures = r.results.iter().find(|x| x.subject == "Level/Textures" && x.metric == "live").unwrap();
    assert_eq!(textures.measured, Some(Number::Int(e.texture_vram_bytes as i64)));
    // The GPU rules hold in both: the four textures the grown demo adds are BC7 without
    // padding, and at most one of them is small at "gameplay".
    let gpu: Vec<(&str, &str, bool)> =
        r.results.iter().filter(|x| x.table == "gpu").map(|x| (x.subject.as_str(), x.metric, x.passed)).collect();
    assert_eq!(
        gpu,
        ["padding_bytes", "npot_waste", "small_resources", "small_bytes", "unknown_formats"]
            .map(|m| (VRAM_LOCAL, m, true)),
        "{}",
        r.to_text()
    );
    assert_eq!(run_check(&args(&grown), Progress::Hidden).unwrap().verdict, Verdict::Broken);
    for p in [base, same, grown] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn a_log_whose_binary_is_gone_is_not_compared_site_by_site() {
    // The log before: a copy of the demo, deleted afterwards (`--symbols` names an empty
    // directory); the log after: the demo itself, named. The same build, under another
    // name: its raw frames cannot be told from names, so they are not compared.
    let (exe, empty) = demo_copy("diff-one-missing");
    let (a, ea) = record_with(exe.to_str().unwrap(), "diff-one-missing-a.mrl", &["--textures", "2", "--frames", "4"]);
    let (b, eb) = record("diff-one-missing-b.mrl", &["--textures", "3", "--frames", "4"]);
    let exe = std::fs::canonicalize(&exe).unwrap();
    std::fs::remove_file(&exe).unwrap();
    let symbols = |x: &mut DiffOptions| x.symbols.search_dirs = vec![empty.clone()];

    for stacks in [false, true] {
        let d = diff_with(&a, &b, None, |x| {
            symbols(x);
            x.stacks = stacks;
        });
        // Domains and contexts compare as ever: the new texture's VRAM.
        let vram = d.domains.iter().find(|x| x.domain == VRAM_LOCAL).unwrap();
        assert_eq!(vram.figures.peak.change, (eb.texture_vram_bytes - ea.texture_vram_bytes) as i64);
        assert!(d.contexts.iter().any(|c| c.status == Status::New && c.context.starts_with(&textures_path())));
        // No site is new or vanished for want of names: the log before's sites are all
        // unnamed, and every site of the log after may be one of them.
        assert!(d.sites.is_empty(), "{:#?}", d.sites);
        assert_eq!((d.unchanged_sites, d.hidden_sites), (0, 0));
        assert_eq!(d.sites_unnamed.after, None, "the log after is named");
        let before = d.sites_unnamed.before.as_ref().expect("the log before is unnamed");
        assert_eq!(before.reasons.len(), 1, "{:#?}", before.reasons);
        let r = &before.reasons[0];
        assert_eq!((r.reason, r.module.as_deref()), (Reason::BinaryNotFound, exe.to_str()));
        assert_eq!(r.build_id.as_ref().map(String::len), Some(40), "a GNU build id");
        assert_eq!((r.sites, r.bytes), (before.sites, before.bytes));
        assert_eq!((before.compared, before.left_out), (0, before.sites));
        assert!(before.other_sites_left_out > 0);
        // Every allocation of the log before, in the top-level domains (the entity pool's
        // blocks are in the heap's).
        let top_level = |f: fn(&FigureChanges) -> Option<u64>| -> u64 {
            let sub_allocating = [ENTITY_POOL, VRAM_BUFFERS];
            d.domains
                .iter()
                .filter(|x| !sub_allocating.contains(&x.domain.as_str()))
                .filter_map(|x| f(&x.figures))
                .sum()
        };
        assert_eq!(before.bytes, top_level(|f| f.total.before));
        assert_eq!(before.allocations, top_level(|f| f.total_count.before));

        // Said once, with the way out.
        let text = d.to_text();
        assert_eq!(text.matches("note: ").count(), 1, "{text}");
        let note = format!(
            "note: the log before cannot name {} of its allocation sites ({} allocated): {}\n  demo-copy: binary not \
             found (build id {id}, recorded as {}): {} sites, {}\n  left out of the allocation sites below, and so \
             are {} sites of the log after that may be among them\n  to name them: --symbols DIR, with the binary \
             of the build that was recorded, or its debug file, in DIR (by build id: DIR/.build-id/{}/{}.debug)\n",
            before.sites,
            size(before.bytes),
            if stacks { "their callstacks have unresolved frames" } else { "their allocating function is unresolved" },
            exe.display(),
            before.sites,
            size(before.bytes),
            before.other_sites_left_out,
            &r.build_id.as_ref().unwrap()[..2],
            &r.build_id.as_ref().unwrap()[2..],
            id = r.build_id.as_ref().unwrap(),
        );
        assert!(text.contains(&note), "missing\n{note}in:\n{text}");
        let sites_section = &text[text.find("\nallocation sites (").expect("the sites section")..];
        assert!(
            sites_section.contains(&format!(
                "; not compared: {} of the log before, {} of the log after, see the note above)\n  none compared\n",
                before.sites, before.other_sites_left_out
            )),
            "{sites_section}"
        );
    }

    // The same in JSON, through the command.
    let mut args = DiffOptions { before: a.clone(), after: Some(b.clone()), json: true, ..DiffOptions::default() };
    symbols(&mut args);
    let out = run_diff(&args, Progress::Hidden).unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_str(&out.text).unwrap();
    let before = &v["sites_unnamed"]["before"];
    assert_eq!(v["sites_unnamed"]["after"], serde_json::Value::Null);
    assert_eq!(before["reasons"][0]["reason"], "binary-not-found");
    assert_eq!(before["reasons"][0]["module"], exe.to_str().unwrap());
    assert!(before["sites"].as_u64() > Some(0) && before["sites"] == before["left_out"], "{before}");
    assert_eq!(v["sites"], serde_json::json!([]));

    // Named again by the binary itself: no note, and the sites compare (the new texture's).
    std::fs::copy(DEMO, empty.join("demo-copy")).unwrap();
    let d = diff_with(&a, &b, None, symbols);
    assert_eq!(d.sites_unnamed, BothUnnamed::default());
    assert!(!d.to_text().contains("note: "), "{}", d.to_text());
    assert!(d.sites.iter().any(|s| s.function == LOAD_TEXTURE), "{:#?}", d.sites);
    let _ = std::fs::remove_dir_all(empty.parent().unwrap());
    for p in [a, b] {
        let _ = std::fs::remove_file(p);
    }
}

/// The root of the repository.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

#[test]
fn the_ci_baseline_is_named_by_the_debug_file_kept_beside_it() {
    // The README's CI recipe: `baseline/memory-baseline.mrl`, recorded by a release build of the
    // demo that CI does not have, and that build's debug file, filed by build id under
    // `baseline/memory-baseline.debug`. Here the binary is looked for where nothing is (its
    // recorded path moved away), so only the debug file can name the sites.
    let (baseline, debug) =
        (repository().join("baseline/memory-baseline.mrl"), repository().join("baseline/memory-baseline.debug"));
    let l = report::load(&ReportOptions::new(&baseline), Progress::Hidden).unwrap_or_else(|e| panic!("{e}"));
    let state = l.state();
    let mut modules = ModuleMap::read(&baseline, |id| state.string(id)).unwrap().modules().to_vec();
    let demo = modules.iter().position(|m| m.name() == "memreplay-demo").expect("the demo's module");
    modules[demo].path = repository().join("baseline/nowhere/memreplay-demo").display().to_string();
    let opts = SymbolOptions { search_dirs: vec![debug.clone()], system_debug_dir: false, disabled: false };
    let mut syms = Symbolizer::new(ModuleMap::new(modules), opts);
    let mut named = 0;
    for site in &state.sites {
        let name = syms.site(site.stack, state.stacks.get(site.stack));
        let Some(f) = name.frames.get(name.site_frame as usize) else { continue };
        // The recording machine's system libraries may be other builds than this one's:
        // only the demo's own frames are the debug file's to name.
        if f.module.as_deref() == Some("memreplay-demo") {
            assert_ne!(f.resolution, Resolution::None, "{f:?}");
            assert!(!site_unresolved(&name), "{name:?}");
            named += 1;
        }
    }
    assert!(named > 50, "{named} sites");
    let id = syms.modules().get(demo).build_id_hex();
    let binary = syms.binary(demo).expect("found by build id");
    assert_eq!(binary.debug_path, Some(debug.join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..]))));
    let st = syms.stats();
    let demo_path = syms.modules().get(demo).path.clone();
    let demo_reasons: Vec<Reason> =
        st.reasons.iter().filter(|r| r.module.as_deref() == Some(demo_path.as_str())).map(|r| r.reason).collect();
    assert!(demo_reasons.iter().all(|&r| r == Reason::NoDebugInfo), "{}", st.text());

    // And `diff` as CI runs it, against a fresh recording: the baseline's own sites named.
    let (fresh, _) = record("ci-fresh.mrl", &[]);
    let d = diff_with(&baseline, &fresh, None, |x| x.symbols.search_dirs = vec![debug.clone()]);
    let unnamed_demo = |u: &Option<report::UnnamedSites>| {
        u.iter().flat_map(|u| &u.reasons).any(|r| r.module.as_deref().is_some_and(|m| m.ends_with("memreplay-demo")))
    };
    assert!(!unnamed_demo(&d.sites_unnamed.before), "{}", d.to_text());
    let _ = std::fs::remove_file(fresh);
}
