//! The HTML report's GPU section: the block map (the SVG of [`super::blockmap`], inline),
//! a table of the blocks with their figures, and "heap and VRAM per context" (O3DE's
//! view): per top-level context, its heap bytes and its bytes in each GPU domain, live at
//! the report's point. The tables are sortable by the page's script (`table.sort-table`:
//! a click on a header sorts by that column, numbers by their exact value in `data-v`).
//!
//! The section is HTML written here, not drawn from the page's data island: the island's
//! schema (JSON.md) does not change.

use std::fmt::Write as _;

use memreplay_format::DomainKind;
use memreplay_replay::{NodeId, ReplayState, ROOT};

use super::blockmap::{self, block_label, BlockFigures};
use super::model::{GpuKind, GpuSource, GpuView};
use super::pivots::{pivots, Owner, Pivots, ResourceRow, DEFAULT_SMALL};

/// Rows per pivot table.
const ROWS: usize = 100;
use crate::figures::short_name;
use crate::select::Selection;
use crate::table::{percent, ratio, size};
use crate::xml::escape;

/// The GPU section of the page, for `view` (the GPU view of the log at the selection's
/// point) and the replayed `state` with the page's selection `sel`.
pub(crate) fn section(view: &GpuView, state: &ReplayState, sel: &Selection) -> String {
    let point = match &view.source {
        GpuSource::Log { point, .. } => point.clone(),
        GpuSource::Dump { path, format } => format!("from {path} ({format} dump)"),
    };
    let mut out = String::new();
    out.push_str("<section class=\"panel\" id=\"gpu-panel\">\n");
    let _ = writeln!(
        out,
        "<div class=\"panel-head\"><h2>GPU memory <span class=\"muted\">{}</span></h2></div>",
        escape(&point)
    );
    pivot_tables(&mut out, view, &pivots(view, DEFAULT_SMALL, ROWS));
    out.push_str("<h3>Block map</h3>\n");
    out.push_str(
        "<p class=\"hint\">Each block of a sub-allocating domain drawn to scale with its sub-allocations, \
         coloured by what they hold; free ranges grey; allocations under 2 px drawn as taller 2 px marks; \
         overlapping bytes and bytes past a block's end in red. Hover for names, offsets, sizes and owners.</p>\n",
    );
    out.push_str("<div class=\"gpu-map\">\n");
    out.push_str(&blockmap::svg_inline(view, "GPU block map"));
    out.push_str("</div>\n");
    out.push_str("<h3>Blocks</h3>\n");
    blocks_table(&mut out, view);
    out.push_str(
        "<h3>Heap and VRAM per context <span class=\"muted small\">live bytes, per top-level context</span></h3>\n",
    );
    contexts_table(&mut out, state, sel);
    out.push_str("</section>\n");
    out
}

/// A header cell: text columns (`l`) sort ascending first, numbers descending.
fn th(out: &mut String, text: &str, numeric: bool, title: &str) {
    let class = if numeric { "" } else { " class=\"l\"" };
    let _ = write!(out, "<th{class} title=\"{}\">{}</th>", escape(title), escape(text));
}

/// A byte count: human-readable, its exact value in `data-v`; zero greyed.
fn bytes_td(out: &mut String, bytes: u64) {
    let zero = if bytes == 0 { " class=\"zero\"" } else { "" };
    let _ = write!(out, "<td data-v=\"{bytes}\"{zero}>{}</td>", escape(&size(bytes)));
}

fn count_td(out: &mut String, n: u64) {
    let zero = if n == 0 { " class=\"zero\"" } else { "" };
    let _ = write!(out, "<td data-v=\"{n}\"{zero}>{n}</td>");
}

fn ratio_td(out: &mut String, r: Option<f64>) {
    let v = r.unwrap_or(0.0);
    let _ = write!(out, "<td data-v=\"{v}\">{}</td>", escape(&percent(r)));
}

fn text_td(out: &mut String, text: &str) {
    let _ = write!(out, "<td class=\"l\">{}</td>", escape(text));
}

/// The blocks with their figures, one row each.
fn blocks_table(out: &mut String, view: &GpuView) {
    if view.blocks.is_empty() {
        out.push_str("<p class=\"muted\">No sub-allocating domain has blocks here.</p>\n");
        return;
    }
    let name =
        |id: u32| view.domains.iter().find(|d| d.id == id).map_or_else(|| format!("domain #{id}"), |d| d.name.clone());
    out.push_str("<div class=\"table-wrap\"><table class=\"data sort-table\" id=\"gpu-blocks\"><thead><tr>");
    th(out, "domain", false, "the sub-allocating domain, in the domain its blocks are allocations of");
    th(out, "block", false, "its name and address");
    th(out, "owner", false, "the context the block was allocated in");
    th(out, "size", true, "the block's size");
    th(out, "used", true, "bytes inside at least one sub-allocation");
    th(out, "used %", true, "used bytes of the block's size");
    th(out, "allocations", true, "sub-allocations in the block");
    th(out, "free", true, "bytes in no sub-allocation");
    th(out, "free ranges", true, "gaps between sub-allocations and at both ends");
    th(out, "largest free", true, "the largest free range");
    th(out, "fragmentation", true, "1 - largest free range / free bytes");
    th(out, "overlapping", true, "bytes inside two sub-allocations or more");
    th(out, "past the end", true, "bytes of sub-allocations past the block's end");
    out.push_str("</tr></thead><tbody>\n");
    for block in &view.blocks {
        let f: BlockFigures = blockmap::figures(block);
        out.push_str("<tr>");
        text_td(out, &format!("{} in {}", name(block.sub_domain), name(block.domain)));
        text_td(out, &block_label(block));
        text_td(out, if block.context.is_empty() { "(no context)" } else { &block.context });
        bytes_td(out, f.size);
        bytes_td(out, f.used_bytes);
        ratio_td(out, ratio(f.used_bytes, f.size));
        count_td(out, f.allocations);
        bytes_td(out, f.free_bytes);
        count_td(out, f.free_ranges);
        bytes_td(out, f.largest_free_range);
        ratio_td(out, Some(f.fragmentation));
        bytes_td(out, f.overlap_bytes);
        bytes_td(out, f.past_end_bytes);
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
}

/// Opens a sortable table with these columns (text, numeric, title).
fn table_head(out: &mut String, id: &str, columns: &[(&str, bool, &str)]) {
    let _ = write!(out, "<div class=\"table-wrap\"><table class=\"data sort-table\" id=\"{id}\"><thead><tr>");
    for &(text, numeric, title) in columns {
        th(out, text, numeric, title);
    }
    out.push_str("</tr></thead><tbody>\n");
}

const TABLE_END: &str = "</tbody></table></div>\n";

fn owners_td(out: &mut String, owners: &[Owner]) {
    let text: Vec<String> = owners
        .iter()
        .map(|o| format!("{} ({})", if o.context.is_empty() { "(no context)" } else { &o.context }, size(o.bytes)))
        .collect();
    text_td(out, &text.join(", "));
}

fn share_td(out: &mut String, ppm: u64) {
    ratio_td(out, Some(ppm as f64 / 1_000_000.0));
}

/// A resource's name, kind, size (width x height), format and owner cells.
fn resource_tds(out: &mut String, r: &ResourceRow) {
    text_td(out, if r.name.is_empty() { "(unnamed)" } else { &r.name });
    text_td(out, r.kind.name());
    text_td(out, &format!("{}x{}", r.width, r.height));
    text_td(out, &r.format);
}

fn kinds_text(kinds: &[GpuKind]) -> String {
    kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// The domains and the pivots of the resources, as sortable tables.
fn pivot_tables(out: &mut String, view: &GpuView, p: &Pivots) {
    out.push_str("<h3>Domains</h3>\n");
    table_head(
        out,
        "gpu-domains",
        &[
            ("domain", false, "GPU domain (a sub-allocating one names its parent)"),
            ("kind", false, "what memory it is"),
            ("live", true, "bytes live at the point"),
            ("allocations", true, "allocations live at the point"),
            ("peak", true, "its peak of live bytes over the log"),
            ("capacity", true, "its size, as the log defined it"),
            ("peak / capacity", true, "the peak against the capacity"),
            ("lowest budget", true, "the smallest budget the driver reported"),
            ("peak usage", true, "the largest usage the driver reported"),
            ("over budget", true, "intervals in which the driver's usage exceeded its budget"),
        ],
    );
    for d in &view.domains {
        out.push_str("<tr>");
        match d.parent.and_then(|p| view.domains.iter().find(|x| x.id == p)) {
            Some(parent) => text_td(out, &format!("{} (in {})", d.name, parent.name)),
            None => text_td(out, &d.name),
        }
        text_td(out, &d.kind);
        bytes_td(out, d.live_bytes);
        count_td(out, d.live_count);
        let peak = d.peak.as_ref().map_or(0, |p| p.bytes);
        bytes_td(out, peak);
        bytes_td(out, d.capacity);
        ratio_td(out, ratio(peak, d.capacity));
        match &d.budget {
            Some(b) => {
                bytes_td(out, b.min_budget);
                bytes_td(out, b.peak_usage);
                count_td(out, b.over_budget.len() as u64);
            }
            None => {
                for _ in 0..3 {
                    out.push_str("<td class=\"zero\" data-v=\"0\">-</td>");
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str(TABLE_END);
    if p.total.count == 0 {
        out.push_str("<p class=\"muted\">No GPU resource is live here.</p>\n");
        return;
    }

    let _ =
        writeln!(out, "<h3>Resources by kind <span class=\"muted small\">{} live</span></h3>", escape(&p.total.text()));
    table_head(
        out,
        "gpu-kinds",
        &[
            ("kind", false, "what the resources are"),
            ("count", true, "resources"),
            ("bytes", true, "their bytes"),
            ("share", true, "of all the live resources' bytes"),
            ("largest owners", false, "the contexts holding most of the bytes"),
        ],
    );
    for r in &p.by_kind {
        out.push_str("<tr>");
        text_td(out, r.kind.name());
        count_td(out, r.count);
        bytes_td(out, r.bytes);
        share_td(out, r.share_ppm);
        owners_td(out, &r.owners);
        out.push_str("</tr>\n");
    }
    out.push_str(TABLE_END);

    if !p.by_dimensions.is_empty() {
        out.push_str("<h3>By dimensions <span class=\"muted small\">textures and targets</span></h3>\n");
        table_head(
            out,
            "gpu-dimensions",
            &[
                ("width x height", false, "texels"),
                ("count", true, "resources of this size"),
                ("bytes", true, "their bytes"),
                ("share", true, "of all the live resources' bytes"),
                ("kinds", false, "what they are"),
                ("largest owners", false, "the contexts holding most of the bytes"),
            ],
        );
        for r in &p.by_dimensions {
            out.push_str("<tr>");
            text_td(out, &format!("{}x{}", r.width, r.height));
            count_td(out, r.count);
            bytes_td(out, r.bytes);
            share_td(out, r.share_ppm);
            text_td(out, &kinds_text(&r.kinds));
            owners_td(out, &r.owners);
            out.push_str("</tr>\n");
        }
        out.push_str(TABLE_END);
    }

    match p.screen {
        None => out.push_str(
            "<p class=\"muted\">Screen-sized targets: the screen size is unknown (the game records it with \
             memreplay::display_size).</p>\n",
        ),
        Some((w, h)) if !p.screen_sized.is_empty() => {
            let _ = writeln!(out, "<h3>Screen-sized targets <span class=\"muted small\">screen {w}x{h}</span></h3>");
            table_head(
                out,
                "gpu-screen",
                &[
                    ("name", false, "the resource's debug name"),
                    ("kind", false, "what it is"),
                    ("size", false, "width x height"),
                    ("format", false, "its format"),
                    ("of screen", false, "the fraction of each screen side"),
                    ("bytes", true, "bytes allocated"),
                    ("context", false, "its owner"),
                ],
            );
            for r in &p.screen_sized {
                out.push_str("<tr>");
                resource_tds(out, &r.resource);
                text_td(out, &r.fraction);
                bytes_td(out, r.resource.size);
                text_td(out, &r.resource.context);
                out.push_str("</tr>\n");
            }
            out.push_str(TABLE_END);
        }
        Some(_) => {}
    }

    if !p.npot.is_empty() {
        out.push_str("<h3>Non-power-of-two textures with mips</h3>\n");
        table_head(
            out,
            "gpu-npot",
            &[
                ("name", false, "the resource's debug name"),
                ("kind", false, "what it is"),
                ("size", false, "width x height"),
                ("format", false, "its format"),
                ("bytes", true, "bytes allocated"),
                ("saves (down)", true, "texel bytes saved by rounding each side down to a power of two"),
                ("costs (up)", true, "texel bytes added by rounding each side up to a power of two"),
                ("context", false, "its owner"),
            ],
        );
        for r in &p.npot {
            out.push_str("<tr>");
            resource_tds(out, &r.resource);
            bytes_td(out, r.resource.size);
            bytes_td(out, r.down.as_ref().map_or(0, |d| d.delta));
            bytes_td(out, r.up.as_ref().map_or(0, |d| d.delta));
            text_td(out, &r.resource.context);
            out.push_str("</tr>\n");
        }
        out.push_str(TABLE_END);
    }

    if !p.padding.is_empty() {
        let _ = writeln!(
            out,
            "<h3>Padding <span class=\"muted small\">{} beyond the texel data</span></h3>",
            escape(&size(p.padding_bytes))
        );
        table_head(
            out,
            "gpu-padding",
            &[
                ("name", false, "the resource's debug name"),
                ("kind", false, "what it is"),
                ("size", false, "width x height"),
                ("format", false, "its format"),
                ("bytes", true, "bytes allocated"),
                ("texel data", true, "bytes of its format, size, layers and mips"),
                ("padding", true, "bytes allocated beyond its texel data"),
                ("context", false, "its owner"),
            ],
        );
        for r in &p.padding {
            out.push_str("<tr>");
            resource_tds(out, &r.resource);
            bytes_td(out, r.resource.size);
            bytes_td(out, r.texel_bytes);
            bytes_td(out, r.padding);
            text_td(out, &r.resource.context);
            out.push_str("</tr>\n");
        }
        out.push_str(TABLE_END);
    }
    let _ = writeln!(
        out,
        "<p class=\"muted\">Small resources (under {}): {}.</p>",
        escape(&size(p.small.below)),
        escape(&p.small.total.text())
    );
}

/// One row of "heap and VRAM per context".
#[derive(Debug, Clone, PartialEq, Eq)]
struct ContextRow {
    node: NodeId,
    name: String,
    heap: u64,
    /// Per GPU domain, in the columns' order.
    gpu: Vec<u64>,
}

/// The columns (the heap's domains, the GPU domains) and the rows: per top-level
/// context (and the root, "(no context)"), live bytes at the selection's point, under its
/// thread filter, over the selection's domains. The heap column sums the top-level
/// domains of CPU kinds, as the page's heap column does. Rows holding nothing are left
/// out; the others come by their GPU bytes, then heap bytes, largest first.
fn context_rows(state: &ReplayState, sel: &Selection) -> (Vec<u32>, Vec<u32>, Vec<ContextRow>) {
    let heap: Vec<u32> = sel.domains.iter().copied().filter(|&d| crate::html::group(state, d) == "cpu").collect();
    let gpu: Vec<u32> = sel
        .domains
        .iter()
        .copied()
        .filter(|d| {
            matches!(state.domain_info.get(d).map(|i| i.kind), Some(DomainKind::GpuLocal | DomainKind::GpuShared))
        })
        .collect();
    // Each node's top-level context (a parent is created before its children).
    let mut top: Vec<NodeId> = Vec::with_capacity(state.nodes.len());
    for (id, node) in state.nodes.iter().enumerate() {
        let t = if id == ROOT as usize || node.parent == ROOT {
            id as NodeId
        } else {
            top.get(node.parent as usize).copied().unwrap_or(ROOT)
        };
        top.push(t);
    }
    let mut rows: Vec<Option<ContextRow>> = vec![None; state.nodes.len().max(1)];
    for (i, slot) in state.slots.iter().enumerate() {
        if sel.thread.is_some_and(|t| t != slot.thread) {
            continue;
        }
        let in_heap = heap.contains(&slot.domain);
        let column = gpu.iter().position(|&d| d == slot.domain);
        if !in_heap && column.is_none() {
            continue;
        }
        let bytes = sel.held(state, i as u32).bytes;
        if bytes == 0 {
            continue;
        }
        let node = top.get(slot.node as usize).copied().unwrap_or(ROOT);
        let Some(row) = rows.get_mut(node as usize) else { continue };
        let row = row.get_or_insert_with(|| ContextRow {
            node,
            name: short_name(state, node),
            heap: 0,
            gpu: vec![0; gpu.len()],
        });
        if in_heap {
            row.heap = row.heap.wrapping_add(bytes);
        }
        if let Some(c) = column {
            row.gpu[c] = row.gpu[c].wrapping_add(bytes);
        }
    }
    let mut rows: Vec<ContextRow> = rows.into_iter().flatten().collect();
    let gpu_sum = |r: &ContextRow| r.gpu.iter().fold(0u64, |a, &b| a.wrapping_add(b));
    rows.sort_by(|a, b| {
        gpu_sum(b)
            .cmp(&gpu_sum(a))
            .then(b.heap.cmp(&a.heap))
            .then_with(|| a.name.cmp(&b.name))
            .then(a.node.cmp(&b.node))
    });
    (heap, gpu, rows)
}

/// "Heap and VRAM per context".
fn contexts_table(out: &mut String, state: &ReplayState, sel: &Selection) {
    let (heap, gpu, rows) = context_rows(state, sel);
    if rows.is_empty() {
        out.push_str("<p class=\"muted\">No context holds heap or GPU memory here.</p>\n");
        return;
    }
    let heap_names: Vec<String> = heap.iter().map(|&d| state.domain_name(d)).collect();
    let heap_title = if heap_names.is_empty() {
        "no heap domain is selected".to_owned()
    } else {
        format!("live bytes in {}", heap_names.join(", "))
    };
    out.push_str("<div class=\"table-wrap\"><table class=\"data sort-table\" id=\"gpu-contexts\"><thead><tr>");
    th(out, "context", false, "top-level context");
    th(out, "heap", true, &heap_title);
    for &d in &gpu {
        let name = state.domain_name(d);
        th(out, &name, true, &format!("live bytes in {name}"));
    }
    out.push_str("</tr></thead><tbody>\n");
    for r in &rows {
        out.push_str("<tr>");
        text_td(out, &r.name);
        bytes_td(out, r.heap);
        for &b in &r.gpu {
            bytes_td(out, b);
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::blockmap::tests::{block, sub, view, well_formed};
    use crate::gpu::model::GpuKind;
    use crate::select::{At, ReportOptions};
    use memreplay_format::{Event, Part};

    const VRAM: u32 = 1;
    const SHARED: u32 = 2;

    /// A replayed state: Level:Forest holds heap and VRAM (a child context's bytes count
    /// for it), Level:Town heap and shared memory, the root a little heap. At the label
    /// "loaded", Forest held less VRAM.
    fn state(at: Option<&str>) -> (ReplayState, Selection) {
        let args = ReportOptions { at: at.map(|l| At::Label(l.into())), ..ReportOptions::new("game.mrl") };
        let mut st = ReplayState::new(args.replay_options());
        let strings = [
            (1, "Level"),
            (2, "Forest"),
            (3, "Town"),
            (4, "vram.local"),
            (5, "Zone"),
            (6, "a"),
            (7, "shared"),
            (8, "loaded"),
        ];
        let mut seq = 0;
        let mut next = || {
            seq += 2;
            seq
        };
        let mut events: Vec<Event> =
            strings.iter().map(|&(id, text)| Event::DefineString { id, text: text.into() }).collect();
        events.extend([
            Event::DefineContextType { id: 1, name: 1 },
            Event::DefineContextType { id: 2, name: 5 },
            Event::DefineDomain { id: VRAM, name: 4, kind: DomainKind::GpuLocal, capacity: 1 << 30, parent: None },
            Event::DefineDomain { id: SHARED, name: 7, kind: DomainKind::GpuShared, capacity: 0, parent: None },
            Event::Alloc { seq: next(), domain: 0, addr: 0x10, size: 7, align_log2: 0, stack: 0 },
            Event::ContextPush { ty: 1, name: 2, flags: 0 },
            Event::Alloc { seq: next(), domain: 0, addr: 0x100, size: 1000, align_log2: 3, stack: 0 },
            Event::Alloc { seq: next(), domain: VRAM, addr: 0x1000, size: 4096, align_log2: 8, stack: 0 },
            Event::ContextPush { ty: 2, name: 6, flags: 0 },
            Event::Alloc { seq: next(), domain: VRAM, addr: 0x4000, size: 1 << 20, align_log2: 8, stack: 0 },
            Event::ContextPop,
            Event::ContextPop,
            Event::Label { seq: next(), name: 8 },
            Event::ContextPush { ty: 1, name: 3, flags: 0 },
            Event::Alloc { seq: next(), domain: 0, addr: 0x800, size: 300, align_log2: 3, stack: 0 },
            Event::Alloc { seq: next(), domain: SHARED, addr: 0x9000, size: 2048, align_log2: 3, stack: 0 },
            Event::ContextPop,
            Event::ContextPush { ty: 1, name: 2, flags: 0 },
            Event::Alloc { seq: next(), domain: VRAM, addr: 0x20_0000, size: 512, align_log2: 8, stack: 0 },
            Event::Free { seq: next(), domain: VRAM, addr: 0x1000, stack: 0 },
            Event::ContextPop,
        ]);
        for e in &events {
            st.apply(1, e, Part::Whole);
        }
        st.finish();
        let sel = Selection::resolve(&st, &args).expect("the selection resolves");
        (st, sel)
    }

    fn row<'a>(rows: &'a [ContextRow], name: &str) -> &'a ContextRow {
        rows.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("no row {name}: {rows:?}"))
    }

    #[test]
    fn contexts_at_the_end_and_at_a_label() {
        let (st, sel) = state(None);
        let (heap, gpu, rows) = context_rows(&st, &sel);
        assert_eq!((heap, gpu), (vec![0], vec![VRAM, SHARED]));
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["Level:Forest", "Level:Town", "(no context)"]);
        assert_eq!(
            (row(&rows, "Level:Forest").heap, row(&rows, "Level:Forest").gpu.clone()),
            (1000, vec![(1 << 20) + 512, 0])
        );
        assert_eq!((row(&rows, "Level:Town").heap, row(&rows, "Level:Town").gpu.clone()), (300, vec![0, 2048]));
        assert_eq!((row(&rows, "(no context)").heap, row(&rows, "(no context)").gpu.clone()), (7, vec![0, 0]));

        let (st, sel) = state(Some("loaded"));
        let (_, _, rows) = context_rows(&st, &sel);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["Level:Forest", "(no context)"], "Town came after the label");
        assert_eq!(row(&rows, "Level:Forest").gpu, vec![4096 + (1 << 20), 0]);
    }

    #[test]
    fn the_section_has_the_map_and_both_tables() {
        let (st, sel) = state(None);
        let mut v = view(vec![
            block(0x10_0000, 1024, vec![sub(0, 128, GpuKind::Texture, "rock"), sub(512, 256, GpuKind::Buffer, "vb")]),
            block(0x20_0000, 256, vec![sub(0, 64, GpuKind::RenderTarget, "<rt>")]),
        ]);
        v.blocks[1].context = "Level:Forest".into();
        let html = section(&v, &st, &sel);
        assert!(well_formed(&html), "{html}");
        assert!(!html.contains("http://"), "the inline SVG names no namespace: the page names no address");
        assert!(html.contains("<svg width=\"1000\""));
        assert!(html.contains("&lt;rt&gt;") && !html.contains("<rt>"));
        // The blocks: size, used, used %, allocations, free, ranges, largest, fragmentation.
        let first = concat!(
            "<tr><td class=\"l\">vram.buffers in vram.local</td><td class=\"l\">0x100000</td>",
            "<td class=\"l\">(no context)</td><td data-v=\"1024\">1.0 KiB</td><td data-v=\"384\">384 B</td>",
            "<td data-v=\"0.375\">37.5%</td><td data-v=\"2\">2</td><td data-v=\"640\">640 B</td>",
            "<td data-v=\"2\">2</td><td data-v=\"384\">384 B</td><td data-v=\"0.4\">40.0%</td>",
            "<td data-v=\"0\" class=\"zero\">0 B</td><td data-v=\"0\" class=\"zero\">0 B</td></tr>"
        );
        assert!(html.contains(first), "{html}");
        assert!(html.contains("<td class=\"l\">Level:Forest</td><td data-v=\"256\">256 B</td>"), "{html}");
        // Heap and VRAM per context: the columns, then Forest first.
        assert!(html.contains(concat!(
            "<th class=\"l\" title=\"top-level context\">context</th>",
            "<th title=\"live bytes in heap\">heap</th>",
            "<th title=\"live bytes in vram.local\">vram.local</th>",
            "<th title=\"live bytes in shared\">shared</th>"
        )));
        let forest = "<tr><td class=\"l\">Level:Forest</td><td data-v=\"1000\">1000 B</td>\
                      <td data-v=\"1049088\">1.0 MiB</td><td data-v=\"0\" class=\"zero\">0 B</td></tr>";
        let town = "<tr><td class=\"l\">Level:Town</td><td data-v=\"300\">300 B</td>\
                    <td data-v=\"0\" class=\"zero\">0 B</td><td data-v=\"2048\">2.0 KiB</td></tr>";
        let (f, t) = (html.find(forest).expect(forest), html.find(town).expect(town));
        assert!(f < t);
        // The domains, the blocks, the contexts; no resource is live, so no pivots.
        assert_eq!(html.matches("class=\"data sort-table\"").count(), 3);
        assert!(html.contains("No GPU resource is live here."));
    }

    #[test]
    fn the_pivots_are_sortable_tables() {
        let (st, sel) = state(None);
        let mut v = view(Vec::new());
        let texture = |name: &str, w: u32, size: u64| crate::gpu::GpuResource {
            domain: 1,
            addr: size,
            size,
            kind: GpuKind::Texture,
            width: w,
            height: 600,
            depth_or_layers: 1,
            mip_levels: 10,
            format: "RGBA8_UNORM".into(),
            name: name.into(),
            context: "UI:atlas".into(),
        };
        v.resources = vec![texture("atlas", 1000, 3_211_264), texture("<odd>", 1000, 3_200_000)];
        let html = section(&v, &st, &sel);
        assert!(well_formed(&html), "{html}");
        for id in ["gpu-domains", "gpu-kinds", "gpu-dimensions", "gpu-npot", "gpu-padding"] {
            assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
        }
        // The atlas's padding: 3,211,264 allocated for 3,199,588 bytes of texels.
        assert!(
            html.contains(
                "<td class=\"l\">atlas</td><td class=\"l\">texture</td><td class=\"l\">1000x600</td>\
             <td class=\"l\">RGBA8_UNORM</td><td data-v=\"3211264\">3.1 MiB</td>\
             <td data-v=\"3199588\">3.1 MiB</td><td data-v=\"11676\">11.4 KiB</td>"
            ),
            "{html}"
        );
        assert!(html.contains("&lt;odd&gt;") && !html.contains("<odd>"));
        assert!(html.contains("Screen-sized targets: the screen size is unknown"));
    }

    #[test]
    fn an_empty_view_says_so() {
        let (st, sel) = state(None);
        let html = section(&view(Vec::new()), &st, &sel);
        assert!(well_formed(&html));
        assert!(html.contains("No sub-allocating domain has blocks here."));
        assert_eq!(html.matches("class=\"data sort-table\"").count(), 2, "the domains' and the contexts' tables stay");
    }
}
