//! Whole-process scenarios, each in a child process: this test binary runs itself again
//! with `MEMREPLAY_TEST_CHILD` naming the scenario (recording started only from the
//! environment, a crash, frees of pre-start memory), and the parent reads the log.

use std::alloc::System;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use memreplay_format::{Event, Log};

/// `System`, counting the bytes live through it: the program's and the recorder's.
struct Counting;

static LIVE_BYTES: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

// SAFETY: forwards to `System`, adding up the sizes it hands out and takes back.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: std::alloc::Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's block and layout, passed on.
        unsafe { System.dealloc(p, layout) }
    }
}

#[global_allocator]
static ALLOC: memreplay::Allocator<Counting> = memreplay::Allocator::new(Counting);

/// Sizes the tests look for in the log.
const MARK_A: usize = 777_001;
const MARK_B: usize = 777_002;
/// The block the process-memory scenario holds for a while.
const BIG_BLOCK: usize = 64 << 20;

/// This test binary, set to run only `child_scenario` in scenario `mode` with `arg`.
fn child(mode: &str, arg: &std::path::Path) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["child_scenario", "--exact", "--test-threads=1", "--nocapture"])
        .env("MEMREPLAY_TEST_CHILD", mode)
        .env("MEMREPLAY_TEST_ARG", arg)
        .env_remove("MEMREPLAY_LOG")
        .env_remove("MEMREPLAY_OPTIONS");
    c
}

/// The child side: does nothing unless run by `child`.
#[test]
fn child_scenario() {
    let Ok(mode) = std::env::var("MEMREPLAY_TEST_CHILD") else { return };
    let path = std::env::var("MEMREPLAY_TEST_ARG").unwrap();
    match mode.as_str() {
        // No recorder call at all: MEMREPLAY_LOG started it, exit stops it.
        "env" => {
            let v = vec![1u8; MARK_A];
            std::hint::black_box(&v);
            std::mem::forget(v);
        }
        // Records, lets a worker go idle, then dies without stopping.
        "crash" => {
            memreplay::start(memreplay::Config::new(path).flush_interval(Duration::from_millis(20))).unwrap();
            let _main = memreplay::context!("Crash", "main");
            let keep = vec![2u8; MARK_A];
            std::thread::Builder::new()
                .name("idle worker".into())
                .spawn(|| {
                    let v = vec![3u8; MARK_B];
                    std::hint::black_box(&v);
                    std::mem::forget(v);
                    std::thread::sleep(Duration::from_secs(60));
                })
                .unwrap();
            // Several flush intervals: everything above reaches the file.
            std::thread::sleep(Duration::from_millis(300));
            std::hint::black_box(&keep);
            std::process::abort();
        }
        // Frees memory allocated before recording started.
        "prestart" => {
            let early: Vec<Vec<u8>> = (0..100).map(|i| vec![0u8; 100 + i]).collect();
            memreplay::start(memreplay::Config::new(path)).unwrap();
            drop(early);
            let v = vec![4u8; MARK_A];
            drop(v);
            memreplay::stop().unwrap();
        }
        // Holds 64 MiB, touched, for a while: the OS's figures must show it.
        "memory" => {
            let every = std::env::var("MEMREPLAY_TEST_SAMPLE_MS").unwrap().parse().unwrap();
            let every = (every > 0).then(|| Duration::from_millis(every));
            memreplay::start(memreplay::Config::new(path).process_memory_interval(every)).unwrap();
            std::thread::sleep(Duration::from_millis(30));
            let big = vec![5u8; BIG_BLOCK];
            std::thread::sleep(Duration::from_millis(60));
            drop(big);
            std::thread::sleep(Duration::from_millis(30));
            memreplay::stop().unwrap();
        }
        // Killed the moment `start` returns, before the writer thread ever ran.
        "killed_at_once" => {
            memreplay::start(memreplay::Config::new(path)).unwrap();
            match std::env::var("MEMREPLAY_TEST_SIGNAL").as_deref() {
                // SAFETY: sends a signal to this very process.
                Ok("kill") => unsafe {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                },
                _ => std::process::abort(),
            }
        }
        // Records to a file that cannot be written (`/dev/full`, or a file size limit
        // that plays a disk filling up mid-run), then stops and prints what it says.
        "write_fails" => {
            if let Ok(limit) = std::env::var("MEMREPLAY_TEST_FSIZE") {
                let limit = libc::rlimit { rlim_cur: limit.parse().unwrap(), rlim_max: libc::RLIM_INFINITY };
                // SAFETY: plain calls; past the limit, writes then fail with EFBIG.
                unsafe {
                    libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                    assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
                }
            }
            memreplay::start(memreplay::Config::new(path).flush_interval(Duration::from_millis(10))).unwrap();
            for round in 0..20 {
                let v: Vec<Vec<u8>> = (0..2_000).map(|i| vec![round as u8; 16 + i]).collect();
                std::hint::black_box(&v);
                std::thread::sleep(Duration::from_millis(10));
            }
            // Idle for a while: a writer that gave up must not spin.
            let cpu_before = cpu_time();
            std::thread::sleep(Duration::from_millis(300));
            let cpu = cpu_time() - cpu_before;
            let st = memreplay::stop().unwrap();
            println!(
                "stats events={} lost={} bytes={} cpu_ms={} blocks={}",
                st.events,
                st.lost_events,
                st.bytes,
                cpu.as_millis(),
                st.blocks
            );
        }
        // Threads that come and go, one after another: what stays allocated after them.
        "thread_churn" => {
            let config = memreplay::Config::new(path).flush_interval(Duration::from_millis(10)).encoder_threads(2);
            memreplay::start(config).unwrap();
            // Each thread registers (it allocates) and exits. Its start and its join, on this
            // thread, are not recorded: an encoder keeps room for the most events a stream
            // had between two flushes, which this thread's stream would raise whenever an
            // encoder fell behind (the machine may be busy); what is measured is what the
            // threads leave.
            let churn = |n: usize| {
                for i in 0..n {
                    memreplay::untracked(|| {
                        std::thread::spawn(move || std::hint::black_box(vec![0u8; 64 + i % 64])).join().unwrap()
                    });
                }
                // The encoders take each thread's last buffer and forget its slot.
                std::thread::sleep(Duration::from_millis(200));
            };
            churn(100);
            // The least of a few looks: not one taken while an encoder compresses a block
            // (LZ4's table, up to 16 KiB, lives as long as that).
            let settled = || {
                (0..5)
                    .map(|_| {
                        std::thread::sleep(Duration::from_millis(20));
                        LIVE_BYTES.load(std::sync::atomic::Ordering::Relaxed)
                    })
                    .min()
                    .unwrap()
            };
            let before = settled();
            churn(2000);
            let after = settled();
            memreplay::stop().unwrap();
            println!("grew {}", after - before);
        }
        other => panic!("unknown scenario {other:?}"),
    }
}

/// CPU time used by this process so far (all threads).
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(us(ru.ru_utime) + us(ru.ru_stime))
}

/// The `memreplay:` lines of a child's stderr.
fn said(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.starts_with("memreplay:")).map(str::to_owned).collect()
}

/// The figures a `write_fails` child printed: events, lost events, bytes, CPU ms, blocks.
fn child_stats(out: &std::process::Output) -> [u64; 5] {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("stats ").map(|(_, s)| s))
        .unwrap_or_else(|| panic!("no stats: {stdout}"));
    let v: Vec<u64> = line.split(' ').map(|kv| kv.split_once('=').unwrap().1.parse().unwrap()).collect();
    [v[0], v[1], v[2], v[3], v[4]]
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("memreplay-process-{}-{name}", std::process::id()))
}

fn has_alloc(log: &Log, size: u64) -> bool {
    log.events().any(|(_, e)| matches!(e, Event::Alloc { size: s, .. } if *s == size))
}

#[test]
fn environment_variable_starts_recording_and_exit_stops_it() {
    let path = temp("env.mrl");
    let status = child("env", &path)
        .env("MEMREPLAY_LOG", &path)
        .env("MEMREPLAY_OPTIONS", "callstacks=off,usage=off,encoders=3")
        .status()
        .unwrap();
    assert!(status.success());
    let log = Log::open(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(log.report.is_clean(), "exit must end the log cleanly: {:?}", log.report);
    assert!(has_alloc(&log, MARK_A as u64));
    assert_eq!(log.header.flags, 0, "options from MEMREPLAY_OPTIONS");
}

#[test]
fn bad_environment_options_do_not_start_recording_and_say_why() {
    let path = temp("bad-env.mrl");
    let missing_dir = temp("no-such-dir").join("x.mrl");
    let options =
        "callstacks, free-callstacks, usage, depth, unwind, flush-ms, buffer-mib, memory-ms, encoders, compression";
    let cases = [
        (&path, "depht=32", format!("MEMREPLAY_OPTIONS: unknown option `depht` (options: {options})")),
        (&path, "depth=500", "MEMREPLAY_OPTIONS: depth takes a number of frames from 1 to 64, not `500`".into()),
        (&path, "unwind=dwarf", "MEMREPLAY_OPTIONS: unwind takes fp or unwinder, not `dwarf`".into()),
        (
            &path,
            "encoders=-1",
            "MEMREPLAY_OPTIONS: encoders takes a number of threads from 0 (one per core) to 64, not `-1`".into(),
        ),
        (&path, "callstacks", format!("MEMREPLAY_OPTIONS: `callstacks` is not key=value (options: {options})")),
        (
            &missing_dir,
            "",
            format!("cannot create the log file: {}: No such file or directory (os error 2)", missing_dir.display()),
        ),
    ];
    for (log, options, why) in cases {
        let out = child("env", log).env("MEMREPLAY_LOG", log).env("MEMREPLAY_OPTIONS", options).output().unwrap();
        assert!(out.status.success(), "the program itself runs on ({options})");
        assert!(!log.exists(), "no log is started ({options})");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said: Vec<&str> = stderr.lines().filter(|l| l.starts_with("memreplay:")).collect();
        assert_eq!(said, [format!("memreplay: MEMREPLAY_LOG is set but nothing is recorded: {why}")], "{options}");
    }
}

#[test]
fn a_crash_loses_at_most_the_last_flush_interval() {
    let path = temp("crash.mrl");
    let status = child("crash", &path).output().unwrap().status;
    assert!(!status.success(), "the child aborts");
    let log = Log::open(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(log.report.end.is_none(), "a crashed log has no end-of-log record");
    assert!(has_alloc(&log, MARK_A as u64), "the main thread's events were flushed");
    assert!(has_alloc(&log, MARK_B as u64), "the idle worker's events were collected and flushed");
    let strings: Vec<&str> = log
        .events()
        .filter_map(|(_, e)| match e {
            Event::DefineString { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(strings.contains(&"idle worker"), "thread names: {strings:?}");
}

#[test]
fn a_process_killed_as_start_returns_leaves_a_readable_log() {
    for signal in ["abort", "kill"] {
        let path = temp(&format!("killed-at-once-{signal}.mrl"));
        let mut c = child("killed_at_once", &path);
        let child = c.env("MEMREPLAY_TEST_SIGNAL", signal).stdout(std::process::Stdio::null()).spawn().unwrap();
        let pid = child.id();
        let status = child.wait_with_output().unwrap().status;
        assert!(!status.success(), "the child dies ({signal})");
        let log = Log::open(&path).unwrap_or_else(|e| panic!("{signal}: {e}"));
        std::fs::remove_file(&path).ok();
        assert_eq!(log.header.pid, u64::from(pid), "{signal}: the header is on disk");
        assert_eq!(log.header.flags & memreplay_format::header_flags::CALLSTACKS_ON_ALLOC, 1, "{signal}: options");
        assert!(log.report.end.is_none(), "{signal}: no end record");
        let modules = log.events().filter(|(_, e)| matches!(e, Event::Module { .. })).count();
        assert!(modules >= 1, "{signal}: the module map is on disk");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn an_unwritable_log_is_said_once_and_the_program_runs_on() {
    // Through `start`: every event is counted as lost, and the writer does not spin.
    let out = child("write_fails", std::path::Path::new("/dev/full")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        said(&out),
        ["memreplay: cannot flush the log /dev/full: No space left on device (os error 28); recording stops writing: \
          0 events (0 bytes) were written, later events are counted as lost"]
    );
    let [events, lost, bytes, cpu_ms, blocks] = child_stats(&out);
    assert_eq!((events, blocks, bytes), (0, 0, 0), "nothing reached the file");
    assert!(lost >= 40_000, "the 40,000 allocations (and their frees) are lost: {lost}");
    assert!(cpu_ms < 100, "{cpu_ms} ms of CPU in 300 ms asleep: the writer must not spin");

    // Through MEMREPLAY_LOG: the same line, and the program's own exit status.
    let out = child("env", std::path::Path::new("/dev/full")).env("MEMREPLAY_LOG", "/dev/full").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        said(&out),
        ["memreplay: cannot flush the log /dev/full: No space left on device (os error 28); recording stops writing: \
          0 events (0 bytes) were written, later events are counted as lost"]
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_disk_that_fills_mid_run_is_said_once_and_the_log_reads_as_cut_off() {
    let path = temp("disk-full.mrl");
    // A file size limit plays the full disk: writes past 48 KiB fail (EFBIG).
    let out = child("write_fails", &path).env("MEMREPLAY_TEST_FSIZE", "49152").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let [events, lost, bytes, _, blocks] = child_stats(&out);
    let said = said(&out);
    assert_eq!(said.len(), 1, "{said:?}");
    // What failed (a block's write or a flush, as the buffer filled), which path, and
    // what reached the file at the last flush.
    let rest = ["write", "flush"]
        .iter()
        .find_map(|what| {
            said[0].strip_prefix(&format!(
                "memreplay: cannot {what} the log {}: File too large (os error 27); recording stops writing: {events} \
                 events (",
                path.display()
            ))
        })
        .unwrap_or_else(|| panic!("{said:?}"));
    let (flushed, tail) = rest.split_once(' ').unwrap();
    assert_eq!(tail, "bytes) were written, later events are counted as lost");
    assert!(flushed.parse::<u64>().unwrap() <= 49152, "{flushed}");
    assert!(events > 0 && lost > 0, "{events} written, {lost} lost");
    assert_eq!(bytes, 49152, "the file holds what fit");
    let log = Log::open(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(log.report.end.is_none(), "no end record: the log reads as cut off");
    assert!(log.report.bytes_lost() > 0, "the cut block is reported: {:?}", log.report);
    // Every event said written is in the file; at most those said lost are missing.
    let read = log.events().filter(|(_, e)| !matches!(e, Event::Time { .. })).count() as u64;
    let read_all = log.events().count() as u64;
    assert!(log.report.blocks >= blocks, "every block said written is read: {} of {blocks}", log.report.blocks);
    assert!(read_all >= events && read <= events + lost, "read {read_all}, written {events}, lost {lost}");
}

#[test]
fn frees_of_memory_allocated_before_start_are_recorded_and_harmless() {
    let path = temp("prestart.mrl");
    let status = child("prestart", &path).status().unwrap();
    assert!(status.success());
    let log = Log::open(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(log.report.is_clean());
    let allocated: std::collections::HashSet<u64> = log
        .events()
        .filter_map(|(_, e)| match e {
            Event::Alloc { addr, .. } => Some(*addr),
            _ => None,
        })
        .collect();
    let untracked_frees =
        log.events().filter(|(_, e)| matches!(e, Event::Free { addr, .. } if !allocated.contains(addr))).count();
    assert!(untracked_frees >= 100, "the 100 pre-start blocks are freed: {untracked_frees}");
    assert!(has_alloc(&log, MARK_A as u64));
}

/// The `ProcessMemory` samples of a log, in order.
fn process_samples(log: &Log) -> Vec<(u32, u64, u64, u64)> {
    log.events()
        .filter_map(|(t, e)| match *e {
            Event::ProcessMemory { time, resident, committed } => Some((t, time, resident, committed)),
            _ => None,
        })
        .collect()
}

#[cfg(target_os = "linux")]
#[test]
fn the_writer_samples_process_memory_and_sees_a_big_block() {
    let path = temp("memory.mrl");
    let status = child("memory", &path).env("MEMREPLAY_TEST_SAMPLE_MS", "5").status().unwrap();
    assert!(status.success());
    let log = Log::open(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(log.report.is_clean(), "{:?}", log.report);
    let samples = process_samples(&log);
    // 120 ms at 5 ms: about 24, whatever the scheduling, and at least one at the start
    // and one at the stop.
    assert!(samples.len() >= 8, "{} samples", samples.len());
    assert!(samples.iter().all(|s| s.0 == 0), "samples go to the metadata stream");
    assert!(samples.windows(2).all(|w| w[0].1 <= w[1].1), "in time order");
    let (first, last) = (samples[0], samples[samples.len() - 1]);
    let max_resident = samples.iter().map(|s| s.2).max().unwrap();
    let max_committed = samples.iter().map(|s| s.3).max().unwrap();
    // The touched 64 MiB is resident and committed while held, and gone after.
    let big = BIG_BLOCK as u64;
    assert!(max_resident >= first.2 + big - (4 << 20), "resident {} -> max {max_resident}", first.2);
    assert!(max_committed >= first.3 + big - (4 << 20), "committed {} -> max {max_committed}", first.3);
    assert!(last.2 + big / 2 < max_resident, "freed: resident {} vs max {max_resident}", last.2);
    assert_eq!(log.header.version_minor, memreplay_format::VERSION_MINOR);
}

#[test]
fn process_memory_sampling_can_be_turned_off() {
    let path = temp("memory-off.mrl");
    let status = child("memory", &path).env("MEMREPLAY_TEST_SAMPLE_MS", "0").status().unwrap();
    assert!(status.success());
    let log = Log::open(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(has_alloc(&log, BIG_BLOCK as u64));
    assert_eq!(process_samples(&log), []);
}

#[test]
fn threads_that_come_and_go_leave_nothing_allocated_behind() {
    // 2,000 threads, each registered with the recorder (its state, its slot) and gone:
    // the process holds no more memory afterwards than before them.
    let path = temp("churn.mrl");
    let out = child("thread_churn", &path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let grew: i64 =
        stdout.lines().find_map(|l| l.split("grew ").nth(1)).unwrap_or_else(|| panic!("{stdout}")).parse().unwrap();
    // What stays of a thread is a pointer in its encoder's index of streams (thread ids
    // are never reused): 8 bytes, × 2 for the vectors' spare capacity (each of the two
    // encoders' grows from 64 slots to 2,048 here: 31.7 KB). Measured 32.0-35.4 KB. A
    // slot for every thread in each encoder's index made 51-55 KB; a thread's state
    // (~110 bytes) and its stream's (~1.8 KiB), kept, made 3.6 MB.
    assert!(grew < 2000 * 22, "{grew} bytes more after 2000 threads");
    let _ = std::fs::remove_file(path);
}
