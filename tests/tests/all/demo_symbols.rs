//! Symbolication and the callstack views on real demo logs: the demo (built in this
//! package's debug profile, with debug info and — from the workspace's
//! `.cargo/config.toml` — frame pointers) allocates from known functions; they must
//! appear with the right files and lines, the deliberate leak at its line; stripped and
//! missing binaries must degrade to `module+0xoffset` with the reasons counted; and the
//! flame graph and pprof outputs must add up to the summary.

use std::path::{Path, PathBuf};
use std::process::Command;

use memreplay_demo::{
    expected, Expected, LEAK_BYTES, LEAK_FUNCTION, LEVEL, STREAMING_THREAD, TEXTURE_NAMES, VRAM_LOCAL,
};
use memreplay_report::{self as report, build_efficiency, build_folded, build_frees, build_leaks_symbolized};
use memreplay_report::{build_summary, flame_svg, stack_frames};
use memreplay_report::{
    build_top, build_tree, decode_pprof, At, Error, ExportFormat, FlameOptions, FreesOptions, Loaded,
};
use memreplay_report::{Metric, Progress, ReportOptions, Top, TopOptions, TopRow, SAMPLE_TYPES};
use memreplay_symbols::{self, Reason, Resolution, SymbolOptions, Symbolizer};
use memreplay_tests::{run_demo, temp_log};

const DEMO: &str = env!("CARGO_BIN_EXE_demo-runner");

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

fn load(args: &ReportOptions) -> Loaded {
    report::load(args, Progress::Hidden).unwrap_or_else(|e| panic!("{e}"))
}

fn top(path: &Path, f: impl FnOnce(&mut TopOptions)) -> Top {
    let mut args = TopOptions::new(path);
    args.limit = Some(10_000);
    f(&mut args);
    build_top(&load(&args.report_options()), &args).unwrap_or_else(|e| panic!("{e}"))
}

/// The heap's rows (none when no heap site passes the filters).
fn heap_rows(t: &Top) -> &[TopRow] {
    t.domains.iter().find(|d| d.domain.name == "heap").map_or(&[], |d| &d.rows)
}

/// The demo's source file `name` (`game.rs`), as lines.
fn demo_source(name: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../demo/src").join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(Into::into)
        .collect()
}

/// The 1-based line of `file` in the demo's sources that contains `needle` (exactly one).
fn line_of(file: &str, needle: &str) -> u32 {
    let lines = demo_source(file);
    let hits: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].contains(needle)).collect();
    assert_eq!(hits.len(), 1, "`{needle}` in {file}: {hits:?}");
    hits[0] as u32 + 1
}

fn row<'a>(rows: &'a [TopRow], function: &str) -> &'a TopRow {
    rows.iter().find(|r| r.function == function).unwrap_or_else(|| {
        let names: Vec<&str> = rows.iter().map(|r| r.function.as_str()).collect();
        panic!("no site in {function}; sites: {names:#?}")
    })
}

#[test]
fn demo_allocation_sites_are_symbolicated() {
    let (path, exp) = record_with(DEMO, "symbols.mrl", &[]);
    let l = load(&ReportOptions::new(&path));
    let state = l.state();
    assert!(!state.stacks.is_empty(), "the demo recorded no callstacks (frame pointers?)");

    // The module map: the demo binary, with its build id, and the C library.
    let mut syms = Symbolizer::for_log(&path, |id| state.string(id), SymbolOptions::default()).unwrap();
    let exe = std::fs::canonicalize(DEMO).unwrap();
    let demo_module = syms
        .modules()
        .modules()
        .iter()
        .find(|m| Path::new(&m.path) == exe)
        .unwrap_or_else(|| panic!("no module {}: {:#?}", exe.display(), syms.modules().modules()))
        .clone();
    assert!(!demo_module.build_id.is_empty());

    // Every heap site: recorder and allocator frames trimmed from the top, names
    // demangled, and the allocating function the demo's own code for most bytes.
    let mut trimmed_some = false;
    let mut inlined_some = false;
    for s in state.sites.iter().filter(|s| s.stack != 0) {
        let site = syms.site(s.stack, state.stacks.get(s.stack));
        assert!(!site.frames.is_empty());
        let top = site.frames[0].function.as_deref().unwrap_or("");
        assert!(!memreplay_symbols::is_recorder_frame(top), "stack {} starts in the recorder: {top}", s.stack);
        for f in &site.frames {
            let name = f.function.as_deref().unwrap_or("");
            assert!(!name.starts_with("_ZN") && !name.starts_with("_R"), "not demangled: {name}");
            assert!(!name.starts_with("memreplay::imp"), "recorder frame below the top: {:#?}", site.frames);
        }
        trimmed_some |= site.trimmed > 0;
        inlined_some |= site.frames.iter().any(|f| f.inlined);
    }
    assert!(trimmed_some && inlined_some);
    let stats = syms.stats();
    assert!(stats.with_lines > stats.addresses / 2, "{stats:?}");
    assert!(
        !stats
            .reasons
            .iter()
            .any(|r| r.module.as_deref() == Some(demo_module.path.as_str()) && r.reason != Reason::NoDebugInfo),
        "demo addresses unresolved: {stats:?}"
    );
    eprintln!("symbolication of the demo ({} callstacks): {}", state.stacks.len(), stats.text());

    // The functions the demo allocates from, with their files and lines.
    let t = top(&path, |a| a.by = Metric::Total);
    let rows = heap_rows(&t);
    for (function, file) in [
        ("memreplay_demo::game::load_texture", "demo/src/game.rs"),
        ("memreplay_demo::game::load_mesh", "demo/src/game.rs"),
        ("memreplay_demo::game::MainMenu::open", "demo/src/game.rs"),
        ("memreplay_demo::pool::EntityPool::new", "demo/src/pool.rs"),
        ("memreplay_demo::workers::decode", "demo/src/workers.rs"),
        (&format!("memreplay_demo::game::{LEAK_FUNCTION}"), "demo/src/game.rs"),
    ] {
        let r = row(rows, function);
        assert!(!r.lines.is_empty(), "{function}: no lines");
        for l in &r.lines {
            assert!(l.file.ends_with(file), "{function}: {} is not {file}", l.file);
        }
    }
    let lines = |f: &str| row(rows, f).lines.iter().map(|l| l.line).collect::<Vec<_>>();
    assert!(lines("memreplay_demo::game::load_texture").contains(&line_of("game.rs", "vec![0u8; pixels_len]")));
    assert!(
        lines("memreplay_demo::game::load_mesh").contains(&line_of("game.rs", "Vec<[f32; 8]> = Vec::with_capacity(n)"))
    );
    assert!(lines("memreplay_demo::game::MainMenu::open")
        .contains(&line_of("game.rs", "Vec::with_capacity(CONSOLE_CAPACITY)")));
    // The textures' CPU copies and their compressed "files", allocated in load_texture.
    let textures = row(rows, "memreplay_demo::game::load_texture");
    let n = exp.textures.len() as u64;
    assert_eq!(textures.total.unwrap().count, 2 * n);
    assert_eq!(textures.total.unwrap().bytes, exp.texture_heap_bytes + exp.texture_heap_bytes / 4);
    // VRAM is allocated through the GPU heap wrapper; the whole stacks lead to the loaders.
    let t = top(&path, |a| {
        a.stacks = true;
        a.domain = Some(VRAM_LOCAL.into());
    });
    let vram = &t.domains[0].rows;
    assert!(vram.iter().all(|r| r.function == "memreplay_demo::gpu::GpuHeap::alloc"), "{vram:#?}");
    assert_eq!(vram.iter().map(|r| r.total.unwrap().bytes).sum::<u64>(), exp.vram_local_bytes);
    let in_stack = |f: &str| vram.iter().any(|r| r.frames.iter().any(|fr| fr.function.as_deref() == Some(f)));
    assert!(in_stack("memreplay_demo::game::load_texture") && in_stack("memreplay_demo::game::load_mesh"));

    // The deliberate leak: its function and line, in `leaks`, by context and by stack.
    let leak_line = line_of("game.rs", "LEAK-SITE");
    let lk = build_leaks_symbolized(
        &load(&ReportOptions { domain: Some("heap".into()), ..ReportOptions::new(&path) }),
        &mut syms,
    );
    let cache = format!("Level:{LEVEL}/Scripts:cache");
    let c = lk.domains[0].contexts.iter().find(|c| c.context == cache).expect("the script cache leaks");
    let site = c.sites[0].site.as_ref().expect("symbolicated");
    assert_eq!(site.function, format!("memreplay_demo::game::{LEAK_FUNCTION}"));
    assert!(site.file.as_deref().is_some_and(|f| f.ends_with("demo/src/game.rs")), "{site:?}");
    assert_eq!(site.line, Some(leak_line));
    let by_stack = &lk.domains[0].stacks[0];
    assert_eq!((by_stack.bytes, by_stack.count), (LEAK_BYTES as u64, 1));
    assert_eq!(by_stack.site.as_ref().unwrap().line, Some(leak_line));
    assert_eq!(by_stack.contexts[0].context, cache);
    assert!(lk.to_text().contains(&format!("memreplay_demo::game::{LEAK_FUNCTION} (")));

    // Free callstacks: the decoded texture (allocated by the streaming thread's decode)
    // is freed by load_texture, once per texture; the scratch buffer by decode itself.
    let mut args =
        FreesOptions { log: path.clone(), site: "memreplay_demo::workers::decode".into(), ..Default::default() };
    args.domain = Some("heap".into());
    let f = build_frees(&load(&args.report_options()), &args).unwrap();
    assert!(f.free_callstacks);
    let s = &f.domains[0].sites[0];
    assert_eq!(s.function, "memreplay_demo::workers::decode");
    let from = |name: &str| s.freed_from.iter().find(|r| r.function == name).unwrap_or_else(|| panic!("{s:#?}"));
    assert_eq!(
        (from("memreplay_demo::game::load_texture").frees, from("memreplay_demo::game::load_texture").bytes),
        (n, exp.texture_heap_bytes)
    );
    assert_eq!(from("memreplay_demo::workers::decode").frees, n);
    assert_eq!(s.freed.count, s.total.count - s.live.count);

    // `summarize` (the README's first command) names its sites and their free callstacks.
    let mut sum = build_summary(&l);
    sum.symbolize(&state.stacks, &mut syms);
    let named = |s: &report::SiteSummary| s.site.as_ref().map_or(String::new(), |n| n.function.clone());
    let textures = sum
        .sites
        .iter()
        .find(|s| s.domain == "heap" && named(s) == "memreplay_demo::game::load_texture")
        .unwrap_or_else(|| panic!("{:#?}", sum.sites.iter().map(named).collect::<Vec<_>>()));
    assert_eq!(textures.site.as_ref().unwrap().line, Some(line_of("game.rs", "vec![0u8; pixels_len]")));
    let unload = textures.freed_from[0].site.as_ref().expect("free callstack symbolicated");
    assert_eq!(unload.function, "memreplay_demo::game::Level::unload");
    // GPU blocks are freed through the GPU heap wrapper: the recorder's `Domain::free`,
    // inlined into it with a bare name, is trimmed by its file.
    let vram = sum.sites.iter().find(|s| s.domain == VRAM_LOCAL).expect("a VRAM site");
    assert_eq!(named(vram), "memreplay_demo::gpu::GpuHeap::alloc");
    let freed = vram.freed_from[0].site.as_ref().unwrap();
    assert_eq!(freed.function, "memreplay_demo::gpu::GpuHeap::free", "{freed:#?}");
    let text = sum.to_text();
    assert!(text.contains("memreplay_demo::game::load_texture (") && text.contains("\nsymbols: "), "{text}");

    // `efficiency` names its container sites the same way: the debug console, reserved
    // in MainMenu::open, with its line; the raw frames stay beside the name.
    let mut eff = build_efficiency(&l);
    eff.symbolize(&state.stacks, &mut syms);
    let console = eff
        .sites
        .iter()
        .find(|s| s.site.as_ref().is_some_and(|n| n.function == "memreplay_demo::game::MainMenu::open"))
        .unwrap_or_else(|| panic!("{:#?}", eff.sites.iter().map(|s| &s.site).collect::<Vec<_>>()));
    let name = console.site.as_ref().unwrap();
    assert_eq!(name.line, Some(line_of("game.rs", "Vec::with_capacity(CONSOLE_CAPACITY)")));
    assert!(name.file.as_deref().is_some_and(|f| f.ends_with("demo/src/game.rs")), "{name:?}");
    assert_eq!(console.frames, stack_frames(state, console.stack));
    let text = eff.to_text();
    assert!(text.contains(&format!("stack {}: memreplay_demo::game::MainMenu::open (", console.stack)), "{text}");
    assert!(text.contains("\nsymbols: "), "{text}");
    let _ = std::fs::remove_file(&path);
}

/// Sum of the folded stacks' values.
fn folded_total(path: &Path, f: impl FnOnce(&mut FlameOptions)) -> u64 {
    let mut args = FlameOptions::new(path);
    f(&mut args);
    let folded = build_folded(&load(&args.report_options()), &args).unwrap_or_else(|e| panic!("{e}"));
    let sum: u64 = folded.lines.iter().map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(sum, folded.total);
    sum
}

fn find_node<'a>(n: &'a report::TreeNode, path: &str) -> Option<&'a report::TreeNode> {
    if n.path == path {
        return Some(n);
    }
    n.children.iter().find_map(|c| find_node(c, path))
}

#[test]
fn flame_graph_and_pprof_add_up_to_the_summary() {
    let (path, _) = record_with(DEMO, "flame.mrl", &["--textures", "4", "--frames", "20"]);
    let s = build_summary(&load(&ReportOptions::new(&path)));
    let dom = |name: &str| s.domains.iter().find(|d| d.domain.name == name).unwrap();
    let heap = dom("heap");

    // Folded stacks, by peak, live and total, with and without contexts.
    for domain in ["heap", VRAM_LOCAL] {
        let d = dom(domain);
        for (by, want) in [(Metric::Peak, d.peak.bytes), (Metric::Live, d.live.bytes), (Metric::Total, d.total.bytes)] {
            for contexts in [false, true] {
                if contexts && by == Metric::Total {
                    // Totals are not kept per context.
                    let mut args = FlameOptions::new(&path);
                    (args.by, args.contexts) = (by, true);
                    assert!(build_folded(&load(&args.report_options()), &args).is_err());
                    continue;
                }
                let got = folded_total(&path, |a| {
                    a.by = by;
                    a.contexts = contexts;
                    a.domain = Some(domain.into());
                });
                assert_eq!(got, want, "{domain} --by {by:?} --contexts {contexts}");
            }
        }
    }
    // Contexts are root frames: the leak under Level → Scripts.
    let mut args = FlameOptions::new(&path);
    args.by = Metric::Live;
    args.contexts = true;
    args.domain = Some("heap".into());
    let folded = build_folded(&load(&args.report_options()), &args).unwrap();
    let leak = folded.lines.iter().find(|l| l.contains(LEAK_FUNCTION)).expect("the leak's stack");
    assert!(leak.starts_with(&format!("Level:{LEVEL};Scripts:cache;")), "{leak}");
    assert!(leak.ends_with(&format!(" {LEAK_BYTES}")), "{leak}");
    // Every domain at once: one root frame per top-level domain.
    let all = folded_total(&path, |a| a.by = Metric::Total);
    assert_eq!(all, s.total.total.bytes);

    // The SVG: well-formed XML, an <svg> root, the functions in it.
    let mut args = FlameOptions::new(&path);
    args.domain = Some("heap".into());
    args.by = Metric::Total;
    let svg = flame_svg(&build_folded(&load(&args.report_options()), &args).unwrap(), &args, "flame.mrl").unwrap();
    let text = String::from_utf8(svg.clone()).unwrap();
    let mut reader = quick_xml::Reader::from_str(&text);
    let mut root = None;
    let mut depth = 0i64;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Start(e)) => {
                if depth == 0 {
                    root = Some(String::from_utf8_lossy(e.name().as_ref()).into_owned());
                }
                depth += 1;
            }
            Ok(quick_xml::events::Event::End(_)) => depth -= 1,
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("the SVG is not well-formed at {}: {e}", reader.buffer_position()),
        }
    }
    assert_eq!((root.as_deref(), depth), (Some("svg"), 0));
    for f in ["memreplay_demo::game::load_texture", "memreplay_demo::workers::decode", LEAK_FUNCTION] {
        assert!(text.contains(f), "{f} not in the SVG");
    }

    // pprof: decodes with the schema; per domain, the samples add up to the summary.
    let out = temp_log("flame.pb.gz");
    let (args, symbols) = (ReportOptions::new(&path), SymbolOptions::default());
    let bytes = report::run_export(&args, ExportFormat::Pprof, &symbols, Progress::Hidden).unwrap();
    std::fs::write(&out, &bytes).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzipped");
    let p = decode_pprof(&bytes).unwrap();
    let st = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!(st(0), "");
    let types: Vec<(&str, &str)> = p.sample_type.iter().map(|t| (st(t.r#type), st(t.unit))).collect();
    assert_eq!(types, SAMPLE_TYPES);
    assert_eq!(st(p.default_sample_type), "inuse_space");
    for d in &s.domains {
        if !d.domain.top_level {
            continue;
        }
        let mut sums = [0i64; 6];
        for sample in &p.sample {
            assert_eq!(sample.value.len(), 6);
            if sample.label.iter().any(|l| st(l.key) == "domain" && st(l.str) == d.domain.name) {
                for (s, v) in sums.iter_mut().zip(&sample.value) {
                    *s += v;
                }
            }
        }
        let want = [d.total.count, d.total.bytes, d.live.count, d.live.bytes, d.peak.count, d.peak.bytes];
        assert_eq!(sums.map(|v| v as u64), want, "{}", d.domain.name);
    }
    assert!(!p.sample.iter().any(|s| s.label.iter().any(|l| st(l.str) == "entity pool")), "pools are not top-level");
    // Locations, functions and mappings are filled and consistent.
    let ids = |v: &[u64]| v.iter().copied().collect::<std::collections::HashSet<u64>>();
    let locations = ids(&p.location.iter().map(|l| l.id).collect::<Vec<_>>());
    let functions = ids(&p.function.iter().map(|f| f.id).collect::<Vec<_>>());
    let mappings = ids(&p.mapping.iter().map(|m| m.id).collect::<Vec<_>>());
    assert!(p.sample.iter().all(|s| !s.location_id.is_empty() && s.location_id.iter().all(|i| locations.contains(i))));
    assert!(p.location.iter().all(|l| !l.line.is_empty() && l.line.iter().all(|x| functions.contains(&x.function_id))));
    assert!(p.location.iter().all(|l| l.mapping_id == 0 || mappings.contains(&l.mapping_id)));
    let exe = std::fs::canonicalize(DEMO).unwrap();
    let m = p.mapping.iter().find(|m| Path::new(st(m.filename)) == exe).expect("the demo's mapping");
    assert!(m.has_functions && m.has_line_numbers && m.has_inline_frames && !st(m.build_id).is_empty());
    assert!(p.location.iter().any(|l| l.line.len() > 1), "inlined frames as lines");
    let leak_fn = p.function.iter().find(|f| st(f.name).ends_with(LEAK_FUNCTION)).expect("the leak's function");
    assert!(st(leak_fn.filename).ends_with("demo/src/game.rs"));
    assert!(p.location.iter().any(|l| l
        .line
        .iter()
        .any(|x| x.function_id == leak_fn.id && x.line == i64::from(line_of("game.rs", "LEAK-SITE")))));
    assert_eq!(heap.domain.name, "heap");
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn context_thread_and_point_filters_agree_with_the_tree() {
    let (path, _) = record_with(DEMO, "filters.mrl", &["--textures", "3", "--frames", "10"]);
    let textures = format!("Level:{LEVEL}/Textures:{LEVEL}");
    let sum = |t: &Top, f: fn(&TopRow) -> u64| heap_rows(t).iter().map(f).sum::<u64>();
    // At the heap's peak and at the end, a context's sites hold what the tree says it held.
    let tr = build_tree(&load(&ReportOptions { domain: Some("heap".into()), ..ReportOptions::new(&path) }));
    let node = find_node(&tr.domains[0].root, &textures).expect("the textures' context");
    let t = top(&path, |a| {
        a.context = Some(textures.clone());
        a.domain = Some("heap".into());
    });
    assert_eq!(sum(&t, |r| r.peak.unwrap().bytes), node.peak_bytes);
    assert_eq!(sum(&t, |r| r.live.unwrap().bytes), node.bytes);
    assert!(heap_rows(&t).iter().all(|r| r.total.is_none()), "totals are not kept per context");
    assert!(heap_rows(&t).iter().any(|r| r.function == "memreplay_demo::game::load_texture"));
    // At a label.
    let at = At::Label("level loaded".into());
    let tr = build_tree(&load(&ReportOptions {
        domain: Some("heap".into()),
        at: Some(at.clone()),
        ..ReportOptions::new(&path)
    }));
    let node = find_node(&tr.domains[0].root, &format!("Level:{LEVEL}")).unwrap();
    let t = top(&path, |a| {
        a.by = Metric::Live;
        a.at = Some(at.clone());
        a.context = Some(format!("Level:{LEVEL}"));
        a.domain = Some("heap".into());
    });
    assert_eq!(sum(&t, |r| r.live.unwrap().bytes), node.bytes);
    assert!(node.bytes > 0);
    // A thread, at the end: what the streaming thread made and still holds.
    let tr = build_tree(&load(&ReportOptions {
        domain: Some("heap".into()),
        thread: Some(STREAMING_THREAD.into()),
        ..ReportOptions::new(&path)
    }));
    let t = top(&path, |a| {
        a.by = Metric::Live;
        a.thread = Some(STREAMING_THREAD.into());
        a.domain = Some("heap".into());
    });
    assert_eq!(sum(&t, |r| r.live.unwrap().bytes), tr.domains[0].root.bytes);
    let t = top(&path, |a| {
        a.by = Metric::Peak;
        a.thread = Some(STREAMING_THREAD.into());
        a.domain = Some("heap".into());
    });
    assert_eq!(sum(&t, |r| r.peak.unwrap().bytes), tr.domains[0].root.peak_bytes);

    // What cannot be had: an error, not a guess.
    let mut args = TopOptions::new(&path);
    args.by = Metric::Total;
    args.context = Some(textures.clone());
    let err = build_top(&load(&args.report_options()), &args).unwrap_err();
    assert!(matches!(err, Error::Usage(_)) && err.to_string().contains("--by total"), "{err}");
    args.context = Some("Level:Nowhere".into());
    args.by = Metric::Peak;
    let err = build_top(&load(&args.report_options()), &args).unwrap_err().to_string();
    assert!(err.contains("no context \"Level:Nowhere\"") && err.contains(&format!("\"Level:{LEVEL}\"")), "{err}");
    let _ = TEXTURE_NAMES;
    let _ = std::fs::remove_file(&path);
}

/// Runs a binutils tool; the tests need binutils (objcopy, strip) on the machine.
fn binutils(tool: &str, args: &[&str]) {
    let out = Command::new(tool).args(args).output().unwrap_or_else(|e| panic!("{tool} (binutils) is needed: {e}"));
    assert!(out.status.success(), "{tool} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn build_id_path(dir: &Path, build_id: &str) -> PathBuf {
    dir.join(".build-id").join(&build_id[..2]).join(format!("{}.debug", &build_id[2..]))
}

#[test]
fn stripped_and_missing_binaries_degrade() {
    // The demo run from a copy, so that its binary can go missing or be stripped.
    let dir = temp_log("strip");
    let _ = std::fs::remove_dir_all(&dir);
    let dirs = ["run", "same", "stripped", "nodebug", "debug", "other"].map(|d| dir.join(d));
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    let [run, same, stripped, nodebug, debug, other] = dirs;
    let exe = run.join("demo-copy");
    std::fs::copy(DEMO, &exe).unwrap();
    let (path, _) = record_with(exe.to_str().unwrap(), "strip.mrl", &["--textures", "2", "--frames", "5"]);
    let exe = std::fs::canonicalize(&exe).unwrap();
    std::fs::copy(&exe, same.join("demo-copy")).unwrap();
    binutils("strip", &["--strip-all", "-o", stripped.join("demo-copy").to_str().unwrap(), exe.to_str().unwrap()]);
    binutils("objcopy", &["--strip-debug", exe.to_str().unwrap(), nodebug.join("demo-copy").to_str().unwrap()]);
    std::fs::copy(std::env::current_exe().unwrap(), other.join("demo-copy")).unwrap();
    std::fs::remove_file(&exe).unwrap();

    let l = load(&ReportOptions { domain: Some("heap".into()), ..ReportOptions::new(&path) });
    let state = l.state();
    let leak_stack =
        state.live_allocations().find(|a| a.2 == LEAK_BYTES as u64).map(|a| a.4).expect("the leak is live");
    let module = Symbolizer::for_log(&path, |id| state.string(id), SymbolOptions::default())
        .unwrap()
        .modules()
        .modules()
        .iter()
        .find(|m| Path::new(&m.path) == exe)
        .expect("the copy's module")
        .clone();
    let leak_line = line_of("game.rs", "LEAK-SITE");
    let leak_function = format!("memreplay_demo::game::{LEAK_FUNCTION}");
    let syms = |dirs: &[&Path]| {
        let opts = SymbolOptions {
            search_dirs: dirs.iter().map(|d| d.to_path_buf()).collect(),
            system_debug_dir: false,
            disabled: false,
        };
        Symbolizer::for_log(&path, |id| state.string(id), opts).unwrap()
    };
    // Why addresses of the demo's module lack file and line. A few always do, even with
    // full debug info (standard-library code without line tables: "no debug info").
    let reasons_for_exe = |s: &Symbolizer| -> Vec<Reason> {
        s.stats()
            .reasons
            .iter()
            .filter(|r| r.module.as_deref() == Some(module.path.as_str()))
            .map(|r| r.reason)
            .collect()
    };
    let unresolved_for_exe = |s: &Symbolizer| -> Vec<Reason> {
        reasons_for_exe(s).into_iter().filter(|&r| r != Reason::NoDebugInfo).collect()
    };

    // Missing: module+0xoffset, counted as "binary not found"; nothing trimmed.
    let mut s = syms(&[]);
    let site = s.site(leak_stack, state.stacks.get(leak_stack));
    let first = &site.frames[0];
    assert_eq!((first.resolution, first.reason), (Resolution::None, Some(Reason::BinaryNotFound)));
    assert_eq!(first.name(), format!("demo-copy+{:#x}", first.address - module.load_bias));
    assert!(site.function.starts_with("demo-copy+0x"), "{}", site.function);
    assert!(site.frames.iter().filter(|f| f.module.as_deref() == Some("demo-copy")).all(|f| f.function.is_none()));
    assert_eq!(reasons_for_exe(&s), [Reason::BinaryNotFound]);
    let st = s.stats();
    let n = st.reasons.iter().find(|r| r.module.as_deref() == Some(module.path.as_str())).unwrap().addresses;
    assert!(n > 0 && st.unresolved >= n);
    // … and the same through the CLI's report: `top --json` says why.
    let mut args = TopOptions::new(&path);
    args.json = true;
    let out = report::run_top(&args, Progress::Hidden).unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let reasons = v["symbols"]["reasons"].as_array().unwrap();
    assert!(
        reasons.iter().any(|r| r["reason"] == "binary-not-found" && r["module"] == module.path.as_str()),
        "{reasons:?}"
    );
    assert!(v["domains"][0]["rows"][0]["function"].as_str().unwrap().starts_with("demo-copy+0x"));

    // Found by `--symbols DIR` (by file name and build id): fully resolved again.
    let mut s = syms(&[&same]);
    let site = s.site(leak_stack, state.stacks.get(leak_stack));
    assert_eq!((site.function.as_str(), site.line), (leak_function.as_str(), Some(leak_line)));
    assert!(unresolved_for_exe(&s).is_empty(), "{:#?}", s.stats());

    // Another build under that name: refused ("build id mismatch").
    let mut s = syms(&[&other]);
    assert_eq!(s.site(leak_stack, state.stacks.get(leak_stack)).frames[0].reason, Some(Reason::BuildIdMismatch));
    assert_eq!(reasons_for_exe(&s), [Reason::BuildIdMismatch]);

    // Debug info stripped (symbol table kept): functions without files and lines.
    let mut s = syms(&[&nodebug]);
    let site = s.site(leak_stack, state.stacks.get(leak_stack));
    assert_eq!(site.function, leak_function);
    assert_eq!((site.file.as_deref(), site.line), (None, None));
    assert!(site.trimmed > 0, "recorder frames trimmed by name");
    assert_eq!(reasons_for_exe(&s), [Reason::NoDebugInfo]);
    assert!(s.stats().function_only > 0);

    // Fully stripped: module+0xoffset, "no symbols".
    let mut s = syms(&[&stripped]);
    let site = s.site(leak_stack, state.stacks.get(leak_stack));
    assert!(site
        .frames
        .iter()
        .filter(|f| f.module.as_deref() == Some("demo-copy"))
        .any(|f| f.reason == Some(Reason::NoSymbols)));
    assert!(site.function.starts_with("demo-copy+0x"), "{}", site.function);
    assert!(reasons_for_exe(&s).contains(&Reason::NoSymbols));
    let text = s.stats().text();
    assert!(text.contains("no symbols: demo-copy ("), "{text}");

    // Stripped, with its debug info in a separate file filed by build id: lines again.
    binutils(
        "objcopy",
        &[
            "--only-keep-debug",
            same.join("demo-copy").to_str().unwrap(),
            debug.join("demo-copy.debug").to_str().unwrap(),
        ],
    );
    let by_id = build_id_path(&debug, &module.build_id_hex());
    std::fs::create_dir_all(by_id.parent().unwrap()).unwrap();
    std::fs::rename(debug.join("demo-copy.debug"), &by_id).unwrap();
    let mut s = syms(&[&stripped, &debug]);
    let site = s.site(leak_stack, state.stacks.get(leak_stack));
    assert_eq!((site.function.as_str(), site.line), (leak_function.as_str(), Some(leak_line)));
    assert!(site.file.as_deref().is_some_and(|f| f.ends_with("demo/src/game.rs")));
    assert!(unresolved_for_exe(&s).is_empty(), "{:#?}", s.stats());
    // Without the binary at all, the debug file alone serves.
    let mut s = syms(&[&debug]);
    assert_eq!(s.site(leak_stack, state.stacks.get(leak_stack)).line, Some(leak_line));

    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&dir);
}
