//! `memreplay`: records where a game's memory goes into a compact `.mrl` log.
//!
//! Add the wrapper as the global allocator and turn on the `capture_replay_log` feature:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: memreplay::Allocator<std::alloc::System> = memreplay::Allocator::new(std::alloc::System);
//!
//! fn main() {
//!     memreplay::start(memreplay::Config::new("game.mrl")).unwrap();
//!     {
//!         let _level = memreplay::context!("Level", "{}", "Forest");
//!         let _tex = memreplay::instance_context!("Texture", "{}.dds", "rock");
//!         let pixels = vec![0u8; 4096]; // belongs to Level/Forest/Texture rock.dds
//!     }
//!     memreplay::label!("level loaded");
//!     memreplay::stop();
//! }
//! ```
//!
//! With the feature off (the default) every macro, guard and function here compiles to
//! nothing: guards are zero-sized, format arguments are never evaluated, and
//! [`Allocator`] forwards straight to the wrapped allocator.
//!
//! With it on, each hook writes a fixed-size record into a per-thread buffer (no lock,
//! no allocation); full buffers go through a bounded channel to a writer thread that
//! interns strings and callstacks, encodes events with `memreplay-format` and writes
//! LZ4 blocks. See `ARCHITECTURE.md` at the repository root.

mod allocator;
mod allocator_report;
mod config;
mod domain;
mod guards;
mod macros;

#[cfg(feature = "capture_replay_log")]
#[doc(hidden)]
pub mod imp;

#[cfg(feature = "capture_replay_log")]
#[doc(hidden)]
pub mod raw;

#[cfg(feature = "tracing-layer")]
pub mod tracing_layer;

pub use allocator::Allocator;
pub use allocator_report::{
    record_allocator_report, AllocatorSnapshot, SnapshotAllocation, SnapshotBlock, SnapshotError,
};
pub use config::{Config, ConfigError, StackCapture, AUTO_ENCODER_THREADS, MAX_ENCODER_THREADS};
pub use domain::{Domain, Resource};
pub use guards::{AttachGuard, ContextGuard};
pub use memreplay_format::{DomainKind, PayloadCompression, ResourceKind, ZSTD_LEVELS};

/// Whether this build can record at all (the `capture_replay_log` feature).
pub const ENABLED: bool = cfg!(feature = "capture_replay_log");

/// Why recording could not start.
#[derive(Debug)]
pub enum StartError {
    /// A session is already recording; stop it first.
    AlreadyRecording,
    /// Recording could not start: the log file could not be created or written, or the
    /// system refused a recorder thread or memory (the message says which).
    Io(std::io::Error),
    /// The configuration (or the environment variables) are invalid.
    Config(ConfigError),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::AlreadyRecording => write!(f, "a memreplay session is already recording"),
            // The error says what failed: the log file's creation, the header's write, a
            // recorder thread's start, the ordering table's memory.
            StartError::Io(e) => write!(f, "{e}"),
            StartError::Config(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// What a finished session wrote, returned by [`stop`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionStats {
    pub path: std::path::PathBuf,
    /// Events written to the log (flushed to the file).
    pub events: u64,
    /// Event blocks written.
    pub blocks: u64,
    /// Bytes of the log file.
    pub bytes: u64,
    /// Events the recorder had to lose: those recorded in the log as `Lost`, and after a
    /// failed write (said on stderr), every event that did not reach the file.
    pub lost_events: u64,
    /// Application threads that recorded events.
    pub threads: u32,
    /// Distinct callstacks interned.
    pub stacks: u32,
    /// Times a thread waited for a free buffer because the writer fell behind.
    pub backpressure_waits: u64,
    /// Total time threads spent waiting for the writer, in nanoseconds.
    pub backpressure_ns: u64,
    /// Most buffer memory the recorder held at once, in bytes.
    pub peak_buffer_bytes: u64,
    /// Most event buffers the recorder held at once.
    pub peak_buffers: u32,
    /// Event buffers `Config::buffer_memory` pays for. The recorder holds more only while
    /// threads that registered when all were in use (one extra buffer each, so that a new
    /// thread never waits) have not yet been paid back by the writer returning buffers.
    pub max_buffers: u32,
    /// Encoder threads the session ran (0: the writer thread encoded alone).
    pub encoder_threads: u32,
    /// CPU time of the writer thread, in nanoseconds (0 where the OS does not say).
    pub writer_cpu_ns: u64,
    /// CPU time of the encoder threads together, in nanoseconds.
    pub encoder_cpu_ns: u64,
}

/// Starts recording to `config.path`. Fails if a session is already recording, if the
/// configuration is invalid or if the log cannot be created.
///
/// With the `capture_replay_log` feature off it does nothing and returns `Ok(())`, like
/// every other hook, so `memreplay::start(..)?` needs no `cfg` in the game's code; the
/// configuration is not even checked. [`ENABLED`] tells the two builds apart.
pub fn start(config: Config) -> Result<(), StartError> {
    #[cfg(feature = "capture_replay_log")]
    {
        imp::start(config)
    }
    #[cfg(not(feature = "capture_replay_log"))]
    {
        let _ = config;
        Ok(())
    }
}

/// Starts recording if the `MEMREPLAY_LOG` environment variable names a log path
/// (options in `MEMREPLAY_OPTIONS`, see [`Config::from_env`]). Returns whether it started.
///
/// The allocator wrapper also does this by itself on its first allocation, so a build
/// with the feature on records under `MEMREPLAY_LOG=game.mrl` without any code change.
pub fn start_from_env() -> Result<bool, StartError> {
    match Config::from_env().map_err(StartError::Config)? {
        Some(config) => start(config).map(|()| true),
        None => Ok(false),
    }
}

/// Stops recording: flushes every thread's buffer, writes the end-of-log record and
/// closes the file. Returns what was written, or `None` if nothing was recording.
pub fn stop() -> Option<SessionStats> {
    #[cfg(feature = "capture_replay_log")]
    {
        imp::stop()
    }
    #[cfg(not(feature = "capture_replay_log"))]
    {
        None
    }
}

/// Whether a session is recording now.
#[inline]
pub fn is_recording() -> bool {
    #[cfg(feature = "capture_replay_log")]
    {
        imp::is_recording()
    }
    #[cfg(not(feature = "capture_replay_log"))]
    {
        false
    }
}

/// Marks a named point in time ("level loaded"). See also [`label!`].
#[inline]
pub fn label(name: &str) {
    #[cfg(feature = "capture_replay_log")]
    imp::label(name);
    #[cfg(not(feature = "capture_replay_log"))]
    let _ = name;
}

/// Marks the start of frame `frame`.
#[inline]
pub fn frame_start(frame: u64) {
    #[cfg(feature = "capture_replay_log")]
    imp::frame_start(frame);
    #[cfg(not(feature = "capture_replay_log"))]
    let _ = frame;
}

/// Records the size in pixels of the swap chain or screen from now on (call it once at
/// start and after every resize), so that reports can tell screen-sized render targets
/// from other textures. Written to this thread's stream (format 1.2 `DISPLAY`).
#[inline]
pub fn display_size(width: u32, height: u32) {
    #[cfg(feature = "capture_replay_log")]
    imp::display_size(width, height);
    #[cfg(not(feature = "capture_replay_log"))]
    let _ = (width, height);
}

/// Reports that the container whose heap allocation starts at `ptr` now uses `used_bytes`
/// of its capacity (e.g. `vec.len() * size_of::<T>()` for a `Vec<T>`), so reports can
/// show how much reserved memory is wasted. Recorded when usage changes are on.
#[inline]
pub fn usage<T>(ptr: *const T, used_bytes: usize) {
    #[cfg(feature = "capture_replay_log")]
    imp::usage(ptr as usize, used_bytes);
    #[cfg(not(feature = "capture_replay_log"))]
    let _ = (ptr, used_bytes);
}

/// Reports the usage of a `Vec`: its length against its capacity.
#[inline]
pub fn vec_usage<T>(v: &Vec<T>) {
    if v.capacity() > 0 && std::mem::size_of::<T>() > 0 {
        usage(v.as_ptr(), v.len() * std::mem::size_of::<T>());
    }
}

/// Names the calling thread in the log (longer than the OS's 15-character thread names).
#[inline]
pub fn set_thread_name(name: &str) {
    #[cfg(feature = "capture_replay_log")]
    imp::set_thread_name(name);
    #[cfg(not(feature = "capture_replay_log"))]
    let _ = name;
}

/// Whether the calling thread is inside the recorder right now: in one of its hooks, in
/// [`start`] or [`stop`], in [`untracked`], or on its writer thread. What is allocated
/// then is the recorder's own (or, in `untracked`, deliberately left out) and is never
/// recorded. For a counting allocator wrapped by [`Allocator`] (`Allocator<Counting<System>>`)
/// that wants to tally exactly what the log holds: count a call when this is `false`.
/// Always `false` with the feature off.
#[inline]
pub fn in_recorder() -> bool {
    #[cfg(feature = "capture_replay_log")]
    {
        imp::in_recorder()
    }
    #[cfg(not(feature = "capture_replay_log"))]
    {
        false
    }
}

/// Runs `f` with this thread's recording suspended: its allocations are not recorded.
/// For tooling code (e.g. a tracing layer) whose memory is not the game's.
#[inline]
pub fn untracked<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(feature = "capture_replay_log")]
    {
        imp::untracked_by_caller(f)
    }
    #[cfg(not(feature = "capture_replay_log"))]
    {
        f()
    }
}

/// Enters a context of type `ty` named `name` on this thread until the guard drops.
/// `instance`: each entry counts as one instance (one texture, one mesh).
/// The [`context!`] and [`instance_context!`] macros are the usual way in.
#[inline]
#[must_use = "the context ends when the guard is dropped"]
pub fn push_context(ty: &'static str, name: &str, instance: bool) -> ContextGuard {
    #[cfg(feature = "capture_replay_log")]
    {
        imp::context_push(ty, format_args!("{name}"), instance);
    }
    #[cfg(not(feature = "capture_replay_log"))]
    let _ = (ty, name, instance);
    ContextGuard::new()
}

/// Until the guard drops, this thread's allocations belong to whatever context owns the
/// allocation containing `ptr` (an interior pointer is fine). Resolved offline by the
/// analyzer: recording an attach costs an event and a clock read (tens of nanoseconds).
/// See also [`attach!`].
#[inline]
#[must_use = "the attach ends when the guard is dropped"]
pub fn attach<T: ?Sized>(ptr: *const T) -> AttachGuard {
    #[cfg(feature = "capture_replay_log")]
    imp::attach_push(ptr as *const u8 as usize);
    #[cfg(not(feature = "capture_replay_log"))]
    let _ = ptr;
    AttachGuard::new()
}

/// Implementation details used by the macros. Not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::guards::ContextGuard;
    #[cfg(feature = "capture_replay_log")]
    pub use crate::imp::{context_push, label_fmt};
}
