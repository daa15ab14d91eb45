//! `timeline`: memory over time as an image (SVG, or PNG with the `png` feature), per
//! domain or per top-level context, with the labels as markers, each domain's peak
//! marked, time along the bottom and frames along the top.
//!
//! Each series is drawn from its buckets (`report::series`): a pale band from the lowest
//! to the highest value of each bucket, and a line along the highest, so a peak shorter
//! than a bucket still shows at its full height. The SVG is plain and self-describing:
//! every series is a `<g class="series">` whose `data-*` attributes give its name, peak
//! and end value in bytes, for tests and scripts.
//!
//! A domain with driver budget samples (format 1.2) gets two step lines in its colour
//! over its live bytes: the budget (long dashes) and the driver's usage (dots), each
//! sample held until the next one and the last to the end of the recording.

use std::fmt::Write as _;

use crate::series::{SeriesData, TimelineData};
use crate::table::size;
use crate::time::format_ms;
use crate::xml::escape as esc;

/// What the chart draws one line for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChartBy {
    /// Each domain (and what the OS saw of the process, when sampled).
    #[default]
    Domain,
    /// Each top-level context of one domain (`--domain`, default the heap).
    Context,
}

/// Size and content of the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChartOptions {
    /// One line per domain, or per top-level context.
    pub by: ChartBy,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

impl Default for ChartOptions {
    fn default() -> Self {
        ChartOptions { by: ChartBy::Domain, width: 1200, height: 600 }
    }
}

/// Contexts drawn at most in a per-context chart; the legend names how many more.
pub const MAX_CONTEXT_LINES: usize = 10;

const PALETTE: [&str; 10] =
    ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const MARGIN_LEFT: f64 = 78.0;
const MARGIN_RIGHT: f64 = 24.0;
const MARGIN_TOP: f64 = 64.0;
const MARGIN_BOTTOM: f64 = 72.0;

/// One drawn line and how to draw it.
struct Line<'a> {
    data: LineData<'a>,
    color: &'static str,
    dashed: bool,
}

enum LineData<'a> {
    Buckets(&'a SeriesData),
    /// (time, bytes) points, e.g. process samples.
    Points {
        name: &'static str,
        points: Vec<(u64, u64)>,
    },
    /// (time, bytes) samples, each held until the next: a domain's driver budget or
    /// usage (`kind`).
    Steps {
        name: String,
        domain: &'a str,
        kind: &'static str,
        points: Vec<(u64, u64)>,
    },
}

impl Line<'_> {
    fn name(&self) -> &str {
        match &self.data {
            LineData::Buckets(s) => &s.name,
            LineData::Points { name, .. } => name,
            LineData::Steps { name, .. } => name,
        }
    }

    fn max(&self) -> u64 {
        match &self.data {
            LineData::Buckets(s) => s.high.iter().copied().max().unwrap_or(0),
            LineData::Points { points, .. } | LineData::Steps { points, .. } => {
                points.iter().map(|p| p.1).max().unwrap_or(0)
            }
        }
    }
}

/// The chart as an SVG document. `title` heads it (the log's path, say).
pub fn svg(data: &TimelineData, title: &str, opts: ChartOptions) -> String {
    let w = f64::from(opts.width.max(320));
    let h = f64::from(opts.height.max(200));

    let mut lines: Vec<Line> = Vec::new();
    let mut more_contexts = 0usize;
    let what = match opts.by {
        ChartBy::Domain => {
            for (i, s) in data.domains.iter().enumerate() {
                lines.push(Line { data: LineData::Buckets(s), color: PALETTE[i % PALETTE.len()], dashed: false });
            }
            let mut extra = data.domains.len();
            for b in &data.budgets {
                // The domain's colour; a domain without a live-bytes series gets the next.
                let color = match data.domains.iter().position(|d| d.name == b.domain) {
                    Some(i) => PALETTE[i % PALETTE.len()],
                    None => {
                        extra += 1;
                        PALETTE[(extra - 1) % PALETTE.len()]
                    }
                };
                for (kind, value) in [("budget", 0), ("usage", 1)] {
                    let points = b.points.iter().map(|p| (p.time_ns, if value == 0 { p.budget } else { p.usage }));
                    lines.push(Line {
                        data: LineData::Steps {
                            name: format!("{} {kind} (driver)", b.domain),
                            domain: &b.domain,
                            kind,
                            points: points.collect(),
                        },
                        color,
                        dashed: true,
                    });
                }
            }
            if !data.process.is_empty() {
                let resident = data.process.iter().map(|p| (p.time_ns, p.resident)).collect();
                lines.push(Line {
                    data: LineData::Points { name: "process resident (OS)", points: resident },
                    color: "#444444",
                    dashed: true,
                });
                if data.process.iter().any(|p| p.committed > 0) {
                    let committed = data.process.iter().map(|p| (p.time_ns, p.committed)).collect();
                    lines.push(Line {
                        data: LineData::Points { name: "process committed (OS)", points: committed },
                        color: "#999999",
                        dashed: true,
                    });
                }
            }
            "memory by domain".to_owned()
        }
        ChartBy::Context => {
            let mut ctx: Vec<&SeriesData> = data.contexts.iter().collect();
            ctx.sort_by(|a, b| b.peak.cmp(&a.peak).then_with(|| a.name.cmp(&b.name)));
            more_contexts = ctx.len().saturating_sub(MAX_CONTEXT_LINES);
            for (i, s) in ctx.into_iter().take(MAX_CONTEXT_LINES).enumerate() {
                lines.push(Line { data: LineData::Buckets(s), color: PALETTE[i % PALETTE.len()], dashed: false });
            }
            let domains: Vec<&str> = data.domains.iter().map(|d| d.name.as_str()).collect();
            format!("{} by top-level context", domains.join(", "))
        }
    };

    // The legend wraps into rows below the time axis; the plot gets what is left.
    let mut legend: Vec<(f64, usize, String)> = Vec::new();
    let (mut lx, mut row) = (MARGIN_LEFT, 0usize);
    let mut items: Vec<String> = lines.iter().map(|l| format!("{} (max {})", l.name(), size(l.max()))).collect();
    if more_contexts > 0 {
        items.push(format!("… {more_contexts} smaller contexts not drawn"));
    }
    for text in items {
        let width = 30.0 + 6.5 * text.chars().count() as f64;
        if lx > MARGIN_LEFT && lx + width > w - MARGIN_RIGHT {
            lx = MARGIN_LEFT;
            row += 1;
        }
        legend.push((lx, row, text));
        lx += width;
    }
    let legend_rows = legend.last().map_or(0, |l| l.1 + 1);
    let plot_w = w - MARGIN_LEFT - MARGIN_RIGHT;
    let plot_h = (h - MARGIN_TOP - MARGIN_BOTTOM - 16.0 * legend_rows.saturating_sub(1) as f64).max(40.0);

    // Scales. A capacity far above the data would flatten it: drawn only when within 4x.
    let data_max = lines.iter().map(Line::max).max().unwrap_or(0);
    let capacities: Vec<(&SeriesData, &'static str)> = match opts.by {
        ChartBy::Domain => lines
            .iter()
            .filter_map(|l| match l.data {
                LineData::Buckets(s) => s.capacity.map(|_| (s, l.color)),
                LineData::Points { .. } | LineData::Steps { .. } => None,
            })
            .collect(),
        ChartBy::Context => Vec::new(),
    };
    let cap_max = capacities
        .iter()
        .filter_map(|(s, _)| s.capacity)
        .filter(|&c| data_max > 0 && c <= data_max.saturating_mul(4))
        .max()
        .unwrap_or(0);
    let y_max = nice_ceiling(data_max.max(cap_max).max(1));
    let t_end = data.end_ns.max(1);
    let x = |t: u64| MARGIN_LEFT + plot_w * (t.min(t_end) as f64 / t_end as f64);
    let y = |v: u64| MARGIN_TOP + plot_h * (1.0 - v as f64 / y_max as f64);

    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{MARGIN_LEFT}" y="20" font-size="15" font-weight="bold">{}</text>"#,
        esc(&format!("{what} — {title}"))
    );

    // Axes and grid: bytes on the left, time along the bottom, frames along the top.
    let _ = writeln!(o, r##"<g class="axes" stroke="#cccccc">"##);
    for k in 0..=4u64 {
        let v = y_max / 4 * k;
        let _ = writeln!(
            o,
            r##"<line x1="{MARGIN_LEFT}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="end" stroke="none" fill="#333333">{}</text>"##,
            w - MARGIN_RIGHT,
            MARGIN_LEFT - 6.0,
            y(v) + 4.0,
            size(v),
            yy = y(v)
        );
    }
    for k in 0..=5u64 {
        let t = t_end / 5 * k;
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{MARGIN_TOP}" y2="{:.1}"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle" stroke="none" fill="#333333">{}</text>"##,
            MARGIN_TOP + plot_h,
            MARGIN_TOP + plot_h + 16.0,
            format_ms(t),
            xx = x(t)
        );
    }
    let _ = writeln!(o, "</g>");
    let _ = writeln!(
        o,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#333333">time since the start of the recording</text>"##,
        MARGIN_LEFT + plot_w / 2.0,
        MARGIN_TOP + plot_h + 34.0
    );
    if !data.frames.is_empty() {
        let _ = writeln!(o, r##"<g class="frames" fill="#666666" font-size="10">"##);
        // A tick where there is room for its text: frames bunch up where they are short.
        let mut next_x = f64::MIN;
        for f in &data.frames {
            let xx = x(f.time_ns);
            if xx < next_x {
                continue;
            }
            next_x = xx + 64.0;
            let _ = writeln!(
                o,
                r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{:.1}" y2="{MARGIN_TOP}" stroke="#999999"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">frame {}</text>"##,
                MARGIN_TOP - 5.0,
                MARGIN_TOP - 8.0,
                f.frame,
            );
        }
        let _ = writeln!(o, "</g>");
    }

    // Capacities, then the series, then labels and peaks on top.
    for (s, color) in &capacities {
        let Some(c) = s.capacity else { continue };
        if c > y_max {
            continue;
        }
        let _ = writeln!(
            o,
            r#"<g class="capacity" data-domain="{}" data-bytes="{c}"><line x1="{MARGIN_LEFT}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="{color}" stroke-dasharray="2 4"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="{color}" font-size="10">{} capacity {}</text></g>"#,
            esc(&s.name),
            w - MARGIN_RIGHT,
            w - MARGIN_RIGHT - 2.0,
            y(c) - 3.0,
            esc(&s.name),
            size(c),
            yy = y(c)
        );
    }
    for line in &lines {
        match &line.data {
            LineData::Buckets(s) => {
                let mut band = String::new();
                let mut top = String::new();
                for i in 0..s.high.len() {
                    let (x0, x1) = (x(data.bucket_start(i)), x(data.bucket_end(i)));
                    let _ = write!(
                        top,
                        "{}{x0:.1},{:.1} {x1:.1},{:.1}",
                        if i == 0 { "M" } else { " L" },
                        y(s.high[i]),
                        y(s.high[i])
                    );
                    let _ = write!(
                        band,
                        "{}{x0:.1},{:.1} {x1:.1},{:.1}",
                        if i == 0 { "M" } else { " L" },
                        y(s.high[i]),
                        y(s.high[i])
                    );
                }
                for i in (0..s.low.len()).rev() {
                    let (x0, x1) = (x(data.bucket_start(i)), x(data.bucket_end(i)));
                    let _ = write!(band, " L{x1:.1},{:.1} {x0:.1},{:.1}", y(s.low[i]), y(s.low[i]));
                }
                let _ = writeln!(
                    o,
                    r#"<g class="series" data-name="{}" data-domain="{}" data-peak="{}" data-high="{}" data-end="{}" data-buckets="{}"><path d="{band} Z" fill="{c}" fill-opacity="0.15" stroke="none"/><path class="line" d="{top}" fill="none" stroke="{c}" stroke-width="1.6"/></g>"#,
                    esc(&s.name),
                    esc(&s.domain),
                    s.peak,
                    s.high.iter().copied().max().unwrap_or(0),
                    s.end,
                    s.high.len(),
                    c = line.color
                );
            }
            LineData::Points { name, points } => {
                let mut d = String::new();
                for (i, &(t, v)) in points.iter().enumerate() {
                    let _ = write!(d, "{}{:.1},{:.1}", if i == 0 { "M" } else { " L" }, x(t), y(v));
                }
                let peak = points.iter().map(|p| p.1).max().unwrap_or(0);
                let end = points.last().map_or(0, |p| p.1);
                let _ = writeln!(
                    o,
                    r#"<g class="series process" data-name="{name}" data-peak="{peak}" data-end="{end}" data-points="{}"><path class="line" d="{d}" fill="none" stroke="{}" stroke-width="1.4"{}/></g>"#,
                    points.len(),
                    line.color,
                    if line.dashed { r#" stroke-dasharray="6 3""# } else { "" }
                );
            }
            LineData::Steps { name, domain, kind, points } => {
                let mut d = String::new();
                for (i, &(t, v)) in points.iter().enumerate() {
                    if i == 0 {
                        let _ = write!(d, "M{:.1},{:.1}", x(t), y(v));
                    } else {
                        let _ = write!(d, " H{:.1} V{:.1}", x(t), y(v));
                    }
                }
                if !points.is_empty() {
                    let _ = write!(d, " H{:.1}", x(t_end));
                }
                let peak = points.iter().map(|p| p.1).max().unwrap_or(0);
                let end = points.last().map_or(0, |p| p.1);
                let _ = writeln!(
                    o,
                    r#"<g class="series budget" data-name="{}" data-domain="{}" data-kind="{kind}" data-peak="{peak}" data-end="{end}" data-points="{}"><path class="line" d="{d}" fill="none" stroke="{}" stroke-width="1.4" stroke-dasharray="{}"/></g>"#,
                    esc(name),
                    esc(domain),
                    points.len(),
                    line.color,
                    step_dashes(kind)
                );
            }
        }
    }
    for (i, label) in data.labels.iter().enumerate() {
        let xx = x(label.time_ns);
        // Labels at the same moment would print over each other: stagger them.
        let yy = MARGIN_TOP + 12.0 + 13.0 * (i % 4) as f64;
        // Near the right edge the text goes to the left of its line.
        let (tx, anchor) = if xx > w - MARGIN_RIGHT - 140.0 { (xx - 3.0, "end") } else { (xx + 3.0, "start") };
        let _ = writeln!(
            o,
            r##"<g class="label" data-name="{}" data-time-ns="{}"><line x1="{xx:.1}" x2="{xx:.1}" y1="{MARGIN_TOP}" y2="{:.1}" stroke="#555555" stroke-dasharray="4 3"/><text x="{tx:.1}" y="{yy:.1}" text-anchor="{anchor}" fill="#222222" font-size="11">{}</text></g>"##,
            esc(&label.name),
            label.time_ns,
            MARGIN_TOP + plot_h,
            esc(&label.name)
        );
    }
    if opts.by == ChartBy::Domain {
        for line in &lines {
            let LineData::Buckets(s) = line.data else { continue };
            if s.peak == 0 {
                continue;
            }
            let (px, py) = (x(s.peak_ns), y(s.peak));
            let _ = writeln!(
                o,
                r#"<g class="peak" data-domain="{}" data-bytes="{}"><circle cx="{px:.1}" cy="{py:.1}" r="4" fill="{c}" stroke="white"/><text x="{:.1}" y="{:.1}" fill="{c}" font-size="11" font-weight="bold">peak {}</text></g>"#,
                esc(&s.name),
                s.peak,
                px + 6.0,
                py - 6.0,
                size(s.peak),
                c = line.color
            );
        }
    }

    // Legend, below the time axis.
    let _ = writeln!(o, r#"<g class="legend">"#);
    for (i, (lx, row, text)) in legend.iter().enumerate() {
        let ly = MARGIN_TOP + plot_h + 56.0 + 16.0 * *row as f64;
        match lines.get(i) {
            Some(line) => {
                let dash = match &line.data {
                    LineData::Steps { kind, .. } => format!(r#" stroke-dasharray="{}""#, step_dashes(kind)),
                    _ if line.dashed => r#" stroke-dasharray="6 3""#.to_owned(),
                    _ => String::new(),
                };
                let _ = writeln!(
                    o,
                    r#"<line x1="{lx:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{}" stroke-width="3"{dash}/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
                    lx + 18.0,
                    ly - 4.0,
                    ly - 4.0,
                    line.color,
                    lx + 22.0,
                    esc(text)
                );
            }
            None => {
                let _ = writeln!(o, r##"<text x="{lx:.1}" y="{ly:.1}" fill="#666666">{}</text>"##, esc(text));
            }
        }
    }
    if lines.is_empty() {
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#666666">no allocations</text>"##,
            MARGIN_LEFT + plot_w / 2.0,
            MARGIN_TOP + plot_h / 2.0
        );
    }
    let _ = writeln!(o, "</g>");
    o.push_str("</svg>\n");
    o
}

/// The dash pattern of a driver step line: long dashes for the budget, dots for usage.
fn step_dashes(kind: &str) -> &'static str {
    if kind == "budget" {
        "10 4"
    } else {
        "2 3"
    }
}

/// The top of the byte axis: `v` rounded up to an eighth of the next power of two, so
/// that its quarters (the grid lines) read as round KiB/MiB figures. Saturates (a
/// corrupt log's figures can reach the top of `u64`).
fn nice_ceiling(v: u64) -> u64 {
    let step = v.checked_next_power_of_two().map_or(1 << 61, |p| (p / 8).max(1));
    v.div_ceil(step).saturating_mul(step)
}

/// The chart rendered to a PNG, at the SVG's size. Text needs a system font (any of
/// DejaVu Sans, Liberation Sans, Arial, Helvetica, Noto Sans); without one the image
/// has no text, and the second value says so.
#[cfg(feature = "png")]
pub fn png(svg: &str) -> Result<(Vec<u8>, Option<String>), String> {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    let families: Vec<String> = opt.fontdb.faces().flat_map(|f| f.families.iter().map(|(n, _)| n.clone())).collect();
    let sans = ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica", "Noto Sans"]
        .into_iter()
        .find(|want| families.iter().any(|f| f == want));
    let warning = match sans {
        Some(f) => {
            opt.fontdb_mut().set_sans_serif_family(f);
            None
        }
        None => Some("no usable system font was found: the PNG has no text (the SVG does)".to_owned()),
    };
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("cannot render the chart: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        tiny_skia::Pixmap::new(size.width(), size.height()).ok_or_else(|| "the chart has no area".to_owned())?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    let png = pixmap.encode_png().map_err(|e| format!("cannot encode the PNG: {e}"))?;
    Ok((png, warning))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testlog::{budget_log, MIB};
    use crate::{run_timeline, ImageFormat, Progress, ReportOptions};

    fn chart(name: &str, budgets: bool) -> String {
        let opts = ReportOptions::new(budget_log(name, budgets));
        let svg = run_timeline(&opts, ChartOptions::default(), ImageFormat::Svg, Progress::Hidden).unwrap();
        String::from_utf8(svg).unwrap()
    }

    /// The `<g class="series budget" ...>` element of `kind`, as one line.
    fn budget_line<'a>(svg: &'a str, kind: &str) -> &'a str {
        let want = format!(r#"data-kind="{kind}""#);
        svg.lines().find(|l| l.starts_with(r#"<g class="series budget""#) && l.contains(&want)).unwrap()
    }

    #[test]
    fn a_domain_with_budget_samples_gets_its_budget_and_usage_as_steps() {
        let svg = chart("chart-budget", true);
        let budget = budget_line(&svg, "budget");
        assert!(budget.contains(r#"data-name="vram.local budget (driver)" data-domain="vram.local""#), "{budget}");
        assert!(
            budget.contains(&format!(r#"data-peak="{}" data-end="{}" data-points="3""#, 1000 * MIB, 900 * MIB)),
            "{budget}"
        );
        let usage = budget_line(&svg, "usage");
        assert!(usage.contains(&format!(r#"data-peak="{}" data-end="{}""#, 950 * MIB, 500 * MIB)), "{usage}");
        // Steps: a start, then per sample a horizontal run and a vertical step, then a
        // run to the end of the plot (10 µs, at its right edge).
        let d = budget.split(r#" d=""#).nth(1).unwrap().split('"').next().unwrap();
        let parts: Vec<&str> = d.split(' ').collect();
        assert_eq!(parts.len(), 1 + 2 * 2 + 1, "{d}");
        assert!(parts[0].starts_with('M') && parts[1].starts_with('H') && parts[2].starts_with('V'), "{d}");
        assert_eq!(parts[5], format!("H{:.1}", 1200.0 - MARGIN_RIGHT));
        // Same colour as the domain's live bytes, and both in the legend.
        let live = svg.lines().find(|l| l.contains(r#"<g class="series" data-name="vram.local""#)).unwrap();
        let color =
            |l: &str| l.split(r#"class="line""#).nth(1).unwrap().split(r#"stroke=""#).nth(1).unwrap()[..7].to_owned();
        assert_eq!(color(budget), color(live));
        assert!(svg.contains("vram.local budget (driver) (max 1000.0 MiB)"), "{svg}");
        assert!(svg.contains("vram.local usage (driver) (max 950.0 MiB)"));
    }

    #[test]
    fn a_log_without_budget_samples_draws_no_budget_lines() {
        let svg = chart("chart-plain", false);
        assert!(!svg.contains("budget") && !svg.contains("driver"), "{svg}");
    }

    #[test]
    fn ceilings_are_round_and_above() {
        for v in [1u64, 3, 100, 1000, 4096, 5000, 1 << 20, 3 << 20, 5_000_000, 17_000_000, u32::MAX as u64] {
            let c = nice_ceiling(v);
            assert!(c >= v, "{v} -> {c}");
            assert!(c <= v.next_power_of_two(), "{v} -> {c}");
        }
        assert_eq!(nice_ceiling(3 << 20), 3 << 20);
        assert_eq!(nice_ceiling(5_000_000), 5 << 20);
        assert_eq!(nice_ceiling(17_000_000), 20 << 20);
    }
}
