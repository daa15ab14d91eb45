//! `replay-cli record -- PROGRAM`, through the binary: C programs (the sources of
//! `crates/capi/tests/preload/`, built with the system's `cc`) recorded with
//! `libmemreplay.so` preloaded, their logs read back with `memreplay-format` and with
//! `leaks --json`; the refusals before anything runs; the exit status passed through;
//! the rule for programs that record themselves; a library `dlopen`ed and `dlclose`d
//! between two module rescans still in the module map.
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use memreplay_format::{merge_by_seq, Compression, Event, Log, Part};
use serde_json::Value;

use crate::common::{replay_cli, stderr, stdout, temp_in};

fn dir() -> PathBuf {
    let d = temp_in("record", "");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Builds `libmemreplay.so` next to `replay-cli` (once per test process).
fn library() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cli = PathBuf::from(env!("CARGO_BIN_EXE_replay-cli"));
            let release = cli.parent().and_then(Path::file_name).is_some_and(|n| n == "release");
            let mut cargo = Command::new(env!("CARGO"));
            cargo.args(["build", "--quiet", "-p", "memreplay-capi"]);
            if release {
                cargo.arg("--release");
            }
            assert!(cargo.status().expect("run cargo").success(), "cargo build -p memreplay-capi");
            let lib = cli.with_file_name("libmemreplay.so");
            assert!(lib.is_file(), "{} missing", lib.display());
            lib
        })
        .clone()
}

/// Builds `crates/capi/tests/preload/<source>` with `flags` into `<name>`.
fn build(source: &str, name: &str, flags: &[&str]) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/capi/tests/preload").join(source);
    let out = dir().join(name);
    let status = Command::new("cc").args(flags).args(["-g", "-pthread", "-o"]).arg(&out).arg(&src).status();
    assert!(status.expect("run cc").success(), "cc failed on {}", src.display());
    built.insert(name.into(), out.clone());
    out
}

/// `replay-cli record ARGS -- PROGRAM PROGRAM_ARGS`, with the library built.
fn record(args: &[&str], program: &Path, program_args: &[&str]) -> Output {
    library();
    replay_cli().arg("record").args(args).arg("--").arg(program).args(program_args).output().expect("run replay-cli")
}

/// The number after `key=` on the `tally` line.
fn tally(text: &str, key: &str) -> u64 {
    let line = text.lines().find(|l| l.starts_with("tally ")).unwrap_or_else(|| panic!("no tally: {text:?}"));
    line.split(' ').find_map(|f| f.strip_prefix(&format!("{key}="))).unwrap().parse().unwrap()
}

/// The log's strings, by id.
fn strings(log: &Log) -> HashMap<u32, String> {
    log.blocks
        .iter()
        .flat_map(|b| b.events.iter())
        .filter_map(|e| match e {
            Event::DefineString { id, text } => Some((*id, text.clone())),
            _ => None,
        })
        .collect()
}

/// Allocations (with reallocs) and frees whose first frame is in `exe`.
fn program_events(log: &Path, exe: &Path) -> (u64, u64) {
    let log = Log::open(log).unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    let events = || log.blocks.iter().flat_map(|b| b.events.iter());
    let strings = strings(&log);
    let stacks: HashMap<_, _> = events()
        .filter_map(|e| match e {
            Event::DefineStack { id, frames } => Some((*id, frames.first().copied())),
            _ => None,
        })
        .collect();
    let exe = std::fs::canonicalize(exe).unwrap();
    let (base, size) = events()
        .find_map(|e| match e {
            Event::Module { base, size, path, .. } if strings.get(path).is_some_and(|p| Path::new(p) == exe) => {
                Some((*base, *size))
            }
            _ => None,
        })
        .expect("the program in the module map");
    let mine = |stack: &u32| stacks.get(stack).copied().flatten().is_some_and(|f| (base..base + size).contains(&f));
    let (mut allocs, mut frees) = (0, 0);
    for te in merge_by_seq(&log.blocks) {
        match (te.event, te.part) {
            (Event::Alloc { stack, .. }, _) | (Event::Realloc { stack, .. }, Part::ReallocAlloc) => {
                allocs += mine(stack) as u64
            }
            (Event::Free { stack, .. }, _) => frees += mine(stack) as u64,
            _ => {}
        }
    }
    (allocs, frees)
}

/// `leaks --json`: (function, count) of each allocation site live at the end.
fn leak_sites(log: &Path) -> Vec<(String, u64)> {
    let out = replay_cli().args(["leaks", "--json"]).arg(log).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let mut sites = Vec::new();
    for d in v["domains"].as_array().unwrap() {
        for c in d["contexts"].as_array().unwrap() {
            for s in c["sites"].as_array().unwrap() {
                let f = s["site"]["function"].as_str().unwrap_or("?").to_owned();
                sites.push((f, s["count"].as_u64().unwrap()));
            }
        }
    }
    sites
}

fn check_threads(name: &str, flags: &[&str], record_flags: &[&str], runs: usize) {
    let exe = build("threads.c", name, flags);
    for run in 0..runs {
        let (threads, leaked) = (2 + run % 3, 3 + run % 6);
        let log = dir().join(format!("{name}.mrl"));
        let mut args = vec!["-o", log.to_str().unwrap(), "--free-stacks", "on"];
        args.extend_from_slice(record_flags);
        let out = record(&args, &exe, &[&threads.to_string(), &leaked.to_string()]);
        let what = format!("{name} run {run}: {}", stderr(&out));
        assert_eq!(out.status.code(), Some(0), "{what}");
        let text = stdout(&out);
        let (allocs, frees) = program_events(&log, &exe);
        assert_eq!(allocs, tally(&text, "allocs") + tally(&text, "reallocs"), "{what}");
        assert_eq!(frees, tally(&text, "frees"), "{what}");
        let sites = leak_sites(&log);
        let from_leak: u64 = sites.iter().filter(|(f, _)| f == "leak_n_blocks").map(|(_, n)| n).sum();
        assert_eq!(from_leak, leaked as u64, "{what}: {sites:?}");
    }
}

#[test]
fn threads_with_frame_pointers_leak_from_leak_n_blocks() {
    check_threads("threads-fp", &["-O2", "-fno-omit-frame-pointer"], &["--unwind", "fp"], 20);
}

#[test]
fn threads_without_frame_pointers_through_the_unwinder() {
    check_threads("threads-nofp", &["-O2"], &["--unwind", "unwinder", "--depth", "32"], 20);
}

#[test]
fn a_program_without_frame_pointers_gets_whole_stacks_by_default() {
    // GCC at -O2 on x86_64 omits frame pointers: the frame-pointer walk would stop in
    // the program's first frame. `--unwind auto` (the default) takes the unwind tables
    // here (glibc 2.35 or later), so the leaked blocks' stacks reach the C library's
    // frame that called `main`.
    let exe = build("threads.c", "threads-default", &["-O2", "-fomit-frame-pointer"]);
    let log = dir().join("threads-default.mrl");
    let out = record(&["-o", log.to_str().unwrap()], &exe, &["2", "5"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = Log::open(&log).unwrap();
    let events = || log.blocks.iter().flat_map(|b| b.events.iter());
    let strings = strings(&log);
    let libc: Vec<_> = events()
        .filter_map(|e| match e {
            Event::Module { base, size, path, .. } if strings.get(path).is_some_and(|p| p.contains("/libc.so")) => {
                Some(*base..*base + *size)
            }
            _ => None,
        })
        .collect();
    let stacks: HashMap<_, _> = events()
        .filter_map(|e| match e {
            Event::DefineStack { id, frames } => Some((*id, frames.clone())),
            _ => None,
        })
        .collect();
    let leaked: Vec<&Vec<u64>> = events()
        .filter_map(|e| match e {
            Event::Alloc { size: 4242, stack, .. } => stacks.get(stack),
            _ => None,
        })
        .collect();
    assert_eq!(leaked.len(), 5);
    for frames in leaked {
        assert!(
            frames.iter().any(|f| libc.iter().any(|r| r.contains(f))),
            "the stack stops before the C library: {frames:x?}"
        );
    }
}

#[test]
fn the_exit_status_is_passed_through() {
    let exe = build("exit_with.c", "exit_with", &["-O1"]);
    let log = dir().join("exit.mrl");
    let o = log.to_str().unwrap();
    for (args, code) in [(&["exit", "3"][..], 3), (&[][..], 0)] {
        let out = record(&["-o", o], &exe, args);
        assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
        // The recorder finished the log: nothing to warn of.
        assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
        assert!(Log::open(&log).unwrap().report.end.is_some());
    }
    // abort() kills the program before the recorder can end its log: `record` says so.
    let aborted = record(&["-o", o], &exe, &["abort"]);
    assert_eq!(aborted.status.code(), Some(128 + 6), "{}", stderr(&aborted));
    assert!(stderr(&aborted).contains("is cut off (no end-of-log record)"), "{}", stderr(&aborted));
    assert!(Log::open(&log).unwrap().report.end.is_none());
}

/// What `record` said on `out`, and the log at `log`, read whole.
fn said_and_read(out: &Output, log: &Path) -> (String, Log) {
    assert!(out.status.success(), "{}", stderr(out));
    (stderr(out), Log::open(log).unwrap())
}

const REPLACED: &str = "the program replaced itself (exec): its log ends there, finished";

#[test]
fn a_program_that_replaces_itself_with_exec_is_recorded_up_to_the_exec_and_record_says_so() {
    // What a launch script's last line does: the shell execs the program in its place.
    // The shell's log ends there, finished; the program it ran is not recorded (the
    // recorder took itself out of the environment), so it makes no log. The shell tries
    // each `PATH` entry in turn: those that cannot run end nothing.
    for command in ["exec /bin/true", "PATH=/nonexistent:/usr/bin:/bin; exec true"] {
        let log = dir().join("exec-in-place.mrl");
        let out = record(&["-o", log.to_str().unwrap()], Path::new("/bin/sh"), &["-c", command]);
        let (said, read) = said_and_read(&out, &log);
        assert!(
            said.contains(REPLACED) && !said.contains("cut off") && !said.contains("after the log ended"),
            "{command}: {said}"
        );
        assert!(read.report.is_clean() && read.report.end.is_some(), "{command}: {:?}", read.report);
        // The shell's own log: its executable, not /bin/true's.
        let shell = std::fs::canonicalize("/bin/sh").unwrap();
        assert_eq!(Path::new(&read.header.exe_path), shell, "{:?}", read.header);
    }
    // A C program, through `execv` and `execvp`: the allocation before is in the log.
    let exe = build("exec_then.c", "exec_then", &["-O2", "-fno-omit-frame-pointer"]);
    for (how, program) in [("v", "/bin/true"), ("p", "true")] {
        let log = dir().join(format!("exec-{how}.mrl"));
        let out = record(&["-o", log.to_str().unwrap()], &exe, &[how, program]);
        let (said, read) = said_and_read(&out, &log);
        assert!(said.contains(REPLACED) && !said.contains("after the log ended"), "{how}: {said}");
        assert!(read.report.is_clean() && read.report.end.is_some(), "{how}: {:?}", read.report);
        assert!(leak_sites(&log).iter().any(|(f, n)| f == "main" && *n == 1), "{how}: {:?}", leak_sites(&log));
        assert_eq!(stdout(&out), "", "{how}: the exec replaced it");
    }
}

#[test]
fn a_child_of_vfork_that_execs_leaves_the_log_to_its_parent() {
    // The child shares the parent's memory, the library's state included, but not its
    // threads: its exec ends nothing, and the parent records on.
    let exe = build("exec_then.c", "exec_then", &["-O2", "-fno-omit-frame-pointer"]);
    let log = dir().join("exec-vfork.mrl");
    let out = record(&["-o", log.to_str().unwrap()], &exe, &["f", "/bin/true"]);
    let (said, read) = said_and_read(&out, &log);
    assert_eq!(stdout(&out), "child done\n");
    assert!(!said.contains(REPLACED) && !said.contains("after the log ended"), "{said}");
    assert!(read.report.is_clean() && read.report.end.is_some(), "{:?}", read.report);
    assert_eq!(leak_sites(&log).iter().filter(|(f, _)| f == "main").map(|(_, n)| n).sum::<u64>(), 2);
}

#[test]
fn an_exec_that_fails_is_said_and_what_follows_is_counted() {
    let exe = build("exec_then.c", "exec_then", &["-O2", "-fno-omit-frame-pointer"]);
    // Not executable: the exec cannot run, nothing ends, the program records on.
    let log = dir().join("exec-cannot.mrl");
    let not_executable = dir().join("not-executable");
    std::fs::write(&not_executable, "data\n").unwrap();
    let out = record(&["-o", log.to_str().unwrap()], &exe, &["v", not_executable.to_str().unwrap()]);
    let (said, read) = said_and_read(&out, &log);
    assert_eq!(stdout(&out), "exec failed\n");
    assert!(!said.contains(REPLACED) && !said.contains("after the log ended"), "{said}");
    assert!(read.report.is_clean() && read.report.end.is_some(), "{:?}", read.report);
    assert_eq!(leak_sites(&log).iter().filter(|(f, _)| f == "main").map(|(_, n)| n).sum::<u64>(), 2);
    // Executable but no program (no ELF header, no `#!`): the log ended before the exec
    // failed, and the allocation after it is counted, not lost without a word.
    use std::os::unix::fs::PermissionsExt as _;
    let log = dir().join("exec-fails.mrl");
    let no_program = dir().join("no-program");
    std::fs::write(&no_program, "not a program\n").unwrap();
    std::fs::set_permissions(&no_program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = record(&["-o", log.to_str().unwrap()], &exe, &["v", no_program.to_str().unwrap()]);
    let (said, read) = said_and_read(&out, &log);
    assert_eq!(stdout(&out), "exec failed\n");
    assert!(
        said.contains("the program called exec, which failed: its log ended there") && !said.contains(REPLACED),
        "{said}"
    );
    // The allocation after it (and what printing "exec failed" takes).
    assert!(
        said.contains("after the log ended, the program made ") && said.contains("(after the exec that failed)"),
        "{said}"
    );
    assert!(read.report.is_clean() && read.report.end.is_some(), "{:?}", read.report);
}

#[test]
fn the_default_log_is_named_after_the_program() {
    let exe = build("exit_with.c", "exit_with", &["-O1"]);
    let cwd = dir().join("default-name");
    std::fs::create_dir_all(&cwd).unwrap();
    let _ = std::fs::remove_file(cwd.join("exit_with.mrl"));
    library();
    let out = replay_cli().current_dir(&cwd).arg("record").arg("--").arg(&exe).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let log = Log::open(cwd.join("exit_with.mrl")).unwrap();
    assert!(log.report.is_clean());
    let allocs = log.blocks.iter().flat_map(|b| &b.events).filter(|e| matches!(e, Event::Alloc { .. })).count();
    assert!(allocs >= 1, "the program's block");
}

/// Refused with exit status 2 and `why` on stderr, the program not run, no log made.
fn refused(args: &[&str], program: &Path, why: &str) {
    let out = record(args, program, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(why), "{:?} lacks {why:?}", stderr(&out));
    assert!(stdout(&out).is_empty(), "the program ran: {}", stdout(&out));
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    let log = dir().join("bad.mrl");
    let o = log.to_str().unwrap();
    refused(&["-o", o], Path::new("/nonexistent/program"), "no such program");
    refused(&["-o", o], Path::new("no-such-program-anywhere"), "no such program");
    let script = dir().join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    refused(&["-o", o], &script, "not an ELF executable");
    let static_exe = build("exit_with.c", "exit_with_static", &["-O1", "-static"]);
    refused(&["-o", o], &static_exe, "statically linked");
    let dynamic = build("env_dump.c", "env_dump_plain", &["-O1", "-DPLAIN"]);
    refused(&["-o", "/nonexistent-dir/x.mrl"], &dynamic, "cannot write /nonexistent-dir/x.mrl");
    refused(&["-o", dir().to_str().unwrap()], &dynamic, "it is a directory");
    refused(&["-o", o, "--preload", "/nonexistent/libmemreplay.so"], &dynamic, "does not exist");
    for wrong in ["zstd:20", "zstd:0", "gzip", "zstd:", "lz4-columns:3", "zstd-columns:0"] {
        refused(
            &["-o", o, "--compression", wrong],
            &dynamic,
            "lz4, zstd, zstd:LEVEL, lz4-columns, zstd-columns or zstd-columns:LEVEL (a level from 1 to 19)",
        );
    }
}

#[test]
fn a_missing_library_says_how_to_build_it() {
    // A copy of replay-cli alone in a folder: nothing next to it.
    let lonely = dir().join("lonely");
    std::fs::create_dir_all(&lonely).unwrap();
    let cli = lonely.join("replay-cli");
    std::fs::copy(env!("CARGO_BIN_EXE_replay-cli"), &cli).unwrap();
    let exe = build("exit_with.c", "exit_with", &["-O1"]);
    let out = Command::new(&cli)
        .args(["record", "-o"])
        .arg(lonely.join("x.mrl"))
        .arg("--")
        .arg(&exe)
        .env_remove("MEMREPLAY_PRELOAD")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cargo build -p memreplay-capi"), "{}", stderr(&out));
}

#[test]
fn options_reach_the_recorder_and_children_are_not_recorded() {
    // env_dump holds "MEMREPLAY_LOG" as a C string: taken for a Rust program that
    // records itself, so it is not preloaded and sees the variables.
    let exe = build("env_dump.c", "env_dump", &["-O1"]);
    let log = dir().join("env.mrl");
    let out = record(
        &[
            "-o",
            log.to_str().unwrap(),
            "--depth",
            "8",
            "--unwind",
            "unwinder",
            "--compression",
            "zstd:5",
            "--options",
            "flush-ms=5",
        ],
        &exe,
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("LD_PRELOAD=-\n") || !text.contains("libmemreplay"), "{text}");
    assert!(text.contains(&format!("MEMREPLAY_LOG={}\n", std::fs::canonicalize(&log).unwrap().display())), "{text}");
    assert!(text.contains("MEMREPLAY_OPTIONS=depth=8,unwind=unwinder,compression=zstd:5,flush-ms=5\n"), "{text}");
    assert!(stderr(&out).contains("records itself"), "{}", stderr(&out));
    // A C program preloaded: the recorder takes its variables out of the environment
    // once started, so what the program runs is not recorded into the same log. (Its
    // blocks compressed with zstd: the counts are the same.)
    let exe = build("lifecycle.c", "lifecycle", &["-O2"]);
    let log = dir().join("exec.mrl");
    let out = record(&["-o", log.to_str().unwrap(), "--compression", "zstd"], &exe, &["exec"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (allocs, _) = program_events(&log, &exe);
    assert_eq!(allocs, tally(&stderr(&out), "allocs"), "{}", stderr(&out));
    let log = Log::open(&log).unwrap();
    assert!(log.blocks.iter().any(|b| b.frame.compression == Compression::Zstd));
    assert!(log.blocks.iter().all(|b| matches!(b.frame.compression, Compression::Zstd | Compression::None)));
    // The exec'd child allocates 777 bytes: not in the parent's log.
    let sizes: Vec<u64> = log
        .blocks
        .iter()
        .flat_map(|b| &b.events)
        .filter_map(|e| match e {
            Event::Alloc { size, .. } => Some(*size),
            _ => None,
        })
        .collect();
    assert!(!sizes.contains(&777), "the exec'd child was recorded");
    // The same with the blocks' fields in columns (format 1.6): the same counts.
    let log = dir().join("exec-columns.mrl");
    let out = record(&["-o", log.to_str().unwrap(), "--compression", "zstd-columns"], &exe, &["exec"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (allocs, _) = program_events(&log, &exe);
    assert_eq!(allocs, tally(&stderr(&out), "allocs"), "{}", stderr(&out));
    let log = Log::open(&log).unwrap();
    let methods = [Compression::ZstdColumns, Compression::ZstdColumnsSizeDeltas, Compression::Zstd, Compression::None];
    assert!(log.blocks.iter().all(|b| methods.contains(&b.frame.compression)));
}

/// Allocation calls in a heaptrack recording: its size histogram's counts, and those of
/// 72,704 bytes (libstdc++'s emergency exception pool, which heaptrack's own library
/// loads and allocates at start-up; a C++ program shares it, one pool per process).
fn heaptrack_calls(program: &Path, args: &[&str], name: &str) -> (u64, u64) {
    let data = dir().join(format!("heaptrack-{name}"));
    let out = Command::new("heaptrack").arg("-o").arg(&data).arg(program).args(args).output().expect("run heaptrack");
    assert!(out.status.success(), "{}", stderr(&out));
    let histogram = dir().join(format!("heaptrack-{name}.histogram"));
    let mut file = data.clone().into_os_string();
    file.push(".zst");
    let print = Command::new("heaptrack_print").arg("-f").arg(&file).arg("-H").arg(&histogram).output().unwrap();
    assert!(print.status.success(), "{}", stderr(&print));
    let (mut all, mut pool) = (0, 0);
    for line in std::fs::read_to_string(&histogram).unwrap().lines() {
        let mut f = line.split_whitespace().map(|n| n.parse::<u64>().unwrap());
        let (size, count) = (f.next().unwrap(), f.next().unwrap());
        all += count;
        if size == 72_704 {
            pool += count;
        }
    }
    (all, pool)
}

/// Every allocation and realloc call our log knows of, wherever it came from: those
/// recorded, and those counted before recording started (whose blocks still live then
/// are in the log as allocations too: counted once).
fn all_allocations(log: &Path) -> u64 {
    let log = Log::open(log).unwrap();
    let events = || log.blocks.iter().flat_map(|b| &b.events);
    let recorded = events().filter(|e| matches!(e, Event::Alloc { domain: 0, .. } | Event::Realloc { .. })).count();
    let before: u64 = events()
        .map(|e| match *e {
            Event::BeforeStart { allocations, reallocs, live, .. } => allocations + reallocs - live,
            _ => 0,
        })
        .sum();
    recorded as u64 + before
}

#[test]
fn heaptrack_counts_the_same_allocations() {
    if Command::new("heaptrack").arg("--version").output().is_err() {
        eprintln!("heaptrack is not installed: nothing to compare with");
        return;
    }
    let c = build("threads.c", "threads-fp", &["-O2", "-fno-omit-frame-pointer"]);
    let cpp = dir().join("objects");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/capi/tests/preload/objects.cpp");
    assert!(Command::new("c++").args(["-O2", "-g", "-o"]).arg(&cpp).arg(&src).status().unwrap().success());
    for (program, args, name) in [(&c, &["3", "5"][..], "threads"), (&cpp, &[][..], "objects")] {
        let log = dir().join(format!("{name}-vs-heaptrack.mrl"));
        let out = record(&["-o", log.to_str().unwrap()], program, args);
        assert!(out.status.success(), "{}", stderr(&out));
        let ours = all_allocations(&log);
        let (theirs, pool) = heaptrack_calls(program, args, name);
        assert_eq!(pool, 1, "{name}: heaptrack's libstdc++ pool");
        // The C++ program's libstdc++ allocates the pool before our recorder starts: the
        // log has it (counted before the start, and live), and heaptrack counts the same
        // one. The C program has no libstdc++: the pool is heaptrack's library's.
        let theirs_of_the_program = if name == "objects" { theirs } else { theirs - pool };
        assert_eq!(theirs_of_the_program, ours, "{name}: heaptrack counted {theirs}");
    }
}

/// The paths of the log's `MODULE` records.
fn module_paths(log: &Path) -> Vec<String> {
    let log = Log::open(log).unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    let events = || log.blocks.iter().flat_map(|b| b.events.iter());
    let strings = strings(&log);
    events()
        .filter_map(|e| match e {
            Event::Module { path, .. } => strings.get(path).cloned(),
            _ => None,
        })
        .collect()
}

#[test]
fn a_library_dlopened_and_dlclosed_at_once_is_in_the_module_map() {
    // Loaded, used and unloaded within milliseconds, well inside the recorder's periodic
    // rescan (every second): only the scan `dlclose` asks for and waits on sees it.
    let plugin = build("plugin.c", "libplugin.so", &["-shared", "-fPIC", "-O2", "-fno-omit-frame-pointer"]);
    let host = build("plugin_host.c", "plugin_host", &["-O2", "-fno-omit-frame-pointer"]);
    let plugin = std::fs::canonicalize(plugin).unwrap();
    for unwind in ["fp", "unwinder"] {
        let log = dir().join(format!("plugin-{unwind}.mrl"));
        let started = std::time::Instant::now();
        let out = record(&["-o", log.to_str().unwrap(), "--unwind", unwind], &host, &[plugin.to_str().unwrap()]);
        let what = format!("unwind={unwind}: {}", stderr(&out));
        assert!(out.status.success(), "{what}");
        assert_eq!(stdout(&out), "ok\n", "{what}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{what}");
        let paths = module_paths(&log);
        assert!(paths.iter().any(|p| Path::new(p) == plugin), "{what}: no MODULE for {}: {paths:?}", plugin.display());
        // The leak is named from the plugin's file, still on disk.
        let sites = leak_sites(&log);
        let from_plugin: Vec<_> = sites.iter().filter(|(f, _)| f == "plugin_leak").collect();
        assert_eq!(from_plugin, [&("plugin_leak".to_owned(), 1)], "{what}: {sites:?}");
    }
}

/// `replay-cli ARGS` with the limit on open files at `limit`, as a shell's `ulimit`
/// sets it: `-Sn` the soft limit (the hard limit as it is), `-n` both.
fn with_open_file_limit(which: &str, limit: u32, args: &[&str]) -> Output {
    let command = format!("ulimit {which} {limit} && exec \"$0\" \"$@\"");
    Command::new("/bin/sh")
        .args(["-c", &command, env!("CARGO_BIN_EXE_replay-cli")])
        .args(args)
        .output()
        .expect("run /bin/sh")
}

#[test]
fn a_program_of_more_libraries_than_the_soft_open_file_limit_is_symbolized_whole() {
    // The symbolizer keeps each binary it loaded open (it reads DWARF as lookups need
    // it); the commands raise their soft limit to the hard one. 96 copies of a library,
    // each its own file (a link would be loaded once), each leaking a block.
    const COPIES: usize = 96;
    let plugin = build("plugin.c", "libplugin-g.so", &["-shared", "-fPIC", "-O2", "-fno-omit-frame-pointer"]);
    let host = build("plugins_host.c", "plugins_host", &["-O2", "-fno-omit-frame-pointer"]);
    let copies = dir().join("many-plugins");
    let _ = std::fs::remove_dir_all(&copies);
    std::fs::create_dir_all(&copies).unwrap();
    let paths: Vec<String> = (0..COPIES)
        .map(|i| {
            let path = copies.join(format!("libpart{i}.so"));
            std::fs::copy(&plugin, &path).unwrap();
            path.to_str().unwrap().to_owned()
        })
        .collect();
    let args: Vec<&str> = paths.iter().map(String::as_str).collect();
    let log = dir().join("many-plugins.mrl");
    let out = record(&["-o", log.to_str().unwrap()], &host, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ok\n");
    assert_eq!(module_paths(&log).iter().filter(|p| p.contains("/many-plugins/")).count(), COPIES);
    let leaks = |which| {
        let out = with_open_file_limit(which, 48, &["leaks", "--json", "--limit", "0", log.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let mut named = 0;
        for c in v["domains"].as_array().unwrap().iter().flat_map(|d| d["contexts"].as_array().unwrap()) {
            for s in c["sites"].as_array().unwrap() {
                if s["site"]["function"] == "plugin_leak" {
                    named += s["count"].as_u64().unwrap();
                }
            }
        }
        let reasons: Vec<String> =
            v["symbols"]["reasons"].as_array().unwrap().iter().map(|r| r["reason"].as_str().unwrap().into()).collect();
        (named, reasons)
    };
    let (named, reasons) = leaks("-Sn");
    assert_eq!(named, COPIES as u64, "blocks leaked from plugin_leak, named; unnamed: {reasons:?}");
    // Where the limit cannot be raised, the frames left unnamed say why.
    let (named, reasons) = leaks("-n");
    let out_of_files = reasons.iter().filter(|r| *r == "too-many-open-files").count();
    assert!(out_of_files >= COPIES - 48, "at most 48 files open at once: {reasons:?}");
    assert_eq!(named + out_of_files as u64, COPIES as u64, "{reasons:?}");
}

#[test]
fn the_recorded_program_keeps_the_open_file_limit_it_was_given() {
    library();
    let out = with_open_file_limit(
        "-Sn",
        48,
        &["record", "-o", dir().join("ulimit.mrl").to_str().unwrap(), "--", "/bin/sh", "-c", "ulimit -Sn"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "48\n");
}

/// The numbers on `record`'s line about calls after the log ended (allocations, frees,
/// reallocs, bytes asked); zeros without that line.
fn after_the_end(text: &str) -> [u64; 4] {
    let Some(line) = text.lines().find(|l| l.contains("after the log ended")) else { return [0; 4] };
    let numbers: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    numbers[..4].try_into().unwrap_or_else(|_| panic!("{line}"))
}

/// `early.c`, linked with `early_lib.c`'s library (a constructor that allocates before
/// the recorder starts, a destructor that allocates after the log ended).
fn build_early() -> PathBuf {
    let lib = build("early_lib.c", "libearly.so", &["-shared", "-fPIC", "-O2"]);
    let dir = lib.parent().unwrap().to_path_buf();
    let exe = dir.join("early");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/capi/tests/preload/early.c");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(format!("-L{}", dir.display()))
        .arg("-learly")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .status();
    assert!(status.expect("run cc").success(), "cc failed on {}", src.display());
    exe
}

#[test]
fn calls_before_the_start_and_after_the_end_are_counted_and_said() {
    // A C program whose libraries allocate nothing in their destructors: what the C
    // library itself does after the log ended (nothing with glibc 2.36).
    let plain = build("threads.c", "threads-fp", &["-O2", "-fno-omit-frame-pointer"]);
    let out = record(&["-o", dir().join("after-end-plain.mrl").to_str().unwrap()], &plain, &["2", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let baseline = after_the_end(&stderr(&out));

    let exe = build_early();
    let log = dir().join("early.mrl");
    let out = record(&["-o", log.to_str().unwrap()], &exe, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // early_lib.c's destructor, after libmemreplay's: 2 allocations, 2 frees, 1 realloc,
    // 10,099 bytes asked.
    let mut want = baseline;
    for (w, n) in want.iter_mut().zip([2, 2, 1, 10_099]) {
        *w += n;
    }
    assert_eq!(after_the_end(&err), want, "{err}");
    assert!(err.contains("not in the log: counted by libmemreplay"), "{err}");

    // The calls before the start are said by summarize and info, and are no damage.
    let o = replay_cli().arg("summarize").arg(&log).output().unwrap();
    let text = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(text.contains("integrity  complete, no damage; no events lost"), "{text}");
    let before = text.lines().find(|l| l.starts_with("  before     recording started: ")).expect(&text);
    assert!(before.contains("still live at the start, recorded without a callstack"), "{before}");
    let o = replay_cli().args(["summarize", "--json"]).arg(&log).output().unwrap();
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["before_start"]["allocations"].as_u64().unwrap() >= 4, "{}", v["before_start"]);
    assert!(v["before_start"]["live"].as_u64().unwrap() >= 3, "{}", v["before_start"]);
    let o = replay_cli().arg("info").arg(&log).output().unwrap();
    assert!(stdout(&o).contains("before recording started (counted, not recorded one by one; not a loss)"));
    // A CI gate passes on it.
    let budget = dir().join("early-budget.toml");
    std::fs::write(&budget, "[[domain]]\nname = \"heap\"\nmax_peak = \"1 GiB\"\n").unwrap();
    let o = replay_cli().arg("check").arg(&log).arg("--budget").arg(&budget).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
}
