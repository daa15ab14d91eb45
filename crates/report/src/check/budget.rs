//! The budget file of `replay-cli check`: TOML, read into a flat list of [`Rule`]s, each
//! remembering the line it was written on so that every message can point to it.
//!
//! The keys are documented in `replay-cli/BUDGET.md`, with a worked example in
//! `replay-cli/budget.example.toml`. Unknown keys, values of the wrong type, sizes and
//! percentages that do not parse, bad context patterns and tables that set no limit are
//! errors naming the line: `budget.toml:12: unknown field `max_peek`, expected ...`.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;

use super::glob::ContextGlob;
use crate::integrity::DamageKind;
use crate::select::parse_bytes;

/// A budget, ready to check.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// The file, as named on the command line.
    pub file: String,
    pub rules: Vec<Rule>,
    /// Kinds of damage the log (and baseline) may have (`[integrity] allow`), each with
    /// its line.
    pub allow_damage: Vec<Located<DamageKind>>,
}

/// A value and the line of the budget file it was written on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located<T> {
    pub value: T,
    pub line: usize,
}

/// One limit on one figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Line of the limit's key.
    pub line: usize,
    pub scope: Scope,
    pub metric: Metric,
    pub limit: Limit,
    /// The label the rule is evaluated at; `None`: the end of the log.
    pub at: Option<Located<String>>,
}

/// What a rule measures.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    /// One domain, whole (`[[domain]]`).
    Domain(Located<String>),
    /// What is live at the end (`[leaks]`): one domain, or the top-level domains summed.
    Leaks(Option<Located<String>>),
    /// The contexts a pattern matches (`[[context]]`): together (outermost matches
    /// summed), or `each` on its own; in one domain or the top-level domains summed.
    Context { glob: ContextGlob, domain: Option<Located<String>>, each: bool, optional: bool },
    /// Every container of the heap (`[efficiency]`).
    HeapContainers,
    /// Growth over the baseline (`[growth]`): one domain, or the top-level domains summed.
    Total(Option<Located<String>>),
    /// The pivots of the live GPU resources (`[[gpu]]`): in one GPU domain and the
    /// domains inside it, or in every GPU domain; resources below `small` bytes are small.
    Gpu {
        /// The GPU domain (`None`: every GPU domain).
        domain: Option<Located<String>>,
        /// Resources of fewer bytes are small.
        small: u64,
    },
}

/// Which figure of the scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Held at the domain's peak.
    Peak,
    /// Held at the rule's point (the end or its label).
    Live,
    /// Allocations live at the point.
    LiveCount,
    Instances,
    /// Live bytes per instance.
    PerInstance,
    /// Used / capacity of the containers live at the point.
    Efficiency,
    /// Growth of a figure over the baseline log, in bytes or in percent.
    GrowthBytes(GrowthOf),
    GrowthPercent(GrowthOf),
    /// The domain's peak of live bytes (what the log tracked), in percent of the
    /// smallest budget the driver reported for it (format 1.2 budget samples).
    PeakOfBudget,
    /// The highest usage the driver reported for the domain, in percent of the smallest
    /// budget it reported.
    UsageOfBudget,
    /// A figure of the GPU pivots at the rule's point.
    Gpu(GpuMetric),
}

/// The figures of the GPU pivots a `[[gpu]]` table limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuMetric {
    /// Bytes allocated beyond the texel data of the textures and targets
    /// (`pivots.padding_bytes`).
    PaddingBytes,
    /// What rounding every NPOT texture with mips down to powers of two would save
    /// (`pivots.npot_save`).
    NpotWaste,
    /// Resources below the small threshold (`pivots.small.total.count`).
    SmallResources,
    /// Their bytes (`pivots.small.total.bytes`).
    SmallBytes,
    /// Textures and targets whose format this reader does not know, so whose padding
    /// could not be checked (`pivots.unchecked.unknown_format.count`).
    UnknownFormats,
}

impl GpuMetric {
    /// The metric's name in the results: its budget key without `max_`.
    pub fn name(self) -> &'static str {
        match self {
            GpuMetric::PaddingBytes => "padding_bytes",
            GpuMetric::NpotWaste => "npot_waste",
            GpuMetric::SmallResources => "small_resources",
            GpuMetric::SmallBytes => "small_bytes",
            GpuMetric::UnknownFormats => "unknown_formats",
        }
    }

    /// The metric in words, for a rule's name.
    pub fn words(self) -> &'static str {
        match self {
            GpuMetric::PaddingBytes => "padding bytes",
            GpuMetric::NpotWaste => "NPOT texture waste",
            GpuMetric::SmallResources => "small resources",
            GpuMetric::SmallBytes => "bytes in small resources",
            GpuMetric::UnknownFormats => "resources of unknown format",
        }
    }
}

/// The figure growth rules compare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrowthOf {
    #[default]
    Peak,
    Live,
    Total,
}

impl GrowthOf {
    pub fn name(self) -> &'static str {
        match self {
            GrowthOf::Peak => "peak",
            GrowthOf::Live => "live",
            GrowthOf::Total => "total",
        }
    }
}

/// The limit itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// At most this many bytes.
    MaxBytes(u64),
    /// At most this many (allocations, instances).
    MaxCount(u64),
    /// At most this many percent.
    MaxPercent(f64),
    /// At least this many percent.
    MinPercent(f64),
}

/// A byte count: an integer, or a string with a unit (`"64MiB"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bytes(u64);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a size: bytes (4096) or a string with a unit (\"64KiB\", \"1.5MiB\")")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Bytes, E> {
                Ok(Bytes(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Bytes, E> {
                u64::try_from(v).map(Bytes).map_err(|_| E::custom(format!("{v} is negative: a size is 0 or more")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Bytes, E> {
                parse_bytes(v).map(Bytes).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A percentage: a number (`5`, `2.5`) or a string (`"5%"`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Percent(f64);

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Percent, D::Error> {
        struct V;
        fn check<E: de::Error>(v: f64) -> Result<Percent, E> {
            if v.is_finite() && v >= 0.0 {
                Ok(Percent(v))
            } else {
                Err(E::custom(format!("{v} is not a percentage (0 or more)")))
            }
        }
        impl Visitor<'_> for V {
            type Value = Percent;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a percentage: a number (5, 2.5) or a string (\"5%\")")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Percent, E> {
                check(v as f64)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Percent, E> {
                check(v as f64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Percent, E> {
                check(v)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Percent, E> {
                let n = v.trim().strip_suffix('%').unwrap_or(v).trim();
                match n.parse::<f64>() {
                    Ok(p) => check(p),
                    Err(_) => Err(E::custom(format!("`{v}` is not a percentage (\"5%\", 2.5)"))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A context pattern, parsed as it is read (so a bad one is reported at its line).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Glob(ContextGlob);

impl<'de> Deserialize<'de> for Glob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Glob, D::Error> {
        let s = String::deserialize(d)?;
        ContextGlob::parse(&s).map(Glob).map_err(de::Error::custom)
    }
}

type Opt<T> = Option<Spanned<T>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    at: Opt<String>,
    growth: Option<Spanned<RawGrowth>>,
    #[serde(default)]
    domain: Vec<Spanned<RawDomain>>,
    leaks: Option<Spanned<RawLeaks>>,
    #[serde(default)]
    context: Vec<Spanned<RawContext>>,
    efficiency: Option<Spanned<RawEfficiency>>,
    integrity: Option<RawIntegrity>,
    #[serde(default)]
    gpu: Vec<Spanned<RawGpu>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGpu {
    domain: Opt<String>,
    at: Opt<String>,
    small: Option<Bytes>,
    max_padding_bytes: Opt<Bytes>,
    max_npot_waste: Opt<Bytes>,
    max_small_resources: Opt<u64>,
    max_small_bytes: Opt<Bytes>,
    max_unknown_formats: Opt<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIntegrity {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrowth {
    domain: Opt<String>,
    at: Opt<String>,
    of: Option<GrowthOf>,
    max_bytes: Opt<Bytes>,
    max_percent: Opt<Percent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDomain {
    name: Spanned<String>,
    at: Opt<String>,
    max_peak: Opt<Bytes>,
    max_live: Opt<Bytes>,
    max_live_count: Opt<u64>,
    max_peak_of_budget: Opt<Percent>,
    max_usage_of_budget: Opt<Percent>,
    growth_of: Option<GrowthOf>,
    max_growth_bytes: Opt<Bytes>,
    max_growth_percent: Opt<Percent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLeaks {
    domain: Opt<String>,
    max_bytes: Opt<Bytes>,
    max_count: Opt<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContext {
    path: Spanned<Glob>,
    domain: Opt<String>,
    at: Opt<String>,
    #[serde(default)]
    each: bool,
    #[serde(default)]
    optional: bool,
    max_peak: Opt<Bytes>,
    max_live: Opt<Bytes>,
    max_count: Opt<u64>,
    max_instances: Opt<u64>,
    max_per_instance: Opt<Bytes>,
    min_efficiency: Opt<Percent>,
    growth_of: Option<GrowthOf>,
    max_growth_bytes: Opt<Bytes>,
    max_growth_percent: Opt<Percent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEfficiency {
    at: Opt<String>,
    min: Spanned<Percent>,
}

/// Line (1-based) of byte offset `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    1 + text.as_bytes()[..at.min(text.len())].iter().filter(|&&b| b == b'\n').count()
}

impl Budget {
    /// Reads a budget from `text` (the file `file`). The error is one line:
    /// `file:LINE: reason`.
    pub fn parse(file: &str, text: &str) -> Result<Budget, String> {
        let raw: RawBudget = toml::from_str(text).map_err(|e| {
            let reason = e.message().trim().replace('\n', " ");
            match e.span() {
                Some(span) => format!("{file}:{}: {reason}", line_of(text, span.start)),
                None => format!("{file}: {reason}"),
            }
        })?;
        let line = |span: std::ops::Range<usize>| line_of(text, span.start);
        let located = |s: &Spanned<String>| Located { value: s.get_ref().clone(), line: line(s.span()) };
        let default_at = raw.at.as_ref().map(located);
        let at_or_default = |at: &Opt<String>| at.as_ref().map(located).or_else(|| default_at.clone());
        let mut rules = Vec::new();
        let no_limit = |span, what: String| format!("{file}:{}: {what} sets no limit", line(span));

        for d in &raw.domain {
            let (span, d) = (d.span(), d.get_ref());
            let scope = Scope::Domain(located(&d.name));
            let at = at_or_default(&d.at);
            let of = d.growth_of.unwrap_or_default();
            let before = rules.len();
            let mut add = |metric, limit, key_line| {
                rules.push(Rule { line: key_line, scope: scope.clone(), metric, limit, at: at.clone() })
            };
            if let Some(v) = &d.max_peak {
                add(Metric::Peak, Limit::MaxBytes(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &d.max_live {
                add(Metric::Live, Limit::MaxBytes(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &d.max_live_count {
                add(Metric::LiveCount, Limit::MaxCount(*v.get_ref()), line(v.span()));
            }
            if let Some(v) = &d.max_peak_of_budget {
                add(Metric::PeakOfBudget, Limit::MaxPercent(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &d.max_usage_of_budget {
                add(Metric::UsageOfBudget, Limit::MaxPercent(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &d.max_growth_bytes {
                add(Metric::GrowthBytes(of), Limit::MaxBytes(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &d.max_growth_percent {
                add(Metric::GrowthPercent(of), Limit::MaxPercent(v.get_ref().0), line(v.span()));
            }
            if rules.len() == before {
                return Err(no_limit(span, format!("[[domain]] \"{}\"", d.name.get_ref())));
            }
        }

        if let Some(l) = &raw.leaks {
            let (span, l) = (l.span(), l.get_ref());
            let scope = Scope::Leaks(l.domain.as_ref().map(located));
            let before = rules.len();
            if let Some(v) = &l.max_bytes {
                let limit = Limit::MaxBytes(v.get_ref().0);
                rules.push(Rule { line: line(v.span()), scope: scope.clone(), metric: Metric::Live, limit, at: None });
            }
            if let Some(v) = &l.max_count {
                let limit = Limit::MaxCount(*v.get_ref());
                rules.push(Rule { line: line(v.span()), scope, metric: Metric::LiveCount, limit, at: None });
            }
            if rules.len() == before {
                return Err(no_limit(span, "[leaks]".into()));
            }
        }

        for c in &raw.context {
            let (span, c) = (c.span(), c.get_ref());
            let scope = Scope::Context {
                glob: c.path.get_ref().0.clone(),
                domain: c.domain.as_ref().map(located),
                each: c.each,
                optional: c.optional,
            };
            let at = at_or_default(&c.at);
            let of = c.growth_of.unwrap_or_default();
            let before = rules.len();
            let mut add = |metric, limit, key_line| {
                rules.push(Rule { line: key_line, scope: scope.clone(), metric, limit, at: at.clone() })
            };
            if let Some(v) = &c.max_peak {
                add(Metric::Peak, Limit::MaxBytes(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &c.max_live {
                add(Metric::Live, Limit::MaxBytes(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &c.max_count {
                add(Metric::LiveCount, Limit::MaxCount(*v.get_ref()), line(v.span()));
            }
            if let Some(v) = &c.max_instances {
                add(Metric::Instances, Limit::MaxCount(*v.get_ref()), line(v.span()));
            }
            if let Some(v) = &c.max_per_instance {
                add(Metric::PerInstance, Limit::MaxBytes(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &c.min_efficiency {
                add(Metric::Efficiency, Limit::MinPercent(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &c.max_growth_bytes {
                add(Metric::GrowthBytes(of), Limit::MaxBytes(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &c.max_growth_percent {
                add(Metric::GrowthPercent(of), Limit::MaxPercent(v.get_ref().0), line(v.span()));
            }
            if rules.len() == before {
                return Err(no_limit(span, format!("[[context]] \"{}\"", c.path.get_ref().0)));
            }
        }

        if let Some(e) = &raw.efficiency {
            let e = e.get_ref();
            rules.push(Rule {
                line: line(e.min.span()),
                scope: Scope::HeapContainers,
                metric: Metric::Efficiency,
                limit: Limit::MinPercent(e.min.get_ref().0),
                at: at_or_default(&e.at),
            });
        }

        if let Some(g) = &raw.growth {
            let (span, g) = (g.span(), g.get_ref());
            let scope = Scope::Total(g.domain.as_ref().map(located));
            let at = at_or_default(&g.at);
            let of = g.of.unwrap_or_default();
            let before = rules.len();
            if let Some(v) = &g.max_bytes {
                let limit = Limit::MaxBytes(v.get_ref().0);
                let metric = Metric::GrowthBytes(of);
                rules.push(Rule { line: line(v.span()), scope: scope.clone(), metric, limit, at: at.clone() });
            }
            if let Some(v) = &g.max_percent {
                let limit = Limit::MaxPercent(v.get_ref().0);
                rules.push(Rule { line: line(v.span()), scope, metric: Metric::GrowthPercent(of), limit, at });
            }
            if rules.len() == before {
                return Err(no_limit(span, "[growth]".into()));
            }
        }

        for g in &raw.gpu {
            let (span, g) = (g.span(), g.get_ref());
            let small = g.small.map_or(crate::gpu::DEFAULT_SMALL, |b| b.0);
            let scope = Scope::Gpu { domain: g.domain.as_ref().map(located), small };
            let at = at_or_default(&g.at);
            let before = rules.len();
            let mut add = |metric, limit, key_line| {
                rules.push(Rule {
                    line: key_line,
                    scope: scope.clone(),
                    metric: Metric::Gpu(metric),
                    limit,
                    at: at.clone(),
                })
            };
            if let Some(v) = &g.max_padding_bytes {
                add(GpuMetric::PaddingBytes, Limit::MaxBytes(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &g.max_npot_waste {
                add(GpuMetric::NpotWaste, Limit::MaxBytes(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &g.max_small_resources {
                add(GpuMetric::SmallResources, Limit::MaxCount(*v.get_ref()), line(v.span()));
            }
            if let Some(v) = &g.max_small_bytes {
                add(GpuMetric::SmallBytes, Limit::MaxBytes(v.get_ref().0), line(v.span()));
            }
            if let Some(v) = &g.max_unknown_formats {
                add(GpuMetric::UnknownFormats, Limit::MaxCount(*v.get_ref()), line(v.span()));
            }
            if rules.len() == before {
                let what =
                    g.domain.as_ref().map_or_else(|| "[[gpu]]".to_owned(), |d| format!("[[gpu]] \"{}\"", d.get_ref()));
                return Err(no_limit(span, what));
            }
        }

        let mut allow_damage = Vec::new();
        for kind in raw.integrity.iter().flat_map(|i| &i.allow) {
            let at = line(kind.span());
            let value =
                DamageKind::parse(kind.get_ref()).map_err(|e| format!("{file}:{at}: [integrity] allow: {e}"))?;
            allow_damage.push(Located { value, line: at });
        }

        if rules.is_empty() {
            return Err(format!("{file}: no rules: the budget limits nothing (see BUDGET.md)"));
        }
        rules.sort_by_key(|r| r.line);
        Ok(Budget { file: file.to_owned(), rules, allow_damage })
    }

    /// Whether any rule compares against a baseline log.
    pub fn needs_baseline(&self) -> Option<&Rule> {
        self.rules.iter().find(|r| matches!(r.metric, Metric::GrowthBytes(_) | Metric::GrowthPercent(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Budget::parse("b.toml", text).expect_err(text)
    }

    #[test]
    fn every_table_reads_into_rules_with_their_lines() {
        let text = r#"at = "level loaded"

[[domain]]
name = "heap"
max_peak = "64MiB"
max_live = 1048576
max_live_count = 10
max_growth_percent = "5%"

[leaks]
max_bytes = "100KiB"
max_count = 4

[[context]]
path = "Level:*/Textures"
domain = "vram.local"
each = true
at = "gameplay"
max_per_instance = "1.5MiB"
min_efficiency = 2.5
growth_of = "total"
max_growth_bytes = 0

[efficiency]
min = "0.1%"

[growth]
of = "live"
max_bytes = "1KiB"
max_percent = 10
"#;
        let b = Budget::parse("b.toml", text).unwrap();
        let lines: Vec<usize> = b.rules.iter().map(|r| r.line).collect();
        assert_eq!(lines, [5, 6, 7, 8, 11, 12, 19, 20, 22, 25, 29, 30]);
        let r = &b.rules[0];
        assert_eq!((r.metric, r.limit), (Metric::Peak, Limit::MaxBytes(64 << 20)));
        assert_eq!(r.at, Some(Located { value: "level loaded".into(), line: 1 }), "the budget's `at`");
        assert_eq!(b.rules[1].limit, Limit::MaxBytes(1 << 20));
        assert_eq!(b.rules[3].metric, Metric::GrowthPercent(GrowthOf::Peak));
        assert_eq!(b.rules[3].limit, Limit::MaxPercent(5.0));
        assert_eq!(b.rules[4].at, None, "leaks are always at the end");
        assert_eq!((b.rules[5].metric, b.rules[5].limit), (Metric::LiveCount, Limit::MaxCount(4)));
        let ctx = &b.rules[6];
        assert_eq!(ctx.at.as_ref().map(|a| (a.value.as_str(), a.line)), Some(("gameplay", 18)));
        let Scope::Context { glob, domain, each, optional } = &ctx.scope else { panic!("{:?}", ctx.scope) };
        assert_eq!(
            (glob.as_str(), domain.as_ref().unwrap().value.as_str(), *each, *optional),
            ("Level:*/Textures", "vram.local", true, false)
        );
        assert_eq!(b.rules[7].limit, Limit::MinPercent(2.5));
        assert_eq!(b.rules[8].metric, Metric::GrowthBytes(GrowthOf::Total));
        assert_eq!((b.rules[9].scope.clone(), b.rules[9].limit), (Scope::HeapContainers, Limit::MinPercent(0.1)));
        assert_eq!(b.rules[10].metric, Metric::GrowthBytes(GrowthOf::Live));
        assert!(b.needs_baseline().is_some());
    }

    #[test]
    fn budget_share_limits_read_as_percentages() {
        let b = Budget::parse(
            "b.toml",
            "[[domain]]\nname = \"vram.local\"\nmax_peak_of_budget = \"90%\"\nmax_usage_of_budget = 100\n",
        )
        .unwrap();
        let rules: Vec<(Metric, Limit, usize)> = b.rules.iter().map(|r| (r.metric, r.limit, r.line)).collect();
        assert_eq!(
            rules,
            [(Metric::PeakOfBudget, Limit::MaxPercent(90.0), 3), (Metric::UsageOfBudget, Limit::MaxPercent(100.0), 4)]
        );
        let e = err("[[domain]]\nname = \"vram.local\"\nmax_peak_of_budget = \"90 MiB\"\n");
        assert!(e.starts_with("b.toml:3: "), "{e}");
    }

    #[test]
    fn errors_name_the_line() {
        let e = err("[[domain]]\nname = \"heap\"\nmax_peek = 1\n");
        assert!(e.starts_with("b.toml:3: ") && e.contains("unknown field `max_peek`"), "{e}");
        let e = err("[[domain]]\nname = \"heap\"\nmax_peak = true\n");
        assert!(e.starts_with("b.toml:3: ") && e.contains("a size"), "{e}");
        let e = err("[[domain]]\nname = \"heap\"\nmax_peak = \"12 parsecs\"\n");
        assert!(e.starts_with("b.toml:3: ") && e.contains("12 parsecs"), "{e}");
        let e = err("\n[[context]]\npath = \"Level//x\"\nmax_live = 1\n");
        assert!(e.starts_with("b.toml:3: ") && e.contains("empty segment"), "{e}");
        let e = err("[leaks]\nmax_bytes = 1\nat = \"x\"\n");
        assert!(e.starts_with("b.toml:3: ") && e.contains("unknown field `at`"), "{e}");
        let e = err("[[domain]]\nname = \"heap\"\nmax_peak = [1\n");
        assert!(e.starts_with("b.toml:3: "), "{e}");
        let e = err("\n\n[[domain]]\nname = \"heap\"\n");
        assert!(e.starts_with("b.toml:") && e.contains("sets no limit"), "{e}");
        let e = err("[efficiency]\nmin = -3\n");
        assert!(e.starts_with("b.toml:2: ") && e.contains("not a percentage"), "{e}");
        assert!(err("").contains("no rules"));
        assert_eq!(line_of("a\nb\nc", 4), 3);
    }

    #[test]
    fn gpu_tables_read_into_rules() {
        let text = "at = \"loaded\"\n\n[[gpu]]\nmax_padding_bytes = \"1MiB\"\nmax_unknown_formats = 0\n\n\
                    [[gpu]]\ndomain = \"vram.local\"\nat = \"gameplay\"\nsmall = \"4KiB\"\nmax_npot_waste = 2048\n\
                    max_small_resources = 64\nmax_small_bytes = \"512KiB\"\n";
        let b = Budget::parse("b.toml", text).unwrap();
        let rules: Vec<(usize, Metric, Limit)> = b.rules.iter().map(|r| (r.line, r.metric, r.limit)).collect();
        assert_eq!(
            rules,
            [
                (4, Metric::Gpu(GpuMetric::PaddingBytes), Limit::MaxBytes(1 << 20)),
                (5, Metric::Gpu(GpuMetric::UnknownFormats), Limit::MaxCount(0)),
                (11, Metric::Gpu(GpuMetric::NpotWaste), Limit::MaxBytes(2048)),
                (12, Metric::Gpu(GpuMetric::SmallResources), Limit::MaxCount(64)),
                (13, Metric::Gpu(GpuMetric::SmallBytes), Limit::MaxBytes(512 << 10)),
            ]
        );
        assert_eq!(b.rules[0].scope, Scope::Gpu { domain: None, small: crate::gpu::DEFAULT_SMALL });
        assert_eq!(b.rules[0].at, Some(Located { value: "loaded".into(), line: 1 }), "the budget's `at`");
        let Scope::Gpu { domain, small } = &b.rules[2].scope else { panic!("{:?}", b.rules[2].scope) };
        assert_eq!((domain.as_ref().map(|d| (d.value.as_str(), d.line)), *small), (Some(("vram.local", 8)), 4096));
        assert_eq!(b.rules[2].at.as_ref().map(|a| a.value.as_str()), Some("gameplay"));
        assert!(b.needs_baseline().is_none());
    }

    #[test]
    fn gpu_table_errors_name_the_line() {
        let e = err("[[domain]]\nname = \"heap\"\nmax_peak = 1\n\n[[gpu]]\ndomain = \"vram.local\"\n");
        assert!(e.starts_with("b.toml:") && e.contains("[[gpu]] \"vram.local\" sets no limit"), "{e}");
        let e = err("[[gpu]]\nsmall = \"4KiB\"\n");
        assert!(e.contains("[[gpu]] sets no limit"), "{e}");
        let e = err("[[gpu]]\nmax_padding_bytes = \"1 furlong\"\n");
        assert!(e.starts_with("b.toml:2: ") && e.contains("1 furlong"), "{e}");
        let e = err("[[gpu]]\nmax_padding_bytes = 1\nsmall = \"lots\"\n");
        assert!(e.starts_with("b.toml:3: ") && e.contains("lots"), "{e}");
        let e = err("[[gpu]]\nmax_small_resources = \"64KiB\"\n");
        assert!(e.starts_with("b.toml:2: "), "{e}");
        let e = err("[[gpu]]\nmax_padding = 1\n");
        assert!(e.starts_with("b.toml:2: ") && e.contains("unknown field `max_padding`"), "{e}");
    }
}
