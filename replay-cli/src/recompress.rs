//! `replay-cli recompress`: a log stored again with another compression method, through
//! `memreplay_format::recompress`; here, the files and what is said about them.
//!
//! The new log is written beside its final path and renamed there once complete, so a
//! failure (a full disk, an unreadable log) leaves no partial file behind and never
//! touches an existing one.

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
