//! The writer thread: every flush interval has the encoders (`encoder.rs`) collect idle
//! threads' events and flushes the file, which bounds what a crash can lose; keeps the
//! metadata stream (modules, domains, process memory samples); ends the log.
//!
//! With one encoder (`Config::encoder_threads` 1, or a one-core machine) the writer
//! thread encodes everything itself, from the buffers threads hand it. With more, encoder
//! threads own the streams `id mod n`, and threads hand their full buffers straight to
//! their encoder: the encoders decode, intern, encode, compress and write their streams'
//! blocks in parallel, so the recorder's work grows with the program's threads instead
//! of waiting for one thread, and the writer thread wakes only for its timers. It also samples what the OS sees of the process (resident and
//! committed memory) at `Config::process_memory_interval`, into the metadata stream.
//! Everything these threads allocate passes through the hook unrecorded (each is marked
//! as the recorder's own).

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufWriter};
use std::num::NonZeroU32;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use memreplay_format::{header_flags, Event, FileHeader, LogWriter, VERSION_MAJOR, VERSION_MINOR};

use super::buffer::{BufPtr, Doorbell};
use super::encoder::{Encoder, Output, Shared};
use super::sys::{ProcessMemoryProbe, RecorderThread};
use super::Session;
use crate::{Config, SessionStats};

/// How often the module list is checked for libraries loaded since the last look.
const MODULE_RESCAN: Duration = Duration::from_secs(1);
/// The metadata stream (modules, process memory samples).
const METADATA: u32 = memreplay_format::block::METADATA_THREAD;

/// What the writer asks of an encoder thread (its threads hand their full buffers to it
/// directly, through the session's hand-off channels).
#[derive(Clone, Copy)]
enum Job {
    /// Take the buffers handed off so far, collect what its idle threads published,
    /// write every pending block, and say so.
    Collect,
    /// The same, then end.
    Stop,
}

struct EncoderThread {
    jobs: Sender<Job>,
    /// Ends with the thread's CPU time (ns).
    thread: RecorderThread<u64>,
}

/// The writer's state, from the log's first bytes to its end record.
pub(crate) struct Writer {
    shared: Arc<Shared>,
    /// With no encoder threads, the one encoder of every stream; else the metadata
    /// stream's.
    enc: Encoder,
    encoders: Vec<EncoderThread>,
    /// Each encoder thread says here that a `Collect` or `Stop` is done.
    done_rx: Receiver<()>,
    modules: HashSet<(u64, String)>,
    /// The modules the last scan found: one missing from the next scan was unloaded.
    loaded: HashSet<(u64, String)>,
    /// The count of `Session::scans_asked` that the last scan answered.
    scans_answered: u64,
}

impl Writer {
    /// Creates the log: writes the header and what is known at start (modules, domains)
    /// and flushes them to the file, so that a process killed at any later moment leaves
    /// a readable log; then starts the encoder threads. Runs on the thread that calls
    /// `start`. A failure to write is said on stderr and leaves the writer failed (the
    /// program runs on, every event is counted as lost); only a header that cannot even
    /// be buffered fails here.
    ///
    /// `hand_offs` are the receiving ends of the session's hand-off channels: one per
    /// encoder thread to start, or none when the writer thread encodes (its own channel
    /// then carries the buffers). An encoder thread the OS refuses fails the start.
    pub fn open(
        session: &'static Session,
        file: File,
        config: &Config,
        start_unix_ns: u64,
        hand_offs: Vec<Receiver<BufPtr>>,
    ) -> io::Result<Writer> {
        let mut flags = 0;
        if config.callstacks_on_alloc {
            flags |= header_flags::CALLSTACKS_ON_ALLOC;
        }
        if config.callstacks_on_free {
            flags |= header_flags::CALLSTACKS_ON_FREE;
        }
        if config.usage_changes {
            flags |= header_flags::USAGE_CHANGES;
        }
        let header = FileHeader {
            version_major: VERSION_MAJOR,
            version_minor: VERSION_MINOR,
            flags,
            pointer_width: std::mem::size_of::<usize>() as u8,
            pid: u64::from(std::process::id()),
            start_unix_ns,
            ticks_per_second: 1_000_000_000,
            max_stack_depth: config.max_stack_depth as u32,
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            exe_path: std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            recorder: concat!("memreplay ", env!("CARGO_PKG_VERSION")).into(),
        };
        let out = BufWriter::with_capacity(1 << 20, file);
        let log = LogWriter::compressed_with(out, &header, config.compression).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot write the log header to {}: {e}", config.path.display()))
        })?;
        let shared = Arc::new(Shared::new(session, Output::new(log, config.path.clone()), config.compression));
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        let mut w = Writer {
            enc: Encoder::new(shared.clone(), 0, NonZeroU32::MIN),
            shared,
            encoders: Vec::new(),
            done_rx,
            modules: HashSet::new(),
            loaded: HashSet::new(),
            scans_answered: 0,
        };
        w.scan_modules();
        w.enc.sync_domains(METADATA, 0);
        w.enc.write_stream(METADATA);
        w.flush();
        w.start_encoders(hand_offs, &done_tx)?;
        Ok(w)
    }

    /// Starts an encoder thread for each hand-off channel: encoder `i` of `n` owns the
    /// streams `id mod n`, whose threads hand their buffers to channel `i`.
    /// One the OS refuses fails the start: dropping the writer then stops and joins
    /// those started (`Drop`).
    fn start_encoders(&mut self, hand_offs: Vec<Receiver<BufPtr>>, done_tx: &Sender<()>) -> io::Result<()> {
        let Some(n) = NonZeroU32::new(hand_offs.len() as u32) else { return Ok(()) };
        for (index, buffers) in hand_offs.into_iter().enumerate() {
            let (jobs, rx) = crossbeam_channel::unbounded();
            let shared = self.shared.clone();
            let done = done_tx.clone();
            let body = move || {
                let session: &'static Session = shared.session;
                encode(Encoder::new(shared, index as u32, n), &session.bells[index], &buffers, &rx, &done);
                super::sys::thread_cpu_ns()
            };
            let thread = RecorderThread::spawn(c"memreplay-enc", super::thread::mark_recorder_thread, body)
                .map_err(|e| io::Error::new(e.kind(), format!("cannot start encoder thread {index} of {n}: {e}")))?;
            self.encoders.push(EncoderThread { jobs, thread });
        }
        Ok(())
    }

    /// A full buffer that reached the writer thread: with no encoder threads, it encodes
    /// it; else it is a stray wake-up and never happens (threads hand off to encoders).
    fn take_full(&mut self, b: BufPtr) {
        debug_assert!(self.encoders.is_empty(), "buffers go to the encoder threads");
        self.enc.take_full(b);
    }

    /// Every thread's published events into blocks, written; then the metadata stream's.
    fn collect_and_write_all(&mut self, job: Job) {
        if self.encoders.is_empty() {
            self.enc.collect_idle();
        } else {
            let session = self.shared.session;
            let mut asked = 0;
            for (i, e) in self.encoders.iter().enumerate() {
                if e.jobs.send(job).is_ok() {
                    session.wake_encoder(i);
                    asked += 1;
                }
            }
            // An encoder that ends before it answers drops its sender: stop waiting then.
            for _ in 0..asked {
                if self.done_rx.recv_timeout(Duration::from_secs(10)).is_err() {
                    super::say_on_stderr("memreplay: an encoder thread did not answer within 10 s\n");
                    break;
                }
            }
        }
        self.enc.write_all_streams();
    }

    fn flush(&mut self) {
        self.shared.output().flush();
    }

    /// Scans the modules if another thread asked for it since the last answer (or
    /// `always`), writes the metadata stream to the file, and then tells the askers: the
    /// scan starts after the count it answers is read. Whether it scanned.
    fn answer_scan_requests(&mut self, always: bool) -> bool {
        let session = self.shared.session;
        let asked = session.scans_asked.load(Ordering::Acquire);
        if asked == self.scans_answered && !always {
            return false;
        }
        self.scans_answered = asked;
        self.scan_modules();
        self.enc.write_stream(METADATA);
        self.flush();
        *session.scans_done.lock().unwrap_or_else(|e| e.into_inner()) = asked;
        session.scan_done.notify_all();
        true
    }

    /// Records modules loaded since the last scan, for offline symbolication; and, once,
    /// what an interposer counted before the start (`raw::note_calls_before_start`).
    fn scan_modules(&mut self) {
        use findshlibs::{SharedLibrary, SharedLibraryId, TargetSharedLibrary};
        let mut found = Vec::new();
        let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default();
        TargetSharedLibrary::each(|lib| {
            let mut path = lib.name().to_string_lossy().into_owned();
            if path.is_empty() {
                path = exe.clone();
            }
            let base = lib.actual_load_addr().0 as u64;
            let build_id = match lib.id() {
                Some(SharedLibraryId::GnuBuildId(b)) => b,
                Some(SharedLibraryId::Uuid(u)) => u.to_vec(),
                _ => Vec::new(),
            };
            found.push((base, lib.len() as u64, lib.virtual_memory_bias().0 as u64, path, build_id));
        });
        let loaded: HashSet<(u64, String)> = found.iter().map(|m| (m.0, m.3.clone())).collect();
        if self.loaded.iter().any(|m| !loaded.contains(m)) {
            // Unloaded without our `dlclose` (a program recorded through `Allocator`):
            // the unwinder's cached rules may describe what is no longer there.
            super::modules_unloaded();
        }
        self.loaded = loaded;
        for (base, size, load_bias, path, build_id) in found {
            if !self.modules.insert((base, path.clone())) {
                continue;
            }
            let path = self.enc.string(METADATA, &path);
            self.enc.emit(METADATA, &Event::Module { base, size, load_bias, path, build_id });
        }
        // What an interposer counted before the start (`raw::note_calls_before_start`
        // asks for a scan to have it written).
        if let Some(c) = crate::raw::take_calls_before_start() {
            let crate::raw::CallsBeforeStart { allocations, frees, reallocs, bytes, live, untracked } = c;
            self.enc.emit(METADATA, &Event::BeforeStart { allocations, frees, reallocs, bytes, live, untracked });
        }
    }
}

impl Drop for Writer {
    /// `run` joins the encoder threads before it ends; a writer dropped with some still
    /// there is one whose start failed (an encoder or the writer thread refused by the
    /// OS: the session was never published, so they have taken nothing) or whose thread
    /// panicked. Closing their job channels ends them, and they are joined here: no
    /// encoder thread outlives its writer.
    fn drop(&mut self) {
        let session = self.shared.session;
        for (i, e) in std::mem::take(&mut self.encoders).into_iter().enumerate() {
            drop(e.jobs);
            session.wake_encoder(i);
            e.thread.join();
        }
    }
}

/// An encoder thread: encodes the buffers its threads hand off, and does what the writer
/// asks, until `Stop` (or until the writer is gone). It sleeps while it has nothing to
/// do, until `bell` rings: threads ring it only once `WAKE_AT` buffers wait (or with their
/// last one), the writer with every job.
fn encode(mut enc: Encoder, bell: &Doorbell, buffers: &Receiver<BufPtr>, jobs: &Receiver<Job>, done: &Sender<()>) {
    bell.answer();
    loop {
        loop {
            match buffers.try_recv() {
                Ok(b) => enc.take_full(b),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        let job = match jobs.try_recv() {
            Ok(job) => job,
            Err(TryRecvError::Empty) => {
                std::thread::park();
                continue;
            }
            Err(TryRecvError::Disconnected) => return,
        };
        // Buffers handed off before the writer asked come first: a thread's current
        // buffer is collected only once those before it are in.
        while let Ok(b) = buffers.try_recv() {
            enc.take_full(b);
        }
        enc.collect_idle();
        enc.write_all_streams();
        let _ = done.send(());
        if matches!(job, Job::Stop) {
            return;
        }
    }
}

pub(crate) fn run(mut w: Writer, full_rx: Receiver<BufPtr>, config: Config) -> SessionStats {
    let session = w.shared.session;
    let path = w.shared.output().path.clone();
    tracing::info!(target: "memreplay", path = %path.display(), encoders = w.encoders.len().max(1), "recording started");

    let mut sampler = config.process_memory_interval.map(|every| ProcessMemorySampler::new(every, session));
    if let Some(p) = &mut sampler {
        p.sample(&mut w);
    }

    let mut next_tick = Instant::now() + config.flush_interval;
    let mut next_modules = Instant::now() + MODULE_RESCAN;
    // A termination signal to raise again once the log is finished.
    let mut end_by_signal = None;
    loop {
        let due = sampler.as_ref().map_or(next_tick, |p| p.next.min(next_tick));
        let wait = due.saturating_duration_since(Instant::now());
        match full_rx.recv_timeout(wait) {
            Ok(b) if !b.0.is_null() => w.take_full(b),
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if session.stopping.load(Ordering::Acquire) {
            break;
        }
        match super::signals::take() {
            Some((sig, true)) => {
                end_by_signal = Some(sig);
                break;
            }
            // The program's own handler chained to ours: it ends on its own terms (its
            // exit finishes the log); what was recorded so far goes to the file now.
            Some((_, false)) => {
                w.collect_and_write_all(Job::Collect);
                w.flush();
            }
            None => {}
        }
        // A thread asked for a scan (a library about to be unloaded): now, not at the
        // next rescan, and the file flushed before the asker is let go.
        if w.answer_scan_requests(false) {
            next_modules = Instant::now() + MODULE_RESCAN;
        }
        let now = Instant::now();
        if let Some(p) = sampler.as_mut().filter(|p| now >= p.next) {
            p.sample(&mut w);
        }
        if now >= next_tick {
            // Domains defined since the last tick, used or not yet.
            w.enc.sync_domains(METADATA, 0);
            w.collect_and_write_all(Job::Collect);
            if now >= next_modules {
                w.scan_modules();
                w.enc.write_stream(METADATA);
                next_modules = now + MODULE_RESCAN;
            }
            w.flush();
            next_tick = now + config.flush_interval;
        }
    }

    // Final drain: every handed-off buffer, then what each thread has published.
    while let Ok(b) = full_rx.try_recv() {
        if !b.0.is_null() {
            w.take_full(b);
        }
    }
    w.enc.sync_domains(METADATA, 0);
    if let Some(p) = &mut sampler {
        p.sample(&mut w);
    }
    // Libraries loaded since the last rescan; and whoever waits for a scan is let go.
    w.answer_scan_requests(true);
    w.collect_and_write_all(Job::Stop);
    let encoder_threads = w.encoders.len() as u32;
    let mut encoder_cpu_ns = 0;
    for (i, e) in std::mem::take(&mut w.encoders).into_iter().enumerate() {
        drop(e.jobs);
        session.wake_encoder(i);
        encoder_cpu_ns += e.thread.join().unwrap_or(0);
    }
    // Everything reaches the file before the end record is written, so that a failure
    // here is counted like any other.
    w.flush();
    session.pool.drain();

    let stacks = w.shared.stacks();
    let mut out = w.shared.output();
    let (blocks, events, lost_events, failed) = (out.flushed_blocks, out.flushed_events, out.lost_events, out.failed);
    let end_ns = session.now_ns();
    let log = out.take_log();
    let bytes = out.flushed_bytes;
    drop(out);
    let file_len = |f: &File| f.metadata().map(|m| m.len()).unwrap_or(0);
    let bytes = match log {
        // Nothing more is written after a failure (not even what the file buffer holds):
        // no end record, the log reads as cut off.
        Some(log) if failed => file_len(&log.into_inner().into_parts().0),
        Some(log) => match log.finish(lost_events, end_ns) {
            Ok((file, _)) => file_len(file.get_ref()),
            Err(e) => {
                super::say_on_stderr(&format!(
                    "memreplay: cannot write the end of the log {}: {e}; all {events} events ({bytes} bytes) \
                     were written, but the log will read as cut off\n",
                    path.display()
                ));
                bytes
            }
        },
        None => bytes,
    };
    let stats = SessionStats {
        path,
        events,
        blocks,
        bytes,
        lost_events,
        threads: session.next_thread.load(Ordering::Relaxed) - 1,
        stacks,
        backpressure_waits: session.pool.waits.load(Ordering::Relaxed),
        backpressure_ns: session.pool.wait_ns.load(Ordering::Relaxed),
        peak_buffer_bytes: session.pool.peak_bytes(),
        peak_buffers: session.pool.peak() as u32,
        max_buffers: session.pool.max() as u32,
        encoder_threads,
        writer_cpu_ns: super::sys::thread_cpu_ns(),
        encoder_cpu_ns,
    };
    tracing::info!(
        target: "memreplay",
        events = stats.events,
        bytes = stats.bytes,
        lost = stats.lost_events,
        backpressure_waits = stats.backpressure_waits,
        backpressure_ms = stats.backpressure_ns / 1_000_000,
        "recording stopped"
    );
    if let Some(sig) = end_by_signal {
        super::signals::end_by(sig);
    }
    stats
}

/// Samples process memory into the metadata stream every `every`.
struct ProcessMemorySampler {
    probe: ProcessMemoryProbe,
    every: Duration,
    next: Instant,
    session: &'static Session,
}

impl ProcessMemorySampler {
    fn new(every: Duration, session: &'static Session) -> Self {
        ProcessMemorySampler { probe: ProcessMemoryProbe::open(), every, next: Instant::now(), session }
    }

    fn sample(&mut self, w: &mut Writer) {
        // Late wake-ups skip samples rather than bunching them up.
        self.next = Instant::now() + self.every;
        if let Some((resident, committed)) = self.probe.sample() {
            let time = self.session.now_ns();
            w.enc.emit(METADATA, &Event::ProcessMemory { time, resident, committed });
        }
    }
}
