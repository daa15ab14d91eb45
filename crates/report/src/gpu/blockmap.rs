//! The block map: each block of a sub-allocating domain drawn to scale with its
//! sub-allocations, and its fragmentation figures, as GpuMemDumpVis draws a VMA dump.
//!
//! The figures ([`figures`], [`domain_figures`]) take the sub-allocations as they come:
//! unsorted, overlapping one another (bad input, or aliased resources), reaching past the
//! block's end, in zero-sized blocks. Nothing here panics on such input: overlapping bytes
//! and bytes past the end are counted, and drawn in a colour of their own.
//!
//! The drawings: [`svg`] (a standalone SVG, also inlined in the HTML report's GPU
//! section) and [`to_text`] (a character bar per block for the terminal).

use std::fmt::Write as _;

use serde::Serialize;

use super::model::{GpuBlock, GpuKind, GpuSource, GpuView};
use crate::table::{percent, plural, ratio, size, size_f};
use crate::xml::escape;

/// A block's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockFigures {
    /// The domain the block is an allocation of.
    pub domain: u32,
    /// The sub-allocating domain whose allocations lie inside it.
    pub sub_domain: u32,
    /// The block's address in `domain`.
    pub addr: u64,
    /// The block's size in bytes.
    pub size: u64,
    /// Bytes of the block inside at least one sub-allocation (each byte once, however
    /// many sub-allocations overlap there; bytes past the block's end not counted).
    pub used_bytes: u64,
    /// Sub-allocations in the block (zero-sized ones and ones past its end included).
    pub allocations: u64,
    /// Bytes of the block in no sub-allocation: `size - used_bytes`.
    pub free_bytes: u64,
    /// Free ranges: the gaps between sub-allocations and at both ends of the block.
    pub free_ranges: u64,
    /// The largest free range, in bytes (0 when none).
    pub largest_free_range: u64,
    /// External fragmentation: `1 - largest_free_range / free_bytes`, the share of the
    /// free bytes an allocation of the largest free range's size could not use. 0 when
    /// the free bytes are one range, or none; near 1 when they are scattered in many
    /// small ranges.
    pub fragmentation: f64,
    /// Bytes of the block inside two sub-allocations or more (each byte once): aliased
    /// resources, or a source that contradicts itself.
    pub overlap_bytes: u64,
    /// Bytes of sub-allocations past the block's end, summed over the sub-allocations.
    pub past_end_bytes: u64,
    /// Sub-allocations that reach past the block's end or start past it.
    pub past_end_allocations: u64,
}

/// The blocks of one sub-allocating domain, in all.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainBlockFigures {
    /// The sub-allocating domain.
    pub sub_domain: u32,
    /// Its name.
    pub sub_domain_name: String,
    /// The domain its blocks are allocations of.
    pub parent: u32,
    /// Its name.
    pub parent_name: String,
    /// Blocks.
    pub blocks: u64,
    /// Their sizes, summed.
    pub block_bytes: u64,
    /// Used bytes of the blocks, summed ([`BlockFigures::used_bytes`]).
    pub used_bytes: u64,
    /// Sub-allocations in the blocks.
    pub allocations: u64,
    /// Free bytes of the blocks, summed.
    pub free_bytes: u64,
    /// Free ranges of the blocks, summed.
    pub free_ranges: u64,
    /// The largest free range over all the blocks.
    pub largest_free_range: u64,
    /// `1 - largest_free_range / free_bytes` over all the blocks (0 without free bytes).
    pub fragmentation: f64,
    /// Overlapping bytes of the blocks, summed.
    pub overlap_bytes: u64,
    /// Bytes past the blocks' ends, summed.
    pub past_end_bytes: u64,
}

/// What a sweep over a block's sub-allocations finds: ranges as `(start, end)` offsets.
struct Sweep {
    /// The free ranges, by offset.
    free: Vec<(u64, u64)>,
    /// The ranges inside two sub-allocations or more, by offset.
    overlaps: Vec<(u64, u64)>,
    /// Bytes past the end, summed over the sub-allocations, and how many reach there.
    past_end_bytes: u64,
    past_end_allocations: u64,
}

/// Where a sub-allocation ends (saturating: an offset and size past `u64::MAX` end there).
fn end_of(offset: u64, size: u64) -> u64 {
    offset.saturating_add(size)
}

fn sweep(block: &GpuBlock) -> Sweep {
    let len = block.size;
    let mut past_end_bytes = 0u64;
    let mut past_end_allocations = 0u64;
    let mut spans: Vec<(u64, u64)> = Vec::with_capacity(block.allocations.len());
    for a in &block.allocations {
        let end = end_of(a.offset, a.size);
        if end > len || a.offset > len {
            past_end_allocations += 1;
            past_end_bytes = past_end_bytes.wrapping_add(end.saturating_sub(a.offset.max(len)));
        }
        let (start, end) = (a.offset.min(len), end.min(len));
        if end > start {
            spans.push((start, end));
        }
    }
    spans.sort_unstable();
    let mut free = Vec::new();
    let mut overlaps: Vec<(u64, u64)> = Vec::new();
    // Sorted by start, the covered bytes from a span's start on are `start..covered`
    // (every span before it starts at or before it), and the bytes covered twice or more
    // from there on are `start..twice` (`twice`: the second-highest end so far).
    let (mut covered, mut twice) = (0u64, 0u64);
    for (start, end) in spans {
        if start > covered {
            free.push((covered, start));
        }
        let (o_start, o_end) = (start.max(twice), end.min(covered));
        if o_end > o_start {
            match overlaps.last_mut() {
                Some(last) if last.1 == o_start => last.1 = o_end,
                _ => overlaps.push((o_start, o_end)),
            }
        }
        twice = twice.max(end.min(covered));
        covered = covered.max(end);
    }
    if covered < len {
        free.push((covered, len));
    }
    Sweep { free, overlaps, past_end_bytes, past_end_allocations }
}

/// `1 - largest / free`, 0 without free bytes.
fn fragmentation(largest: u64, free: u64) -> f64 {
    if free == 0 {
        0.0
    } else {
        1.0 - largest as f64 / free as f64
    }
}

/// A block's figures. The sub-allocations may come in any order; the free ranges are the
/// gaps between them and at both ends of the block.
pub fn figures(block: &GpuBlock) -> BlockFigures {
    figures_of(block, &sweep(block))
}

fn figures_of(block: &GpuBlock, s: &Sweep) -> BlockFigures {
    let free_bytes = s.free.iter().map(|(a, b)| b - a).sum::<u64>();
    let largest_free_range = s.free.iter().map(|(a, b)| b - a).max().unwrap_or(0);
    BlockFigures {
        domain: block.domain,
        sub_domain: block.sub_domain,
        addr: block.addr,
        size: block.size,
        used_bytes: block.size - free_bytes,
        allocations: block.allocations.len() as u64,
        free_bytes,
        free_ranges: s.free.len() as u64,
        largest_free_range,
        fragmentation: fragmentation(largest_free_range, free_bytes),
        overlap_bytes: s.overlaps.iter().map(|(a, b)| b - a).sum(),
        past_end_bytes: s.past_end_bytes,
        past_end_allocations: s.past_end_allocations,
    }
}

/// A domain's name in the view (`domain #7` when the view does not have it).
fn domain_name(view: &GpuView, id: u32) -> String {
    view.domains.iter().find(|d| d.id == id).map_or_else(|| format!("domain #{id}"), |d| d.name.clone())
}

/// The blocks of the view by sub-allocating domain (and the domain they are in), in
/// order of those ids; each group's blocks in the view's order.
fn groups(view: &GpuView) -> Vec<((u32, u32), Vec<&GpuBlock>)> {
    let mut keys: Vec<(u32, u32)> = view.blocks.iter().map(|b| (b.sub_domain, b.domain)).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter().map(|k| (k, view.blocks.iter().filter(|b| (b.sub_domain, b.domain) == k).collect())).collect()
}

fn sum_figures(view: &GpuView, (sub_domain, parent): (u32, u32), blocks: &[BlockFigures]) -> DomainBlockFigures {
    let sum = |f: fn(&BlockFigures) -> u64| blocks.iter().map(f).fold(0u64, u64::wrapping_add);
    let free_bytes = sum(|b| b.free_bytes);
    let largest_free_range = blocks.iter().map(|b| b.largest_free_range).max().unwrap_or(0);
    DomainBlockFigures {
        sub_domain,
        sub_domain_name: domain_name(view, sub_domain),
        parent,
        parent_name: domain_name(view, parent),
        blocks: blocks.len() as u64,
        block_bytes: sum(|b| b.size),
        used_bytes: sum(|b| b.used_bytes),
        allocations: sum(|b| b.allocations),
        free_bytes,
        free_ranges: sum(|b| b.free_ranges),
        largest_free_range,
        fragmentation: fragmentation(largest_free_range, free_bytes),
        overlap_bytes: sum(|b| b.overlap_bytes),
        past_end_bytes: sum(|b| b.past_end_bytes),
    }
}

/// The blocks' figures per sub-allocating domain (and the domain its blocks are in), in
/// order of their ids.
pub fn domain_figures(view: &GpuView) -> Vec<DomainBlockFigures> {
    groups(view)
        .into_iter()
        .map(|(key, blocks)| {
            let figures: Vec<BlockFigures> = blocks.into_iter().map(figures).collect();
            sum_figures(view, key, &figures)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Words shared by the drawings
// ---------------------------------------------------------------------------------------

/// `"name" at 0x1000`, or `0x1000` for a block without a name.
pub(crate) fn block_label(block: &GpuBlock) -> String {
    if block.name.is_empty() {
        format!("{:#x}", block.addr)
    } else {
        format!("\"{}\" at {:#x}", block.name, block.addr)
    }
}

/// A block's figures in one line: `64.0 MiB · used 40.0 MiB (62.5%) in 3 allocations ·
/// free 24.0 MiB in 2 ranges (largest 16.0 MiB) · fragmentation 33.3%`, and what is
/// wrong with it.
fn figures_line(f: &BlockFigures) -> String {
    if f.size == 0 {
        let mut line = format!("zero-sized block · {}", plural(f.allocations, "allocation"));
        if f.past_end_bytes > 0 {
            let _ = write!(line, " · {} past its end", size(f.past_end_bytes));
        }
        return line;
    }
    let mut line = format!(
        "{} · used {} ({}) in {} · free {} in {} (largest {}) · fragmentation {}",
        size(f.size),
        size(f.used_bytes),
        percent(ratio(f.used_bytes, f.size)),
        plural(f.allocations, "allocation"),
        size(f.free_bytes),
        plural(f.free_ranges, "range"),
        size(f.largest_free_range),
        percent(Some(f.fragmentation)),
    );
    if f.overlap_bytes > 0 {
        let _ = write!(line, " · overlapping {}", size(f.overlap_bytes));
    }
    if f.past_end_allocations > 0 {
        let _ = write!(
            line,
            " · {} past the end ({})",
            size(f.past_end_bytes),
            plural(f.past_end_allocations, "allocation")
        );
    }
    line
}

/// A domain's name in headings: `vram.local.buffers in vram.local`.
fn domain_heading(d: &DomainBlockFigures) -> String {
    format!("{} in {}", d.sub_domain_name, d.parent_name)
}

/// A domain's figures: `2 blocks, 64.0 MiB, used 40.0 MiB (62.5%) in 5 allocations, ...`.
fn domain_line(d: &DomainBlockFigures) -> String {
    let mut line = format!(
        "{}, {}, used {} ({}) in {}, free {}, largest free range {}, fragmentation {}",
        plural(d.blocks, "block"),
        size(d.block_bytes),
        size(d.used_bytes),
        percent(ratio(d.used_bytes, d.block_bytes)),
        plural(d.allocations, "allocation"),
        size(d.free_bytes),
        size(d.largest_free_range),
        percent(Some(d.fragmentation)),
    );
    if d.overlap_bytes > 0 {
        let _ = write!(line, ", overlapping {}", size(d.overlap_bytes));
    }
    if d.past_end_bytes > 0 {
        let _ = write!(line, ", {} past the blocks' ends", size(d.past_end_bytes));
    }
    line
}

/// Where the view was read, in words.
pub(crate) fn source_line(source: &GpuSource) -> String {
    match source {
        GpuSource::Log { path, point } => format!("{path}, {point}"),
        GpuSource::Dump { path, format } => format!("{path} ({format} dump)"),
    }
}

// ---------------------------------------------------------------------------------------
// The SVG
// ---------------------------------------------------------------------------------------

/// Width of the drawing.
const WIDTH: f64 = 1000.0;
/// Left margin, and where the bars start.
const MARGIN: f64 = 10.0;
/// Width of the largest block's bar.
const BAR_MAX: f64 = 960.0;
/// Height of a bar.
const BAR_H: f64 = 18.0;
/// Allocations narrower than this are drawn this wide, as a "tiny" marker.
const TINY_PX: f64 = 2.0;
/// On one scale for the whole view, the smallest block must be at least this wide;
/// otherwise each block is drawn to its own scale.
const MIN_BLOCK_PX: f64 = 8.0;

const FREE_FILL: &str = "#e6e8ec";
const OVERLAP_FILL: &str = "#d62728";
const PAST_END_FILL: &str = "#7a0c0c";
const OUTLINE: &str = "#8a93a6";
const TINY_STROKE: &str = "#1d2330";

/// The fill of a kind's sub-allocations.
pub(crate) fn kind_colour(kind: GpuKind) -> &'static str {
    match kind {
        GpuKind::Texture => "#4e79a7",
        GpuKind::RenderTarget => "#f28e2b",
        GpuKind::DepthStencil => "#b07aa1",
        GpuKind::Buffer => "#59a14f",
        GpuKind::Other => "#edc948",
        GpuKind::Unknown => "#9c755f",
    }
}

/// A coordinate: two decimals at most, no trailing zeros (`12`, `12.5`, `0.33`).
fn num(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// A `<rect>` with its hover text.
fn rect(out: &mut String, x: f64, y: f64, w: f64, h: f64, style: &str, hover: &str) {
    let _ = writeln!(
        out,
        r#"<rect x="{}" y="{}" width="{}" height="{}" {style}><title>{}</title></rect>"#,
        num(x),
        num(y),
        num(w.max(0.0)),
        num(h),
        escape(hover)
    );
}

fn text(out: &mut String, x: f64, y: f64, style: &str, content: &str) {
    let _ = writeln!(out, r#"<text x="{}" y="{}"{style}>{}</text>"#, num(x), num(y), escape(content));
}

/// A size in words, exact: `512 B`, `4.0 KiB (4096 B)`.
fn exact(bytes: u64) -> String {
    if bytes < 1024 {
        size(bytes)
    } else {
        format!("{} ({bytes} B)", size(bytes))
    }
}

/// An offset and a size in words: `offset 0x1000, 4.0 KiB (4096 B)`.
fn span_words(offset: u64, bytes: u64) -> String {
    format!("offset {offset:#x}, {}", exact(bytes))
}

/// How the view's blocks are scaled: bytes per pixel for all of them, or `None` for each
/// block to its own scale (the smallest would be under [`MIN_BLOCK_PX`] on one scale).
fn common_scale(view: &GpuView) -> Option<f64> {
    let sizes = view.blocks.iter().map(|b| b.size).filter(|&s| s > 0);
    let (min, max) = sizes.fold((u64::MAX, 0u64), |(lo, hi), s| (lo.min(s), hi.max(s)));
    if max == 0 {
        return Some(1.0);
    }
    let per_px = max as f64 / BAR_MAX;
    (min as f64 / per_px >= MIN_BLOCK_PX).then_some(per_px)
}

/// The block map of a view as a standalone SVG document titled `title`.
///
/// Per sub-allocating domain a heading with its figures, then each block as a bar drawn
/// to scale: sub-allocations coloured by [`GpuKind`], free ranges grey, allocations
/// narrower than two pixels drawn two pixels wide and taller than the bar ("tiny"),
/// bytes inside two sub-allocations or more as a red strip over the bar's lower half, and
/// a dark red mark after the bar when sub-allocations reach past the block's end. Every rectangle has a hover text;
/// under each bar, the block's figures. All blocks share one scale unless the smallest
/// would be under 8 pixels wide; then each is drawn to its own, and the headings say so.
pub fn svg(view: &GpuView, title: &str) -> String {
    draw(view, title, true)
}

/// The SVG inlined in HTML: without the namespace (an HTML parser puts `<svg>` in it).
pub(crate) fn svg_inline(view: &GpuView, title: &str) -> String {
    draw(view, title, false)
}

fn draw(view: &GpuView, title: &str, standalone: bool) -> String {
    let scale = common_scale(view);
    let mut body = String::new();
    let mut y = 22.0;
    text(&mut body, MARGIN, y, r#" font-size="15" font-weight="bold""#, title);
    y += 18.0;
    let scale_words = match scale {
        Some(per_px) => format!("one scale: 1 px = {}", size_f(per_px)),
        None => "each block drawn to its own scale (on one scale the smallest would vanish)".to_owned(),
    };
    text(&mut body, MARGIN, y, r##" fill="#6b7385""##, &format!("{} · {scale_words}", source_line(&view.source)));
    y += 12.0;
    legend(&mut body, y);
    y += 24.0;

    let groups = groups(view);
    if groups.is_empty() {
        y += 12.0;
        text(&mut body, MARGIN, y, "", "No sub-allocating domain has blocks here.");
        y += 8.0;
    }
    for (key, blocks) in groups {
        let sweeps: Vec<Sweep> = blocks.iter().map(|b| sweep(b)).collect();
        let figures: Vec<BlockFigures> = blocks.iter().zip(&sweeps).map(|(b, s)| figures_of(b, s)).collect();
        let d = sum_figures(view, key, &figures);
        y += 14.0;
        let mut heading = domain_heading(&d);
        if scale.is_none() {
            heading.push_str(" · each block to its own scale");
        }
        text(&mut body, MARGIN, y, r#" font-size="13" font-weight="bold""#, &heading);
        y += 15.0;
        text(&mut body, MARGIN, y, "", &domain_line(&d));
        y += 10.0;
        for ((block, s), f) in blocks.iter().zip(&sweeps).zip(&figures) {
            block_bar(&mut body, view, block, s, f, scale, y);
            text(&mut body, MARGIN, y + BAR_H + 14.0, "", &format!("{} · {}", block_label(block), figures_line(f)));
            y += BAR_H + 26.0;
        }
    }
    let height = y + 6.0;
    let ns = if standalone { r#" xmlns="http://www.w3.org/2000/svg""# } else { "" };
    let mut out = format!(
        concat!(
            r#"<svg{ns} width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" "#,
            r#"font-family="system-ui, sans-serif" font-size="11" class="gpu-block-map">"#,
            "\n<title>{title}</title>\n"
        ),
        ns = ns,
        w = num(WIDTH),
        h = num(height),
        title = escape(title)
    );
    out.push_str(&body);
    out.push_str("</svg>\n");
    out
}

/// The legend: a swatch per kind, free, tiny, overlapping, past the end.
fn legend(out: &mut String, y: f64) {
    let mut x = MARGIN;
    let mut item = |out: &mut String, style: &str, name: &str, hover: &str| {
        rect(out, x, y, 12.0, 10.0, style, hover);
        text(out, x + 16.0, y + 9.0, "", name);
        // About 6 px a character at this size.
        x += 16.0 + name.chars().count() as f64 * 6.0 + 14.0;
    };
    for kind in GpuKind::ALL {
        item(
            out,
            &format!(r#"fill="{}""#, kind_colour(kind)),
            kind.name(),
            &format!("{} sub-allocations", kind.name()),
        );
    }
    item(out, &format!(r#"fill="{FREE_FILL}""#), "free", "free ranges");
    item(
        out,
        &format!(r#"fill="{}" stroke="{TINY_STROKE}" stroke-width="0.6""#, kind_colour(GpuKind::Unknown)),
        "tiny",
        "sub-allocations narrower than 2 px, drawn 2 px wide and taller than the bar, in their kind's colour",
    );
    item(
        out,
        &format!(r#"fill="{OVERLAP_FILL}""#),
        "overlapping",
        "bytes inside two sub-allocations or more: a red strip over the lower half of the bar",
    );
    item(out, &format!(r#"fill="{PAST_END_FILL}""#), "past the end", "sub-allocations reaching past the block's end");
}

/// One block's bar at `y`.
fn block_bar(
    out: &mut String,
    view: &GpuView,
    block: &GpuBlock,
    s: &Sweep,
    f: &BlockFigures,
    scale: Option<f64>,
    y: f64,
) {
    let context = if block.context.is_empty() { "(no context)" } else { block.context.as_str() };
    let block_words = format!(
        "block {} in {} · {} · owner {context}",
        block_label(block),
        domain_name(view, block.domain),
        exact(block.size),
    );
    if block.size == 0 {
        rect(
            out,
            MARGIN,
            y,
            TINY_PX,
            BAR_H,
            &format!(r#"fill="none" stroke="{PAST_END_FILL}" stroke-dasharray="2 2""#),
            &format!("{block_words} · zero-sized"),
        );
        if f.past_end_allocations > 0 {
            past_end_mark(out, MARGIN + TINY_PX, y, f);
        }
        return;
    }
    let per_px = scale.unwrap_or(block.size as f64 / BAR_MAX);
    let bar_w = block.size as f64 / per_px;
    let x_of = |offset: u64| MARGIN + offset as f64 / per_px;
    for &(a, b) in &s.free {
        rect(
            out,
            x_of(a),
            y,
            x_of(b) - x_of(a),
            BAR_H,
            &format!(r#"fill="{FREE_FILL}""#),
            &format!("free · {}", span_words(a, b - a)),
        );
    }
    // Sub-allocations by offset (then size, then as they came: a stable sort), the tiny
    // ones after the others, so that none hides a tiny one.
    let mut order: Vec<usize> = (0..block.allocations.len()).collect();
    order.sort_by_key(|&i| (block.allocations[i].offset, block.allocations[i].size));
    let mut tiny = Vec::new();
    for i in order {
        let a = &block.allocations[i];
        if a.offset >= block.size && a.size > 0 {
            continue; // wholly past the end: only the mark after the bar shows it
        }
        let end = end_of(a.offset, a.size).min(block.size);
        let (x, w) = (x_of(a.offset), x_of(end) - x_of(a.offset));
        let mut hover = format!(
            "{} · {} · {} · owner {}",
            if a.name.is_empty() { "(unnamed)" } else { a.name.as_str() },
            a.kind.name(),
            span_words(a.offset, a.size),
            if a.context.is_empty() { "(no context)" } else { a.context.as_str() }
        );
        if end_of(a.offset, a.size) > block.size {
            let _ = write!(hover, " · reaches {} past the block's end", size(end_of(a.offset, a.size) - block.size));
        }
        if w < TINY_PX {
            tiny.push((x, a.kind, hover));
        } else {
            rect(
                out,
                x,
                y,
                w,
                BAR_H,
                &format!(r##"fill="{}" stroke="#ffffff" stroke-width="0.5""##, kind_colour(a.kind)),
                &hover,
            );
        }
    }
    // Overlaps: a red strip over the lower half of the bar, the sub-allocations' colours
    // still showing above it.
    for &(a, b) in &s.overlaps {
        rect(
            out,
            x_of(a),
            y + BAR_H / 2.0,
            (x_of(b) - x_of(a)).max(1.0),
            BAR_H / 2.0,
            &format!(r#"fill="{OVERLAP_FILL}""#),
            &format!("overlapping sub-allocations · {}", span_words(a, b - a)),
        );
    }
    for (x, kind, hover) in tiny {
        // Kept inside the bar, however close to its end.
        let x = x.min(MARGIN + bar_w - TINY_PX).max(MARGIN);
        rect(
            out,
            x,
            y - 4.0,
            TINY_PX,
            BAR_H + 4.0,
            &format!(r#"fill="{}" stroke="{TINY_STROKE}" stroke-width="0.6" class="tiny""#, kind_colour(kind)),
            &format!("tiny: {hover}"),
        );
    }
    rect(out, MARGIN, y, bar_w, BAR_H, &format!(r#"fill="none" stroke="{OUTLINE}""#), &block_words);
    if f.past_end_allocations > 0 {
        past_end_mark(out, MARGIN + bar_w, y, f);
    }
}

/// The red mark after a bar whose sub-allocations reach past its end.
fn past_end_mark(out: &mut String, bar_end: f64, y: f64, f: &BlockFigures) {
    rect(
        out,
        bar_end + 2.0,
        y,
        6.0,
        BAR_H,
        &format!(r#"fill="{PAST_END_FILL}""#),
        &format!(
            "{} past the block's end · {} past it",
            plural(f.past_end_allocations, "sub-allocation"),
            exact(f.past_end_bytes),
        ),
    );
}

// ---------------------------------------------------------------------------------------
// The text form
// ---------------------------------------------------------------------------------------

/// Columns of a block's bar in [`to_text`].
pub const TEXT_COLUMNS: usize = 64;

/// The block map for the terminal: per sub-allocating domain a heading, then per block a
/// bar of [`TEXT_COLUMNS`] characters (each column 1/64 of that block) and its figures.
/// A column is `#` when at least half its bytes are used, `!` when less is used but a
/// sub-allocation narrower than a column starts in it ("tiny"), `.` otherwise; a `>`
/// after the bar says sub-allocations reach past the block's end.
pub fn to_text(view: &GpuView) -> String {
    let mut out = format!("Block map: {}\n", source_line(&view.source));
    let groups = groups(view);
    if groups.is_empty() {
        out.push_str("  No sub-allocating domain has blocks here.\n");
        return out;
    }
    out.push_str("  # used, . free, ! tiny allocation (narrower than a column), > reaches past the block's end\n");
    for (key, blocks) in groups {
        let sweeps: Vec<Sweep> = blocks.iter().map(|b| sweep(b)).collect();
        let figures: Vec<BlockFigures> = blocks.iter().zip(&sweeps).map(|(b, s)| figures_of(b, s)).collect();
        let d = sum_figures(view, key, &figures);
        let _ = writeln!(out, "\n{}: {}", domain_heading(&d), domain_line(&d));
        for ((block, s), f) in blocks.iter().zip(&sweeps).zip(&figures) {
            let _ = writeln!(out, "  {}  {} · {}", text_bar(block, s, f), block_label(block), figures_line(f));
        }
    }
    out
}

/// `[####....!###]` (64 columns), with `>` after it when sub-allocations reach past the
/// end (a space otherwise, so the figures line up).
fn text_bar(block: &GpuBlock, s: &Sweep, f: &BlockFigures) -> String {
    let past = if f.past_end_allocations > 0 { '>' } else { ' ' };
    if block.size == 0 {
        return format!("[{:^w$}]{past}", "zero-sized", w = TEXT_COLUMNS);
    }
    let len = u128::from(block.size);
    let col_start = |c: usize| (len * c as u128 / TEXT_COLUMNS as u128) as u64;
    // Used bytes in [a, b): the block minus its free ranges there.
    let free_in = |a: u64, b: u64| -> u64 { s.free.iter().map(|&(fa, fb)| fb.min(b).saturating_sub(fa.max(a))).sum() };
    let mut bar = String::with_capacity(TEXT_COLUMNS + 3);
    bar.push('[');
    for c in 0..TEXT_COLUMNS {
        let (a, b) = (col_start(c), col_start(c + 1));
        let ch = if b == a {
            // A block under 64 bytes: the column shows the byte it falls on.
            if free_in(a, a + 1) == 0 {
                '#'
            } else {
                '.'
            }
        } else {
            let used = (b - a) - free_in(a, b);
            let tiny = block
                .allocations
                .iter()
                .any(|x| x.offset >= a && x.offset < b && u128::from(x.size) * (TEXT_COLUMNS as u128) < len);
            if used * 2 >= b - a {
                '#'
            } else if tiny {
                '!'
            } else {
                '.'
            }
        };
        bar.push(ch);
    }
    bar.push(']');
    bar.push(past);
    bar
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gpu::model::{GpuDomain, SubAllocation};

    pub(crate) fn sub(offset: u64, size: u64, kind: GpuKind, name: &str) -> SubAllocation {
        SubAllocation { offset, size, kind, name: name.into(), context: "Level:Forest".into() }
    }

    pub(crate) fn block(addr: u64, size: u64, allocations: Vec<SubAllocation>) -> GpuBlock {
        GpuBlock { domain: 1, sub_domain: 2, addr, size, name: String::new(), context: String::new(), allocations }
    }

    fn domain(id: u32, name: &str, kind: &str, parent: Option<u32>) -> GpuDomain {
        GpuDomain {
            id,
            name: name.into(),
            kind: kind.into(),
            capacity: 0,
            parent,
            live_bytes: 0,
            live_count: 0,
            peak: None,
            budget: None,
        }
    }

    pub(crate) fn view(blocks: Vec<GpuBlock>) -> GpuView {
        GpuView {
            source: GpuSource::Log { path: "game.mrl".into(), point: "at the end".into() },
            domains: vec![domain(1, "vram.local", "gpu-local", None), domain(2, "vram.buffers", "pool", Some(1))],
            resources: Vec::new(),
            blocks,
            screen: None,
        }
    }

    #[test]
    fn gaps_at_both_ends_and_between() {
        // 0..100 free, 100..300 used, 300..400 free, 400..500 used, 500..1000 free.
        let b = block(0x1000, 1000, vec![sub(400, 100, GpuKind::Texture, "t"), sub(100, 200, GpuKind::Buffer, "b")]);
        let f = figures(&b);
        assert_eq!(
            f,
            BlockFigures {
                domain: 1,
                sub_domain: 2,
                addr: 0x1000,
                size: 1000,
                used_bytes: 300,
                allocations: 2,
                free_bytes: 700,
                free_ranges: 3,
                largest_free_range: 500,
                fragmentation: 1.0 - 500.0 / 700.0,
                overlap_bytes: 0,
                past_end_bytes: 0,
                past_end_allocations: 0,
            }
        );
    }

    #[test]
    fn unsorted_overlapping_and_past_the_end() {
        // 0..50 used twice over 20..50 and three times over 30..40; 50..60 free;
        // 60..100 used, and 40 bytes past the end (90 + 50 = 140); one sub-allocation
        // wholly past the end (200..210), one zero-sized.
        let b = block(
            0,
            100,
            vec![
                sub(60, 40, GpuKind::Buffer, "a"),
                sub(20, 30, GpuKind::Texture, "b"),
                sub(90, 50, GpuKind::Other, "c"),
                sub(0, 40, GpuKind::Texture, "d"),
                sub(30, 10, GpuKind::Unknown, "e"),
                sub(200, 10, GpuKind::Buffer, "f"),
                sub(55, 0, GpuKind::Buffer, "g"),
            ],
        );
        let f = figures(&b);
        assert_eq!((f.used_bytes, f.free_bytes, f.free_ranges, f.largest_free_range), (90, 10, 1, 10));
        // 20..40 (b and d), 90..100 (a and c): each byte once, though 30..40 is in three.
        assert_eq!(f.overlap_bytes, 30);
        assert_eq!((f.past_end_bytes, f.past_end_allocations), (50, 2));
        assert_eq!(f.allocations, 7);
        assert_eq!(f.fragmentation, 0.0);
        assert_eq!(sweep(&b).overlaps, vec![(20, 40), (90, 100)]);
    }

    #[test]
    fn zero_sized_and_huge_blocks_do_not_panic() {
        let b = block(0, 0, vec![sub(0, 16, GpuKind::Buffer, "x"), sub(u64::MAX, u64::MAX, GpuKind::Buffer, "y")]);
        let f = figures(&b);
        assert_eq!((f.size, f.used_bytes, f.free_bytes, f.free_ranges, f.largest_free_range), (0, 0, 0, 0, 0));
        assert_eq!((f.past_end_allocations, f.past_end_bytes), (2, 16));
        assert_eq!(f.fragmentation, 0.0);
        let empty = figures(&block(0, 64, Vec::new()));
        assert_eq!(
            (empty.free_bytes, empty.free_ranges, empty.largest_free_range, empty.fragmentation),
            (64, 1, 64, 0.0)
        );
        let v = view(vec![b, block(0x100, u64::MAX, vec![sub(u64::MAX - 1, 10, GpuKind::Texture, "z")])]);
        assert!(well_formed(&svg(&v, "odd")));
        let text = to_text(&v);
        assert!(text.contains("[                           zero-sized                           ]>"), "{text}");
    }

    #[test]
    fn domains_sum_their_blocks() {
        let v = view(vec![
            block(0, 1000, vec![sub(100, 200, GpuKind::Buffer, "a")]),
            block(4096, 500, vec![sub(0, 500, GpuKind::Texture, "b")]),
        ]);
        let d = domain_figures(&v);
        assert_eq!(d.len(), 1);
        let d = &d[0];
        assert_eq!(
            (d.sub_domain, d.sub_domain_name.as_str(), d.parent, d.parent_name.as_str()),
            (2, "vram.buffers", 1, "vram.local")
        );
        assert_eq!(
            (d.blocks, d.block_bytes, d.used_bytes, d.free_bytes, d.largest_free_range),
            (2, 1500, 700, 800, 700)
        );
        assert_eq!((d.allocations, d.free_ranges), (2, 2));
        assert_eq!(d.fragmentation, 1.0 - 700.0 / 800.0);
    }

    /// Tags balance (a tiny XML check: no attribute value here holds `<` or `>`, the
    /// escaping sees to it).
    pub(crate) fn well_formed(doc: &str) -> bool {
        let mut stack: Vec<&str> = Vec::new();
        let mut rest = doc;
        while let Some(open) = rest.find('<') {
            let Some(close) = rest[open..].find('>') else { return false };
            let tag = &rest[open + 1..open + close];
            rest = &rest[open + close + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                if stack.pop() != Some(name.trim()) {
                    return false;
                }
            } else if !tag.ends_with('/') && !tag.starts_with('!') && !tag.starts_with('?') {
                stack.push(tag.split_whitespace().next().unwrap_or(""));
            }
        }
        stack.is_empty()
    }

    #[test]
    fn the_svg_of_two_blocks() {
        // An aliased target over 32..64 and a buffer 44 bytes past the end.
        let mut small = block(
            0x20_0000,
            256,
            vec![
                sub(0, 64, GpuKind::RenderTarget, "rt <main>"),
                sub(200, 100, GpuKind::Buffer, "over"),
                sub(32, 64, GpuKind::RenderTarget, "alias"),
            ],
        );
        small.name = "small".into();
        let v = view(vec![
            block(
                0x10_0000,
                1024,
                vec![
                    sub(512, 256, GpuKind::Buffer, "vb"),
                    sub(0, 128, GpuKind::Texture, "rock"),
                    sub(1000, 1, GpuKind::DepthStencil, ""),
                ],
            ),
            small,
        ]);
        let doc = svg(&v, "Blocks & <maps>");
        assert!(well_formed(&doc), "{doc}");
        let expected = include_str!("snapshots/blockmap_two_blocks.svg");
        assert_eq!(doc, expected, "the whole drawing; new:\n{doc}");
    }

    #[test]
    fn blocks_too_different_get_their_own_scales() {
        let v = view(vec![
            block(0, 1 << 30, vec![sub(0, 1 << 20, GpuKind::Texture, "big")]),
            block(1 << 30, 1 << 20, vec![sub(0, 1 << 19, GpuKind::Texture, "half")]),
        ]);
        let doc = svg(&v, "t");
        assert!(well_formed(&doc));
        assert!(doc.contains("each block to its own scale"));
        // Each bar is the full width; the small block's half is half of it.
        assert_eq!(doc.matches(r##"width="960" height="18" fill="none" stroke="#8a93a6""##).count(), 2);
        assert!(
            doc.contains(
                r##"<rect x="10" y="159" width="480" height="18" fill="#4e79a7" stroke="#ffffff" stroke-width="0.5">"##
            ),
            "{doc}"
        );
        // The big block's 1 MiB is under 2 px on its scale: a tiny marker.
        assert!(
            doc.contains(r##"width="2" height="22" fill="#4e79a7" stroke="#1d2330" stroke-width="0.6" class="tiny">"##),
            "{doc}"
        );
    }

    #[test]
    fn the_text_bar() {
        // 6400 bytes: 100 a column.
        let v = view(vec![block(
            0,
            6400,
            vec![
                // Columns 48 to 63, and 5 bytes past the end.
                sub(4800, 1605, GpuKind::Buffer, "tail"),
                // Columns 0 to 15.
                sub(0, 1600, GpuKind::Texture, "head"),
                // Narrower than a column, in column 32: tiny.
                sub(3250, 10, GpuKind::Buffer, "tiny"),
                // Half of column 40: used.
                sub(4000, 50, GpuKind::Buffer, "half"),
                // 40 % of column 41 (not tiny: wider than a column), all of column 42.
                sub(4160, 140, GpuKind::Buffer, "edge"),
            ],
        )]);
        let text = to_text(&v);
        let bar =
            format!("[{}{}!{}#.#{}{}]>", "#".repeat(16), ".".repeat(16), ".".repeat(7), ".".repeat(5), "#".repeat(16));
        assert_eq!(bar.chars().count(), TEXT_COLUMNS + 3);
        let line = text.lines().find(|l| l.starts_with("  [")).expect("a block line");
        assert_eq!(&line[2..2 + TEXT_COLUMNS + 3], bar, "{text}");
        assert_eq!(
            &line[2 + TEXT_COLUMNS + 3..],
            "  0x0 · 6.2 KiB · used 3.3 KiB (53.1%) in 5 allocations · free 2.9 KiB in 4 ranges (largest 1.6 KiB) \
             · fragmentation 45.0% · 5 B past the end (1 allocation)"
        );
        assert!(text.contains("\nvram.buffers in vram.local: 1 block, 6.2 KiB, used 3.3 KiB (53.1%)"), "{text}");
    }
}
