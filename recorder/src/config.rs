//! What to record and where: [`Config`], built in code or read from the environment.

use std::path::PathBuf;
use std::time::Duration;

use memreplay_format::{PayloadCompression, COMPRESSION_VALUES, ZSTD_LEVELS};

/// How callstacks are captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackCapture {
    /// Walk the frame-pointer chain: about 13 ns for 16 frames, no allocation, no lock.
    /// Needs frame pointers (`RUSTFLAGS="-C force-frame-pointers=yes"`); without them
    /// stacks come out short. x86_64 and aarch64 only.
    FramePointers,
    /// Follow the code's unwind tables (`.eh_frame`): correct without frame pointers. On
    /// x86_64 Linux with glibc 2.35 or later each thread caches the rule of every return
    /// address it meets (about 30 KiB a thread): a 16-frame stack costs about 150 ns
    /// (2.4 times the frame-pointer walk's instructions), with no lock and no
    /// allocation. A frame it cannot follow (generated code, no unwind table, a signal
    /// frame), and every capture elsewhere, goes to the platform unwinder
    /// (`_Unwind_Backtrace`): about 100 ns a frame, and on an older glibc not safe in
    /// code that allocates while holding the dynamic loader's lock (dlopen).
    Unwinder,
}

impl StackCapture {
    /// Frame pointers where the walk is implemented, the unwinder elsewhere.
    pub const fn platform_default() -> Self {
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            StackCapture::FramePointers
        } else {
            StackCapture::Unwinder
        }
    }
}

/// A recording session's settings. `Config::new(path)` records allocations with
/// 16-frame callstacks, no free callstacks, and usage changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The log file to create (overwritten if it exists).
    pub path: PathBuf,
    /// Capture a callstack for every allocation.
    pub callstacks_on_alloc: bool,
    /// Capture a callstack for every free (MemReplay's `REPLAY_RECORD_FREECS`).
    pub callstacks_on_free: bool,
    /// Record container usage changes ([`usage`](crate::usage)).
    pub usage_changes: bool,
    /// Most frames a callstack keeps (1..=64).
    pub max_stack_depth: usize,
    pub stack_capture: StackCapture,
    /// How often the writer collects idle threads' events and flushes the file: the most
    /// a crash can lose of a thread that stopped allocating.
    pub flush_interval: Duration,
    /// Memory for event buffers, in bytes: the cap on what the recorder holds in flight.
    /// When the writer falls behind, allocating threads wait for it (never drop events).
    pub buffer_memory: usize,
    /// How often the writer thread samples what the OS sees of the process (resident and
    /// committed memory), so reports can set tracked memory against it; `None`: never.
    /// Linux only (elsewhere nothing is sampled). A sample costs the writer one `pread` of
    /// `/proc/self/statm`, a few microseconds.
    pub process_memory_interval: Option<Duration>,
    /// Threads that encode, compress and write the log: 0 (the default) for one per core
    /// (at most [`AUTO_ENCODER_THREADS`]), 1 for the writer thread alone. Each recorded
    /// thread's events go to one encoder (thread id mod n), so a program with many
    /// allocating threads does not wait for a single writer. If the OS refuses to start
    /// one, `start` fails.
    pub encoder_threads: usize,
    /// How the encoders compress each block: LZ4 (the default), or zstd, which keeps a
    /// real program's log about a third smaller for about 8 ns more per event on the
    /// encoder threads (the log then needs a reader of format 1.4 or later).
    pub compression: PayloadCompression,
}

/// An invalid setting, from code or from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid memreplay configuration: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Most encoder threads a session starts.
pub const MAX_ENCODER_THREADS: usize = 64;

/// Most encoder threads "one per core" (`encoder_threads` 0) starts.
pub const AUTO_ENCODER_THREADS: usize = 16;

/// Most frames a callstack may keep.
pub const MAX_STACK_DEPTH: usize = 64;

impl Config {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Config {
            path: path.into(),
            callstacks_on_alloc: true,
            callstacks_on_free: false,
            usage_changes: true,
            max_stack_depth: 16,
            stack_capture: StackCapture::platform_default(),
            flush_interval: Duration::from_millis(100),
            buffer_memory: 8 << 20,
            process_memory_interval: Some(Duration::from_millis(10)),
            encoder_threads: 0,
            compression: PayloadCompression::Lz4,
        }
    }

    pub fn callstacks(mut self, on: bool) -> Self {
        self.callstacks_on_alloc = on;
        self
    }

    pub fn free_callstacks(mut self, on: bool) -> Self {
        self.callstacks_on_free = on;
        self
    }

    pub fn usage_changes(mut self, on: bool) -> Self {
        self.usage_changes = on;
        self
    }

    pub fn max_stack_depth(mut self, frames: usize) -> Self {
        self.max_stack_depth = frames;
        self
    }

    pub fn stack_capture(mut self, how: StackCapture) -> Self {
        self.stack_capture = how;
        self
    }

    pub fn flush_interval(mut self, every: Duration) -> Self {
        self.flush_interval = every;
        self
    }

    pub fn buffer_memory(mut self, bytes: usize) -> Self {
        self.buffer_memory = bytes;
        self
    }

    /// Samples process memory every `every` (`None`: never).
    pub fn process_memory_interval(mut self, every: Option<Duration>) -> Self {
        self.process_memory_interval = every;
        self
    }

    /// Encoder threads (0: one per core, at most [`AUTO_ENCODER_THREADS`]).
    pub fn encoder_threads(mut self, n: usize) -> Self {
        self.encoder_threads = n;
        self
    }

    /// How blocks are compressed (zstd levels: [`ZSTD_LEVELS`]).
    pub fn compression(mut self, method: PayloadCompression) -> Self {
        self.compression = method;
        self
    }

    /// The encoders a session starts with these settings: `encoder_threads`, or for 0
    /// the cores this process may run on (1 if unknown), at most [`AUTO_ENCODER_THREADS`].
    pub fn encoders(&self) -> usize {
        match self.encoder_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()).min(AUTO_ENCODER_THREADS),
            n => n,
        }
    }

    /// Checks the settings' ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_stack_depth == 0 || self.max_stack_depth > MAX_STACK_DEPTH {
            return Err(ConfigError(format!(
                "max_stack_depth must be 1..={MAX_STACK_DEPTH}, got {}",
                self.max_stack_depth
            )));
        }
        if self.buffer_memory < (1 << 20) {
            return Err(ConfigError(format!("buffer_memory must be at least 1 MiB, got {} bytes", self.buffer_memory)));
        }
        if self.flush_interval.is_zero() {
            return Err(ConfigError("flush_interval must be above zero".into()));
        }
        if self.encoder_threads > MAX_ENCODER_THREADS {
            return Err(ConfigError(format!(
                "encoder_threads must be 0..={MAX_ENCODER_THREADS} (0 = one per core), got {}",
                self.encoder_threads
            )));
        }
        if self.process_memory_interval.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError("process_memory_interval must be above zero (None turns sampling off)".into()));
        }
        if let Some(level) = self.compression.zstd_level() {
            if !ZSTD_LEVELS.contains(&level) {
                let (low, high) = (ZSTD_LEVELS.start(), ZSTD_LEVELS.end());
                return Err(ConfigError(format!("the zstd level must be {low}..={high}, got {level}")));
            }
        }
        Ok(())
    }

    /// Reads `MEMREPLAY_LOG` (the log path; unset or empty: `Ok(None)`) and
    /// `MEMREPLAY_OPTIONS`, a comma-separated list of `key=value`:
    /// `callstacks=on|off`, `free-callstacks=on|off`, `usage=on|off`, `depth=N`,
    /// `unwind=fp|unwinder`, `flush-ms=N`, `buffer-mib=N`, `memory-ms=N` (process memory
    /// sampling interval; 0 = off), `encoders=N` (encoder threads; 0 = one per core),
    /// `compression=lz4|zstd|zstd:LEVEL|lz4-columns|zstd-columns|zstd-columns:LEVEL` (zstd
    /// alone: level 1; `-columns`: the block's fields in columns first, format 1.6).
    pub fn from_env() -> Result<Option<Config>, ConfigError> {
        let path = match std::env::var_os("MEMREPLAY_LOG") {
            Some(p) if !p.is_empty() => p,
            _ => return Ok(None),
        };
        let options = std::env::var("MEMREPLAY_OPTIONS").unwrap_or_default();
        Config::new(PathBuf::from(path))
            .with_options(&options)
            .map(Some)
            .map_err(|e| ConfigError(format!("MEMREPLAY_OPTIONS: {}", e.0)))
    }

    /// Applies `key=value` options as in `MEMREPLAY_OPTIONS`. An error names the option
    /// and what it accepts.
    pub fn with_options(mut self, options: &str) -> Result<Config, ConfigError> {
        for item in options.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| ConfigError(format!("`{item}` is not key=value (options: {OPTION_NAMES})")))?;
            let bad = |accepted: &str| ConfigError(format!("{key} takes {accepted}, not `{value}`"));
            let on = || match value {
                "on" | "1" | "true" | "yes" => Ok(true),
                "off" | "0" | "false" | "no" => Ok(false),
                _ => Err(bad("on or off")),
            };
            let number = |accepted: &str, range: std::ops::RangeInclusive<u64>| {
                value.parse::<u64>().ok().filter(|n| range.contains(n)).ok_or_else(|| bad(accepted))
            };
            match key {
                "callstacks" => self.callstacks_on_alloc = on()?,
                "free-callstacks" => self.callstacks_on_free = on()?,
                "usage" => self.usage_changes = on()?,
                "depth" => {
                    self.max_stack_depth =
                        number(&format!("a number of frames from 1 to {MAX_STACK_DEPTH}"), 1..=MAX_STACK_DEPTH as u64)?
                            as usize
                }
                "unwind" => {
                    self.stack_capture = match value {
                        "fp" | "frame-pointers" => StackCapture::FramePointers,
                        "unwinder" => StackCapture::Unwinder,
                        _ => return Err(bad("fp or unwinder")),
                    }
                }
                "flush-ms" => {
                    self.flush_interval = Duration::from_millis(number("milliseconds, 1 or more", 1..=u64::MAX)?)
                }
                "buffer-mib" => {
                    self.buffer_memory = number("MiB, from 1 to 65536", 1..=65536)? as usize * (1 << 20);
                }
                "memory-ms" => {
                    self.process_memory_interval = match number("milliseconds (0 = off)", 0..=u64::MAX)? {
                        0 => None,
                        ms => Some(Duration::from_millis(ms)),
                    }
                }
                "encoders" => {
                    self.encoder_threads = number(
                        &format!("a number of threads from 0 (one per core) to {MAX_ENCODER_THREADS}"),
                        0..=MAX_ENCODER_THREADS as u64,
                    )? as usize
                }
                "compression" => {
                    self.compression = PayloadCompression::from_option(value).ok_or_else(|| bad(COMPRESSION_VALUES))?
                }
                _ => return Err(ConfigError(format!("unknown option `{key}` (options: {OPTION_NAMES})"))),
            }
        }
        self.validate()?;
        Ok(self)
    }
}

/// The keys `MEMREPLAY_OPTIONS` accepts, for error messages.
const OPTION_NAMES: &str =
    "callstacks, free-callstacks, usage, depth, unwind, flush-ms, buffer-mib, memory-ms, encoders, compression";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_reject() {
        let c = Config::new("x.mrl").with_options("callstacks=off, free-callstacks=on,depth=32,usage=0").unwrap();
        assert!(!c.callstacks_on_alloc && c.callstacks_on_free && !c.usage_changes);
        assert_eq!(c.max_stack_depth, 32);
        assert!(Config::new("x").with_options("depth=0").is_err());
        assert!(Config::new("x").with_options("depth=65").is_err());
        assert!(Config::new("x").with_options("bogus=1").is_err());
        assert!(Config::new("x").with_options("callstacks=maybe").is_err());
        assert!(Config::new("x").with_options("novalue").is_err());
        assert_eq!(Config::new("x").process_memory_interval, Some(Duration::from_millis(10)));
        let c = Config::new("x").with_options("memory-ms=250").unwrap();
        assert_eq!(c.process_memory_interval, Some(Duration::from_millis(250)));
        assert_eq!(Config::new("x").with_options("memory-ms=0").unwrap().process_memory_interval, None);
        // Each error names the option and what it accepts.
        let err = |o: &str| Config::new("x").with_options(o).unwrap_err().0;
        assert_eq!(
            err("depht=32"),
            "unknown option `depht` (options: callstacks, free-callstacks, usage, depth, unwind, \
             flush-ms, buffer-mib, memory-ms, encoders, compression)"
        );
        assert_eq!(Config::new("x").compression, PayloadCompression::Lz4);
        let zstd = |o: &str| Config::new("x").with_options(o).unwrap().compression;
        assert_eq!(zstd("compression=zstd"), PayloadCompression::Zstd { level: 1 });
        assert_eq!(zstd("compression=zstd:19"), PayloadCompression::Zstd { level: 19 });
        assert_eq!(zstd("compression=zstd,compression=lz4"), PayloadCompression::Lz4);
        assert_eq!(zstd("compression=lz4-columns"), PayloadCompression::Lz4Columns);
        assert_eq!(zstd("compression=zstd-columns"), PayloadCompression::ZstdColumns { level: 1 });
        assert_eq!(zstd("compression=zstd-columns:3"), PayloadCompression::ZstdColumns { level: 3 });
        let wrong_values = [
            "zstd:0",
            "zstd:20",
            "zstd:-1",
            "zstd:",
            "zstd:x",
            "lz4:1",
            "lz4-columns:1",
            "zstd-columns:20",
            "gzip",
            "",
        ];
        for wrong in wrong_values {
            assert_eq!(
                err(&format!("compression={wrong}")),
                format!(
                    "compression takes lz4, zstd, zstd:LEVEL, lz4-columns, zstd-columns or zstd-columns:LEVEL (a \
                     level from 1 to 19), not `{wrong}`"
                )
            );
        }
        let level_22 = Config::new("x").compression(PayloadCompression::Zstd { level: 22 }).validate();
        assert_eq!(level_22.unwrap_err().0, "the zstd level must be 1..=19, got 22");
        let level_0 = Config::new("x").compression(PayloadCompression::ZstdColumns { level: 0 }).validate();
        assert_eq!(level_0.unwrap_err().0, "the zstd level must be 1..=19, got 0");
        assert_eq!(err("encoders=65"), "encoders takes a number of threads from 0 (one per core) to 64, not `65`");
        assert_eq!(Config::new("x").with_options("encoders=3").unwrap().encoders(), 3);
        assert!(Config::new("x").encoders() >= 1);
        assert!(Config::new("x").encoder_threads(65).validate().is_err());
        assert_eq!(err("depth=500"), "depth takes a number of frames from 1 to 64, not `500`");
        assert_eq!(err("flush-ms=0"), "flush-ms takes milliseconds, 1 or more, not `0`");
        assert_eq!(err("buffer-mib=x"), "buffer-mib takes MiB, from 1 to 65536, not `x`");
        assert!(Config::new("x").process_memory_interval(Some(Duration::ZERO)).validate().is_err());
    }
}
