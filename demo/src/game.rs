//! The game itself, on the main thread: main menu, level load, frames, level unload.

use std::collections::VecDeque;

use memreplay::{Domain, DomainKind, Resource, ResourceKind};

use crate::gpu::{GpuAlloc, GpuHeap};
use crate::pool::{Entity, EntityPool, Slot};
use crate::render::Renderer;
use crate::workers::{Audio, Streamer};
use crate::*;

/// Plays the whole game while a session records.
pub(crate) fn play(opts: &Options, expected: &Expected) -> Result<(), RunError> {
    memreplay::set_thread_name(MAIN_THREAD);
    // Spans entered on this thread become contexts of type "System", named by their
    // `name` field (as Bevy names its systems' spans).
    let _tracing = {
        use tracing_subscriber::layer::SubscriberExt;
        let layer =
            memreplay::tracing_layer::ContextLayer::new().with_type(SYSTEM_CONTEXT_TYPE).name_from_field("name");
        tracing::subscriber::set_default(tracing_subscriber::registry().with(layer))
    };

    let (streamer, audio) = {
        let _ctx = memreplay::context!("Engine", "startup");
        (Streamer::spawn()?, Audio::spawn()?)
    };
    // Domains are defined once, at start-up; the handles are plain ids.
    let vram_local = Domain::define(VRAM_LOCAL, DomainKind::GpuLocal, VRAM_LOCAL_CAPACITY);
    let domains = Domains {
        vram_local,
        vram_system: Domain::define(VRAM_SYSTEM, DomainKind::GpuShared, VRAM_SYSTEM_CAPACITY),
        entity_pool: Domain::define_within(ENTITY_POOL, DomainKind::Pool, POOL_BYTES as u64, Domain::HEAP),
        // The renderer's buffers, sub-allocated inside blocks of vram.local.
        vram_buffers: Domain::define_within(VRAM_BUFFERS, DomainKind::GpuLocal, 0, vram_local),
    };

    memreplay::label(LABELS[0]);
    let menu = MainMenu::open();

    let result = (|| {
        let mut level = Level::load(opts, expected, &domains, &streamer)?;
        memreplay::label!("{}", LABELS[1]);

        memreplay::label!("{}", LABELS[2]);
        for frame in 0..opts.frames {
            memreplay::frame_start(frame);
            // What the driver says each frame (VK_EXT_memory_budget's heapBudget and
            // heapUsage): another process takes video memory for a few frames.
            let budget = if LOW_BUDGET_FRAMES.contains(&frame) { VRAM_LOCAL_LOW_BUDGET } else { VRAM_LOCAL_BUDGET };
            domains.vram_local.budget(budget, level.vram.live_bytes());
            level.update(frame, &audio)?;
        }

        level.unload();
        memreplay::label(LABELS[3]);
        Ok(())
    })();

    // Shut the workers down whatever happened, so that their events reach the log.
    let streamed = streamer.shutdown();
    let mixed = audio.shutdown();
    drop(menu);
    result.and(streamed).and(mixed)
}

struct Domains {
    vram_local: Domain,
    vram_system: Domain,
    entity_pool: Domain,
    vram_buffers: Domain,
}

/// The main menu and the debug console, open for the whole run.
struct MainMenu {
    items: Vec<String>,
    /// Reserved for a million bytes, holds a thousand: the over-reserved container.
    console: Vec<u8>,
}

impl MainMenu {
    fn open() -> Self {
        let _ctx = memreplay::context!("UI", "main menu");
        let mut items = Vec::with_capacity(MENU_ITEMS.len());
        items.extend(MENU_ITEMS.iter().map(|s| s.to_string()));
        // A well-used container: every reserved slot holds an item.
        memreplay::vec_usage(&items);

        let _console_ctx = memreplay::context!("UI", "debug console");
        let mut console = Vec::with_capacity(CONSOLE_CAPACITY);
        let line = b"[console] memreplay demo ready\n";
        while console.len() < CONSOLE_USED {
            let n = line.len().min(CONSOLE_USED - console.len());
            console.extend_from_slice(&line[..n]);
        }
        memreplay::vec_usage(&console);
        std::hint::black_box(items.iter().map(String::len).sum::<usize>());
        MainMenu { items, console }
    }
}

impl Drop for MainMenu {
    fn drop(&mut self) {
        std::hint::black_box((self.items.len(), self.console.len()));
    }
}

struct Texture {
    /// The decoded CPU-side copy (kept for CPU sampling: collision, foliage density).
    pixels: Vec<u8>,
    vram: GpuAlloc,
}

/// A small deterministic random number generator (64-bit LCG).
struct Lcg(u64);

impl Lcg {
    fn next_f32(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32) / ((1u64 << 24) as f32)
    }
}

#[derive(Clone, Copy, Default)]
struct NavNode {
    position: [f32; 3],
    neighbour: u32,
}

struct Level {
    vram: GpuHeap,
    textures: Vec<Texture>,
    meshes: Vec<GpuAlloc>,
    shadow_atlas: GpuAlloc,
    renderer: Renderer,
    nav: Vec<NavNode>,
    pool: EntityPool,
    /// Live projectiles: (spawn frame, slot), oldest first.
    projectiles: VecDeque<(u64, Slot)>,
    rng: Lcg,
    next_entity_id: u32,
}

impl Level {
    fn load(opts: &Options, expected: &Expected, domains: &Domains, streamer: &Streamer) -> Result<Level, RunError> {
        let _level = memreplay::context!("Level", "{}", LEVEL);
        let mut vram = GpuHeap::new(domains.vram_local, VRAM_LOCAL, VRAM_LOCAL_BASE, VRAM_LOCAL_CAPACITY);
        let mut upload = GpuHeap::new(domains.vram_system, VRAM_SYSTEM, VRAM_SYSTEM_BASE, VRAM_SYSTEM_CAPACITY);

        let staging = {
            let _ctx = memreplay::context!("Renderer", "upload");
            let desc = buffer_resource(STAGING_BYTES, "upload staging");
            upload.alloc(STAGING_BYTES, 4096, Some(&desc))
        };

        let textures = {
            let _ctx = memreplay::context!("Textures", "{}", LEVEL);
            let mut textures = Vec::with_capacity(expected.textures.len());
            for spec in &expected.textures {
                textures.push(load_texture(spec, &mut vram, streamer)?);
            }
            textures
        };

        let meshes = {
            let _ctx = memreplay::context!("Meshes", "{}", LEVEL);
            expected.meshes.iter().map(|spec| load_mesh(spec, &mut vram)).collect()
        };

        let shadow_atlas = {
            let _ctx = memreplay::context!("Renderer", "shadows");
            let desc = Resource {
                kind: ResourceKind::DepthStencil,
                width: SHADOW_ATLAS_SIZE,
                height: SHADOW_ATLAS_SIZE,
                depth_or_layers: 1,
                mip_levels: 1,
                format: "D32_FLOAT",
                name: "shadow atlas",
            };
            vram.alloc(SHADOW_ATLAS_BYTES, TEXTURE_ALIGN, Some(&desc))
        };

        // The swap chain's size, so reports can find screen-sized render targets.
        memreplay::display_size(SCREEN.0, SCREEN.1);
        let renderer = Renderer::create(&mut vram, domains.vram_buffers);

        let mut rng = Lcg(0x5eed);
        let nav = {
            // Grown one node at a time, as a graph builder would: the Vec reallocates
            // as it doubles.
            let _ctx = memreplay::context!("Navigation", "path graph");
            let mut nav = Vec::new();
            for i in 0..NAV_NODES {
                let position = [rng.next_f32() * 512.0, 0.0, rng.next_f32() * 512.0];
                nav.push(NavNode { position, neighbour: ((i * 7 + 1) % NAV_NODES) as u32 });
            }
            nav
        };

        let mut level = Level {
            vram,
            textures,
            meshes,
            shadow_atlas,
            renderer,
            nav,
            pool: {
                let _ctx = memreplay::context!("Entities", "{}", LEVEL);
                EntityPool::new(domains.entity_pool)
            },
            projectiles: VecDeque::with_capacity(PROJECTILE_LIFETIME as usize + 1),
            rng,
            next_entity_id: 1,
        };
        {
            let _ctx = memreplay::context!("Entities", "{}", LEVEL);
            for i in 0..LEVEL_ENTITIES {
                let nav = level.nav[i * 13 % NAV_NODES];
                let e = Entity::new(level.next_entity_id, 1 + (i % 4) as u32, nav.position, [0.0; 3], 0);
                level.next_entity_id += 1;
                level.pool.spawn(e, true).expect("the pool holds the level's entities");
            }
            level.pool.report_usage();
        }

        {
            let _ctx = memreplay::context!("Scripts", "cache");
            leak_level_script_cache();
        }
        if opts.extra_leak {
            let _ctx = memreplay::context!("Shaders", "permutations");
            leak_shader_permutation_table();
        }

        upload.free(staging);
        Ok(level)
    }

    fn update(&mut self, frame: u64, audio: &Audio) -> Result<(), RunError> {
        let _ctx = memreplay::context!("Frame", "update");

        // Simulate: steer along the navigation graph and move everything, no allocation.
        let node = self.nav[frame as usize % NAV_NODES];
        let next = self.nav[node.neighbour as usize].position;
        for e in self.pool.live_mut() {
            if e.kind == 1 {
                e.velocity = [next[0] - e.position[0], 0.0, next[2] - e.position[2]];
            }
            for (p, v) in e.position.iter_mut().zip(e.velocity) {
                *p += v / 60.0;
            }
        }

        // One projectile per frame, each living PROJECTILE_LIFETIME frames.
        let velocity = [self.rng.next_f32() * 20.0 - 10.0, 5.0, self.rng.next_f32() * 20.0 - 10.0];
        let projectile = Entity::new(self.next_entity_id, 9, [256.0, 2.0, 256.0], velocity, frame as u32);
        self.next_entity_id += 1;
        let slot = self.pool.spawn(projectile, false).expect("projectiles expire before the pool fills");
        self.projectiles.push_back((frame, slot));
        while let Some(&(born, slot)) = self.projectiles.front() {
            if frame - born < PROJECTILE_LIFETIME {
                break;
            }
            self.pool.despawn(slot);
            self.projectiles.pop_front();
        }
        self.pool.report_usage();

        // Per-frame temporaries: the visible set and the HUD text.
        let visible: Vec<u32> = self.pool.live().filter(|(_, e)| e.position[0] < 384.0).map(|(_, e)| e.id).collect();
        // The HUD is drawn by a "system" in the tracing sense: its span becomes a context
        // through memreplay's tracing layer, with no memreplay call here.
        let hud = tracing::info_span!("system", name = HUD_SYSTEM)
            .in_scope(|| format!("frame {frame}: {} entities, {} visible", self.pool.len(), visible.len()));
        std::hint::black_box(&hud);

        if frame % FOOTSTEP_EVERY == 0 {
            // Made here, freed by the audio thread.
            let step: Vec<i16> = (0..FOOTSTEP_SAMPLES).map(|i| ((i * 131) % 4096) as i16 - 2048).collect();
            audio.play(step)?;
        }
        audio.tick(frame)?;

        if frame % 30 == 0 {
            // A profiler overlay is tooling, not game memory: keep it out of the log.
            // (Allocate and free it inside `untracked`, or the log sees half of it.)
            let n = memreplay::untracked(|| format!("{hud} | textures {}", self.textures.len()).len());
            std::hint::black_box(n);
        }
        Ok(())
    }

    /// Frees everything the level holds (the leaks are, by design, out of reach).
    fn unload(self) {
        let _ctx = memreplay::context!("Level", "{} unload", LEVEL);
        let Level { mut vram, textures, meshes, shadow_atlas, renderer, nav, mut pool, projectiles, .. } = self;
        drop(projectiles);
        pool.clear();
        pool.report_usage();
        drop(pool);
        drop(nav);
        renderer.destroy(&mut vram);
        vram.free(shadow_atlas);
        for mesh in meshes {
            vram.free(mesh);
        }
        for t in textures {
            vram.free(t.vram);
            drop(t.pixels);
        }
    }
}

fn buffer_resource(bytes: u64, name: &str) -> Resource<'_> {
    Resource {
        kind: ResourceKind::Buffer,
        width: u32::try_from(bytes).unwrap_or(u32::MAX),
        height: 1,
        depth_or_layers: 1,
        mip_levels: 1,
        format: "",
        name,
    }
}

/// Loads one texture: its CPU copy (decoded by the streaming thread) and its VRAM.
fn load_texture(spec: &TextureSpec, vram: &mut GpuHeap, streamer: &Streamer) -> Result<Texture, RunError> {
    let _tex = memreplay::instance_context!("Texture", "{}", spec.name);
    let pixels_len = spec.heap_bytes as usize;
    let mut pixels = vec![0u8; pixels_len];
    // The "file": one byte per pixel.
    let compressed: Vec<u8> = (0..pixels_len / 4).map(|i| (i as u8).wrapping_mul(31) ^ spec.width as u8).collect();
    // Any address inside the CPU copy will do for the worker's attach.
    let interior = pixels.as_ptr().wrapping_add(pixels_len / 2);
    let decoded = streamer.decode(interior, compressed)?;
    pixels.copy_from_slice(&decoded);
    // Allocated on the streaming thread, freed here.
    drop(decoded);

    let desc = Resource {
        kind: ResourceKind::Texture,
        width: spec.width,
        height: spec.height,
        depth_or_layers: 1,
        mip_levels: spec.mip_levels,
        format: TEXTURE_FORMAT,
        name: &spec.name,
    };
    let vram = vram.alloc(spec.vram_bytes, TEXTURE_ALIGN, Some(&desc));
    Ok(Texture { pixels, vram })
}

/// Loads one mesh: builds its vertex and index arrays, uploads them, frees them.
fn load_mesh(spec: &MeshSpec, vram: &mut GpuHeap) -> GpuAlloc {
    // The function form of a context, for names made at run time.
    let _mesh = memreplay::push_context("Mesh", &spec.name, true);
    let n = spec.vertices as usize;
    let mut vertices: Vec<[f32; 8]> = Vec::with_capacity(n);
    for i in 0..n {
        let a = i as f32 * 0.01;
        vertices.push([a.cos(), a, a.sin(), 0.0, 1.0, 0.0, a.fract(), 1.0 - a.fract()]);
    }
    let mut indices: Vec<u32> = Vec::with_capacity(n * INDICES_PER_VERTEX as usize);
    for i in 0..n as u32 {
        indices.extend([i, (i + 1) % n as u32, (i + 2) % n as u32]);
    }
    // The "upload": the driver reads both arrays (opaque to the optimizer, which could
    // otherwise drop them).
    std::hint::black_box((&vertices, &indices));
    debug_assert_eq!(vertices.len() * std::mem::size_of::<[f32; 8]>(), spec.vertex_bytes as usize);
    debug_assert_eq!(indices.len() * 4, spec.index_bytes as usize);
    vram.alloc(spec.vram_bytes, BUFFER_ALIGN, Some(&buffer_resource(spec.vram_bytes, &spec.name)))
}

/// The deliberate leak: the level's compiled-script cache, allocated and forgotten.
#[inline(never)]
fn leak_level_script_cache() {
    let mut cache = Vec::<u8>::with_capacity(LEAK_BYTES); // LEAK-SITE (tests look this line up)
    cache.extend((0..64).map(|i| i as u8));
    // `black_box`: without it the optimizer sees the allocation is never used and
    // removes it, leak and all.
    std::mem::forget(std::hint::black_box(cache));
}

/// The second deliberate leak (`--extra-leak`): a shader permutation table.
#[inline(never)]
fn leak_shader_permutation_table() {
    let table = Vec::<u8>::with_capacity(EXTRA_LEAK_BYTES);
    std::mem::forget(std::hint::black_box(table));
}
