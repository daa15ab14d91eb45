//! The renderer's GPU resources for one frame: screen-sized and screen-fraction render
//! targets, a depth target, non-power-of-two textures with mips, a padded lightmap, and
//! small buffers sub-allocated from blocks. What `replay-cli gpu` pivots and maps.

use memreplay::{Domain, Resource, ResourceKind};

use crate::gpu::{BlockAllocator, GpuAlloc, GpuHeap};
use crate::*;

/// Bytes of a `width` x `height` uncompressed texture of `texel` bytes per texel with a
/// full mip chain down to 1x1 (each level half the last, rounded down, at least 1).
pub fn mip_chain_bytes(width: u32, height: u32, texel: u64) -> (u32, u64) {
    let (mut w, mut h) = (u64::from(width.max(1)), u64::from(height.max(1)));
    let (mut mips, mut bytes) = (0u32, 0u64);
    loop {
        bytes += w * h * texel;
        mips += 1;
        if w == 1 && h == 1 {
            return (mips, bytes);
        }
        w = (w / 2).max(1);
        h = (h / 2).max(1);
    }
}

/// One GPU resource the renderer creates, computed from the constants alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderResource {
    pub name: &'static str,
    pub kind: ResourceKind,
    pub format: &'static str,
    pub width: u32,
    pub height: u32,
    pub mip_levels: u32,
    /// Bytes of its texel data.
    pub texel_bytes: u64,
    /// Bytes allocated: the texel data rounded up to [`TEXTURE_ALIGN`] (the lightmap: more).
    pub alloc_bytes: u64,
    /// The context (type, name) it is created in.
    pub context: (&'static str, &'static str),
}

/// The renderer's dedicated `vram.local` resources, in creation order.
pub fn render_resources() -> Vec<RenderResource> {
    let (sw, sh) = SCREEN;
    let mut out: Vec<RenderResource> = RENDER_TARGETS
        .iter()
        .map(|&(name, kind, format, texel, div)| {
            let (width, height) = (sw / div, sh / div);
            let texel_bytes = u64::from(width) * u64::from(height) * texel;
            RenderResource {
                name,
                kind,
                format,
                width,
                height,
                mip_levels: 1,
                texel_bytes,
                alloc_bytes: texel_bytes.next_multiple_of(TEXTURE_ALIGN),
                context: ("Renderer", "frame graph"),
            }
        })
        .collect();
    for (name, width, height, format, texel) in NPOT_TEXTURES {
        let (mip_levels, texel_bytes) = mip_chain_bytes(width, height, texel);
        out.push(RenderResource {
            name,
            kind: ResourceKind::Texture,
            format,
            width,
            height,
            mip_levels,
            texel_bytes,
            alloc_bytes: texel_bytes.next_multiple_of(TEXTURE_ALIGN),
            context: if name == "ui atlas" { ("UI", "atlas") } else { ("Terrain", LEVEL) },
        });
    }
    let (mip_levels, texel_bytes) = bc7_mip_chain(LIGHTMAP_SIZE, LIGHTMAP_SIZE);
    out.push(RenderResource {
        name: "lightmap",
        kind: ResourceKind::Texture,
        format: TEXTURE_FORMAT,
        width: LIGHTMAP_SIZE,
        height: LIGHTMAP_SIZE,
        mip_levels,
        texel_bytes,
        alloc_bytes: LIGHTMAP_ALLOC_BYTES,
        context: ("Lighting", LEVEL),
    });
    out
}

/// The sub-allocated buffers, in allocation order: (name, bytes).
pub fn sub_buffers() -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (name, bytes, count) in SUB_BUFFERS {
        for i in 0..count {
            out.push((if count == 1 { name.to_owned() } else { format!("{name} {i}") }, bytes));
        }
    }
    out
}

/// Whether the sub-allocated buffer `name` is freed once the level is loaded.
pub fn freed_after_load(name: &str) -> bool {
    name.strip_prefix("draw constants ")
        .and_then(|i| i.parse::<u32>().ok())
        .is_some_and(|i| i % DRAW_CONSTANTS_FREED_EVERY == 0)
}

/// The renderer's live resources.
pub(crate) struct Renderer {
    dedicated: Vec<GpuAlloc>,
    blocks: BlockAllocator,
    buffers: Vec<GpuAlloc>,
}

impl Renderer {
    /// Creates every resource (the caller is in the level's context).
    pub fn create(vram: &mut GpuHeap, buffers_domain: Domain) -> Renderer {
        let mut dedicated = Vec::new();
        for r in render_resources() {
            let _ctx = memreplay::context!(r.context.0, "{}", r.context.1);
            let desc = Resource {
                kind: r.kind,
                width: r.width,
                height: r.height,
                depth_or_layers: 1,
                mip_levels: r.mip_levels,
                format: r.format,
                name: r.name,
            };
            dedicated.push(vram.alloc(r.alloc_bytes, TEXTURE_ALIGN, Some(&desc)));
        }
        let mut blocks = BlockAllocator::new(buffers_domain, BUFFER_BLOCK_BYTES, SUB_BUFFER_ALIGN);
        let mut buffers = Vec::new();
        {
            let _ctx = memreplay::context!("Renderer", "buffers");
            for (name, bytes) in sub_buffers() {
                let desc = Resource {
                    kind: ResourceKind::Buffer,
                    width: bytes as u32,
                    height: 1,
                    depth_or_layers: 1,
                    mip_levels: 1,
                    format: "",
                    name: &name,
                };
                let a = blocks.alloc(vram, bytes, &desc);
                if freed_after_load(&name) {
                    blocks.free(a);
                } else {
                    buffers.push(a);
                }
            }
        }
        Renderer { dedicated, blocks, buffers }
    }

    /// Frees every resource.
    pub fn destroy(self, vram: &mut GpuHeap) {
        let Renderer { dedicated, mut blocks, buffers } = self;
        for b in buffers {
            blocks.free(b);
        }
        blocks.release(vram);
        for a in dedicated {
            vram.free(a);
        }
    }
}

/// One sub-allocated buffer where the renderer's linear block allocator places it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubBuffer {
    pub name: String,
    pub bytes: u64,
    /// Its block, in order of creation, and its offset in it.
    pub block: usize,
    pub offset: u64,
    /// Freed once the level is loaded ([`freed_after_load`]).
    pub freed_after_load: bool,
}

/// Where each of [`sub_buffers`] lands: in the first block with room at its end
/// ([`SUB_BUFFER_ALIGN`]-aligned), else in a new block of [`BUFFER_BLOCK_BYTES`].
pub fn buffer_layout() -> Vec<SubBuffer> {
    let mut ends: Vec<u64> = Vec::new();
    sub_buffers()
        .into_iter()
        .map(|(name, bytes)| {
            let fits = |&end: &u64| end.next_multiple_of(SUB_BUFFER_ALIGN) + bytes <= BUFFER_BLOCK_BYTES;
            let block = ends.iter().position(fits).unwrap_or_else(|| {
                ends.push(0);
                ends.len() - 1
            });
            let offset = ends[block].next_multiple_of(SUB_BUFFER_ALIGN);
            ends[block] = offset + bytes;
            let freed_after_load = freed_after_load(&name);
            SubBuffer { name, bytes, block, offset, freed_after_load }
        })
        .collect()
}
