//! `replay-cli record [OPTIONS] -- PROGRAM ARGS...`: runs a program under the recorder.
//!
//! A C or C++ program (any dynamically linked program) runs with `libmemreplay.so`
//! preloaded (`LD_PRELOAD`), which records the C library's `malloc` family into
//! `MEMREPLAY_LOG` (`crates/capi/src/preload.rs`). A Rust program built with memreplay's
//! `capture_replay_log` records itself: it reads `MEMREPLAY_LOG` at its first allocation.
//! Preloading it too would run two recorders into one log (its `Allocator` calls its own
//! copy, and its `System` calls reach the preloaded `malloc`, the other copy), so for
//! such a program (its file holds a line only the recorder has,
//! [`RUST_RECORDER_MARK_REVERSED`])
//! only the variables are set.
//!
//! Children: the preloaded recorder takes its variables and its `LD_PRELOAD` entry out
//! of the environment once started, so what the program executes is not recorded, and a
//! child of `fork` records nothing. One log, of the program itself. A program that
//! replaces itself with `exec` has its log finished by the library first, which notes it
//! in the shared counts below ([`AfterEnd`]), and this command says so (or that the exec
//! failed, and the program ran on). An exec the library does not see (`execl`, `execlp`,
//! `execle`) leaves the log cut off: once the program has exited, this command reads the
//! log's frames and warns when the end-of-log record is missing.
//!
//! Calls after the log ended: the library's destructor ends the log, and the destructors
//! of the libraries initialised before it (libstdc++'s, the C library's) run later. The
//! library counts what they allocate and free in shared memory this command passes
//! (a memfd, its descriptor number in `MEMREPLAY_AFTER_END_FD`, [`AfterEnd`]), and
//! this command says how many there were once the program has exited.
//!
//! Everything that can be checked is checked before the program runs (exit status 2):
//! the program exists and is an ELF executable for this machine with a program
//! interpreter (a static executable cannot be preloaded), the library is found, the log
//! can be created. Then the program's exit status is passed through; a program killed by
//! signal N exits 128 + N, as shells say.

use std::ffi::{OsStr, OsString};
use std::os::fd::AsRawFd as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};

use crate::args::RecordArgs;
use crate::CliError;

/// What the recorder's copy in a Rust program holds, backwards: the start of the line its
/// `auto_start_once` (`recorder/src/imp/mod.rs`, reached from every allocation) says when
/// `MEMREPLAY_LOG` cannot be honoured. Only a build with `capture_replay_log` has it; a
/// C program that merely reads the variable does not. Kept backwards so that `replay-cli`
/// itself does not hold it.
const RUST_RECORDER_MARK_REVERSED: &[u8] = b"dedrocer si gnihton tub tes si GOL_YALPERMEM :yalpermem";

/// Whether `bytes` (a program's file) holds the recorder ([`RUST_RECORDER_MARK_REVERSED`]).
fn holds_the_recorder(bytes: &[u8]) -> bool {
    let mark: Vec<u8> = RUST_RECORDER_MARK_REVERSED.iter().rev().copied().collect();
    bytes.windows(mark.len()).any(|w| w == mark.as_slice())
}

/// What kind of program `record` runs.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// Dynamically linked: the library is preloaded.
    Dynamic,
    /// A Rust program with its own recorder: only the variables are set.
    RecordsItself,
}

/// Runs `record`; returns the program's exit status.
pub fn run(a: &RecordArgs) -> Result<u8, CliError> {
    let usage = CliError::Usage;
    let (program, args) = a.command.split_first().ok_or_else(|| usage("record: no program to run".into()))?;
    let path = find_program(program)?;
    let target = inspect(&path)?;
    let preload = match target {
        Target::Dynamic => Some(find_library(a.preload.as_deref())?),
        Target::RecordsItself => None,
    };
    let output = match &a.output {
        Some(o) => o.clone(),
        None => {
            let mut name = path.file_name().unwrap_or(OsStr::new("program")).to_os_string();
            name.push(".mrl");
            PathBuf::from(name)
        }
    };
    if output.is_dir() {
        return Err(usage(format!("record: cannot write {}: it is a directory", output.display())));
    }
    std::fs::File::create(&output).map_err(|e| usage(format!("record: cannot write {}: {e}", output.display())))?;
    // The log's path as the program sees it, whatever directory it changes to.
    let output = std::fs::canonicalize(&output).unwrap_or(output);
    let options = a.recorder_options(caches_unwind_rules());

    // Where the preloaded library counts the calls made after the log ended.
    let after_end = preload.as_ref().and_then(|_| AfterEnd::new());
    let mut cmd = std::process::Command::new(&path);
    cmd.arg0(program).args(args).env("MEMREPLAY_LOG", &output);
    if options.is_empty() {
        cmd.env_remove("MEMREPLAY_OPTIONS");
    } else {
        cmd.env("MEMREPLAY_OPTIONS", &options);
    }
    match &preload {
        Some(lib) => {
            // Ahead of whatever the caller preloads already.
            let mut list = lib.as_os_str().to_os_string();
            if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
                list.push(":");
                list.push(old);
            }
            cmd.env("LD_PRELOAD", list);
            if let Some(a) = &after_end {
                cmd.env("MEMREPLAY_AFTER_END_FD", a.fd.as_raw_fd().to_string());
            }
        }
        None => eprintln!(
            "replay-cli: {} records itself (built with memreplay's capture_replay_log): not preloading",
            path.display()
        ),
    }
    // While the program runs, Ctrl-C and SIGTERM are for it (its recorder ends the log
    // and re-raises them): this process waits and reports what became of it.
    let ignored = ignore_signals();
    // The counts' descriptor, if any, is made inheritable in the child only: this
    // process's other children never get it.
    let inherit = after_end.as_ref().map(|a| a.fd.as_raw_fd());
    // SAFETY: the closure runs in the child between fork and exec, and only calls
    // `signal` and `fcntl`, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            if let Some(fd) = inherit {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let status = cmd.status();
    restore_signals(ignored);
    let status = status.map_err(|e| usage(format!("cannot run {}: {e}", path.display())))?;
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.saturating_add(sig as u8),
        (None, None) => 1,
    };
    match std::fs::metadata(&output) {
        Ok(m) if m.len() > 0 => {
            eprintln!("replay-cli: recorded {} into {} ({} bytes)", path.display(), output.display(), m.len());
            if ends_with_its_record(&output) == Some(false) {
                eprintln!(
                    "replay-cli: warning: {} is cut off (no end-of-log record): the program ended without \
                     finishing its recording, by _exit, a signal it cannot catch (abort, SIGKILL), or an exec \
                     not seen (through execl, execlp or execle, or in a Rust program that records itself); \
                     reports read what was written and say what was lost",
                    output.display()
                );
            }
        }
        _ => eprintln!(
            "replay-cli: warning: {} is empty: the program recorded nothing (it may have ended before its \
             first allocation, or not read MEMREPLAY_LOG)",
            output.display()
        ),
    }
    let counts = after_end.and_then(|a| a.read()).filter(|c| c.attached);
    match counts.as_ref().map(|c| c.exec) {
        Some(Exec::Replaced) => eprintln!(
            "replay-cli: the program replaced itself (exec): its log ends there, finished; what the exec ran \
             is not recorded (record that program itself)"
        ),
        Some(Exec::Failed) => eprintln!(
            "replay-cli: the program called exec, which failed: its log ended there, finished, and the \
             program ran on"
        ),
        _ => {}
    }
    if let Some(line) = counts.and_then(|c| c.line()) {
        eprintln!("replay-cli: {line}");
    }
    Ok(code)
}

/// Whether the log at `path` ends with its end-of-log record, read frame by frame
/// without decoding a block; `None` if it cannot be read as a log at all.
fn ends_with_its_record(path: &Path) -> Option<bool> {
    let file = std::fs::File::open(path).ok()?;
    let mut reader = memreplay_format::LogReader::new(file).ok()?;
    while reader.next_frame().ok()?.is_some() {}
    Some(reader.report().end.is_some())
}

/// The counts the preloaded library keeps of the calls made after the log ended: shared
/// memory (a memfd) laid out as `crates/capi/src/preload.rs`'s `AfterEnd`, six `u64` in
/// native byte order: `attached` (1 once the library counts there), `allocations`,
/// `frees`, `reallocs`, `bytes`, `exec` (1 if the log was ended for an exec, 2 if that
/// exec then failed).
struct AfterEnd {
    fd: std::os::fd::OwnedFd,
}

/// What [`AfterEnd`] holds once the program has exited.
#[derive(Debug, PartialEq, Eq)]
struct AfterEndCounts {
    attached: bool,
    allocations: u64,
    frees: u64,
    reallocs: u64,
    bytes: u64,
    exec: Exec,
}

/// Whether the library ended the log for an exec (`AfterEnd`'s sixth word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exec {
    /// It did not.
    No,
    /// It did, and the exec replaced the program (or killed it: the library cannot tell).
    Replaced,
    /// It did, and the exec failed: the program ran on.
    Failed,
}

impl AfterEnd {
    /// A page of zeros, or `None` where no memfd can be made (then nothing is counted).
    fn new() -> Option<AfterEnd> {
        use std::os::fd::FromRawFd as _;
        // SAFETY: a constant C string; the descriptor returned is checked and owned.
        let fd = unsafe { libc::memfd_create(c"memreplay-after-end".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` was just made and is owned by nothing else.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        // SAFETY: sizes the memfd just made to one page.
        (unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) } == 0).then_some(AfterEnd { fd })
    }

    fn read(&self) -> Option<AfterEndCounts> {
        let mut words = [0u64; 6];
        let len = std::mem::size_of_val(&words);
        // SAFETY: reads at most `len` bytes into `words`, which has room for them.
        let n = unsafe { libc::pread(self.fd.as_raw_fd(), words.as_mut_ptr().cast(), len, 0) };
        (n == len as isize).then(|| {
            let [attached, allocations, frees, reallocs, bytes, exec] = words;
            let exec = match exec {
                1 => Exec::Replaced,
                2 => Exec::Failed,
                _ => Exec::No,
            };
            AfterEndCounts { attached: attached == 1, allocations, frees, reallocs, bytes, exec }
        })
    }
}

impl AfterEndCounts {
    /// The line `record` says, if the library counted anything.
    fn line(&self) -> Option<String> {
        if !self.attached || self.allocations + self.frees + self.reallocs == 0 {
            return None;
        }
        let n = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        let after = match self.exec {
            Exec::Failed => "after the exec that failed",
            Exec::Replaced => "its other threads, until the exec replaced it",
            Exec::No => "the destructors of libraries initialised before it, the C library's clean-up",
        };
        Some(format!(
            "after the log ended, the program made {}, {} and {} ({} bytes asked), not in the log: \
             counted by libmemreplay ({after})",
            n(self.allocations, "allocation"),
            n(self.frees, "free"),
            n(self.reallocs, "realloc"),
            self.bytes
        ))
    }
}

/// `program` as a path: itself if it names a directory part, else found in `PATH`.
fn find_program(program: &OsStr) -> Result<PathBuf, CliError> {
    let not_found = || CliError::Usage(format!("record: {}: no such program", Path::new(program).display()));
    if program.as_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        return if p.is_file() { Ok(p) } else { Err(not_found()) };
    }
    let paths = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt as _;
            p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(not_found)
}

/// Reads `path`'s ELF header and program headers: a dynamically linked x86_64 executable,
/// or a Rust program with its own recorder; anything else is refused with the reason.
fn inspect(path: &Path) -> Result<Target, CliError> {
    let name = path.display();
    let bytes = std::fs::read(path).map_err(|e| CliError::Usage(format!("record: cannot read {name}: {e}")))?;
    let refuse = |why: &str| Err(CliError::Usage(format!("record: {name}: {why}")));
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return refuse("not an ELF executable (for a script, record the program it runs)");
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return refuse("not a 64-bit little-endian ELF file");
    }
    let u16_at = |o: usize| bytes.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| bytes.get(o..o + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()));
    let u64_at = |o: usize| bytes.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
    const EM_X86_64: u16 = 62;
    if u16_at(18) != Some(EM_X86_64) || !cfg!(target_arch = "x86_64") {
        return refuse("not an x86_64 program: libmemreplay records x86_64 Linux programs only");
    }
    if !matches!(u16_at(16), Some(2 | 3)) {
        return refuse("not an executable (an ELF object file or core dump?)");
    }
    if holds_the_recorder(&bytes) {
        return Ok(Target::RecordsItself);
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(32), u16_at(54), u16_at(56)) else {
        return refuse("a damaged ELF header");
    };
    const PT_INTERP: u32 = 3;
    let has_interp = (0..phnum as usize)
        .filter_map(|i| (phoff as usize).checked_add(i * phentsize as usize))
        .any(|o| u32_at(o) == Some(PT_INTERP));
    if !has_interp {
        return refuse(
            "statically linked (no program interpreter): the dynamic loader never runs, so no library can be \
             preloaded into it; link it dynamically, or build it with memreplay's C API",
        );
    }
    Ok(Target::Dynamic)
}

/// The library to preload: `--preload`, else `MEMREPLAY_PRELOAD`, else next to this
/// executable.
fn find_library(flag: Option<&Path>) -> Result<PathBuf, CliError> {
    let chosen = flag.map(Path::to_path_buf).or_else(|| std::env::var_os("MEMREPLAY_PRELOAD").map(PathBuf::from));
    if let Some(lib) = chosen {
        return match std::fs::canonicalize(&lib) {
            Ok(p) if p.is_file() => Ok(p),
            _ => Err(CliError::Usage(format!("record: the library to preload, {}, does not exist", lib.display()))),
        };
    }
    let exe = std::env::current_exe().map_err(|e| CliError::Usage(format!("record: where am I? {e}")))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    // `target/<profile>/deps/` for a test binary: the library is one up.
    for d in [dir, dir.parent().unwrap_or(dir)] {
        let lib = d.join("libmemreplay.so");
        if lib.is_file() {
            return Ok(lib);
        }
    }
    Err(CliError::Usage(format!(
        "record: libmemreplay.so is not next to {} (build it with `cargo build -p memreplay-capi`, with \
         --release for a release replay-cli), and neither --preload nor MEMREPLAY_PRELOAD names it",
        exe.display()
    )))
}

/// Previous dispositions of SIGINT and SIGTERM.
type Saved = [libc::sighandler_t; 2];

fn ignore_signals() -> Saved {
    // SAFETY: sets the dispositions of two signals of this process to "ignore".
    unsafe { [libc::signal(libc::SIGINT, libc::SIG_IGN), libc::signal(libc::SIGTERM, libc::SIG_IGN)] }
}

fn restore_signals(saved: Saved) {
    // SAFETY: puts back the dispositions `ignore_signals` returned.
    unsafe {
        libc::signal(libc::SIGINT, saved[0]);
        libc::signal(libc::SIGTERM, saved[1]);
    }
}

/// Whether the recorder caches unwind rules here (`unwind=unwinder` is then about as fast
/// as the frame-pointer walk): x86_64 Linux with glibc 2.35 or later, whose
/// `_dl_find_object` it needs. The program runs with this process's C library.
fn caches_unwind_rules() -> bool {
    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    {
        // SAFETY: gnu_get_libc_version returns a static string.
        let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
        let mut parts = version.to_str().unwrap_or("").split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        (major, minor) >= (2, 35)
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_says_how_to_build_it() {
        let e = find_library(Some(Path::new("/nonexistent/libmemreplay.so"))).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
    }

    #[test]
    fn only_the_recorder_holds_the_mark() {
        // The test binary (this module's code included) is a dynamically linked Rust
        // program without the recorder.
        let me = std::env::current_exe().unwrap();
        assert_eq!(inspect(&me).unwrap(), Target::Dynamic);
        // The line as the recorder holds it (made here, or this binary would hold it).
        let mut line = b"..".to_vec();
        line.extend(RUST_RECORDER_MARK_REVERSED.iter().rev());
        line.extend(b": ..");
        assert!(holds_the_recorder(&line));
        assert!(String::from_utf8_lossy(&line).contains("MEMREPLAY_LOG is set but nothing"));
        assert!(!holds_the_recorder(b"MEMREPLAY_LOG\0"));
    }

    /// The line about calls after the end names what made them, by how the log ended.
    #[test]
    fn calls_after_the_end_are_said_with_their_cause() {
        let counts = |exec| AfterEndCounts { attached: true, allocations: 1, frees: 0, reallocs: 0, bytes: 64, exec };
        let cause = |exec| {
            let line = counts(exec).line().unwrap();
            assert!(
                line.starts_with(
                    "after the log ended, the program made 1 allocation, 0 frees and 0 reallocs (64 bytes asked)"
                ),
                "{line}"
            );
            line.rsplit_once('(').unwrap().1.trim_end_matches(')').to_owned()
        };
        assert_eq!(cause(Exec::No), "the destructors of libraries initialised before it, the C library's clean-up");
        assert_eq!(cause(Exec::Replaced), "its other threads, until the exec replaced it");
        assert_eq!(cause(Exec::Failed), "after the exec that failed");
        let none = AfterEndCounts { allocations: 0, bytes: 0, ..counts(Exec::Failed) };
        assert_eq!(none.line(), None, "nothing counted: nothing said");
    }
}
