//! The demo's worker threads: asset streaming (decodes textures for the main thread,
//! attaching its allocations to the texture it works for) and audio (mixes sound every
//! frame, plays one-shot sounds made by the main thread).
//!
//! Both exchange heap memory with the main thread through channels, so the log holds
//! allocations freed on another thread than the one that made them.

use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;

use crate::{RunError, AUDIO_THREAD, DECODE_SCRATCH_BYTES, MIX_FRAMES, SOUND_BANKS, STREAMING_THREAD};

/// A job for the streaming thread: expand `compressed` (one byte per pixel) into an RGBA8
/// image for the asset whose CPU copy contains `asset`.
struct DecodeJob {
    /// An address inside the asset's allocation (never dereferenced by the worker).
    asset: usize,
    /// Made on the main thread, freed by the worker.
    compressed: Vec<u8>,
}

pub(crate) struct Streamer {
    jobs: Option<Sender<DecodeJob>>,
    decoded: Receiver<Vec<u8>>,
    handle: JoinHandle<()>,
}

fn spawn_named<F: FnOnce() + Send + 'static>(name: &'static str, f: F) -> Result<JoinHandle<()>, RunError> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .map_err(|e| RunError::Thread { name, what: e.to_string() })
}

fn join(name: &'static str, handle: JoinHandle<()>) -> Result<(), RunError> {
    handle.join().map_err(|_| RunError::Thread { name, what: "it panicked".into() })
}

impl Streamer {
    pub fn spawn() -> Result<Self, RunError> {
        let (jobs, job_rx) = mpsc::channel::<DecodeJob>();
        let (done_tx, decoded) = mpsc::channel::<Vec<u8>>();
        let handle = spawn_named(STREAMING_THREAD, move || streaming_thread(job_rx, done_tx))?;
        Ok(Streamer { jobs: Some(jobs), decoded, handle })
    }

    /// Has the streaming thread decode `compressed` for the asset at `asset` and waits for
    /// the image (allocated on the streaming thread; the caller frees it).
    pub fn decode(&self, asset: *const u8, compressed: Vec<u8>) -> Result<Vec<u8>, RunError> {
        let gone = || RunError::Thread { name: STREAMING_THREAD, what: "it stopped".into() };
        let jobs = self.jobs.as_ref().ok_or_else(gone)?;
        jobs.send(DecodeJob { asset: asset as usize, compressed }).map_err(|_| gone())?;
        // Polled, as a game polls its streaming results: a blocking receive registers this
        // thread with the channel the first time it waits, an allocation that would land in
        // whichever texture's context first waited (a race with the streaming thread).
        loop {
            match self.decoded.try_recv() {
                Ok(image) => return Ok(image),
                Err(TryRecvError::Empty) => std::thread::yield_now(),
                Err(TryRecvError::Disconnected) => return Err(gone()),
            }
        }
    }

    pub fn shutdown(mut self) -> Result<(), RunError> {
        drop(self.jobs.take());
        join(STREAMING_THREAD, self.handle)
    }
}

fn streaming_thread(jobs: Receiver<DecodeJob>, done: Sender<Vec<u8>>) {
    // The OS name (set by the builder) is cut to 15 bytes on Linux; the log keeps ours whole.
    memreplay::set_thread_name(STREAMING_THREAD);
    let _ctx = memreplay::context!("Streaming", "decoder");
    for DecodeJob { asset, compressed } in jobs {
        let image = {
            // Everything allocated here belongs to the asset the main thread is loading.
            let _owner = memreplay::attach!(asset as *const u8);
            decode(&compressed)
        };
        // Allocated on the main thread, freed here.
        drop(compressed);
        if done.send(image).is_err() {
            return;
        }
    }
}

/// "Decompresses" one byte per pixel into RGBA8 through a scratch buffer, like a real
/// block decoder would.
fn decode(compressed: &[u8]) -> Vec<u8> {
    let mut scratch: Vec<u8> = Vec::with_capacity(DECODE_SCRATCH_BYTES);
    let mut image = Vec::with_capacity(compressed.len() * 4);
    for chunk in compressed.chunks(DECODE_SCRATCH_BYTES / 4) {
        scratch.clear();
        for &v in chunk {
            scratch.extend_from_slice(&[v, v.rotate_left(3), v ^ 0x5a, 0xff]);
        }
        image.extend_from_slice(&scratch);
    }
    image
}

enum AudioCommand {
    /// Mix one frame's worth of sound.
    Tick(u64),
    /// Play a one-shot sound made by the main thread (the audio thread frees it).
    Play(Vec<i16>),
}

pub(crate) struct Audio {
    commands: Option<Sender<AudioCommand>>,
    handle: JoinHandle<()>,
}

impl Audio {
    pub fn spawn() -> Result<Self, RunError> {
        let (tx, rx) = mpsc::channel();
        let handle = spawn_named(AUDIO_THREAD, move || audio_thread(rx))?;
        Ok(Audio { commands: Some(tx), handle })
    }

    fn send(&self, command: AudioCommand) -> Result<(), RunError> {
        let gone = || RunError::Thread { name: AUDIO_THREAD, what: "it stopped".into() };
        self.commands.as_ref().ok_or_else(gone)?.send(command).map_err(|_| gone())
    }

    pub fn tick(&self, frame: u64) -> Result<(), RunError> {
        self.send(AudioCommand::Tick(frame))
    }

    pub fn play(&self, sound: Vec<i16>) -> Result<(), RunError> {
        self.send(AudioCommand::Play(sound))
    }

    pub fn shutdown(mut self) -> Result<(), RunError> {
        drop(self.commands.take());
        join(AUDIO_THREAD, self.handle)
    }
}

fn audio_thread(commands: Receiver<AudioCommand>) {
    memreplay::set_thread_name(AUDIO_THREAD);
    let _ctx = memreplay::context!("Audio", "mixer");
    let banks: Vec<Vec<i16>> = {
        let _banks = memreplay::context!("Audio", "sound banks");
        SOUND_BANKS
            .iter()
            .map(|&(name, samples)| {
                let _bank = memreplay::instance_context!("Sound", "{name}");
                (0..samples).map(|i| ((i * 37) % 2000) as i16 - 1000).collect()
            })
            .collect()
    };
    let mut voices: Vec<Vec<i16>> = Vec::new();
    let mut level = 0i64;
    for command in commands {
        match command {
            AudioCommand::Play(sound) => voices.push(sound),
            AudioCommand::Tick(frame) => {
                let mut mix = vec![0f32; MIX_FRAMES * 2];
                let bank = &banks[frame as usize % banks.len()];
                for (i, out) in mix.iter_mut().enumerate() {
                    *out = f32::from(bank[(frame as usize * MIX_FRAMES * 2 + i) % bank.len()]) / 32768.0;
                }
                // One-shots play for one tick: each gets a resampling buffer attached to
                // the sound (which the main thread made), then both are freed here.
                for voice in voices.drain(..) {
                    let _owner = memreplay::attach(voice.as_ptr());
                    let resampled: Vec<f32> = voice.iter().step_by(2).map(|&s| f32::from(s) / 32768.0).collect();
                    for (out, s) in mix.iter_mut().zip(&resampled) {
                        *out += s;
                    }
                }
                level = level.wrapping_add(mix.iter().map(|s| (s * 1000.0) as i64).sum::<i64>());
            }
        }
    }
    std::hint::black_box(level);
}
