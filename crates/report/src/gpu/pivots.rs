//! The live resources pivoted as AMD's WPA guide pivots video memory: by kind, by
//! dimensions, screen-sized render targets, non-power-of-two textures with mips, small
//! resources and padding. Every row says which contexts (assets) own it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::formats::format_info;
use super::model::{GpuKind, GpuResource, GpuView};
use crate::rows::Amount;

/// Resources below this many bytes are "small" unless `--small` says otherwise.
pub const DEFAULT_SMALL: u64 = 64 * 1024;

/// Owners listed per grouped row.
const OWNERS_PER_ROW: usize = 3;

/// Counts a resource of `bytes` into `a`.
fn add(a: &mut Amount, bytes: u64) {
    a.count += 1;
    a.bytes = a.bytes.wrapping_add(bytes);
}

/// A context that owns part of a grouped row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Owner {
    /// Its path ("" = outside any context).
    pub context: String,
    /// Its allocations and bytes in the row.
    pub count: u64,
    /// See `count`.
    pub bytes: u64,
}

/// One kind of resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindRow {
    /// The kind.
    pub kind: GpuKind,
    /// Its resources.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Share of all the resources' bytes, in parts per million.
    pub share_ppm: u64,
    /// The contexts holding most of its bytes.
    pub owners: Vec<Owner>,
}

/// Textures, render targets and depth targets of one width × height.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DimensionsRow {
    /// Width in texels.
    pub width: u32,
    /// Height in texels.
    pub height: u32,
    /// Resources of this size.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Share of all the resources' bytes, in parts per million.
    pub share_ppm: u64,
    /// The kinds among them.
    pub kinds: Vec<GpuKind>,
    /// The contexts holding most of their bytes.
    pub owners: Vec<Owner>,
}

/// One resource, as the lists show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceRow {
    /// Its debug name ("" = none).
    pub name: String,
    /// The domain's name.
    pub domain: String,
    /// What it is.
    pub kind: GpuKind,
    /// Width, height, depth or layers and mip levels.
    pub width: u32,
    /// See `width`.
    pub height: u32,
    /// See `width`.
    pub depth_or_layers: u32,
    /// See `width`.
    pub mip_levels: u32,
    /// Its format ("" = none given).
    pub format: String,
    /// Bytes allocated.
    pub size: u64,
    /// Its owner's context path.
    pub context: String,
}

/// A render or depth target the size of the screen or a fraction of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScreenRow {
    /// The resource.
    #[serde(flatten)]
    pub resource: ResourceRow,
    /// "1" (screen-sized), "1/2", "1/4", "1/8" of each side, or "2" (twice each side).
    pub fraction: String,
}

/// A texture with mips whose sides are not both powers of two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NpotRow {
    /// The resource.
    #[serde(flatten)]
    pub resource: ResourceRow,
    /// Bytes of its texel data as it is (null: unknown format).
    pub texel_bytes: Option<u64>,
    /// Each side rounded down to a power of two: its size and texel bytes, and the bytes
    /// that would save.
    pub down: Option<PowerOfTwo>,
    /// Each side rounded up to a power of two: its size and texel bytes, and the bytes that
    /// would cost.
    pub up: Option<PowerOfTwo>,
}

/// A texture resized to powers of two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PowerOfTwo {
    /// The power-of-two size.
    pub width: u32,
    /// See `width`.
    pub height: u32,
    /// Its texel bytes with the same format, layers and mip levels.
    pub texel_bytes: u64,
    /// Bytes saved (rounding down) or added (rounding up) against the texel data now.
    pub delta: u64,
}

/// A resource allocated larger than its texel data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PaddingRow {
    /// The resource.
    #[serde(flatten)]
    pub resource: ResourceRow,
    /// Bytes of its texel data (format, dimensions, layers, mips).
    pub texel_bytes: u64,
    /// `size - texel_bytes`.
    pub padding: u64,
}

/// Resources below the size threshold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Small {
    /// The threshold: resources of fewer bytes are small.
    pub below: u64,
    /// All of them.
    pub total: Amount,
    /// By kind.
    pub by_kind: Vec<KindRow>,
}

/// Textures and targets whose padding could not be checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unchecked {
    /// Described with a format this reader does not know (or none).
    pub unknown_format: Amount,
    /// Described without dimensions.
    pub no_dimensions: Amount,
    /// Allocated smaller than their texel data (the descriptor and the allocation disagree).
    pub undersized: Amount,
}

/// Every pivot of a view's resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pivots {
    /// All the resources.
    pub total: Amount,
    /// By kind, largest first.
    pub by_kind: Vec<KindRow>,
    /// By width × height (textures and targets), largest first; `--limit` rows.
    pub by_dimensions: Vec<DimensionsRow>,
    /// Distinct sizes in all (rows before the limit).
    pub dimensions_total: usize,
    /// The screen size the targets were compared with (null: unknown).
    pub screen: Option<(u32, u32)>,
    /// Render and depth targets at the screen size or a fraction of it, largest first.
    pub screen_sized: Vec<ScreenRow>,
    /// Their bytes.
    pub screen_sized_total: Amount,
    /// Textures with mips and a side that is not a power of two, largest first.
    pub npot: Vec<NpotRow>,
    /// Their bytes, and what rounding every one down would save and up would cost.
    pub npot_total: Amount,
    /// See `npot_total`.
    pub npot_save: u64,
    /// See `npot_total`.
    pub npot_cost: u64,
    /// Small resources.
    pub small: Small,
    /// Padded resources, largest padding first.
    pub padding: Vec<PaddingRow>,
    /// All the padded resources and their padding bytes.
    pub padding_total: Amount,
    /// See `padding_total`.
    pub padding_bytes: u64,
    /// What the padding check could not read.
    pub unchecked: Unchecked,
}

fn ppm(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        0
    } else {
        (u128::from(part) * 1_000_000 / u128::from(whole)) as u64
    }
}

fn owners<'a>(rs: impl Iterator<Item = &'a GpuResource>) -> Vec<Owner> {
    let mut by: BTreeMap<&str, Amount> = BTreeMap::new();
    for r in rs {
        add(by.entry(&r.context).or_default(), r.size);
    }
    let mut v: Vec<Owner> =
        by.into_iter().map(|(c, a)| Owner { context: c.to_owned(), count: a.count, bytes: a.bytes }).collect();
    v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.context.cmp(&b.context)));
    v.truncate(OWNERS_PER_ROW);
    v
}

fn row(view: &GpuView, r: &GpuResource) -> ResourceRow {
    ResourceRow {
        name: r.name.clone(),
        domain: view.domains.iter().find(|d| d.id == r.domain).map_or_else(|| r.domain.to_string(), |d| d.name.clone()),
        kind: r.kind,
        width: r.width,
        height: r.height,
        depth_or_layers: r.depth_or_layers,
        mip_levels: r.mip_levels,
        format: r.format.clone(),
        size: r.size,
        context: r.context.clone(),
    }
}

fn is_image(kind: GpuKind) -> bool {
    matches!(kind, GpuKind::Texture | GpuKind::RenderTarget | GpuKind::DepthStencil)
}

/// Largest bytes first, then name, then address: a stable order for equal rows.
fn by_size_then_name(a: &GpuResource, b: &GpuResource) -> std::cmp::Ordering {
    b.size.cmp(&a.size).then_with(|| a.name.cmp(&b.name)).then_with(|| (a.domain, a.addr).cmp(&(b.domain, b.addr)))
}

fn kind_rows<'a>(rs: impl Iterator<Item = &'a GpuResource> + Clone, whole: u64) -> Vec<KindRow> {
    let mut rows: Vec<KindRow> = GpuKind::ALL
        .iter()
        .filter_map(|&k| {
            let of = rs.clone().filter(move |r| r.kind == k);
            let mut a = Amount::default();
            of.clone().for_each(|r| add(&mut a, r.size));
            (a.count > 0).then(|| KindRow {
                kind: k,
                count: a.count,
                bytes: a.bytes,
                share_ppm: ppm(a.bytes, whole),
                owners: owners(of),
            })
        })
        .collect();
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.kind.cmp(&b.kind)));
    rows
}

/// The fraction of the screen `(w, h)` is, if it is one of 2, 1, 1/2, 1/4, 1/8 of each side.
fn screen_fraction((w, h): (u32, u32), (sw, sh): (u32, u32)) -> Option<&'static str> {
    if sw == 0 || sh == 0 {
        return None;
    }
    let (w, h, sw, sh) = (u64::from(w), u64::from(h), u64::from(sw), u64::from(sh));
    if w == 2 * sw && h == 2 * sh {
        return Some("2");
    }
    for (k, name) in [(1u64, "1"), (2, "1/2"), (4, "1/4"), (8, "1/8")] {
        // Odd screen sides round up at the smaller sizes (a 1/2 of 1080 is 540; of 1081, 541).
        if w == sw.div_ceil(k) && h == sh.div_ceil(k) || w == sw / k && h == sh / k {
            return Some(name);
        }
    }
    None
}

fn pow2_down(x: u32) -> u32 {
    if x == 0 {
        0
    } else {
        1 << (31 - x.leading_zeros())
    }
}

/// Pivots the view's resources. `small`: the size threshold; `limit`: rows per list
/// (`usize::MAX`: all).
pub fn pivots(view: &GpuView, small: u64, limit: usize) -> Pivots {
    let rs = &view.resources;
    let mut total = Amount::default();
    rs.iter().for_each(|r| add(&mut total, r.size));
    let by_kind = kind_rows(rs.iter(), total.bytes);

    let mut dims: BTreeMap<(u32, u32), Vec<&GpuResource>> = BTreeMap::new();
    for r in rs.iter().filter(|r| is_image(r.kind) && r.width > 0 && r.height > 0) {
        dims.entry((r.width, r.height)).or_default().push(r);
    }
    let mut by_dimensions: Vec<DimensionsRow> = dims
        .into_iter()
        .map(|((width, height), group)| {
            let mut a = Amount::default();
            group.iter().for_each(|r| add(&mut a, r.size));
            let mut kinds: Vec<GpuKind> = group.iter().map(|r| r.kind).collect();
            kinds.sort_unstable();
            kinds.dedup();
            DimensionsRow {
                width,
                height,
                count: a.count,
                bytes: a.bytes,
                share_ppm: ppm(a.bytes, total.bytes),
                kinds,
                owners: owners(group.into_iter()),
            }
        })
        .collect();
    by_dimensions.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| (b.width, b.height).cmp(&(a.width, a.height))));
    let dimensions_total = by_dimensions.len();
    by_dimensions.truncate(limit);

    let mut sorted: Vec<&GpuResource> = rs.iter().collect();
    sorted.sort_by(|a, b| by_size_then_name(a, b));

    let mut screen_sized = Vec::new();
    let mut screen_sized_total = Amount::default();
    if let Some(screen) = view.screen {
        for r in sorted.iter().filter(|r| matches!(r.kind, GpuKind::RenderTarget | GpuKind::DepthStencil)) {
            if let Some(f) = screen_fraction((r.width, r.height), screen) {
                add(&mut screen_sized_total, r.size);
                screen_sized.push(ScreenRow { resource: row(view, r), fraction: f.to_owned() });
            }
        }
    }
    screen_sized.truncate(limit);

    let mut npot = Vec::new();
    let (mut npot_total, mut npot_save, mut npot_cost) = (Amount::default(), 0u64, 0u64);
    for r in sorted.iter().filter(|r| {
        r.kind == GpuKind::Texture
            && r.mip_levels > 1
            && r.width > 0
            && r.height > 0
            && !(r.width.is_power_of_two() && r.height.is_power_of_two())
    }) {
        add(&mut npot_total, r.size);
        let info = format_info(&r.format);
        let texel_bytes = info.map(|f| f.texture_bytes(r.width, r.height, r.depth_or_layers, r.mip_levels));
        let resized = |width: Option<u32>, height: Option<u32>, delta: &dyn Fn(u64, u64) -> u64| {
            let (f, now, width, height) = (info?, texel_bytes?, width?, height?);
            let t = f.texture_bytes(width, height, r.depth_or_layers, r.mip_levels);
            Some(PowerOfTwo { width, height, texel_bytes: t, delta: delta(now, t) })
        };
        let down = resized(Some(pow2_down(r.width)), Some(pow2_down(r.height)), &|now, t| now.saturating_sub(t));
        // A side past 2^31 has no power of two above it in 32 bits: no figure.
        let up = resized(r.width.checked_next_power_of_two(), r.height.checked_next_power_of_two(), &|now, t| {
            t.saturating_sub(now)
        });
        npot_save = npot_save.saturating_add(down.as_ref().map_or(0, |p| p.delta));
        npot_cost = npot_cost.saturating_add(up.as_ref().map_or(0, |p| p.delta));
        npot.push(NpotRow { resource: row(view, r), texel_bytes, down, up });
    }
    npot.truncate(limit);

    let small_ones = rs.iter().filter(|r| r.size < small);
    let mut small_total = Amount::default();
    small_ones.clone().for_each(|r| add(&mut small_total, r.size));
    let small = Small { below: small, total: small_total, by_kind: kind_rows(small_ones, total.bytes) };

    let mut padding = Vec::new();
    let (mut padding_total, mut padding_bytes) = (Amount::default(), 0u64);
    let mut unchecked = Unchecked {
        unknown_format: Amount::default(),
        no_dimensions: Amount::default(),
        undersized: Amount::default(),
    };
    for r in sorted.iter().filter(|r| is_image(r.kind)) {
        if r.width == 0 || r.height == 0 {
            add(&mut unchecked.no_dimensions, r.size);
            continue;
        }
        let Some(info) = format_info(&r.format) else {
            add(&mut unchecked.unknown_format, r.size);
            continue;
        };
        let texel_bytes = info.texture_bytes(r.width, r.height, r.depth_or_layers, r.mip_levels);
        if r.size < texel_bytes {
            add(&mut unchecked.undersized, r.size);
        } else if r.size > texel_bytes {
            add(&mut padding_total, r.size);
            padding_bytes = padding_bytes.saturating_add(r.size - texel_bytes);
            padding.push(PaddingRow { resource: row(view, r), texel_bytes, padding: r.size - texel_bytes });
        }
    }
    padding.sort_by(|a, b| b.padding.cmp(&a.padding).then_with(|| a.resource.name.cmp(&b.resource.name)));
    padding.truncate(limit);

    Pivots {
        total,
        by_kind,
        by_dimensions,
        dimensions_total,
        screen: view.screen,
        screen_sized,
        screen_sized_total,
        npot,
        npot_total,
        npot_save,
        npot_cost,
        small,
        padding,
        padding_total,
        padding_bytes,
        unchecked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{GpuSource, GpuView};

    fn texture(name: &str, w: u32, h: u32, mips: u32, format: &str, size: u64) -> GpuResource {
        GpuResource {
            domain: 1,
            addr: 0,
            size,
            kind: GpuKind::Texture,
            width: w,
            height: h,
            depth_or_layers: 1,
            mip_levels: mips,
            format: format.into(),
            name: name.into(),
            context: String::new(),
        }
    }

    fn view(resources: Vec<GpuResource>) -> GpuView {
        GpuView {
            source: GpuSource::Log { path: "t.mrl".into(), point: "at the end".into() },
            domains: Vec::new(),
            resources,
            blocks: Vec::new(),
            screen: Some((u32::MAX, 1)),
        }
    }

    /// Descriptors a hostile log can hold (sides of 4G texels, 32 mips, sizes near 2^64)
    /// give saturated figures or none, never an overflow.
    #[test]
    fn hostile_descriptors_saturate() {
        let v = view(vec![
            texture("huge", u32::MAX, u32::MAX, 32, "RGBA32_FLOAT", u64::MAX),
            texture("wide", (1 << 31) + 1, 3, 2, "BC7", u64::MAX - 1),
            texture("odd", 3, 5, u32::MAX, "R8", 1 << 40),
        ]);
        let p = pivots(&v, DEFAULT_SMALL, usize::MAX);
        let wide = p.npot.iter().find(|n| n.resource.name == "wide").unwrap();
        assert_eq!(wide.up, None, "no 32-bit power of two above 2^31 + 1");
        assert_eq!(wide.down.as_ref().map(|d| d.width), Some(1 << 31));
        let huge = p.npot.iter().find(|n| n.resource.name == "huge").unwrap();
        assert_eq!(huge.texel_bytes, Some(u64::MAX), "saturated");
        // "wide" alone is padded by almost 2^64, "odd" by about 2^40: the sum saturates.
        assert_eq!(p.padding_bytes, u64::MAX);
        assert_eq!(p.npot_total.count, 3);
    }
}
