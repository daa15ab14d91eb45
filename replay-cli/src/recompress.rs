//! `replay-cli recompress`: a log stored again with another compression method, through
//! `memreplay_format::recompress`; here, the files and what is said about them.
//!
//! The new log is written beside its final path and renamed there once complete, so a
//! failure (a full disk, an unreadable log) leaves no partial file behind and never
//! touches an existing one; nor does an interrupt (SIGINT, SIGTERM, SIGHUP), which
//! removes the unfinished file before the process ends as the signal would have ended it.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

use memreplay_format::{recompress, PayloadCompression, RecompressError, Recompressed};

use crate::args::RecompressArgs;
use crate::{CliError, EXIT_DAMAGED};

/// Runs `recompress`; returns the exit status: 0, or 3 when the log is damaged (its damage
/// is kept in the new log as it was, and said on stderr).
pub fn run(a: &RecompressArgs, out: &mut dyn std::io::Write) -> Result<u8, CliError> {
    let usage = CliError::Usage;
    let method = PayloadCompression::from_option(&a.compression)
        .ok_or_else(|| usage(format!("--compression: expected {}", memreplay_format::COMPRESSION_VALUES)))?;
    let input = File::open(&a.log).map_err(|e| usage(format!("cannot read {}: {e}", a.log.display())))?;
    if same_file(&a.log, &a.output) {
        return Err(usage(format!(
            "{} is the log being read: write the recompressed log to another path",
            a.output.display()
        )));
    }
    crate::check_output(&a.output)?;
    let temp = temp_path(&a.output);
    let write_error = |error| CliError::Write { path: a.output.clone(), error };
    let file = File::create(&temp).map_err(write_error)?;
    let _removed_on_interrupt = RemovedOnInterrupt::new(&temp);
    let workers = match a.threads {
        Some(n) => n as usize,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let done =
        recompress(BufReader::with_capacity(1 << 20, input), BufWriter::with_capacity(1 << 20, file), method, workers)
            .and_then(|done| {
                std::fs::rename(&temp, &a.output).map_err(RecompressError::Write)?;
                Ok(done)
            });
    let done = match done {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            return Err(match e {
                RecompressError::Read(e) => usage(format!("{}: {e}", a.log.display())),
                RecompressError::Write(error) => write_error(error),
            });
        }
    };
    crate::print(out, summary(a, &done).as_bytes())?;
    let damage = damage_lines(&done);
    for line in &damage {
        eprintln!("replay-cli: {line}");
    }
    Ok(if damage.is_empty() { 0 } else { EXIT_DAMAGED })
}

/// Whether `a` and `b` name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Where the new log is written until it is complete: beside `output`, hidden.
fn temp_path(output: &Path) -> PathBuf {
    let name = output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    output.with_file_name(format!(".{name}.recompress-{}", std::process::id()))
}

/// While it lives, SIGINT, SIGTERM and SIGHUP (those the process does not ignore) remove
/// the file at its path (the new log, unfinished) before they end the process as they
/// would have. Dropped, it puts back what the signals did before.
struct RemovedOnInterrupt {
    saved: [libc::sigaction; 3],
}

const INTERRUPTS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The path the handler removes (a leaked C string), or null.
static REMOVE_ON_INTERRUPT: std::sync::atomic::AtomicPtr<libc::c_char> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

extern "C" fn remove_and_end(signal: libc::c_int) {
    let path = REMOVE_ON_INTERRUPT.load(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: `unlink`, `signal` and `raise` are async-signal-safe; `path` is null or a C
    // string that is never freed. With the default disposition back, the raised signal
    // ends the process with the status the interrupt would have given it.
    unsafe {
        if !path.is_null() {
            libc::unlink(path);
        }
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

impl RemovedOnInterrupt {
    fn new(path: &Path) -> RemovedOnInterrupt {
        use std::os::unix::ffi::OsStrExt;
        if let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) {
            REMOVE_ON_INTERRUPT.store(c.into_raw(), std::sync::atomic::Ordering::SeqCst);
        }
        // SAFETY: `sigaction` values are plain data, for which all zeroes is valid; the
        // handler is an `extern "C" fn(c_int)` that does only async-signal-safe work.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = remove_and_end as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            let mut saved: [libc::sigaction; 3] = std::mem::zeroed();
            for (signal, old) in INTERRUPTS.iter().zip(&mut saved) {
                libc::sigaction(*signal, std::ptr::null(), old);
                // A signal the process was started ignoring (`nohup`) stays ignored.
                if old.sa_sigaction != libc::SIG_IGN {
                    libc::sigaction(*signal, &action, std::ptr::null_mut());
                }
            }
            RemovedOnInterrupt { saved }
        }
    }
}

impl Drop for RemovedOnInterrupt {
    fn drop(&mut self) {
        // SAFETY: puts back the dispositions `new` found.
        unsafe {
            for (signal, old) in INTERRUPTS.iter().zip(&self.saved) {
                libc::sigaction(*signal, old, std::ptr::null_mut());
            }
        }
        // The path's string is left leaked: a signal being handled on another thread may
        // still read it.
        REMOVE_ON_INTERRUPT.store(std::ptr::null_mut(), std::sync::atomic::Ordering::SeqCst);
    }
}

/// Two lines: what was written, and how much smaller it is.
fn summary(a: &RecompressArgs, d: &Recompressed) -> String {
    let per_event = |bytes: u64| if d.events == 0 { 0.0 } else { bytes as f64 / d.events as f64 };
    let copied = match d.copied_blocks {
        0 => String::new(),
        n => format!(" and {n} damaged blocks copied as they were"),
    };
    format!(
        "{} -> {}: {} blocks of {} events stored with {}{copied} (format 1.{})\n\
         {} -> {} bytes ({:.2} -> {:.2} bytes per event, {:.1} % of the size)\n",
        a.log.display(),
        a.output.display(),
        d.blocks,
        d.events,
        d.method,
        d.version_minor,
        d.bytes_in,
        d.bytes_out,
        per_event(d.bytes_in),
        per_event(d.bytes_out),
        if d.bytes_in == 0 { 0.0 } else { 100.0 * d.bytes_out as f64 / d.bytes_in as f64 },
    )
}

/// What is wrong with the log read, kept as it was in the log written: one line each.
fn damage_lines(d: &Recompressed) -> Vec<String> {
    let mut lines: Vec<String> = d.report.damage.iter().map(|x| format!("damage kept as it was: {x}")).collect();
    if d.report.end.is_none() {
        lines.push("the log has no end-of-log record (the recording was cut off); nor has the new one".into());
    }
    lines
}
