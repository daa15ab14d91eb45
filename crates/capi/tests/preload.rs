//! `libmemreplay.so` preloaded into C and C++ programs (`crates/capi/src/preload.rs`):
//! the programs in `tests/preload/` are built with the system's `cc`, run with
//! `LD_PRELOAD` and `MEMREPLAY_LOG`, and their logs read back with `memreplay-format`.
//!
//! The programs count their own calls to the allocator. A call made by the program's own
//! code is recorded with a callstack whose first frame lies in the program's executable
//! (the interposer anchors the stack at the program's call into `malloc`), so the log's
//! events whose first frame is in the executable must match the tally exactly, beside
//! what the C library and the loader allocate for themselves.
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use memreplay_format::{merge_by_seq, Event, Log, Part};

/// `target/<profile>/`, where cargo put `libmemreplay.so` before running this test.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent().and_then(Path::parent).expect("target/<profile>/deps").to_path_buf()
}

/// `libmemreplay.so`, built up to date (cargo does not build a `cdylib`-only package's
/// library before its integration tests).
fn library() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let release = target_dir().file_name().is_some_and(|n| n == "release");
            let mut cargo = Command::new(env!("CARGO"));
            cargo.args(["build", "--quiet", "-p", "memreplay-capi"]);
            if release {
                cargo.arg("--release");
            }
            let status = cargo.current_dir(env!("CARGO_MANIFEST_DIR")).status().expect("run cargo");
            assert!(status.success(), "cargo build -p memreplay-capi failed");
            let lib = target_dir().join("libmemreplay.so");
            assert!(lib.is_file(), "{} is missing", lib.display());
            lib
        })
        .clone()
}

fn work_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("preload");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Builds `tests/preload/<source>` into `<name>` with `flags` (once per test process).
fn build(source: &str, name: &str, flags: &[&str]) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/preload").join(source);
    let out = work_dir().join(name);
    let compiler = if source.ends_with(".cpp") { "c++" } else { "cc" };
    let status = Command::new(compiler)
        .args(flags)
        .args(["-g", "-pthread", "-o"])
        .arg(unfinished(&out))
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("run {compiler}: {e}"));
    assert!(status.success(), "{compiler} failed on {}", src.display());
    finish(&out);
    built.insert(name.into(), out.clone());
    out
}

/// Where this process builds `out` before [`finish`] moves it in place: test runners that
/// start a process per test (nextest) build the same programs at once, and one must not
/// run or link a file another is still writing.
fn unfinished(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    PathBuf::from(name)
}

/// Moves the finished build in place (a rename: a program another process runs keeps
/// the file it opened).
fn finish(out: &Path) {
    std::fs::rename(unfinished(out), out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}

/// Runs `program args` preloaded, recording into `log` with `options`.
fn record(program: &Path, args: &[&str], log: &Path, options: &str) -> Output {
    let _ = std::fs::remove_file(log);
    Command::new(program)
        .args(args)
        .env("LD_PRELOAD", library())
        .env("MEMREPLAY_LOG", log)
        .env("MEMREPLAY_OPTIONS", options)
        .output()
        .expect("run the program")
}

/// The numbers after `key=` on the program's `tally` line.
fn tally(text: &str, key: &str) -> u64 {
    let line = text.lines().find(|l| l.starts_with("tally ")).unwrap_or_else(|| panic!("no tally in {text:?}"));
    let field = line.split(' ').find_map(|f| f.strip_prefix(&format!("{key}="))).expect("tally field");
    field.parse().unwrap()
}

/// A log read back: where each event's first frame lies.
struct Recorded {
    /// Allocations, reallocs and frees whose first frame is in the executable.
    allocs: u64,
    reallocs: u64,
    frees: u64,
    /// Every allocation and realloc, wherever its first frame is.
    all_allocs: u64,
    /// Blocks live at the end of the log: (size, first frame as an address in the
    /// executable's file, if it is there).
    live: Vec<(u64, Option<u64>)>,
    pid: u64,
    lost: u64,
    /// Frees of blocks the log does not know.
    unknown_frees: u64,
}

fn read_log(log: &Path, exe: &Path) -> Recorded {
    let log = Log::open(log).unwrap_or_else(|e| panic!("read {}: {e:?}", log.display()));
    assert!(log.report.is_clean(), "damaged log: {:?}", log.report);
    let mut strings = HashMap::new();
    let mut stacks: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut modules = Vec::new();
    let mut lost = 0;
    for b in &log.blocks {
        for e in &b.events {
            match e {
                Event::DefineString { id, text } => {
                    strings.insert(*id, text.clone());
                }
                Event::DefineStack { id, frames } => {
                    stacks.insert(*id, frames.clone());
                }
                Event::Module { base, size, load_bias, path, .. } => modules.push((*base, *size, *load_bias, *path)),
                Event::Lost { events, .. } => lost += events,
                _ => {}
            }
        }
    }
    let exe = std::fs::canonicalize(exe).unwrap();
    let (base, size, bias) = modules
        .iter()
        .find(|m| strings.get(&m.3).is_some_and(|p| Path::new(p) == exe))
        .map(|m| (m.0, m.1, m.2))
        .expect("the executable in the module map");
    // The first frame, as an address of the executable's file (a return address).
    let first = |stack: u32| -> Option<u64> {
        let f = *stacks.get(&stack)?.first()?;
        (base..base + size).contains(&f).then(|| f - bias)
    };
    let mut r = Recorded {
        allocs: 0,
        reallocs: 0,
        frees: 0,
        all_allocs: 0,
        live: Vec::new(),
        pid: log.header.pid,
        lost,
        unknown_frees: 0,
    };
    let mut live: HashMap<u64, (u64, u32)> = HashMap::new();
    for te in merge_by_seq(&log.blocks) {
        match (te.event, te.part) {
            (Event::Alloc { domain: 0, addr, size, stack, .. }, _) => {
                r.all_allocs += 1;
                r.allocs += first(*stack).is_some() as u64;
                live.insert(*addr, (*size, *stack));
            }
            (Event::Free { domain: 0, addr, stack, .. }, _) => {
                r.frees += first(*stack).is_some() as u64;
                r.unknown_frees += live.remove(addr).is_none() as u64;
            }
            (Event::Realloc { old_addr, .. }, Part::ReallocFree) => {
                r.unknown_frees += live.remove(old_addr).is_none() as u64;
            }
            (Event::Realloc { new_addr, new_size, stack, .. }, Part::ReallocAlloc) => {
                r.all_allocs += 1;
                r.reallocs += first(*stack).is_some() as u64;
                live.insert(*new_addr, (*new_size, *stack));
            }
            _ => {}
        }
    }
    r.live = live.values().map(|&(size, stack)| (size, first(stack))).collect();
    r
}

/// The address range of function `name` in `exe`'s symbol table.
fn function_range(exe: &Path, name: &str) -> std::ops::Range<u64> {
    let out = Command::new("nm").arg("-S").arg(exe).output().expect("run nm");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.ends_with(&format!(" {name}"))).unwrap_or_else(|| panic!("{name} not in nm"));
    let mut f = line.split_whitespace();
    let start = u64::from_str_radix(f.next().unwrap(), 16).unwrap();
    let len = u64::from_str_radix(f.next().unwrap(), 16).unwrap();
    start..start + len
}

/// Runs the threaded program `runs` times and holds each log to its tally.
fn check_threads(name: &str, flags: &[&str], options: &str) {
    let exe = build("threads.c", name, flags);
    let leak_fn = function_range(&exe, "leak_n_blocks");
    for run in 0..20 {
        let threads = 2 + run % 4;
        let leaked = 3 + run % 5;
        let log = work_dir().join(format!("{name}.mrl"));
        let out = record(&exe, &[&threads.to_string(), &leaked.to_string()], &log, options);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "run {run}: {:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
        let r = read_log(&log, &exe);
        let what = format!("{name}, run {run} ({threads} threads): {stdout}");
        assert_eq!(r.lost, 0, "{what}");
        // Threads exit after their flush: what glibc and std allocated for the recorder
        // then (the thread-exit registration) is freed without showing in the log.
        assert_eq!(r.unknown_frees, 0, "frees of blocks the log does not know, {what}");
        assert_eq!(r.allocs, tally(&stdout, "allocs"), "allocations from the program, {what}");
        assert_eq!(r.reallocs, tally(&stdout, "reallocs"), "reallocs from the program, {what}");
        assert_eq!(r.frees, tally(&stdout, "frees"), "frees from the program, {what}");
        assert!(r.all_allocs > r.allocs + r.reallocs, "the C library's own allocations are recorded too, {what}");
        // What the program still holds: the leak, every block from `leak_n_blocks`.
        let held: Vec<_> = r.live.iter().filter_map(|&(size, f)| Some((size, f?))).collect();
        assert_eq!(held.len() as u64, leaked as u64, "blocks the program leaked, {what}: {held:x?}");
        for (size, f) in held {
            assert_eq!(size, 4242, "{what}");
            // A return address: the call is just before it.
            assert!(leak_fn.contains(&(f - 1)), "first frame {f:#x} outside leak_n_blocks {leak_fn:x?}, {what}");
        }
    }
}

#[test]
fn threads_with_frame_pointers() {
    check_threads("threads-fp", &["-O2", "-fno-omit-frame-pointer"], "free-callstacks=on,unwind=fp");
}

#[test]
fn threads_without_frame_pointers_through_the_unwinder() {
    check_threads("threads-nofp", &["-O2", "-fomit-frame-pointer"], "free-callstacks=on,unwind=unwinder");
}

#[test]
fn cpp_objects_are_recorded_whole() {
    let exe = build("objects.cpp", "objects", &["-O2"]);
    let log = work_dir().join("objects.mrl");
    let out = record(&exe, &[], &log, "free-callstacks=on");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(tally(&stdout, "news"), 1000, "{stdout}");
    assert!(stdout.contains("checksum=68390"), "{stdout}");
    let r = read_log(&log, &exe);
    // Each node: the Node (new), its name's buffer, and its values' buffer when it has
    // values (i % 50 > 0: 980 of them), reallocated as it grows; the vector of nodes too.
    // `new` goes through libstdc++, so the first frame is `operator new`, not the
    // program: count what is live instead: everything was deleted.
    // The one big block left is libstdc++'s emergency exception pool (72,704 bytes),
    // allocated by its constructor before the recorder started, never freed: in the log
    // without a callstack.
    assert_eq!(r.unknown_frees, 0);
    let big: Vec<_> = r.live.iter().filter(|(size, _)| *size > 64 * 1024).collect();
    assert_eq!(big, [&(72_704, None)], "{:?}", r.live);
    assert!(r.all_allocs >= 1000 + 1000 + 980, "{} allocations", r.all_allocs);
    let node_sized = r.live.iter().filter(|(size, _)| *size == 56).count();
    assert_eq!(node_sized, 0, "no Node is left: {:?}", r.live);
}

#[test]
fn constructors_atexit_and_destructors_are_recorded() {
    let exe = build("lifecycle.c", "lifecycle", &["-O2"]);
    for mode in ["plain", "fork", "exec"] {
        let log = work_dir().join(format!("lifecycle-{mode}.mrl"));
        let out = record(&exe, &[mode], &log, "");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{mode}: {out:?}");
        let r = read_log(&log, &exe);
        // The parent's tally is the last line (a child of fork prints its own first).
        let last = stderr.lines().rfind(|l| l.starts_with("tally ")).unwrap();
        assert_eq!(r.pid, out_pid_guard(&r), "{mode}");
        assert_eq!(r.allocs, tally(last, "allocs"), "{mode}: {stderr}");
        assert_eq!(r.frees, 0, "{mode}: no free callstacks asked");
        // The four kept blocks, from the constructor, main, the atexit handler and the
        // destructor: nothing of the child's 100,000 blocks, nor of the exec'd program.
        let mut kept: Vec<u64> = r.live.iter().filter(|(_, f)| f.is_some()).map(|(s, _)| *s).collect();
        kept.sort();
        assert_eq!(kept, [1000, 2000, 3000, 4000], "{mode}");
        assert!(r.all_allocs < 1000, "{mode}: {} allocations: a child was recorded", r.all_allocs);
    }
}

/// The log's pid is the recorded process's (a sanity check that the header is there).
fn out_pid_guard(r: &Recorded) -> u64 {
    assert!(r.pid > 1);
    r.pid
}

#[test]
fn interposed_calls_behave_as_glibcs() {
    // A program that calls every entry point with good and bad arguments.
    let exe = build("calls.c", "calls", &["-O0", "-fno-builtin"]);
    let log = work_dir().join("calls.mrl");
    let plain = Command::new(&exe).output().unwrap();
    let out = record(&exe, &[], &log, "");
    assert!(plain.status.success(), "{plain:?}");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&plain.stdout));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let r = read_log(&log, &exe);
    assert_eq!(r.allocs, tally(&stdout, "allocs"), "{stdout}");
    assert_eq!(r.reallocs, tally(&stdout, "reallocs"), "{stdout}");
    let mut held: Vec<u64> = r.live.iter().filter(|(_, f)| f.is_some()).map(|(s, _)| *s).collect();
    held.sort();
    // Kept on purpose: a valloc'd block (4 KiB asked), a pvalloc'd one (5000 bytes asked:
    // two pages), an aligned_alloc'd one and a memalign'd one.
    assert_eq!(held, [100, 300, 4096, 8192], "{stdout}");
}

/// Runs `cmd` for at most a minute: a hang is a failure, not a stuck test.
fn output_within_a_minute(cmd: &mut Command) -> Output {
    let mut child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{cmd:?} hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn threads_that_first_allocate_inside_pthread_getattr_np() {
    let exe = build("getattr.c", "getattr", &["-O1"]);
    let log = work_dir().join("getattr.mrl");
    let _ = std::fs::remove_file(&log);
    for capture in ["fp", "unwinder"] {
        let out = output_within_a_minute(
            Command::new(&exe)
                .env("LD_PRELOAD", library())
                .env("MEMREPLAY_LOG", &log)
                .env("MEMREPLAY_OPTIONS", format!("unwind={capture}")),
        );
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ok 5\n");
        let r = read_log(&log, &exe);
        // The program's one malloc, whatever the C library allocated for itself.
        assert_eq!(r.allocs, 1);
    }
}

#[test]
fn a_rust_program_without_the_recorder_is_recorded_through_malloc() {
    // This test binary: Rust's runtime calls pthread_getattr_np on the main thread
    // before `main` (its first allocation is the C library's `fopen` inside it).
    let me = std::env::current_exe().unwrap();
    let log = work_dir().join("rust.mrl");
    let out = output_within_a_minute(
        Command::new(&me).args(["--list", "--format", "terse"]).env("LD_PRELOAD", library()).env("MEMREPLAY_LOG", &log),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("a_rust_program_without_the_recorder"));
    let log = Log::open(&log).unwrap();
    assert!(log.report.is_clean());
    let allocs = log.blocks.iter().flat_map(|b| &b.events).filter(|e| matches!(e, Event::Alloc { .. })).count();
    assert!(allocs > 10, "{allocs} allocations recorded");
}

#[test]
fn a_dlopened_library_stays_out_of_the_way() {
    let exe = build("dlopen.c", "dlopen", &["-O1"]);
    let log = work_dir().join("dlopen.mrl");
    let _ = std::fs::remove_file(&log);
    let out = Command::new(&exe).arg(library()).env("MEMREPLAY_LOG", &log).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
    // Off for good: no session started from MEMREPLAY_LOG.
    assert!(!log.exists(), "a dlopened libmemreplay started recording");
}

/// Builds `early.c` linked with the library `early_lib.c` (found next to it at run time).
fn build_early() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/preload");
            let dir = work_dir();
            let lib = dir.join("libearly.so");
            let cc = |args: &[&std::ffi::OsStr]| {
                let status = Command::new("cc").args(args).status().expect("run cc");
                assert!(status.success(), "cc {args:?}");
            };
            let lib_src = src.join("early_lib.c");
            cc(&[
                "-O2".as_ref(),
                "-g".as_ref(),
                "-shared".as_ref(),
                "-fPIC".as_ref(),
                "-o".as_ref(),
                unfinished(&lib).as_ref(),
                lib_src.as_ref(),
            ]);
            finish(&lib);
            let exe = dir.join("early");
            let exe_src = src.join("early.c");
            let link_dir = format!("-L{}", dir.display());
            let rpath = format!("-Wl,-rpath,{}", dir.display());
            cc(&[
                "-O2".as_ref(),
                "-g".as_ref(),
                "-pthread".as_ref(),
                "-o".as_ref(),
                unfinished(&exe).as_ref(),
                exe_src.as_ref(),
                link_dir.as_ref(),
                "-learly".as_ref(),
                rpath.as_ref(),
            ]);
            finish(&exe);
            exe
        })
        .clone()
}

/// The log's `BeforeStart` counts, summed, and whether it had one.
fn before_start(log: &Log) -> Option<[u64; 6]> {
    let mut sum = None;
    for e in log.blocks.iter().flat_map(|b| &b.events) {
        if let Event::BeforeStart { allocations, frees, reallocs, bytes, live, untracked } = *e {
            let s: &mut [u64; 6] = sum.get_or_insert([0; 6]);
            for (a, b) in s.iter_mut().zip([allocations, frees, reallocs, bytes, live, untracked]) {
                *a += b;
            }
        }
    }
    sum
}

#[test]
fn blocks_allocated_before_the_start_are_in_the_log_and_their_frees_match() {
    // What the loader and the C library do before any constructor, in a program that
    // allocates nothing before `main` itself.
    let plain = build("lifecycle.c", "lifecycle", &["-O2"]);
    let log = work_dir().join("before-start-plain.mrl");
    assert!(record(&plain, &["plain"], &log, "").status.success());
    let baseline = before_start(&Log::open(&log).unwrap()).expect("a BEFORE_START record");
    // The program's library allocates before the recorder starts; `main` frees what it
    // left (early_lib.c: 4 allocations, 1 free, 1 realloc, 1765 bytes, 3 blocks left).
    let exe = build_early();
    for unwind in ["fp", "unwinder"] {
        let log = work_dir().join(format!("before-start-{unwind}.mrl"));
        let out = record(&exe, &[], &log, &format!("unwind={unwind},free-callstacks=on"));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{out:?}");
        let early: Vec<u64> = stdout
            .trim()
            .strip_prefix("early ")
            .unwrap_or_else(|| panic!("{stdout}"))
            .split(' ')
            .map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap())
            .collect();
        let log = Log::open(&log).unwrap();
        assert!(log.report.is_clean(), "{:?}", log.report);
        let mut want = baseline;
        for (w, n) in want.iter_mut().zip([4, 1, 1, 1765, 3, 0]) {
            *w += n;
        }
        assert_eq!(before_start(&log), Some(want), "allocations, frees, reallocs, bytes, live, untracked");
        // Each block left is an allocation without a callstack inside the context that
        // says so, and the program's free of it frees a block the log knows.
        let strings: HashMap<u32, String> = log
            .blocks
            .iter()
            .flat_map(|b| &b.events)
            .filter_map(|e| match e {
                Event::DefineString { id, text } => Some((*id, text.clone())),
                _ => None,
            })
            .collect();
        let mut context: Vec<String> = Vec::new();
        let mut live: HashMap<u64, (u64, u32, Option<String>)> = HashMap::new();
        let mut freed = Vec::new();
        for te in merge_by_seq(&log.blocks) {
            match te.event {
                Event::ContextPush { name, .. } => context.push(strings.get(name).cloned().unwrap_or_default()),
                Event::ContextPop => {
                    context.pop();
                }
                Event::Alloc { domain: 0, addr, size, stack, .. } => {
                    live.insert(*addr, (*size, *stack, context.last().cloned()));
                }
                Event::Free { domain: 0, addr, .. } if early.contains(addr) => {
                    freed.push(live.remove(addr).map(|(size, stack, ctx)| (*addr, size, stack, ctx)));
                }
                _ => {}
            }
        }
        let ctx = Some("before recording started".to_owned());
        let want: Vec<_> =
            early.iter().zip([111, 222, 333]).map(|(&a, size)| Some((a, size, 0, ctx.clone()))).collect();
        assert_eq!(freed, want, "unwind={unwind}: the frees of the blocks left before the start");
    }
}

/// Frees of blocks the log does not know (in its global order).
fn unknown_frees(log: &Log) -> u64 {
    let mut live = std::collections::HashSet::new();
    let mut unknown = 0;
    for te in merge_by_seq(&log.blocks) {
        match (te.event, te.part) {
            (Event::Alloc { domain: 0, addr, .. }, _) | (Event::Realloc { new_addr: addr, .. }, Part::ReallocAlloc) => {
                live.insert(*addr);
            }
            (Event::Free { domain: 0, addr, .. }, _) | (Event::Realloc { old_addr: addr, .. }, Part::ReallocFree) => {
                unknown += u64::from(!live.remove(addr));
            }
            _ => {}
        }
    }
    unknown
}

#[test]
fn blocks_past_the_early_table_are_counted_as_untracked() {
    let exe = build_early();
    let run = |many: Option<u64>| {
        let log = work_dir().join(format!("before-start-many-{}.mrl", many.unwrap_or(0)));
        let _ = std::fs::remove_file(&log);
        let mut cmd = Command::new(&exe);
        cmd.env("LD_PRELOAD", library()).env("MEMREPLAY_LOG", &log);
        if let Some(n) = many {
            cmd.env("EARLY_MANY", n.to_string());
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let log = Log::open(&log).unwrap();
        assert!(log.report.is_clean(), "{:?}", log.report);
        (before_start(&log).expect("a BEFORE_START record"), unknown_frees(&log))
    };
    let (few, unknown_few) = run(None);
    // 5000 blocks of 48 bytes and their array (8 bytes each) on top: more than the 4096
    // the interposer keeps track of before the start.
    let (many, unknown_many) = run(Some(5000));
    let [allocations, frees, reallocs, bytes, live, untracked] = few;
    assert_eq!(untracked, 0);
    let blocks = live + 5001;
    assert_eq!(many, [allocations + 5001, frees, reallocs, bytes + 5000 * (48 + 8), 4096, blocks - 4096]);
    // `main` frees them all: those not kept track of are frees of unknown blocks, which
    // the log's count says in advance; the others match.
    assert_eq!(unknown_many - unknown_few, blocks - 4096);
}

/// The frees of blocks the log does not know whose first frame lies in the module
/// `module` (a path ending), in the log's global order.
fn unknown_frees_from(log: &Log, module: &str) -> Vec<u64> {
    let events = || log.blocks.iter().flat_map(|b| &b.events);
    let strings: HashMap<u32, &str> = events()
        .filter_map(|e| match e {
            Event::DefineString { id, text } => Some((*id, text.as_str())),
            _ => None,
        })
        .collect();
    let stacks: HashMap<u32, &Vec<u64>> = events()
        .filter_map(|e| match e {
            Event::DefineStack { id, frames } => Some((*id, frames)),
            _ => None,
        })
        .collect();
    let ranges: Vec<std::ops::Range<u64>> = events()
        .filter_map(|e| match e {
            Event::Module { base, size, path, .. } if strings.get(path).is_some_and(|p| p.ends_with(module)) => {
                Some(*base..*base + *size)
            }
            _ => None,
        })
        .collect();
    assert!(!ranges.is_empty(), "{module} is not in the module map");
    let mut live = std::collections::HashSet::new();
    let mut found = Vec::new();
    for te in merge_by_seq(&log.blocks) {
        match (te.event, te.part) {
            (Event::Alloc { domain: 0, addr, .. }, _) | (Event::Realloc { new_addr: addr, .. }, Part::ReallocAlloc) => {
                live.insert(*addr);
            }
            (Event::Free { domain: 0, addr, stack, .. }, _) if !live.remove(addr) => {
                let first = stacks.get(stack).and_then(|f| f.first().copied());
                if first.is_some_and(|f| ranges.iter().any(|r| r.contains(&f))) {
                    found.push(*addr);
                }
            }
            (Event::Realloc { old_addr, .. }, Part::ReallocFree) => {
                live.remove(old_addr);
            }
            _ => {}
        }
    }
    found
}

#[test]
fn a_fork_while_another_thread_holds_the_early_table_does_not_hang_the_child() {
    // Before the recorder starts, a library's constructor forks while its thread
    // allocates through the interposer's table of early blocks: a child forked while the
    // thread held the table's lock has no such thread, yet its own `malloc` goes through
    // the same table. It must not wait for it.
    let exe = build_early();
    let log = work_dir().join("before-start-fork.mrl");
    let _ = std::fs::remove_file(&log);
    let out = output_within_a_minute(
        Command::new(&exe)
            .env("LD_PRELOAD", library())
            .env("MEMREPLAY_LOG", &log)
            .env("EARLY_THREAD", "1")
            .env("EARLY_FORK", "300"),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(Log::open(&log).unwrap().report.is_clean());
}

#[test]
fn a_thread_allocating_through_the_recorders_start_is_recorded_exactly() {
    // Threads started by a constructor before the recorder's (one, or three) allocate
    // and free while the recorder starts and hands its early blocks over: nothing hangs,
    // and no free in the log is a free of a block the log does not know.
    let exe = build_early();
    let log = work_dir().join("before-start-thread.mrl");
    for run in 0..10 {
        let _ = std::fs::remove_file(&log);
        let out = output_within_a_minute(
            Command::new(&exe)
                .env("LD_PRELOAD", library())
                .env("MEMREPLAY_LOG", &log)
                .env("MEMREPLAY_OPTIONS", "free-callstacks=on")
                .env("EARLY_THREAD", if run % 2 == 0 { "1" } else { "3" }),
        );
        assert!(out.status.success(), "run {run}: {out:?}");
        let log = Log::open(&log).unwrap();
        assert!(log.report.is_clean(), "run {run}: {:?}", log.report);
        let lost: u64 = log
            .blocks
            .iter()
            .flat_map(|b| &b.events)
            .map(|e| if let Event::Lost { events, .. } = e { *events } else { 0 })
            .sum();
        assert_eq!(lost, 0, "run {run}");
        let [allocations, frees, ..] = before_start(&log).expect("a BEFORE_START record");
        assert!(allocations >= 4 && frees >= 1, "run {run}: {allocations} allocations, {frees} frees");
        assert_eq!(unknown_frees_from(&log, "/libearly.so"), [0u64; 0], "run {run}");
        assert_eq!(unknown_frees(&log), 0, "run {run}");
    }
}

// ---- The cached unwinder (`unwind=unwinder`, `recorder/src/imp/unwind.rs`). A debug
// build of the library redoes every capture of the cached unwinder with
// `_Unwind_Backtrace` and aborts on a difference; with `MEMREPLAY_DEBUG_UNWIND` set it says
// at the end how many captures each did. The programs are built without frame pointers.

/// Runs `program args` preloaded with `unwind=unwinder`, 64-frame stacks on allocations
/// and frees; checks it succeeded and returns its output and (in a debug build) the
/// captures done by the cached unwinder and by `_Unwind_Backtrace`.
fn record_unwound(program: &Path, args: &[&str], log: &Path) -> (Output, Option<(u64, u64)>) {
    let _ = std::fs::remove_file(log);
    let out = Command::new(program)
        .args(args)
        .env("LD_PRELOAD", library())
        .env("MEMREPLAY_LOG", log)
        .env("MEMREPLAY_OPTIONS", "free-callstacks=on,unwind=unwinder,depth=64")
        .env("MEMREPLAY_DEBUG_UNWIND", "1")
        .output()
        .expect("run the program");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{program:?}: {:?}\n{stderr}", out.status);
    let counts = stderr.lines().find_map(|l| {
        let rest = l.strip_prefix("memreplay: unwinder: ")?;
        let mut numbers = rest.split(' ').filter_map(|w| w.parse::<u64>().ok());
        Some((numbers.next()?, numbers.next()?))
    });
    assert_eq!(counts.is_some(), cfg!(debug_assertions), "the debug build's count: {stderr}");
    (out, counts)
}

#[test]
fn the_cached_unwinder_gives_the_platform_unwinders_stacks() {
    for (name, flags) in [
        ("threads-o3", &["-O3", "-fomit-frame-pointer"][..]),
        ("threads-lto", &["-O3", "-flto", "-fomit-frame-pointer"][..]),
    ] {
        let exe = build("threads.c", name, flags);
        let log = work_dir().join(format!("{name}-unwound.mrl"));
        let (out, counts) = record_unwound(&exe, &["4", "5", "3000"], &log);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let r = read_log(&log, &exe);
        assert_eq!(r.allocs, tally(&stdout, "allocs"), "{name}: allocations from the program");
        assert_eq!(r.frees, tally(&stdout, "frees"), "{name}: frees from the program");
        if let Some((cached, fell_back)) = counts {
            // Every frame of this program, glibc's and the thread start included, has
            // rules the cached unwinder follows.
            let own = tally(&stdout, "allocs") + tally(&stdout, "reallocs") + tally(&stdout, "frees");
            assert!(cached >= own, "{name}: {cached} captures cached, the program made {own} calls");
            assert_eq!(fell_back, 0, "{name}: captures left to _Unwind_Backtrace");
        }
    }
}

#[test]
fn the_cached_unwinder_walks_libstdcxx_frames() {
    let exe = build("objects.cpp", "objects-nofp", &["-O2", "-fomit-frame-pointer"]);
    let log = work_dir().join("objects-unwound.mrl");
    let (out, counts) = record_unwound(&exe, &[], &log);
    assert!(String::from_utf8_lossy(&out.stdout).contains("checksum=68390"), "{out:?}");
    // `operator new` (libstdc++) calls `malloc`: its frame and the program's above it.
    if let Some((cached, fell_back)) = counts {
        assert!(cached >= 1000 + 1000 + 980, "{cached} captures cached");
        assert_eq!(fell_back, 0, "captures left to _Unwind_Backtrace");
    }
}

#[test]
fn the_cached_unwinder_walks_a_dlopened_librarys_frames() {
    let plugin = build("plugin.c", "libplugin-nofp.so", &["-O2", "-fomit-frame-pointer", "-fPIC", "-shared"]);
    let host = build("plugin_host.c", "plugin-host-nofp", &["-O2", "-fomit-frame-pointer"]);
    let log = work_dir().join("plugin-unwound.mrl");
    let (out, counts) = record_unwound(&host, &[plugin.to_str().unwrap()], &log);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
    // The plugin's block: its stack runs from the plugin's `plugin_leak` into the host's
    // `main` and on to the C library's start.
    let log = Log::open(&log).unwrap();
    let mut stacks: HashMap<u32, usize> = HashMap::new();
    let mut depth = None;
    for e in log.blocks.iter().flat_map(|b| &b.events) {
        match e {
            Event::DefineStack { id, frames, .. } => {
                stacks.insert(*id, frames.len());
            }
            Event::Alloc { size: 31337, stack, .. } => depth = Some(stacks[stack]),
            _ => {}
        }
    }
    let depth = depth.expect("the plugin's block is in the log");
    assert!(depth >= 4, "plugin_leak, main, __libc_start_call_main, ...: {depth} frames");
    if let Some((cached, fell_back)) = counts {
        assert!(cached > 0, "{cached} captures cached");
        assert_eq!(fell_back, 0, "captures left to _Unwind_Backtrace");
    }
}

#[test]
fn frames_without_unwind_tables_fall_back_to_the_platform_unwinder() {
    // No `.eh_frame` records for the program's functions: the cached unwinder cannot
    // step through them, and `_Unwind_Backtrace` does the whole capture (stopping there,
    // as it always did). The program's own calls are still recorded at their call sites.
    let flags = ["-O2", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"];
    let exe = build("threads.c", "threads-no-cfi", &flags);
    let log = work_dir().join("threads-no-cfi.mrl");
    let (out, counts) = record_unwound(&exe, &["2", "3", "500"], &log);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let r = read_log(&log, &exe);
    assert_eq!(r.allocs, tally(&stdout, "allocs"), "allocations from the program");
    assert_eq!(r.frees, tally(&stdout, "frees"), "frees from the program");
    if let Some((_, fell_back)) = counts {
        assert!(fell_back >= tally(&stdout, "allocs"), "{fell_back} captures left to _Unwind_Backtrace");
    }
}

#[test]
fn the_cached_unwinder_forgets_an_unloaded_librarys_rules() {
    // The same function at the same address (the loader maps the second library where the
    // first was), with a different frame size: a rule cached for the first library would
    // misread the second's frames. `dlclose` starts a new generation of rules.
    let small =
        build("swap_plugin.c", "libswap-256.so", &["-O2", "-fomit-frame-pointer", "-fPIC", "-shared", "-DFRAME=256"]);
    let large =
        build("swap_plugin.c", "libswap-512.so", &["-O2", "-fomit-frame-pointer", "-fPIC", "-shared", "-DFRAME=512"]);
    let host = build("swap_host.c", "swap-host", &["-O2", "-fomit-frame-pointer"]);
    let log = work_dir().join("swap-unwound.mrl");
    let (out, counts) = record_unwound(&host, &[small.to_str().unwrap(), large.to_str().unwrap()], &log);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(stdout.ends_with("ok\n"), "{stdout}");
    let addresses: std::collections::HashSet<&str> =
        stdout.lines().filter_map(|l| l.strip_prefix("swap_work ")).map(|l| &l[2..]).collect();
    assert_eq!(addresses.len(), 1, "both libraries' swap_work at one address (what this test needs): {stdout}");
    if let Some((cached, fell_back)) = counts {
        assert!(cached >= 600, "{cached} captures cached");
        assert_eq!(fell_back, 0, "captures left to _Unwind_Backtrace");
    }
}

#[test]
fn frames_in_generated_code_fall_back_to_the_platform_unwinder() {
    // `malloc` called from code in an anonymous mapping: `_dl_find_object` knows no object
    // there, so `_Unwind_Backtrace` does each such capture (and stops at that frame, as
    // it always did).
    let exe = build("jit.c", "jit", &["-O2", "-fomit-frame-pointer"]);
    let log_path = work_dir().join("jit-unwound.mrl");
    let (out, counts) = record_unwound(&exe, &["300"], &log_path);
    assert_eq!(tally(&String::from_utf8_lossy(&out.stdout), "jit"), 300);
    let log = Log::open(&log_path).unwrap();
    let mut stacks: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut first_frames = Vec::new();
    for e in log.blocks.iter().flat_map(|b| &b.events) {
        match e {
            Event::DefineStack { id, frames } => {
                stacks.insert(*id, frames.clone());
            }
            Event::Alloc { size: 777, stack, .. } => first_frames.push(stacks[stack].first().copied()),
            _ => {}
        }
    }
    assert_eq!(first_frames.len(), 300, "every allocation from the generated code");
    // The first frame is the return into the generated code: one address for all.
    let firsts: std::collections::HashSet<_> = first_frames.iter().collect();
    assert_eq!(firsts.len(), 1, "{firsts:x?}");
    if let Some((_, fell_back)) = counts {
        assert!(fell_back >= 300, "{fell_back} captures left to _Unwind_Backtrace");
    }
}
