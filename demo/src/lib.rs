//! `memreplay-demo`: a small, deterministic "game" that exercises every memreplay API.
//!
//! It exists to produce realistic `.mrl` logs for the analyzer, the CLI and the
//! end-to-end tests: a main menu, a level load with typed nested contexts (textures
//! with CPU copies and VRAM allocations, meshes, a shadow atlas), an entity pool
//! sub-allocated from a heap block, containers that report their usage (one of them
//! badly over-reserved), a frame loop with per-frame temporaries, an asset streaming
//! thread that attaches its allocations to the assets it decodes, an audio thread,
//! cross-thread frees, reallocs, and one deliberate leak (two with `--extra-leak`).
//!
//! Everything the demo does is fixed by the constants below and its [`Options`]: two
//! runs with the same options record the same events (modulo what the standard library
//! allocates on its own and the addresses the allocator hands out). [`expected`]
//! computes, from the options alone, the figures a test can assert against a log.
//!
//! The recording only sees heap allocations if the binary installs the wrapper:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: memreplay::Allocator<std::alloc::System> = memreplay::Allocator::new(std::alloc::System);
//!
//! fn main() -> std::process::ExitCode {
//!     memreplay_demo::main_with_args(std::env::args_os().skip(1))
//! }
//! ```

mod args;
mod game;
mod gpu;
mod pool;
mod render;
mod workers;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

pub use args::{parse_args, ArgError, Command, USAGE};
pub use pool::Entity;
pub use render::{
    buffer_layout, freed_after_load, mip_chain_bytes, render_resources, sub_buffers, RenderResource, SubBuffer,
};

// ---------------------------------------------------------------------------------------
// What the demo does: every size and count, so tests can check the log against them.
// ---------------------------------------------------------------------------------------

/// Log written when no path is given.
pub const DEFAULT_LOG: &str = "demo.mrl";
/// Textures loaded by default (`--textures N`).
pub const DEFAULT_TEXTURES: usize = 8;
/// Most textures `--textures` accepts (keeps VRAM within [`VRAM_LOCAL_CAPACITY`]).
pub const MAX_TEXTURES: usize = 256;
/// Frames played by default (`--frames N`).
pub const DEFAULT_FRAMES: u64 = 60;
/// Most frames `--frames` accepts.
pub const MAX_FRAMES: u64 = 100_000;

/// The labels the demo records, in order.
pub const LABELS: [&str; 4] = ["main menu", "level loaded", "gameplay", "level unloaded"];

/// Names the demo gives its threads in the log.
pub const MAIN_THREAD: &str = "main";
pub const STREAMING_THREAD: &str = "asset streaming";
pub const AUDIO_THREAD: &str = "audio";

/// Context type the tracing layer gives spans, and the span that draws the HUD each frame.
pub const SYSTEM_CONTEXT_TYPE: &str = "System";
pub const HUD_SYSTEM: &str = "hud";

/// The one level.
pub const LEVEL: &str = "Forest";

/// Base names of the textures; past the eighth, names repeat with a suffix (`rock_1.dds`).
pub const TEXTURE_NAMES: [&str; 8] = ["rock", "grass", "bark", "moss", "water", "sand", "leaf", "cliff"];
/// Declared sizes (width, height) of the textures, cycled like the names.
pub const TEXTURE_DIMS: [(u32, u32); 8] =
    [(256, 256), (512, 256), (128, 128), (256, 512), (64, 64), (512, 512), (128, 256), (256, 128)];
/// GPU format of every texture: BC7, one byte per pixel in 4x4 blocks of 16 bytes.
pub const TEXTURE_FORMAT: &str = "BC7_UNORM";
/// Bytes per pixel of a texture's decoded CPU-side copy (RGBA8).
pub const TEXTURE_CPU_BYTES_PER_PIXEL: u64 = 4;

/// The device-local GPU heap.
pub const VRAM_LOCAL: &str = "vram.local";
pub const VRAM_LOCAL_CAPACITY: u64 = 256 << 20;
/// Fake GPU virtual address where `vram.local` starts (the bump allocator's base).
pub const VRAM_LOCAL_BASE: u64 = 0x0000_0040_0000_0000;
/// The host-visible GPU heap holding the upload staging buffer.
pub const VRAM_SYSTEM: &str = "vram.system";
pub const VRAM_SYSTEM_CAPACITY: u64 = 64 << 20;
pub const VRAM_SYSTEM_BASE: u64 = 0x0000_0080_0000_0000;
/// Alignment of textures and render targets in VRAM.
pub const TEXTURE_ALIGN: u64 = 64 << 10;
/// Alignment of buffers in VRAM.
pub const BUFFER_ALIGN: u64 = 256;
/// The upload staging buffer in `vram.system`, alive during the level load.
pub const STAGING_BYTES: u64 = 4 << 20;

/// Meshes of the level: (name, vertex count).
pub const MESHES: [(&str, u32); 6] =
    [("oak", 2400), ("pine", 1800), ("boulder", 960), ("fern", 600), ("log", 480), ("stump", 300)];
/// Bytes per vertex (position, normal, uv as f32).
pub const VERTEX_BYTES: u64 = 32;
/// Indices per vertex (u32 each).
pub const INDICES_PER_VERTEX: u64 = 3;

/// The shadow atlas: a square D32_FLOAT depth target in `vram.local`.
pub const SHADOW_ATLAS_SIZE: u32 = 2048;
pub const SHADOW_ATLAS_BYTES: u64 = SHADOW_ATLAS_SIZE as u64 * SHADOW_ATLAS_SIZE as u64 * 4;

/// The screen the renderer draws to (recorded with `memreplay::display_size`).
pub const SCREEN: (u32, u32) = (1920, 1080);
/// The renderer's render and depth targets, alive from the level load to its unload, each
/// a dedicated `vram.local` allocation of its texel data rounded up to [`TEXTURE_ALIGN`]:
/// (name, kind, format, bytes per texel, each screen side divided by).
pub const RENDER_TARGETS: [(&str, memreplay::ResourceKind, &str, u64, u32); 7] = {
    use memreplay::ResourceKind::{DepthStencil, RenderTarget};
    [
        ("gbuffer albedo", RenderTarget, "RGBA8_UNORM", 4, 1),
        ("gbuffer normals", RenderTarget, "RGBA16_FLOAT", 8, 1),
        ("hdr color", RenderTarget, "R11G11B10_FLOAT", 4, 1),
        ("scene depth", DepthStencil, "D32_FLOAT", 4, 1),
        ("ssao", RenderTarget, "R8_UNORM", 1, 2),
        ("bloom half", RenderTarget, "RGBA16_FLOAT", 8, 2),
        ("bloom quarter", RenderTarget, "RGBA16_FLOAT", 8, 4),
    ]
};
/// Textures whose sides are not powers of two, with full mip chains: (name, width, height,
/// format, bytes per texel). Allocated like the render targets.
pub const NPOT_TEXTURES: [(&str, u32, u32, &str, u64); 2] =
    [("terrain heightmap", 1025, 1025, "R16_UNORM", 2), ("ui atlas", 1000, 600, "RGBA8_UNORM", 4)];
/// The baked lightmap: a 1024x1024 BC7 texture with a full mip chain, allocated at
/// [`LIGHTMAP_ALLOC_BYTES`], far more than its texel data (a padded resource).
pub const LIGHTMAP_SIZE: u32 = 1024;
pub const LIGHTMAP_ALLOC_BYTES: u64 = 2 << 20;
/// The renderer's small buffers are sub-allocated, VMA-style, from blocks of
/// [`BUFFER_BLOCK_BYTES`] allocated in `vram.local`: this domain holds the sub-allocations.
pub const VRAM_BUFFERS: &str = "vram.local.buffers";
pub const BUFFER_BLOCK_BYTES: u64 = 128 << 10;
/// Alignment of the sub-allocated buffers.
pub const SUB_BUFFER_ALIGN: u64 = 256;
/// The sub-allocated buffers, in allocation order: (name, bytes, count).
pub const SUB_BUFFERS: [(&str, u64, u32); 4] = [
    ("frame constants", 4 << 10, 1),
    ("light list", 64 << 10, 1),
    ("instances", 24 << 10, 6),
    ("draw constants", 256, 48),
];
/// Every third draw-constants buffer (the 1st, 4th, ...) is freed once the level is
/// loaded, leaving holes in its block.
pub const DRAW_CONSTANTS_FREED_EVERY: u32 = 3;
/// The budget the "driver" reports for `vram.local` each frame, and a lower one reported
/// for frames [`LOW_BUDGET_FRAMES`] (another process took video memory).
pub const VRAM_LOCAL_BUDGET: u64 = 200 << 20;
pub const VRAM_LOCAL_LOW_BUDGET: u64 = 64 << 20;
pub const LOW_BUDGET_FRAMES: std::ops::Range<u64> = 20..30;

/// The entity pool: a heap block of [`POOL_SLOTS`] entities, sub-allocated per entity.
pub const ENTITY_POOL: &str = "entity pool";
pub const POOL_SLOTS: usize = 300;
pub const ENTITY_BYTES: usize = std::mem::size_of::<Entity>();
pub const POOL_BYTES: usize = POOL_SLOTS * ENTITY_BYTES;
/// Entities placed by the level load (with their alignment: `alloc_aligned`).
pub const LEVEL_ENTITIES: usize = 96;
/// Each frame spawns one projectile (`alloc`) that lives this many frames.
pub const PROJECTILE_LIFETIME: u64 = 8;

/// Nodes of the navigation graph, grown one push at a time (reallocs).
pub const NAV_NODES: usize = 1500;

/// The debug console's text buffer: reserved far beyond what it holds.
pub const CONSOLE_CAPACITY: usize = 1_000_000;
/// Bytes the console buffer holds (its reported usage).
pub const CONSOLE_USED: usize = 1_000;
/// Main-menu entries (a well-used `Vec<String>`).
pub const MENU_ITEMS: [&str; 4] = ["Continue", "New game", "Options", "Quit"];

/// The deliberate leak: a script cache the level never frees.
pub const LEAK_BYTES: usize = 77_777;
pub const LEAK_FUNCTION: &str = "leak_level_script_cache";
/// The second leak with `--extra-leak`: a shader permutation table.
pub const EXTRA_LEAK_BYTES: usize = 31_337;
pub const EXTRA_LEAK_FUNCTION: &str = "leak_shader_permutation_table";

/// Scratch buffer the streaming thread allocates for each decode.
pub const DECODE_SCRATCH_BYTES: usize = 24_576;

/// Sound banks the audio thread loads: (name, 16-bit samples).
pub const SOUND_BANKS: [(&str, usize); 4] =
    [("forest ambience", 96_000), ("wind", 48_000), ("bird call", 12_000), ("creek", 24_000)];
/// Stereo frames the audio thread mixes per tick (one tick per game frame).
pub const MIX_FRAMES: usize = 512;
/// A footstep sound is made on the main thread and played (then freed) by the audio
/// thread every this many frames.
pub const FOOTSTEP_EVERY: u64 = 15;
pub const FOOTSTEP_SAMPLES: usize = 2_205;

// ---------------------------------------------------------------------------------------
// Options and expected figures.
// ---------------------------------------------------------------------------------------

/// What to run. Built by [`parse_args`] or by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The log to write.
    pub out: PathBuf,
    pub textures: usize,
    pub frames: u64,
    /// Adds the second deliberate leak ([`EXTRA_LEAK_BYTES`] in [`EXTRA_LEAK_FUNCTION`]).
    pub extra_leak: bool,
    /// Extra recorder settings in `MEMREPLAY_OPTIONS` syntax (`depth=32,unwind=unwinder`).
    pub recorder_options: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            out: PathBuf::from(DEFAULT_LOG),
            textures: DEFAULT_TEXTURES,
            frames: DEFAULT_FRAMES,
            extra_leak: false,
            recorder_options: String::new(),
        }
    }
}

/// One texture the level loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextureSpec {
    /// File name, also the name of its instance context and of its VRAM resource.
    pub name: String,
    pub width: u32,
    pub height: u32,
    /// Full mip chain down to 1x1.
    pub mip_levels: u32,
    /// Its decoded CPU-side copy: `width * height * 4` bytes, one heap allocation.
    pub heap_bytes: u64,
    /// Its BC7 mip chain in `vram.local`.
    pub vram_bytes: u64,
}

/// One mesh the level loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshSpec {
    pub name: String,
    pub vertices: u32,
    /// Vertex array bytes (a heap allocation, freed once uploaded).
    pub vertex_bytes: u64,
    /// Index array bytes (a heap allocation, freed once uploaded).
    pub index_bytes: u64,
    /// Its buffer in `vram.local`: vertices and indices.
    pub vram_bytes: u64,
}

/// A deliberate leak: `bytes` allocated in `function` under contexts `Level/<LEVEL>` →
/// `context` and never freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leak {
    pub function: &'static str,
    /// (type, name) of the innermost context.
    pub context: (&'static str, &'static str),
    pub bytes: u64,
}

/// What a run with given options does, computed without running it: the figures that do
/// not depend on the standard library's own allocations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub textures: Vec<TextureSpec>,
    /// Sum of the textures' CPU copies.
    pub texture_heap_bytes: u64,
    /// Sum of the textures' VRAM allocations.
    pub texture_vram_bytes: u64,
    pub meshes: Vec<MeshSpec>,
    pub mesh_vram_bytes: u64,
    pub shadow_atlas_bytes: u64,
    /// The renderer's dedicated resources: render and depth targets, the non-power-of-two
    /// textures and the lightmap, and their bytes.
    pub render: Vec<RenderResource>,
    pub render_vram_bytes: u64,
    /// The renderer's sub-allocated buffers ([`VRAM_BUFFERS`]), where they land, and the
    /// blocks of `vram.local` that hold them.
    pub buffers: Vec<SubBuffer>,
    pub buffer_blocks: usize,
    /// Every `vram.local` allocation: textures, mesh buffers, the shadow atlas, the
    /// renderer's resources and buffer blocks.
    pub vram_local_bytes: u64,
    pub vram_local_allocs: usize,
    /// Every `vram.system` allocation: the staging buffer.
    pub vram_system_bytes: u64,
    /// The entity pool's heap block.
    pub pool_bytes: u64,
    pub entity_bytes: u64,
    /// Entities allocated in the pool over the run (level placement + one per frame).
    pub entity_allocs: u64,
    /// Allocations never freed, in the order they are made.
    pub leaks: Vec<Leak>,
    /// The over-reserved console buffer: its allocation size and its reported usage.
    pub over_reserved_capacity: u64,
    pub over_reserved_used: u64,
    pub frames: u64,
    pub labels: [&'static str; 4],
    /// Decode jobs of the streaming thread, one attach each (one per texture).
    pub stream_jobs: usize,
    /// Footsteps made on the main thread and freed on the audio thread.
    pub footsteps: u64,
    /// Names of the demo's threads (main, streaming, audio).
    pub threads: [&'static str; 3],
}

/// Mip levels and bytes of a full BC7 mip chain of a `width` x `height` texture.
pub fn bc7_mip_chain(width: u32, height: u32) -> (u32, u64) {
    let (mut w, mut h) = (u64::from(width.max(1)), u64::from(height.max(1)));
    let (mut mips, mut bytes) = (0u32, 0u64);
    loop {
        // 16 bytes per 4x4 block; a mip smaller than a block still takes one.
        bytes += w.div_ceil(4) * h.div_ceil(4) * 16;
        mips += 1;
        if w == 1 && h == 1 {
            return (mips, bytes);
        }
        w = (w / 2).max(1);
        h = (h / 2).max(1);
    }
}

/// The textures a level with `count` textures loads, in load order.
pub fn texture_specs(count: usize) -> Vec<TextureSpec> {
    (0..count)
        .map(|i| {
            let base = TEXTURE_NAMES[i % TEXTURE_NAMES.len()];
            let round = i / TEXTURE_NAMES.len();
            let name = if round == 0 { format!("{base}.dds") } else { format!("{base}_{round}.dds") };
            let (width, height) = TEXTURE_DIMS[i % TEXTURE_DIMS.len()];
            let (mip_levels, vram_bytes) = bc7_mip_chain(width, height);
            let heap_bytes = u64::from(width) * u64::from(height) * TEXTURE_CPU_BYTES_PER_PIXEL;
            TextureSpec { name, width, height, mip_levels, heap_bytes, vram_bytes }
        })
        .collect()
}

/// The meshes of the level, in load order.
pub fn mesh_specs() -> Vec<MeshSpec> {
    MESHES
        .iter()
        .map(|&(name, vertices)| {
            let vertex_bytes = u64::from(vertices) * VERTEX_BYTES;
            let index_bytes = u64::from(vertices) * INDICES_PER_VERTEX * 4;
            MeshSpec {
                name: format!("{name}.mesh"),
                vertices,
                vertex_bytes,
                index_bytes,
                vram_bytes: vertex_bytes + index_bytes,
            }
        })
        .collect()
}

/// What a run with `opts` does (see [`Expected`]).
pub fn expected(opts: &Options) -> Expected {
    let textures = texture_specs(opts.textures);
    let meshes = mesh_specs();
    let texture_heap_bytes = textures.iter().map(|t| t.heap_bytes).sum();
    let texture_vram_bytes: u64 = textures.iter().map(|t| t.vram_bytes).sum();
    let mesh_vram_bytes: u64 = meshes.iter().map(|m| m.vram_bytes).sum();
    let render = render_resources();
    let render_vram_bytes: u64 = render.iter().map(|r| r.alloc_bytes).sum();
    let buffers = buffer_layout();
    let buffer_blocks = buffers.iter().map(|b| b.block + 1).max().unwrap_or(0);
    let mut leaks = vec![Leak { function: LEAK_FUNCTION, context: ("Scripts", "cache"), bytes: LEAK_BYTES as u64 }];
    if opts.extra_leak {
        leaks.push(Leak {
            function: EXTRA_LEAK_FUNCTION,
            context: ("Shaders", "permutations"),
            bytes: EXTRA_LEAK_BYTES as u64,
        });
    }
    Expected {
        stream_jobs: textures.len(),
        vram_local_allocs: textures.len() + meshes.len() + 1 + render.len() + buffer_blocks,
        texture_heap_bytes,
        texture_vram_bytes,
        mesh_vram_bytes,
        shadow_atlas_bytes: SHADOW_ATLAS_BYTES,
        vram_local_bytes: texture_vram_bytes
            + mesh_vram_bytes
            + SHADOW_ATLAS_BYTES
            + render_vram_bytes
            + buffer_blocks as u64 * BUFFER_BLOCK_BYTES,
        render,
        render_vram_bytes,
        buffers,
        buffer_blocks,
        vram_system_bytes: STAGING_BYTES,
        pool_bytes: POOL_BYTES as u64,
        entity_bytes: ENTITY_BYTES as u64,
        entity_allocs: LEVEL_ENTITIES as u64 + opts.frames,
        leaks,
        over_reserved_capacity: CONSOLE_CAPACITY as u64,
        over_reserved_used: CONSOLE_USED as u64,
        frames: opts.frames,
        labels: LABELS,
        footsteps: opts.frames.div_ceil(FOOTSTEP_EVERY),
        threads: [MAIN_THREAD, STREAMING_THREAD, AUDIO_THREAD],
        textures,
        meshes,
    }
}

// ---------------------------------------------------------------------------------------
// Running.
// ---------------------------------------------------------------------------------------

/// Why a run failed.
#[derive(Debug)]
pub enum RunError {
    /// memreplay was built without `capture_replay_log`.
    Disabled,
    /// A session was already recording (e.g. started by `MEMREPLAY_LOG`).
    AlreadyRecording,
    /// `--options` is invalid.
    Options(memreplay::ConfigError),
    /// Recording could not start (e.g. the log cannot be created).
    Start(memreplay::StartError),
    /// A worker thread could not be spawned or died.
    Thread { name: &'static str, what: String },
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Disabled => write!(f, "memreplay was built without the `capture_replay_log` feature"),
            RunError::AlreadyRecording => {
                write!(f, "a memreplay session is already recording (is MEMREPLAY_LOG set?); the demo starts its own")
            }
            RunError::Options(e) => write!(f, "{e}"),
            RunError::Start(e) => write!(f, "cannot start recording: {e}"),
            RunError::Thread { name, what } => write!(f, "the {name} thread failed: {what}"),
        }
    }
}

impl std::error::Error for RunError {}

/// What a finished run recorded.
#[derive(Debug, Clone)]
pub struct Summary {
    pub stats: memreplay::SessionStats,
    pub expected: Expected,
}

impl Summary {
    /// Log bytes per recorded event.
    pub fn bytes_per_event(&self) -> f64 {
        if self.stats.events == 0 {
            0.0
        } else {
            self.stats.bytes as f64 / self.stats.events as f64
        }
    }
}

/// The recorder configuration the demo uses: callstacks on allocations and frees, usage
/// changes on, frame-pointer walking (the workspace's `.cargo/config.toml` builds with
/// frame pointers), then `opts.recorder_options` on top (`unwind=unwinder` for the
/// unwind tables).
pub fn recorder_config(opts: &Options) -> Result<memreplay::Config, memreplay::ConfigError> {
    let config = memreplay::Config::new(&opts.out)
        .callstacks(true)
        .free_callstacks(true)
        .usage_changes(true)
        .max_stack_depth(16)
        .stack_capture(memreplay::StackCapture::platform_default())
        .flush_interval(Duration::from_millis(50))
        // The demo plays in milliseconds: sample what the OS sees often enough to plot.
        .process_memory_interval(Some(Duration::from_millis(1)))
        .buffer_memory(4 << 20);
    config.validate()?;
    config.with_options(&opts.recorder_options)
}

/// Records one play-through into `opts.out` and returns the session's statistics.
///
/// Call it at most once per process (the recorder and the domains are process-wide), from
/// a binary whose global allocator is [`memreplay::Allocator`]; otherwise the heap is not
/// recorded.
pub fn run(opts: &Options) -> Result<Summary, RunError> {
    if !memreplay::ENABLED {
        return Err(RunError::Disabled);
    }
    if memreplay::is_recording() {
        return Err(RunError::AlreadyRecording);
    }
    let config = recorder_config(opts).map_err(RunError::Options)?;
    // Computed before recording starts: the figures are not part of the game.
    let expected = expected(opts);
    memreplay::start(config).map_err(|e| match e {
        memreplay::StartError::AlreadyRecording => RunError::AlreadyRecording,
        e => RunError::Start(e),
    })?;
    let played = game::play(opts, &expected);
    // Stop even if a worker failed, so the log is complete either way.
    let stats = memreplay::stop();
    played?;
    let stats = stats.ok_or(RunError::Thread { name: MAIN_THREAD, what: "the recording stopped early".into() })?;
    Ok(Summary { stats, expected })
}

/// The whole command line: parses `args` (without the program name), runs, prints the
/// summary. Exit status 0 on success, 1 if the run failed, 2 for bad arguments.
pub fn main_with_args<I>(args: I) -> ExitCode
where
    I: IntoIterator<Item = std::ffi::OsString>,
{
    let opts = match parse_args(args) {
        Ok(Command::Run(opts)) => opts,
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("memreplay-demo: {e}");
            eprintln!("usage: memreplay-demo [OUT.mrl] [--textures N] [--frames N] [--extra-leak] [--options LIST]");
            return ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(summary) => {
            print_summary(&opts, &summary);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("memreplay-demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_summary(opts: &Options, s: &Summary) {
    let st = &s.stats;
    println!(
        "memreplay-demo: played {LEVEL}: {} textures, {} meshes, {} frames{}",
        opts.textures,
        MESHES.len(),
        opts.frames,
        if opts.extra_leak { ", extra leak" } else { "" }
    );
    println!("  log:     {}", st.path.display());
    println!(
        "  events:  {} in {} blocks ({} threads, {} callstacks, {} lost)",
        st.events, st.blocks, st.threads, st.stacks, st.lost_events
    );
    println!("  bytes:   {} ({:.2} bytes/event)", st.bytes, s.bytes_per_event());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bc7_chains() {
        // 4x4 blocks of 16 bytes: one byte per pixel, at least one block per mip.
        assert_eq!(bc7_mip_chain(4, 4), (3, 16 * 3));
        assert_eq!(bc7_mip_chain(1, 1), (1, 16));
        let (mips, bytes) = bc7_mip_chain(256, 256);
        assert_eq!(mips, 9);
        assert_eq!(bytes, 65536 + 16384 + 4096 + 1024 + 256 + 64 + 16 + 16 + 16);
        assert_eq!(bc7_mip_chain(512, 256).0, 10);
    }

    #[test]
    fn texture_names_are_deterministic_and_unique() {
        let specs = texture_specs(20);
        assert_eq!(specs[0].name, "rock.dds");
        assert_eq!(specs[2].name, "bark.dds");
        assert_eq!(specs[8].name, "rock_1.dds");
        assert_eq!(specs[19].name, "moss_2.dds");
        let mut names: Vec<_> = specs.iter().map(|s| &s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 20);
        assert_eq!(specs[5].heap_bytes, 512 * 512 * 4);
    }

    #[test]
    fn expected_figures() {
        let e = expected(&Options::default());
        assert_eq!(e.textures.len(), 8);
        assert_eq!(e.texture_heap_bytes, e.textures.iter().map(|t| t.heap_bytes).sum::<u64>());
        // Textures, meshes, the shadow atlas; 7 targets, 2 non-power-of-two textures and the
        // lightmap; 2 buffer blocks.
        assert_eq!(e.vram_local_allocs, 8 + 6 + 1 + 10 + 2);
        assert_eq!(e.buffer_blocks, 2);
        assert_eq!(e.leaks.len(), 1);
        assert_eq!(e.leaks[0].bytes, LEAK_BYTES as u64);
        assert_eq!(e.entity_allocs, 96 + 60);
        assert_eq!(e.footsteps, 4);
        let e = expected(&Options { extra_leak: true, ..Options::default() });
        assert_eq!(e.leaks.iter().map(|l| l.bytes).collect::<Vec<_>>(), [77_777, 31_337]);
        // Everything the biggest level needs fits in vram.local, even with the bump
        // allocator's alignment padding.
        let big = expected(&Options { textures: MAX_TEXTURES, ..Options::default() });
        let padded: u64 = big.textures.iter().map(|t| t.vram_bytes.next_multiple_of(TEXTURE_ALIGN)).sum::<u64>()
            + big.meshes.iter().map(|m| m.vram_bytes.next_multiple_of(TEXTURE_ALIGN)).sum::<u64>()
            + SHADOW_ATLAS_BYTES
            + big.render_vram_bytes
            + big.buffer_blocks as u64 * BUFFER_BLOCK_BYTES;
        assert!(padded < VRAM_LOCAL_CAPACITY, "{padded}");
    }

    #[test]
    fn the_renderer_s_resources_and_buffer_layout() {
        let r = render_resources();
        let find = |name: &str| r.iter().find(|x| x.name == name).unwrap();
        // 1920x1080 RGBA16F: 16,588,800 bytes, rounded up to 64 KiB.
        assert_eq!(
            (find("gbuffer normals").texel_bytes, find("gbuffer normals").alloc_bytes),
            (16_588_800, 16_646_144)
        );
        assert_eq!((find("bloom quarter").width, find("bloom quarter").height), (480, 270));
        // 1025x1025 R16: 11 levels, 1025² + 512² + 256² + ... + 1² texels of 2 bytes.
        let heightmap = find("terrain heightmap");
        assert_eq!(heightmap.mip_levels, 11);
        assert_eq!(heightmap.texel_bytes, 2 * (1025 * 1025 + (0..10).map(|m| (512u64 >> m).pow(2)).sum::<u64>()));
        assert_eq!(find("lightmap").alloc_bytes, 2 << 20);
        // Block 0: frame constants, the light list, two instance buffers (116 KiB), then the
        // 48 draw-constant buffers fill its last 12 KiB; block 1 takes the 4 other instance buffers.
        let l = buffer_layout();
        let at = |name: &str| l.iter().find(|b| b.name == name).map(|b| (b.block, b.offset)).unwrap();
        assert_eq!(at("frame constants"), (0, 0));
        assert_eq!(at("light list"), (0, 4096));
        assert_eq!(at("instances 1"), (0, 94_208));
        assert_eq!(at("instances 2"), (1, 0));
        assert_eq!(at("instances 5"), (1, 73_728));
        assert_eq!(at("draw constants 0"), (0, 118_784));
        assert_eq!(at("draw constants 47"), (0, 131_072 - 256));
        assert_eq!(l.iter().filter(|b| b.freed_after_load).count(), 16);
    }

    #[test]
    fn entity_is_64_bytes() {
        assert_eq!(ENTITY_BYTES, 64);
        assert_eq!(POOL_BYTES, 19_200);
    }

    #[test]
    fn config_takes_recorder_options() {
        let c = recorder_config(&Options { recorder_options: "depth=32,unwind=unwinder".into(), ..Options::default() })
            .unwrap();
        assert_eq!(c.max_stack_depth, 32);
        assert_eq!(c.stack_capture, memreplay::StackCapture::Unwinder);
        assert!(c.callstacks_on_free && c.callstacks_on_alloc && c.usage_changes);
        assert!(recorder_config(&Options { recorder_options: "depth=0".into(), ..Options::default() }).is_err());
    }
}
