//! The C API from C and C++: programs built with the system `cc` and `c++` against
//! `include/memreplay.h` and `libmemreplay.so`, run, and their logs read back.
//!
//! The library is built first with `cargo build -p memreplay-capi` (see [`lib_dir`]).
//! Without a C or C++ compiler, the tests say so on stderr and skip.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memreplay_format::{context_flags, DomainKind, Event, Log, ResourceKind};

/// `target/<profile>`, where cargo puts `libmemreplay.so`: the test executable lives in
/// its `deps` folder. `cargo test` does not build a package's cdylib for its integration
/// tests (they cannot link it), so the first call builds it, up to date, with the cargo
/// that runs the tests and the same profile.
fn lib_dir() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
            let mut cargo = Command::new(env!("CARGO"));
            cargo.args(["build", "-p", "memreplay-capi", "--lib"]).current_dir(manifest_dir());
            match dir.file_name().and_then(|p| p.to_str()) {
                Some("debug") | None => {}
                Some(profile) => {
                    cargo.args(["--profile", profile]);
                }
            }
            check("cargo build -p memreplay-capi", cargo.output().unwrap());
            assert!(dir.join("libmemreplay.so").is_file(), "no libmemreplay.so in {}", dir.display());
            dir
        })
        .clone()
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn include_dir() -> PathBuf {
    manifest_dir().join("include")
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether `compiler` runs; if not, says so (a skipped test is not a silent pass).
fn have(compiler: &str) -> bool {
    let ok = Command::new(compiler).arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: `{compiler}` is not installed; the C API tests need a C and a C++ compiler");
    }
    ok
}

fn check(what: &str, out: Output) -> Output {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Compiles `source` with `compiler` and `flags` into `dir`; links libmemreplay if `link`.
fn compile(compiler: &str, source: &str, flags: &[&str], link: bool, dir: &Path, exe: &str) -> PathBuf {
    let out = dir.join(exe);
    let mut cmd = Command::new(compiler);
    cmd.args(flags).arg("-Wall").arg("-Wextra").arg("-Werror").arg("-I").arg(include_dir());
    cmd.arg(manifest_dir().join("tests/c").join(source)).arg("-o").arg(&out);
    if link {
        cmd.arg("-L").arg(lib_dir()).arg("-lmemreplay");
    }
    check(&format!("{compiler} {source}"), cmd.output().unwrap());
    out
}

fn run(exe: &Path, log: &Path) -> String {
    let out = Command::new(exe).arg(log).env("LD_LIBRARY_PATH", lib_dir()).env_remove("MEMREPLAY_LOG").output();
    let out = check(&exe.display().to_string(), out.unwrap());
    String::from_utf8(out.stdout).unwrap()
}

/// What the tests read from a log: strings, domains, and each thread's events with the
/// context path they were made in.
struct Read {
    log: Log,
    strings: HashMap<u32, String>,
    types: HashMap<u32, String>,
}

impl Read {
    fn open(path: &Path) -> Read {
        let log = Log::open(path).unwrap();
        assert!(log.report.is_clean(), "{}: {:?}", path.display(), log.report);
        let strings: HashMap<u32, String> = log
            .events()
            .filter_map(|(_, e)| match e {
                Event::DefineString { id, text } => Some((*id, text.clone())),
                _ => None,
            })
            .collect();
        let types = log
            .events()
            .filter_map(|(_, e)| match e {
                Event::DefineContextType { id, name } => Some((*id, strings[name].clone())),
                _ => None,
            })
            .collect();
        Read { log, strings, types }
    }

    fn s(&self, id: u32) -> &str {
        if id == 0 {
            ""
        } else {
            &self.strings[&id]
        }
    }

    /// Domains by name: (id, kind, capacity, parent).
    fn domains(&self) -> HashMap<String, (u32, DomainKind, u64, Option<u32>)> {
        self.log
            .events()
            .filter_map(|(_, e)| match e {
                Event::DefineDomain { id, name, kind, capacity, parent } if *id != 0 => {
                    Some((self.s(*name).to_owned(), (*id, *kind, *capacity, *parent)))
                }
                _ => None,
            })
            .collect()
    }

    /// Context pushes in order: (type, name, instance).
    fn pushes(&self) -> Vec<(String, String, bool)> {
        self.log
            .events()
            .filter_map(|(_, e)| match e {
                Event::ContextPush { ty, name, flags } => {
                    Some((self.types[ty].clone(), self.s(*name).to_owned(), flags & context_flags::INSTANCE != 0))
                }
                _ => None,
            })
            .collect()
    }

    fn count(&self, f: impl Fn(&Event) -> bool) -> usize {
        self.log.events().filter(|(_, e)| f(e)).count()
    }

    fn labels(&self) -> Vec<String> {
        self.log
            .events()
            .filter_map(|(_, e)| match e {
                Event::Label { name, .. } => Some(self.s(*name).to_owned()),
                _ => None,
            })
            .collect()
    }

    /// The allocations in `domain`, each with its size and the context path it was made
    /// in ("Level:Desert/Texture:sand.dds"), replaying each thread's contexts in order.
    fn allocs_in(&self, domain: u32) -> Vec<(u64, u64, String)> {
        let mut paths: HashMap<u32, Vec<String>> = HashMap::new();
        let mut out = Vec::new();
        for (thread, e) in self.log.events() {
            let path = paths.entry(thread).or_default();
            match e {
                Event::ContextPush { ty, name, .. } => path.push(format!("{}:{}", self.types[ty], self.s(*name))),
                Event::ContextPop => {
                    path.pop().expect("a pop without a push");
                }
                Event::Alloc { domain: d, addr, size, .. } if *d == domain => out.push((*addr, *size, path.join("/"))),
                _ => {}
            }
        }
        assert!(paths.values().all(Vec::is_empty), "contexts left open: {paths:?}");
        out
    }
}

#[test]
fn c_program_drives_the_whole_api() {
    if !have("cc") {
        return;
    }
    let dir = scratch("c");
    let exe = compile("cc", "api_test.c", &["-std=c99", "-pedantic"], true, &dir, "api_test");
    let log_path = dir.join("c.mrl");
    let stdout = run(&exe, &log_path);
    let r = Read::open(&log_path);

    // The stats memreplay_stop returned: the file's size, nothing lost.
    let bytes = std::fs::metadata(&log_path).unwrap().len();
    assert!(stdout.contains(&format!("bytes={bytes} lost=0")), "{stdout}");

    // Exactly the two domains defined well (bad definitions define nothing).
    let domains = r.domains();
    assert_eq!(domains.len(), 2, "{domains:?}");
    let (heap, kind, cap, parent) = domains["engine.heap"];
    assert_eq!((kind, cap, parent), (DomainKind::Pool, 64 * 1024, Some(0)));
    let (vram, kind, cap, parent) = domains["vram.local"];
    assert_eq!((kind, cap, parent), (DomainKind::GpuLocal, 256 << 20, None));

    // The engine heap's bracket: 10 blocks of 100..1000 bytes under Level/Texture, then a
    // realloc (free + alloc of 300) and an allocation of 64 under the attach; 4 frees.
    let allocs = r.allocs_in(heap);
    assert_eq!(allocs.len(), 12);
    let sizes: Vec<u64> = allocs.iter().map(|a| a.1).collect();
    assert_eq!(sizes, [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 300, 64]);
    assert!(allocs[..10].iter().all(|a| a.2 == "Level:Forest/Texture:rock.dds"), "{allocs:?}");
    assert!(allocs[10..].iter().all(|a| a.2.is_empty()), "{allocs:?}");
    assert_eq!(r.count(|e| matches!(e, Event::Free { domain, .. } if *domain == heap)), 5);
    // The realloc freed the first block before allocating the new one.
    let first = allocs[0].0;
    let realloc_free = r
        .log
        .events()
        .position(|(_, e)| matches!(e, Event::Free { domain, addr, .. } if *domain == heap && *addr == first));
    let realloc_alloc = r.log.events().position(
        |(_, e)| matches!(e, Event::Alloc { domain, addr, size: 300, .. } if *domain == heap && *addr == allocs[10].0),
    );
    assert!(realloc_free.unwrap() < realloc_alloc.unwrap());

    // VRAM: the texture, the resource with a bad kind (recorded as "other"), and the
    // allocation whose resource was NULL; each freed.
    let vram_allocs = r.allocs_in(vram);
    let vram_sizes: Vec<u64> = vram_allocs.iter().map(|a| a.1).collect();
    assert_eq!(vram_sizes, [4 << 20, 4096, 8192]);
    assert_eq!(vram_allocs[0].2, "Level:Forest/Texture:rock.dds");
    assert_eq!(r.count(|e| matches!(e, Event::Free { domain, .. } if *domain == vram)), 3);
    let resources: Vec<_> = r
        .log
        .events()
        .filter_map(|(_, e)| match e {
            Event::Resource { domain, addr, desc } if *domain == vram => Some((
                *addr,
                desc.kind,
                (desc.width, desc.height, desc.depth_or_layers, desc.mip_levels),
                r.s(desc.format).to_owned(),
                r.s(desc.name).to_owned(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        resources,
        [
            (0x100000, ResourceKind::Texture, (2048, 2048, 1, 12), "BC7_UNORM".into(), "rock.dds".into()),
            (0x900000, ResourceKind::Other, (2048, 2048, 1, 12), String::new(), "bad-kind".into()),
        ]
    );
    let budgets: Vec<_> = r
        .log
        .events()
        .filter_map(|(_, e)| match e {
            Event::Budget { domain, budget, usage, .. } => Some((*domain, *budget, *usage)),
            _ => None,
        })
        .collect();
    assert_eq!(budgets, [(vram, 200 << 20, 5 << 20)]);
    assert_eq!(r.count(|e| matches!(e, Event::Display { width: 1920, height: 1080 })), 1);
    assert_eq!(r.count(|e| matches!(e, Event::Display { .. })), 1);

    // Contexts: printf-style names; a NULL type and name recorded as "(null)", bad bytes
    // as U+FFFD; every push popped (allocs_in checks the balance).
    assert_eq!(
        r.pushes(),
        [
            ("Level".into(), "Forest".into(), false),
            ("Texture".into(), "rock.dds".into(), true),
            ("(null)".into(), "(null)".into(), false),
            ("Level".into(), "\u{FFFD}\u{FFFD}".into(), false),
        ]
    );
    assert_eq!(r.count(|e| matches!(e, Event::ContextPop)), 4);
    // The label (the refused ones are not in the log), frames, usage, attach, thread name.
    assert_eq!(r.labels(), ["level Forest loaded"]);
    let frames: Vec<u64> = r
        .log
        .events()
        .filter_map(|(_, e)| match e {
            Event::FrameStart { frame, .. } => Some(*frame),
            _ => None,
        })
        .collect();
    assert_eq!(frames, [1, 2]);
    assert_eq!(r.count(|e| matches!(e, Event::Usage { used: 1000, .. })), 1);
    assert_eq!(r.count(|e| matches!(e, Event::Usage { .. })), 1);
    assert_eq!(r.count(|e| matches!(e, Event::AttachPush { .. })), 1);
    assert_eq!(r.count(|e| matches!(e, Event::AttachPop)), 1);
    assert_eq!(r.count(|e| matches!(e, Event::ThreadInfo { name, .. } if r.s(*name) == "c-main")), 1);
    assert_eq!(r.count(|e| matches!(e, Event::Lost { .. })), 0);
}

#[test]
fn cpp_scope_macros_pop_on_scope_exit_and_exceptions() {
    if !have("c++") {
        return;
    }
    let dir = scratch("cpp");
    let exe = compile("c++", "raii_test.cpp", &["-std=c++11", "-pedantic"], true, &dir, "raii_test");
    let log_path = dir.join("cpp.mrl");
    let stdout = run(&exe, &log_path);
    // Every macro argument with a side effect ran once: 7 allocations' alignments, the
    // capacity, the frame, the batch number, the label's argument and the attach pointer.
    assert!(stdout.contains("stopped=0 evaluated=12"), "{stdout}");
    assert!(stdout.contains("caught: broken.pak is corrupt"), "{stdout}");
    let r = Read::open(&log_path);
    let domains = r.domains();
    assert_eq!(domains.len(), 1, "{domains:?}");
    let (pool, kind, cap, parent) = domains["assets"];
    assert_eq!((kind, cap, parent), (DomainKind::Pool, 1 << 20, Some(0)));

    let allocs: Vec<(u64, String)> = r.allocs_in(pool).into_iter().map(|(_, size, path)| (size, path)).collect();
    let want: Vec<(u64, String)> = [
        (1000, "Level:Desert/Streaming:batch 1/Texture:sand.dds"),
        (2000, "Level:Desert/Streaming:batch 1/Texture:rock.dds"),
        (3000, "Level:Desert/Streaming:batch 1/Texture:cactus.dds"),
        (500, "Level:Desert"),
        (11, "Level:Desert/Loader:broken.pak"),
        // After the exception left Loader's scope: back in Level alone.
        (777, "Level:Desert"),
        (55, ""),
    ]
    .into_iter()
    .map(|(s, p)| (s, p.to_owned()))
    .collect();
    assert_eq!(allocs, want);
    let instances: Vec<_> = r.pushes().into_iter().filter(|p| p.2).map(|p| p.1).collect();
    assert_eq!(instances, ["sand.dds", "rock.dds", "cactus.dds"]);
    assert_eq!(r.count(|e| matches!(e, Event::ContextPush { .. })), 6);
    assert_eq!(r.count(|e| matches!(e, Event::ContextPop)), 6);
    assert_eq!(r.labels(), ["loaded 3 textures"]);
    assert_eq!(r.count(|e| matches!(e, Event::AttachPush { .. })), 1);
    assert_eq!(r.count(|e| matches!(e, Event::AttachPop)), 1);
}

#[test]
fn disabled_macros_compile_to_nothing_and_need_no_library() {
    if !have("c++") {
        return;
    }
    let dir = scratch("cpp-off");
    // Not linked to libmemreplay: any call left by a macro would fail to link.
    let exe =
        compile("c++", "raii_test.cpp", &["-std=c++11", "-pedantic", "-DMEMREPLAY_ENABLED=0"], false, &dir, "raii_off");
    let log_path = dir.join("off.mrl");
    let out = Command::new(&exe).arg(&log_path).env_remove("LD_LIBRARY_PATH").output().unwrap();
    let stdout = String::from_utf8(check("raii_off", out).stdout).unwrap();
    // No argument evaluated, stop says nothing recorded, no log written.
    assert!(stdout.contains("stopped=-6 evaluated=0"), "{stdout}");
    assert!(!log_path.exists());
    let nm = Command::new("nm").arg("-u").arg(&exe).output();
    if let Ok(nm) = nm {
        let undefined = String::from_utf8_lossy(&nm.stdout);
        assert!(!undefined.contains("memreplay"), "the disabled build references the library:\n{undefined}");
    }
}

#[test]
fn example_engine_builds_runs_and_names_its_contexts() {
    if !have("c++") || !have("make") {
        return;
    }
    let dir = scratch("engine");
    let make = Command::new("make")
        .arg("-C")
        .arg(manifest_dir().join("../../examples/cpp-engine"))
        .arg(format!("OUT={}", dir.display()))
        .arg(format!("LIBDIR={}", lib_dir().display()))
        .args(["all", "engine-static", "engine-off"])
        .output()
        .unwrap();
    check("make -C examples/cpp-engine", make);
    // Linked to libmemreplay.a with the system libraries the README names: it records.
    let static_log = dir.join("static.mrl");
    let out = Command::new(dir.join("engine-static")).arg(&static_log).env_remove("LD_LIBRARY_PATH").output();
    let stdout = String::from_utf8(check("engine-static", out.unwrap()).stdout).unwrap();
    assert!(stdout.contains(" 0 lost"), "{stdout}");
    assert_eq!(
        Read::open(&static_log).labels(),
        ["level Forest loaded", "window resized to 2560x1440", "unloading Forest"]
    );
    // Built with MEMREPLAY_ENABLED=0 and no library: runs, records nothing.
    let off_log = dir.join("off.mrl");
    let out = Command::new(dir.join("engine-off")).arg(&off_log).env_remove("MEMREPLAY_LOG").output();
    let stdout = String::from_utf8(check("engine-off", out.unwrap()).stdout).unwrap();
    assert!(stdout.is_empty() && !off_log.exists(), "{stdout}");
    let log_path = dir.join("engine.mrl");
    let stdout = run(&dir.join("engine"), &log_path);
    assert!(stdout.contains(" 0 lost"), "{stdout}");
    let r = Read::open(&log_path);

    let domains = r.domains();
    let mut names: Vec<&str> = domains.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, ["engine.heap", "pool.entities", "vram.local"]);
    let heap = domains["engine.heap"].0;
    assert_eq!(domains["engine.heap"].3, Some(0));
    assert_eq!(domains["pool.entities"].3, Some(heap));
    assert_eq!(domains["vram.local"].1, DomainKind::GpuLocal);
    // Everything the engine allocated in its domains it freed before stopping.
    for (name, (id, ..)) in &domains {
        let allocs = r.count(|e| matches!(e, Event::Alloc { domain, .. } if domain == id));
        let frees = r.count(|e| matches!(e, Event::Free { domain, .. } if domain == id));
        assert!(allocs > 0 && allocs == frees, "{name}: {allocs} allocations, {frees} frees");
    }

    let mut contexts: Vec<String> = r.pushes().into_iter().map(|(ty, name, _)| format!("{ty}:{name}")).collect();
    contexts.sort();
    contexts.dedup();
    let want = [
        "Level:Forest",
        "Mesh:boulder.mesh",
        "Mesh:tree.mesh",
        "Renderer:targets",
        "System:render",
        "System:spawner",
        "Texture:bark.dds",
        "Texture:fern.dds",
        "Texture:moss.dds",
        "Texture:rock.dds",
        "Texture:water.dds",
    ];
    assert_eq!(contexts, want);
    let textures = r.allocs_in(domains["vram.local"].0);
    assert!(textures.iter().any(|(_, _, path)| path == "Level:Forest/Texture:rock.dds"), "{textures:?}");
    assert_eq!(r.labels(), ["level Forest loaded", "window resized to 2560x1440", "unloading Forest"]);
    assert_eq!(r.count(|e| matches!(e, Event::FrameStart { .. })), 12);
    assert_eq!(r.count(|e| matches!(e, Event::Budget { .. })), 12);
    let displays: Vec<(u32, u32)> = r
        .log
        .events()
        .filter_map(|(_, e)| match e {
            Event::Display { width, height } => Some((*width, *height)),
            _ => None,
        })
        .collect();
    assert_eq!(displays, [(1920, 1080), (2560, 1440)]);

    // Preloaded with a session from the environment (what `replay-cli record` does), the
    // engine's own start finds it recording: it records into that log and leaves it open
    // for the library to end at exit; the path it names is not written.
    let (recorded, named) = (dir.join("preloaded.mrl"), dir.join("named.mrl"));
    let out = Command::new(dir.join("engine"))
        .arg(&named)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("LD_PRELOAD", lib_dir().join("libmemreplay.so"))
        .env("MEMREPLAY_LOG", &recorded)
        .output();
    let stdout = String::from_utf8(check("engine under a preloaded session", out.unwrap()).stdout).unwrap();
    assert!(stdout.is_empty() && !named.exists(), "{stdout}");
    let r = Read::open(&recorded);
    assert_eq!(r.labels(), ["level Forest loaded", "window resized to 2560x1440", "unloading Forest"]);
    assert_eq!(r.count(|e| matches!(e, Event::FrameStart { .. })), 12);
}

#[test]
fn fork_child_records_nothing_of_the_parents_session_and_can_start_its_own() {
    if !have("cc") {
        return;
    }
    let dir = scratch("fork");
    let exe = compile("cc", "fork_test.c", &["-std=c99"], true, &dir, "fork_test");
    let (parent, child) = (dir.join("parent.mrl"), dir.join("child.mrl"));
    let mut cmd = Command::new(&exe);
    cmd.arg(&parent).arg(&child).env("LD_LIBRARY_PATH", lib_dir());
    let mut proc = cmd.spawn().unwrap();
    // Before the fork handler, the child hung (its buffers filled with no writer to
    // take them): give it ample time, then fail instead of hanging the test run.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = proc.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = proc.kill();
            panic!("fork_test did not finish in 60 s: the forked child hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "fork_test: {status}");

    let p = Read::open(&parent);
    assert_eq!(p.labels(), ["before fork", "after fork"]);
    let objects = p.domains()["objects"].0;
    let sizes: Vec<u64> = p.allocs_in(objects).into_iter().map(|a| a.1).collect();
    assert_eq!(sizes, [100], "the child's events are not in the parent's log");

    let c = Read::open(&child);
    assert_eq!(c.labels(), ["child"]);
    let objects = c.domains()["objects"].0;
    let sizes: Vec<u64> = c.allocs_in(objects).into_iter().map(|a| a.1).collect();
    assert_eq!(sizes, [700]);
}
