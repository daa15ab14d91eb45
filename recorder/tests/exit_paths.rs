//! How a recorded program ends, each way in a child process: this binary (no test
//! harness, so that a panic really leaves `main`) runs itself again with
//! `MEMREPLAY_TEST_CHILD` naming the ending, and the parent reads the log. Every
//! ending listed in the README's "What the recorder guarantees" is here.

use std::alloc::System;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use memreplay_format::{Event, Log};

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

/// Sizes the parent looks for in the log: made before the ending, and after a signal
/// that the program handles itself.
const BEFORE: usize = 778_001;
const AFTER: usize = 778_002;

/// Set by the program's own signal handler.
static GOT_SIGNAL: AtomicBool = AtomicBool::new(false);
/// The handler a chaining handler replaced.
static PREVIOUS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

extern "C" fn own_handler(_sig: libc::c_int) {
    GOT_SIGNAL.store(true, Ordering::SeqCst);
}

/// Like `signal-hook`: notes the signal, then calls the handler it replaced.
extern "C" fn chaining_handler(sig: libc::c_int) {
    GOT_SIGNAL.store(true, Ordering::SeqCst);
    let previous = PREVIOUS.load(Ordering::SeqCst);
    if previous != libc::SIG_DFL && previous != libc::SIG_IGN {
        // SAFETY: `previous` is the handler function sigaction returned.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(previous) };
        f(sig);
    }
}

fn set_handler(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) -> usize {
    // SAFETY: sigaction with valid, zero-initialized structs.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = handler as libc::sighandler_t;
        act.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(sig, &act, &mut old), 0);
        old.sa_sigaction
    }
}

/// Allocates a block of `size` bytes and keeps it.
fn keep(size: usize) {
    std::mem::forget(std::hint::black_box(vec![1u8; size]));
}

/// Says "ready" to the parent, then waits for a signal the program handles itself.
fn ready_then_wait(handled: bool) {
    println!("ready");
    std::io::stdout().flush().unwrap();
    for _ in 0..1000 {
        std::thread::sleep(Duration::from_millis(10));
        if handled && GOT_SIGNAL.load(Ordering::SeqCst) {
            keep(AFTER);
            return;
        }
    }
    panic!("no signal came");
}

fn child(mode: &str, path: &Path) {
    // A long flush interval: what the log holds at the end was not flushed by chance.
    let config = memreplay::Config::new(path).flush_interval(Duration::from_secs(5));
    match mode {
        "exit" => {
            memreplay::start(config).unwrap();
            keep(BEFORE);
            std::process::exit(3);
        }
        "panic" => {
            memreplay::start(config).unwrap();
            keep(BEFORE);
            panic!("the game gave up");
        }
        "signal" => {
            memreplay::start(config.flush_interval(Duration::from_millis(20))).unwrap();
            keep(BEFORE);
            ready_then_wait(false);
        }
        "own_handler" => {
            set_handler(libc::SIGTERM, own_handler);
            memreplay::start(config.flush_interval(Duration::from_millis(20))).unwrap();
            keep(BEFORE);
            ready_then_wait(true);
        }
        "chaining_handler" => {
            memreplay::start(config.flush_interval(Duration::from_millis(20))).unwrap();
            PREVIOUS.store(set_handler(libc::SIGTERM, chaining_handler), Ordering::SeqCst);
            keep(BEFORE);
            ready_then_wait(true);
        }
        other => panic!("unknown ending {other:?}"),
    }
}

fn main() {
    if let Ok(mode) = std::env::var("MEMREPLAY_TEST_CHILD") {
        child(&mode, Path::new(&std::env::var("MEMREPLAY_TEST_ARG").unwrap()));
        return;
    }
    // `cargo test -- FILTER` runs the endings whose name contains FILTER.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-')).unwrap_or_default();
    let tests: [(&str, fn()); 6] = [
        ("std_process_exit_finishes_the_log", std_process_exit_finishes_the_log),
        ("a_panic_in_main_finishes_the_log", a_panic_in_main_finishes_the_log),
        ("sigterm_finishes_the_log_then_ends_the_process_by_it", || ends_by_signal(libc::SIGTERM)),
        ("sigint_finishes_the_log_then_ends_the_process_by_it", || ends_by_signal(libc::SIGINT)),
        ("a_program_with_its_own_handler_keeps_it", a_program_with_its_own_handler_keeps_it),
        (
            "a_handler_that_chains_to_the_recorders_keeps_its_ending",
            a_handler_that_chains_to_the_recorders_keeps_its_ending,
        ),
    ];
    for (name, test) in tests.iter().filter(|(name, _)| name.contains(&filter)) {
        print!("test {name} ... ");
        std::io::stdout().flush().unwrap();
        test();
        println!("ok");
    }
}

fn run_child(mode: &str) -> (Command, PathBuf) {
    let path = std::env::temp_dir().join(format!("memreplay-exit-{}-{mode}.mrl", std::process::id()));
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.env("MEMREPLAY_TEST_CHILD", mode)
        .env("MEMREPLAY_TEST_ARG", &path)
        .env_remove("MEMREPLAY_LOG")
        .env_remove("MEMREPLAY_OPTIONS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    (c, path)
}

/// The log at `path`, which must be complete (end record, no damage) and hold `sizes`.
fn complete_log_with(path: &Path, sizes: &[usize]) {
    let log = Log::open(path).unwrap();
    std::fs::remove_file(path).ok();
    assert!(log.report.is_clean(), "the log must be finished: {:?}", log.report);
    for &size in sizes {
        let found = log.events().any(|(_, e)| matches!(e, Event::Alloc { size: s, .. } if *s == size as u64));
        assert!(found, "an allocation of {size} bytes is recorded");
    }
}

fn std_process_exit_finishes_the_log() {
    let (mut c, path) = run_child("exit");
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(3), "the program's own exit status");
    complete_log_with(&path, &[BEFORE]);
}

fn a_panic_in_main_finishes_the_log() {
    let (mut c, path) = run_child("panic");
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(101), "a panic in main exits with 101");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the game gave up"), "the default hook prints the panic: {stderr}");
    complete_log_with(&path, &[BEFORE]);
}

/// Starts `mode`, waits for its "ready", sends `sig`; returns its exit status.
fn signal_child(mode: &str, sig: libc::c_int) -> (std::process::ExitStatus, PathBuf) {
    let (mut c, path) = run_child(mode);
    let mut child = c.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    // SAFETY: signals the child this test spawned.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
    (child.wait().unwrap(), path)
}

fn ends_by_signal(sig: libc::c_int) {
    let (status, path) = signal_child("signal", sig);
    assert_eq!(status.signal(), Some(sig), "the process still ends by the signal: {status:?}");
    complete_log_with(&path, &[BEFORE]);
}

fn a_program_with_its_own_handler_keeps_it() {
    let (status, path) = signal_child("own_handler", libc::SIGTERM);
    assert!(status.success(), "the program's handler ran, and the program ended normally: {status:?}");
    complete_log_with(&path, &[BEFORE, AFTER]);
}

fn a_handler_that_chains_to_the_recorders_keeps_its_ending() {
    let (status, path) = signal_child("chaining_handler", libc::SIGTERM);
    assert!(status.success(), "the recorder's handler, called by the program's, does not end it: {status:?}");
    complete_log_with(&path, &[BEFORE, AFTER]);
}
