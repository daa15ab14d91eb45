//! `replay-cli check game.mrl --budget budget.toml [--baseline base.mrl]`: holds a log to
//! a memory budget (and, with a baseline, to a limit on growth) for continuous
//! integration.
//!
//! [`budget`] reads the TOML file into rules, [`glob`] matches context paths, this module
//! measures every rule on the replayed log (through [`load`] and the figures every
//! report uses) and renders the results: a table, JSON, JUnit XML ([`junit`]) and
//! GitHub Actions annotations ([`github`]). The [`Verdict`]: every rule holds, a rule is
//! broken, or the log or the baseline is damaged (truncated, corrupt, events lost:
//! [`crate::integrity`]) in a way neither the budget nor `allow_damage` allows.

pub mod budget;
pub mod github;
pub mod glob;
pub mod junit;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use crate::compare::{path_text, LevelPath, LogFigures, Metrics};
use crate::gpu::{self, GpuBudget, GpuView, Pivots};
use crate::integrity::{DamageKind, LogIntegrity};
use crate::loaded::{load_with, to_json, Loaded, Progress, SCHEMA_VERSION};
use crate::matching::{signed_count, signed_size};
use crate::select::ReportOptions;
use crate::select::{At, Selection};
use crate::table::{size, Align, Table};
use crate::Error;
use memreplay_replay::{LabelSnapshots, NodeId, ReplayOptions, ROOT};

use budget::{Budget, GpuMetric, Limit, Located, Metric, Rule, Scope};

/// What `check` measures, and how it reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// The log to check.
    pub log: PathBuf,
    /// The budget's name as messages cite it (its path: `budget.toml:3`).
    pub budget_name: String,
    /// The budget (TOML; see BUDGET.md).
    pub budget: String,
    /// A log to measure growth against (for max_growth_* rules).
    pub baseline: Option<PathBuf>,
    /// The results as JSON instead of a table.
    pub json: bool,
    /// GitHub Actions annotations after the results: an error per broken rule, pointing
    /// to its line of the budget.
    pub github: bool,
    /// Kinds of damage the log and the baseline may have without failing the check:
    /// truncated, corrupt, bad-blocks, unknown-blocks, trailing-bytes, lost-events.
    pub allow_damage: Vec<String>,
}

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every rule holds, and neither log has damage that is not allowed.
    Passed,
    /// A rule is broken.
    Broken,
    /// The log or the baseline has damage that is not allowed, whatever the rules say:
    /// their figures cover only what could be read.
    Damaged,
}

/// What `check` made: the results to print, the same as JSON and as JUnit XML (for
/// files the caller may write), and the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOutput {
    /// The table (or JSON), with the GitHub annotations if asked for.
    pub text: String,
    /// The results as JSON.
    pub json: String,
    /// The results as JUnit XML, one test case per rule.
    pub junit: String,
    /// How the check ended.
    pub verdict: Verdict,
}

/// The results of a check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckReport {
    /// The JSON schema version (`JSON.md`).
    pub schema_version: u32,
    /// `"check"`.
    pub report: &'static str,
    /// The log checked, as given.
    pub path: String,
    /// The budget file, as given.
    pub budget: String,
    /// The baseline log, if any.
    pub baseline: Option<String>,
    /// Every rule holds, and neither log has damage that is not allowed.
    pub passed: bool,
    /// Rules measured (one per matched context for `each` context rules).
    pub rules: u64,
    /// Rules broken.
    pub failed: u64,
    /// Whether the log and the baseline are whole.
    pub integrity: IntegrityResult,
    /// One per rule (per matched context for `each` context rules), in budget order.
    pub results: Vec<RuleResult>,
}

/// The integrity of the logs checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntegrityResult {
    /// Neither log has damage that is not allowed.
    pub passed: bool,
    /// The kinds of damage allowed (by the budget's `[integrity] allow` and
    /// `--allow-damage`).
    pub allowed: Vec<DamageKind>,
    pub log: SideIntegrity,
    /// Null without `--baseline`.
    pub baseline: Option<SideIntegrity>,
    /// Why the rules could not be measured on a damaged log (a label or domain the
    /// budget names is not in what could be read); null when they were.
    pub unmeasured: Option<String>,
}

/// One log's integrity, held to what is allowed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideIntegrity {
    #[serde(flatten)]
    pub facts: LogIntegrity,
    /// The kinds found that are not allowed.
    pub not_allowed: Vec<DamageKind>,
    /// No damage, or only damage that is allowed.
    pub passed: bool,
    /// One sentence: what was lost, and whether that is allowed.
    pub message: String,
    /// `the log` or `the baseline`.
    #[serde(skip)]
    pub which: &'static str,
    /// What allowed the damage found (`budget.toml:3`, `--allow-damage`), if it was.
    #[serde(skip)]
    pub allowed_by: Option<String>,
}

/// The kinds of damage allowed, each with what allowed it.
struct Allowed {
    kinds: Vec<(DamageKind, String)>,
}

impl Allowed {
    fn new(budget: &Budget, flags: &[String]) -> Result<Allowed, Error> {
        let mut kinds: Vec<(DamageKind, String)> =
            budget.allow_damage.iter().map(|k| (k.value, format!("{}:{}", budget.file, k.line))).collect();
        for name in flags {
            let kind = DamageKind::parse(name.trim()).map_err(|e| Error::Usage(format!("--allow-damage: {e}")))?;
            kinds.push((kind, "--allow-damage".to_owned()));
        }
        Ok(Allowed { kinds })
    }

    fn by(&self, kind: DamageKind) -> Option<&str> {
        self.kinds.iter().find(|(k, _)| *k == kind).map(|(_, by)| by.as_str())
    }

    fn names(&self) -> Vec<DamageKind> {
        let mut k: Vec<DamageKind> = self.kinds.iter().map(|(k, _)| *k).collect();
        k.sort();
        k.dedup();
        k
    }

    fn hold(&self, facts: LogIntegrity, which: &'static str) -> SideIntegrity {
        let not_allowed: Vec<DamageKind> = facts.kinds.iter().copied().filter(|k| self.by(*k).is_none()).collect();
        let mut by: Vec<&str> = facts.kinds.iter().filter_map(|k| self.by(*k)).collect();
        by.dedup();
        let allowed_by = (!facts.clean && not_allowed.is_empty()).then(|| by.join(", "));
        let names = |k: &[DamageKind]| k.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ");
        let message = if facts.clean {
            format!("{which} is whole: nothing lost")
        } else if let Some(by) = &allowed_by {
            format!("{which} is damaged, as allowed ({by}): {}", facts.summary())
        } else {
            format!(
                "{which} is damaged ({} not allowed): {}; the figures cover only what could be read",
                names(&not_allowed),
                facts.summary()
            )
        };
        SideIntegrity { passed: not_allowed.is_empty(), not_allowed, message, which, allowed_by, facts }
    }
}

/// A number in the results: exact for bytes and counts, fractional for percentages.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Number {
    /// A count or a byte figure.
    Int(i64),
    /// A ratio or a percentage.
    Float(f64),
}

/// One rule, measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleResult {
    /// `domain heap: peak`, `context Level:*/Textures: per instance`.
    pub rule: String,
    /// The budget table: `domain`, `leaks`, `context`, `efficiency`, `growth` or `gpu`.
    pub table: &'static str,
    /// The domain name, the context pattern (or, with `each`, the matched context's
    /// path), `top-level domains`, `heap containers`, or for `gpu` the GPU domain or
    /// `(every GPU domain)`.
    pub subject: String,
    /// The domain the figure is read in (null: the top-level domains summed).
    pub domain: Option<String>,
    /// `peak`, `live`, `live_count`, `instances`, `per_instance`, `efficiency`,
    /// `growth_bytes`, `growth_percent`, `peak_of_budget`, `usage_of_budget`, or for
    /// `gpu` `padding_bytes`, `npot_waste`, `small_resources`, `small_bytes` or
    /// `unknown_formats`.
    pub metric: &'static str,
    /// For growth rules: the figure compared (`peak`, `live`, `total`).
    pub growth_of: Option<&'static str>,
    /// The label the rule is evaluated at; null: the end of the log.
    pub at: Option<String>,
    /// Line of the limit in the budget file.
    pub line: usize,
    /// `bytes`, `count` or `percent`.
    pub unit: &'static str,
    /// `max` or `min`.
    pub comparison: &'static str,
    /// The rule's limit.
    pub limit: Number,
    /// Null when nothing could be measured (no container for an efficiency, growth from
    /// nothing in percent, no budget sample or a budget of 0 for a share of budget, no
    /// GPU domain for a `gpu` rule).
    pub measured: Option<Number>,
    /// For growth rules: the same figure in the baseline.
    pub baseline: Option<Number>,
    /// How far from the limit: positive within the budget, negative over it.
    pub margin: Option<Number>,
    /// The rule holds.
    pub passed: bool,
    /// One sentence saying what was measured against what.
    pub message: String,
}

/// `check`: parses the budget, replays the log (and the baseline) and measures every
/// rule.
pub fn run(args: &CheckOptions, progress: Progress) -> Result<CheckOutput, Error> {
    if args.json && args.github {
        return Err(Error::Usage("--json and --github both print to stdout: use --json-out FILE with --github".into()));
    }
    let report = build(args, progress)?;
    let json = to_json(&report);
    let mut text = if args.json { json.clone() } else { report.to_text() };
    if args.github {
        text.push_str(&github::annotations(&report));
    }
    let verdict = if !report.integrity.passed {
        Verdict::Damaged
    } else if report.passed {
        Verdict::Passed
    } else {
        Verdict::Broken
    };
    Ok(CheckOutput { text, json, junit: junit::render(&report), verdict })
}

/// Parses the budget and measures it on the log (and baseline) of `args`.
pub fn build(args: &CheckOptions, progress: Progress) -> Result<CheckReport, Error> {
    let file = args.budget_name.clone();
    let budget = Budget::parse(&file, &args.budget).map_err(Error::Usage)?;
    let allowed = Allowed::new(&budget, &args.allow_damage)?;
    if args.baseline.is_none() {
        if let Some(r) = budget.needs_baseline() {
            return Err(Error::Usage(format!("{file}:{}: growth limits need a --baseline log", r.line)));
        }
    }
    // Snapshots at the labels the rules name, at no other.
    let named: Vec<String> = budget.rules.iter().filter_map(|r| r.at.as_ref().map(|a| a.value.clone())).collect();
    let options = ReplayOptions { snapshot_frame: None, label_snapshots: LabelSnapshots::Evenly { count: 0, named } };
    let log = load_with(&ReportOptions::new(&args.log), options.clone(), progress)?;
    let baseline = match &args.baseline {
        Some(p) => Some(load_with(&ReportOptions::new(p), options, progress)?),
        None => None,
    };
    let log_side = allowed.hold(log.integrity(), "the log");
    let base_side = baseline.as_ref().map(|b| allowed.hold(b.integrity(), "the baseline"));
    let mut integrity = IntegrityResult {
        passed: log_side.passed && base_side.as_ref().is_none_or(|b| b.passed),
        allowed: allowed.names(),
        log: log_side,
        baseline: base_side,
        unmeasured: None,
    };
    let results = match measure_all(&budget, &log, baseline.as_ref()) {
        Ok(results) => results,
        // A label or domain missing from a damaged log may be in what was lost: the
        // damage is the failure to report.
        Err(Error::Usage(m)) if !integrity.passed => {
            integrity.unmeasured = Some(m);
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let failed = results.iter().filter(|r| !r.passed).count() as u64;
    Ok(CheckReport {
        schema_version: SCHEMA_VERSION,
        report: "check",
        path: log.path.clone(),
        budget: file,
        baseline: baseline.map(|b| b.path.clone()),
        passed: failed == 0 && integrity.passed,
        rules: results.len() as u64,
        failed,
        integrity,
        results,
    })
}

/// Every rule of `budget`, measured on `log` (and `baseline`).
fn measure_all(budget: &Budget, log: &Loaded, baseline: Option<&Loaded>) -> Result<Vec<RuleResult>, Error> {
    let current = Measured::new(log, budget, "the log")?;
    let base = match baseline {
        Some(b) => Some(Measured::new(b, budget, "the baseline")?),
        None => None,
    };
    let gpu = GpuPivots::new(budget, &current)?;
    let mut results = Vec::new();
    for rule in &budget.rules {
        evaluate(budget, rule, &current, base.as_ref(), &gpu, &mut results)?;
    }
    Ok(results)
}

/// The GPU pivots the `[[gpu]]` rules read, by (domain, point, small threshold): one view
/// of the live GPU resources per distinct (domain, point). `Err`: why there is nothing to
/// pivot (no such GPU domain, no GPU domain at all), which breaks the rule.
struct GpuPivots {
    by: HashMap<GpuKey, Result<Pivots, String>>,
}

/// A `[[gpu]]` rule's domain (`None`: every GPU domain), point (`None`: the end) and
/// small threshold.
type GpuKey = (Option<String>, Option<String>, u64);

impl GpuPivots {
    fn new(budget: &Budget, m: &Measured<'_>) -> Result<GpuPivots, Error> {
        let state = m.loaded.state();
        let mut views: HashMap<(Option<String>, Option<String>), Result<GpuView, String>> = HashMap::new();
        let mut by = HashMap::new();
        for rule in &budget.rules {
            let Scope::Gpu { domain, small } = &rule.scope else { continue };
            let domain = domain.as_ref().map(|d| d.value.clone());
            let at = rule.at.as_ref().map(|a| a.value.clone());
            let key = (domain.clone(), at.clone());
            if !views.contains_key(&key) {
                let ids = match &domain {
                    Some(name) => gpu::domain_tree(state, name),
                    None => {
                        let all = gpu::gpu_domains(state);
                        if all.is_empty() {
                            Err("the log has no GPU domain (a domain of kind GpuLocal or GpuShared, or one inside it)"
                                .to_owned())
                        } else {
                            Ok(all)
                        }
                    }
                };
                let view = match ids {
                    Ok(ids) => Ok(gpu::view_at(m.loaded, &m.sels[&at], gpu::ViewPoint::Selection, &ids, None, None)?),
                    Err(why) => Err(why),
                };
                views.insert(key.clone(), view);
            }
            by.entry((domain, at, *small)).or_insert_with(|| {
                // Only the totals are read: no rows are listed.
                views[&key].as_ref().map(|v| gpu::pivots(v, *small, 0)).map_err(Clone::clone)
            });
        }
        Ok(GpuPivots { by })
    }

    /// The rule's figure, or why it has none.
    fn figure(&self, rule: &Rule, metric: GpuMetric) -> Result<u64, String> {
        let Scope::Gpu { domain, small } = &rule.scope else { unreachable!("a [[gpu]] rule") };
        let key = (domain.as_ref().map(|d| d.value.clone()), rule.at.as_ref().map(|a| a.value.clone()), *small);
        let p = self.by[&key].as_ref().map_err(Clone::clone)?;
        Ok(match metric {
            GpuMetric::PaddingBytes => p.padding_bytes,
            GpuMetric::NpotWaste => p.npot_save,
            GpuMetric::SmallResources => p.small.total.count,
            GpuMetric::SmallBytes => p.small.total.bytes,
            GpuMetric::UnknownFormats => p.unchecked.unknown_format.count,
        })
    }
}

/// One log's figures at every point the budget names.
struct Measured<'a> {
    loaded: &'a Loaded,
    /// By label (`None`: the end).
    at: HashMap<Option<String>, LogFigures<'a>>,
    /// The selection at each of those points.
    sels: HashMap<Option<String>, Selection>,
    /// "the log" or "the baseline", for messages.
    which: &'static str,
}

impl<'a> Measured<'a> {
    fn new(loaded: &'a Loaded, budget: &Budget, which: &'static str) -> Result<Measured<'a>, Error> {
        let state = loaded.state();
        let mut at: HashMap<Option<String>, LogFigures<'a>> = HashMap::new();
        let mut sels = HashMap::new();
        let points = std::iter::once(None).chain(budget.rules.iter().map(|r| r.at.as_ref()).filter(|a| a.is_some()));
        for point in points {
            let key = point.map(|a| a.value.clone());
            if at.contains_key(&key) {
                continue;
            }
            // The selection reads only the options, not the log's path.
            let args = ReportOptions { at: key.clone().map(At::Label), ..ReportOptions::default() };
            let sel = Selection::resolve(state, &args).map_err(|e| located_error(budget, point, which, e))?;
            at.insert(key.clone(), LogFigures::new(state, &sel));
            sels.insert(key, sel);
        }
        Ok(Measured { loaded, at, sels, which })
    }

    fn figures(&self, at: &Option<Located<String>>) -> &LogFigures<'a> {
        &self.at[&at.as_ref().map(|a| a.value.clone())]
    }
}

fn located_error(budget: &Budget, at: Option<&Located<String>>, which: &str, e: Error) -> Error {
    match at {
        Some(a) => Error::Usage(format!("{}:{}: {e} ({which})", budget.file, a.line)),
        None => e,
    }
}

/// The domains a rule reads: the one it names, or every top-level domain.
fn domains<'f>(
    budget: &Budget,
    f: &'f LogFigures<'_>,
    domain: Option<&Located<String>>,
    which: &str,
) -> Result<Vec<&'f crate::compare::DomainMetrics>, Error> {
    match domain {
        None => Ok(f.domains.iter().filter(|d| d.top_level).collect()),
        Some(name) => match f.domain(&name.value) {
            Some(d) => Ok(vec![d]),
            None => {
                let names: Vec<String> = f.domains.iter().map(|d| format!("\"{}\"", d.name)).collect();
                Err(Error::Usage(format!(
                    "{}:{}: no domain \"{}\" in {which}; domains: {}",
                    budget.file,
                    name.line,
                    name.value,
                    names.join(", ")
                )))
            }
        },
    }
}

/// A node's metrics summed over `domains` (instances counted once).
fn node_metrics(f: &LogFigures<'_>, domains: &[&crate::compare::DomainMetrics], node: NodeId) -> Metrics {
    let mut m = Metrics::default();
    for d in domains {
        m.add(&Metrics { instances: 0, ..f.metrics(d, node) });
    }
    m.instances = f.instances[node as usize];
    m
}

/// The contexts a pattern matches that hold or allocated anything in `domains`: with
/// `each`, every one; else one row, the outermost matches summed.
fn matched(
    f: &LogFigures<'_>,
    domains: &[&crate::compare::DomainMetrics],
    glob: &glob::ContextGlob,
    each: bool,
) -> Vec<(LevelPath, Metrics)> {
    let n = f.state.nodes.len();
    let mut hit = vec![false; n];
    let mut rows = Vec::new();
    let mut sum = Metrics::default();
    let mut any = false;
    for node in 0..n {
        if !glob.matches(&f.paths[node]) {
            continue;
        }
        let m = node_metrics(f, domains, node as NodeId);
        if m.is_empty() {
            continue;
        }
        hit[node] = true;
        if each {
            rows.push((f.paths[node].clone(), m));
            continue;
        }
        // Outermost only: a match inside another is already in its figures.
        let mut up = node as NodeId;
        let mut inside = false;
        while up != ROOT {
            up = f.state.nodes[up as usize].parent;
            inside |= hit[up as usize];
        }
        if !inside {
            sum.add(&m);
            any = true;
        }
    }
    if !each && any {
        rows.push((Vec::new(), sum));
    }
    rows
}

/// What a rule is measured on: one subject's metrics now, and in the baseline.
struct Subject {
    name: String,
    current: Metrics,
    baseline: Option<Metrics>,
    /// For a domain: what its driver budget samples say over the whole log (`None`:
    /// it has none).
    driver: Option<GpuBudget>,
    /// For a `[[gpu]]` rule: its figure of the GPU pivots, or why there is none.
    gpu: Option<Result<u64, String>>,
}

/// The driver's budget figures of the domain named `name` over the whole log.
fn driver_figures(m: &Measured<'_>, f: &LogFigures<'_>, name: &str) -> Option<GpuBudget> {
    let id = f.domain(name)?.figures.domain;
    crate::gpu::budget::figures(f.state, id, None, m.loaded.ticks_per_second(), |_| None)
}

fn evaluate(
    budget: &Budget,
    rule: &Rule,
    current: &Measured<'_>,
    base: Option<&Measured<'_>>,
    gpu: &GpuPivots,
    out: &mut Vec<RuleResult>,
) -> Result<(), Error> {
    let fc = current.figures(&rule.at);
    let fb = base.map(|b| b.figures(&rule.at));
    let (table, domain, subjects): (&'static str, Option<String>, Vec<Subject>) = match &rule.scope {
        Scope::Domain(name) => {
            let d = domains(budget, fc, Some(name), current.which)?;
            let b = match (fb, base) {
                (Some(fb), Some(base)) => Some(node_metrics(fb, &domains(budget, fb, Some(name), base.which)?, ROOT)),
                _ => None,
            };
            let driver = match rule.metric {
                Metric::PeakOfBudget | Metric::UsageOfBudget => driver_figures(current, fc, &name.value),
                _ => None,
            };
            let s = Subject {
                name: name.value.clone(),
                current: node_metrics(fc, &d, ROOT),
                baseline: b,
                driver,
                gpu: None,
            };
            ("domain", Some(name.value.clone()), vec![s])
        }
        Scope::Leaks(name) | Scope::Total(name) => {
            let d = domains(budget, fc, name.as_ref(), current.which)?;
            let b = match (fb, base) {
                (Some(fb), Some(base)) => {
                    Some(node_metrics(fb, &domains(budget, fb, name.as_ref(), base.which)?, ROOT))
                }
                _ => None,
            };
            let subject = name.as_ref().map_or_else(|| "top-level domains".to_owned(), |n| n.value.clone());
            let table = if matches!(rule.scope, Scope::Leaks(_)) { "leaks" } else { "growth" };
            (
                table,
                name.as_ref().map(|n| n.value.clone()),
                vec![Subject {
                    name: subject,
                    current: node_metrics(fc, &d, ROOT),
                    baseline: b,
                    driver: None,
                    gpu: None,
                }],
            )
        }
        Scope::HeapContainers => {
            let heap = Located { value: "heap".to_owned(), line: rule.line };
            let d = domains(budget, fc, Some(&heap), current.which)?;
            let s = Subject {
                name: "heap containers".into(),
                current: node_metrics(fc, &d, ROOT),
                baseline: None,
                driver: None,
                gpu: None,
            };
            ("efficiency", Some("heap".into()), vec![s])
        }
        Scope::Context { glob, domain, each, optional } => {
            let d = domains(budget, fc, domain.as_ref(), current.which)?;
            let rows = matched(fc, &d, glob, *each);
            let base_rows: Option<Vec<(LevelPath, Metrics)>> = match (fb, base) {
                (Some(fb), Some(base)) => {
                    let bd = domains(budget, fb, domain.as_ref(), base.which)?;
                    Some(matched(fb, &bd, glob, *each))
                }
                _ => None,
            };
            let dname = domain.as_ref().map(|n| n.value.clone());
            if rows.is_empty() && !*optional {
                out.push(no_match(budget, rule, glob.as_str(), dname));
                return Ok(());
            }
            let rows = if rows.is_empty() { vec![(Vec::new(), Metrics::default())] } else { rows };
            let subjects = rows
                .into_iter()
                .map(|(path, m)| {
                    let baseline = base_rows
                        .as_ref()
                        .map(|b| b.iter().find(|(p, _)| *p == path).map(|(_, m)| *m).unwrap_or_default());
                    let name = if *each { path_text(&path) } else { glob.as_str().to_owned() };
                    Subject { name, current: m, baseline, driver: None, gpu: None }
                })
                .collect();
            ("context", dname, subjects)
        }
        Scope::Gpu { domain, .. } => {
            let Metric::Gpu(metric) = rule.metric else { unreachable!("[[gpu]] rules read the GPU pivots") };
            let s = Subject {
                name: domain.as_ref().map_or_else(|| "(every GPU domain)".to_owned(), |d| d.value.clone()),
                current: Metrics::default(),
                baseline: None,
                driver: None,
                gpu: Some(gpu.figure(rule, metric)),
            };
            ("gpu", domain.as_ref().map(|d| d.value.clone()), vec![s])
        }
    };
    for s in subjects {
        out.push(measure(budget, rule, table, domain.clone(), &s));
    }
    Ok(())
}

fn metric_name(m: Metric) -> &'static str {
    match m {
        Metric::Peak => "peak",
        Metric::Live => "live",
        Metric::LiveCount => "live_count",
        Metric::Instances => "instances",
        Metric::PerInstance => "per_instance",
        Metric::Efficiency => "efficiency",
        Metric::GrowthBytes(_) => "growth_bytes",
        Metric::GrowthPercent(_) => "growth_percent",
        Metric::PeakOfBudget => "peak_of_budget",
        Metric::UsageOfBudget => "usage_of_budget",
        Metric::Gpu(g) => g.name(),
    }
}

/// The words for a metric in a rule's name.
fn metric_words(table: &str, m: Metric) -> String {
    match (table, m) {
        ("leaks", Metric::Live) => "leaked bytes".into(),
        ("leaks", Metric::LiveCount) => "leaked allocations".into(),
        (_, Metric::Peak) => "peak".into(),
        (_, Metric::Live) => "live".into(),
        (_, Metric::LiveCount) => "live allocations".into(),
        (_, Metric::Instances) => "instances".into(),
        (_, Metric::PerInstance) => "bytes per instance".into(),
        (_, Metric::Efficiency) => "container efficiency".into(),
        (_, Metric::GrowthBytes(of)) => format!("{} growth", of.name()),
        (_, Metric::GrowthPercent(of)) => format!("{} growth %", of.name()),
        (_, Metric::PeakOfBudget) => "peak of the smallest driver budget".into(),
        (_, Metric::UsageOfBudget) => "driver usage of the smallest driver budget".into(),
        (_, Metric::Gpu(g)) => g.words().into(),
    }
}

fn rule_name(table: &str, subject: &str, domain: Option<&str>, m: Metric) -> String {
    let what = metric_words(table, m);
    match (table, domain) {
        ("context", Some(d)) => format!("context {subject} ({d}): {what}"),
        ("context", None) => format!("context {subject}: {what}"),
        ("domain", _) => format!("domain {subject}: {what}"),
        ("leaks", _) => format!("leaks in {subject}: {what}"),
        ("growth", _) => format!("growth of {subject}: {what}"),
        ("gpu", _) => format!("gpu {subject}: {what}"),
        _ => format!("{subject}: {what}"),
    }
}

fn no_match(budget: &Budget, rule: &Rule, pattern: &str, domain: Option<String>) -> RuleResult {
    let (unit, comparison, limit) = limit_parts(rule.limit);
    let rule_text = rule_name("context", pattern, domain.as_deref(), rule.metric);
    RuleResult {
        message: format!(
            "{rule_text}: no context matches `{pattern}`{} ({}:{}; set `optional = true` if that is expected)",
            domain.as_ref().map_or_else(String::new, |d| format!(" in {d}")),
            budget.file,
            rule.line
        ),
        rule: rule_text,
        table: "context",
        subject: pattern.to_owned(),
        domain,
        metric: metric_name(rule.metric),
        growth_of: growth_of(rule.metric),
        at: rule.at.as_ref().map(|a| a.value.clone()),
        line: rule.line,
        unit,
        comparison,
        limit,
        measured: None,
        baseline: None,
        margin: None,
        passed: false,
    }
}

fn growth_of(m: Metric) -> Option<&'static str> {
    match m {
        Metric::GrowthBytes(of) | Metric::GrowthPercent(of) => Some(of.name()),
        _ => None,
    }
}

fn limit_parts(limit: Limit) -> (&'static str, &'static str, Number) {
    match limit {
        Limit::MaxBytes(b) => ("bytes", "max", Number::Int(to_i64(b))),
        Limit::MaxCount(n) => ("count", "max", Number::Int(to_i64(n))),
        Limit::MaxPercent(p) => ("percent", "max", Number::Float(p)),
        Limit::MinPercent(p) => ("percent", "min", Number::Float(p)),
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn growth_figure(m: &Metrics, of: budget::GrowthOf) -> u64 {
    match of {
        budget::GrowthOf::Peak => m.peak,
        budget::GrowthOf::Live => m.live,
        budget::GrowthOf::Total => m.total,
    }
}

/// Measures one subject against a rule.
fn measure(budget: &Budget, rule: &Rule, table: &'static str, domain: Option<String>, s: &Subject) -> RuleResult {
    let m = &s.current;
    let (unit, comparison, limit) = limit_parts(rule.limit);
    let mut baseline = None;
    // (measured, margin, passed) as exact integers or percentages.
    let (measured, margin, passed): (Option<Number>, Option<Number>, bool) = match (rule.metric, rule.limit) {
        (Metric::GrowthBytes(of), Limit::MaxBytes(max)) => {
            let (now, before) = (growth_figure(m, of), growth_figure(&s.baseline.unwrap_or_default(), of));
            baseline = Some(Number::Int(to_i64(before)));
            let growth = to_i64(now) - to_i64(before);
            let margin = to_i64(max).saturating_sub(growth);
            (Some(Number::Int(growth)), Some(Number::Int(margin)), margin >= 0)
        }
        (Metric::GrowthPercent(of), Limit::MaxPercent(max)) => {
            let (now, before) = (growth_figure(m, of), growth_figure(&s.baseline.unwrap_or_default(), of));
            baseline = Some(Number::Int(to_i64(before)));
            match (before, now) {
                (0, 0) => (Some(Number::Float(0.0)), Some(Number::Float(max)), true),
                // Growth from nothing: infinitely many percent.
                (0, _) => (None, None, false),
                _ => {
                    let pct = (now as f64 - before as f64) * 100.0 / before as f64;
                    (Some(Number::Float(pct)), Some(Number::Float(max - pct)), pct <= max)
                }
            }
        }
        (Metric::Efficiency, Limit::MinPercent(min)) => match m.efficiency() {
            // No container, nothing wasted.
            None => (None, None, true),
            Some(e) => {
                let pct = e * 100.0;
                (Some(Number::Float(pct)), Some(Number::Float(pct - min)), pct >= min)
            }
        },
        (Metric::PerInstance, Limit::MaxBytes(max)) => match m.per_instance() {
            None => (None, None, true),
            Some(avg) => {
                let avg = avg.round() as u64;
                let margin = to_i64(max) - to_i64(avg);
                (Some(Number::Int(to_i64(avg))), Some(Number::Int(margin)), margin >= 0)
            }
        },
        (Metric::Gpu(_), Limit::MaxBytes(max) | Limit::MaxCount(max)) => match &s.gpu {
            Some(Ok(v)) => {
                let margin = to_i64(max) - to_i64(*v);
                (Some(Number::Int(to_i64(*v))), Some(Number::Int(margin)), margin >= 0)
            }
            // No GPU domain to pivot: the rule fails.
            _ => (None, None, false),
        },
        (metric, Limit::MaxBytes(max) | Limit::MaxCount(max)) => {
            let v = match metric {
                Metric::Peak => m.peak,
                Metric::Live => m.live,
                Metric::LiveCount => m.live_count,
                Metric::Instances => m.instances,
                _ => 0,
            };
            let margin = to_i64(max) - to_i64(v);
            (Some(Number::Int(to_i64(v))), Some(Number::Int(margin)), margin >= 0)
        }
        (Metric::PeakOfBudget | Metric::UsageOfBudget, Limit::MaxPercent(max)) => match &s.driver {
            // No sample, or a budget of 0: no share to measure, and the rule fails.
            Some(b) if b.min_budget > 0 => {
                let v = if rule.metric == Metric::PeakOfBudget { m.peak } else { b.peak_usage };
                let pct = v as f64 * 100.0 / b.min_budget as f64;
                (Some(Number::Float(pct)), Some(Number::Float(max - pct)), pct <= max)
            }
            _ => (None, None, false),
        },
        (_, Limit::MaxPercent(_) | Limit::MinPercent(_)) => (None, None, false),
    };
    let rule_text = rule_name(table, &s.name, domain.as_deref(), rule.metric);
    // The budget rules are over the whole log: no point to name.
    let at = match rule.metric {
        Metric::PeakOfBudget | Metric::UsageOfBudget => None,
        _ => rule.at.as_ref().map(|a| a.value.clone()),
    };
    let message = match (rule.metric, &s.driver) {
        (Metric::Gpu(_), _) if !passed && measured.is_none() => {
            let why = match &s.gpu {
                Some(Err(why)) => why.as_str(),
                _ => "nothing to measure",
            };
            format!("{rule_text}: {why}")
        }
        (Metric::PeakOfBudget | Metric::UsageOfBudget, None) => format!(
            "{rule_text}: the log has no budget samples for \"{}\" (the game reports them with `Domain::budget`, format 1.2)",
            s.name
        ),
        (Metric::PeakOfBudget | Metric::UsageOfBudget, Some(b)) if b.min_budget == 0 => {
            format!("{rule_text}: the driver reported a budget of 0 bytes for \"{}\": no share to measure", s.name)
        }
        (Metric::PeakOfBudget | Metric::UsageOfBudget, Some(b)) => {
            let (what, v) = match rule.metric {
                Metric::PeakOfBudget => ("peak", m.peak),
                _ => ("driver usage peak", b.peak_usage),
            };
            let (lim, pct) = (number_text(unit, Some(limit), false), number_text(unit, measured, false));
            let by = number_text(unit, margin.map(|n| if let Number::Float(v) = n { Number::Float(v.abs()) } else { n }), false);
            let verdict = if passed {
                format!("within the maximum {lim} ({by} to spare)")
            } else {
                format!("over the maximum {lim} by {by}")
            };
            format!(
                "{rule_text}: {pct} over the log, {verdict}: {what} {} against the smallest budget {}",
                size(v),
                size(b.min_budget)
            )
        }
        _ => message(&rule_text, unit, comparison, limit, measured, margin, passed, at.as_deref()),
    };
    RuleResult {
        rule: rule_text,
        table,
        subject: s.name.clone(),
        domain,
        metric: metric_name(rule.metric),
        growth_of: growth_of(rule.metric),
        at,
        line: rule.line,
        unit,
        comparison,
        limit,
        measured,
        baseline,
        margin,
        passed,
        message: format!("{message} ({}:{})", budget.file, rule.line),
    }
}

/// A number in its unit, human-readable: `64.0 MiB`, `12`, `2.5%`. Signed for growth
/// and margins.
pub fn number_text(unit: &str, n: Option<Number>, signed: bool) -> String {
    match (unit, n) {
        (_, None) => "-".into(),
        ("bytes", Some(Number::Int(v))) if signed => signed_size(v),
        ("bytes", Some(Number::Int(v))) if v < 0 => signed_size(v),
        ("bytes", Some(Number::Int(v))) => size(v.unsigned_abs()),
        ("count", Some(Number::Int(v))) if signed => signed_count(v),
        (_, Some(Number::Int(v))) => v.to_string(),
        (_, Some(Number::Float(v))) if signed => format!("{v:+.2}%"),
        (_, Some(Number::Float(v))) => format!("{v:.2}%"),
    }
}

#[allow(clippy::too_many_arguments)]
fn message(
    rule: &str,
    unit: &str,
    comparison: &str,
    limit: Number,
    measured: Option<Number>,
    margin: Option<Number>,
    passed: bool,
    at: Option<&str>,
) -> String {
    let at = at.map_or_else(|| "at the end".to_owned(), |l| format!("at \"{l}\""));
    let lim = number_text(unit, Some(limit), false);
    let growth = rule.contains("growth");
    let m = number_text(unit, measured, growth);
    let by = number_text(
        unit,
        margin.map(|n| match n {
            Number::Int(v) => Number::Int(v.abs()),
            Number::Float(v) => Number::Float(v.abs()),
        }),
        false,
    );
    match (measured, passed, comparison) {
        (None, true, _) => format!("{rule}: nothing to measure {at} (within the {comparison}imum {lim})"),
        (None, false, _) => format!("{rule}: grew from nothing {at}: over the maximum {lim}"),
        (_, true, "min") => format!("{rule}: {m} {at}, at least the minimum {lim} ({by} to spare)"),
        (_, true, _) => format!("{rule}: {m} {at}, within the maximum {lim} ({by} to spare)"),
        (_, false, "min") => format!("{rule}: {m} {at}, under the minimum {lim} by {by}"),
        (_, false, _) => format!("{rule}: {m} {at}, over the maximum {lim} by {by}"),
    }
}

impl IntegrityResult {
    /// The logs that are not whole (allowed or not): the log, then the baseline.
    pub fn damaged(&self) -> impl Iterator<Item = &SideIntegrity> {
        std::iter::once(&self.log).chain(self.baseline.as_ref()).filter(|s| !s.facts.clean)
    }
}

impl CheckReport {
    /// The results as a table, one row per rule, then the integrity of the logs.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{}: checked against {}{}",
            self.path,
            self.budget,
            self.baseline.as_ref().map_or_else(String::new, |b| format!(" (growth over {b})"))
        );
        let mut t = Table::new(&[
            ("result", Align::Left),
            ("rule", Align::Left),
            ("at", Align::Left),
            ("limit", Align::Right),
            ("measured", Align::Right),
            ("margin", Align::Right),
            ("budget line", Align::Left),
        ]);
        for side in self.integrity.damaged() {
            t.row(vec![
                if side.passed { "allowed".into() } else { "DAMAGED".into() },
                format!("integrity of {}", side.which),
                "-".into(),
                "undamaged".into(),
                side.facts.kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(","),
                "-".into(),
                side.allowed_by.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        for r in &self.results {
            let growth = r.metric.starts_with("growth");
            let limit = format!("{} {}", r.comparison, number_text(r.unit, Some(r.limit), false));
            let measured = match (r.measured, r.passed) {
                (None, true) => "none".to_owned(),
                (None, false) if r.table == "context" && r.baseline.is_none() && !growth => "no match".to_owned(),
                (None, false) if r.table == "gpu" => "no GPU domain".to_owned(),
                (None, false) => "from nothing".to_owned(),
                (m, _) => number_text(r.unit, m, growth),
            };
            t.row(vec![
                if r.passed { "ok".into() } else { "FAIL".into() },
                r.rule.clone(),
                r.at.as_ref().map_or_else(|| "end".into(), |a| format!("\"{a}\"")),
                limit,
                measured,
                number_text(r.unit, r.margin, true),
                format!("{}:{}", self.budget, r.line),
            ]);
        }
        o.push_str(&t.render(2));
        let verdict = match (self.integrity.log.passed, self.integrity.baseline.as_ref().is_none_or(|b| b.passed)) {
            (false, false) => "LOG AND BASELINE DAMAGED",
            (false, true) => "LOG DAMAGED",
            (true, false) => "BASELINE DAMAGED",
            (true, true) if self.failed == 0 => "within budget",
            (true, true) => "BUDGET BROKEN",
        };
        let _ = writeln!(o, "\n{verdict}: {} rules, {} broken", self.rules, self.failed);
        for side in self.integrity.damaged() {
            let _ = writeln!(o, "  {}", side.message);
            for d in &side.facts.damage {
                let _ = writeln!(o, "    damage: {}", d.what);
            }
        }
        if let Some(why) = &self.integrity.unmeasured {
            let _ = writeln!(o, "  the rules could not be measured: {why}");
        }
        for r in self.results.iter().filter(|r| !r.passed) {
            let _ = writeln!(o, "  {}", r.message);
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testlog::budget_log;

    /// `check` of `log` against the budget `toml`, with no baseline.
    fn options(log: std::path::PathBuf, toml: &str) -> CheckOptions {
        CheckOptions {
            log,
            budget_name: "b.toml".into(),
            budget: toml.into(),
            baseline: None,
            json: false,
            github: false,
            allow_damage: Vec::new(),
        }
    }

    fn check(name: &str, budgets: bool, toml: &str) -> CheckReport {
        let args = options(budget_log(name, budgets), toml);
        build(&args, Progress::Hidden).unwrap()
    }

    const RULES: &str = "[[domain]]\nname = \"vram.local\"\nmax_peak_of_budget = \"90%\"\nmax_usage_of_budget = 120\n";

    #[test]
    fn peaks_are_held_to_a_share_of_the_smallest_budget() {
        // Peak 900 MiB live, smallest budget 800 MiB: 112.5 %, over 90 %. The driver's
        // highest usage, 950 MiB, is 118.75 % of it, within 120 %.
        let r = check("check-budget", true, RULES);
        assert!(!r.passed);
        assert_eq!(r.failed, 1);
        let peak = &r.results[0];
        assert_eq!((peak.metric, peak.line, peak.unit, peak.passed), ("peak_of_budget", 3, "percent", false));
        assert_eq!(peak.measured, Some(Number::Float(112.5)));
        assert_eq!(peak.margin, Some(Number::Float(-22.5)));
        assert_eq!(
            peak.message,
            "domain vram.local: peak of the smallest driver budget: 112.50% over the log, over the maximum \
             90.00% by 22.50%: peak 900.0 MiB against the smallest budget 800.0 MiB (b.toml:3)"
        );
        let usage = &r.results[1];
        assert_eq!((usage.metric, usage.passed), ("usage_of_budget", true));
        assert_eq!(usage.measured, Some(Number::Float(118.75)));
        assert!(usage.message.contains("within the maximum 120.00% (1.25% to spare)"), "{}", usage.message);
    }

    #[test]
    fn a_domain_without_budget_samples_fails_the_rule_saying_why() {
        let r = check("check-no-budget", false, RULES);
        assert!(!r.passed);
        assert_eq!(r.failed, 2);
        for res in &r.results {
            assert_eq!((res.measured, res.margin, res.passed), (None, None, false));
            assert!(res.message.contains("the log has no budget samples for \"vram.local\""), "{}", res.message);
        }
    }

    fn check_gpu(name: &str, gpu: bool, toml: &str) -> CheckOutput {
        let args = options(crate::testlog::gpu_log(name, gpu), toml);
        run(&args, Progress::Hidden).unwrap()
    }

    fn report(o: &CheckOutput) -> serde_json::Value {
        serde_json::from_str(&o.json).unwrap()
    }

    /// (metric, measured, margin, passed) of every result.
    fn gpu_results(o: &CheckOutput) -> Vec<(String, i64, i64, bool)> {
        report(o)["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["metric"].as_str().unwrap().to_owned(),
                    r["measured"].as_i64().unwrap(),
                    r["margin"].as_i64().unwrap(),
                    r["passed"].as_bool().unwrap(),
                )
            })
            .collect()
    }

    fn gpu_table(head: &str, limits: [u64; 5]) -> String {
        format!(
            "{head}max_padding_bytes = {}\nmax_npot_waste = {}\nmax_small_resources = {}\nmax_small_bytes = {}\n\
             max_unknown_formats = {}\n",
            limits[0], limits[1], limits[2], limits[3], limits[4]
        )
    }

    const METRICS: [&str; 5] = ["padding_bytes", "npot_waste", "small_resources", "small_bytes", "unknown_formats"];

    #[test]
    fn gpu_rules_hold_at_their_measured_values_and_break_one_below() {
        // At the end, every GPU domain: padding 8 192 + 3 072; the BC7 texture rounded
        // down saves 36 928; the three buffers and the 16 x 16 texture are small
        // (1 000 + 2 000 + 4 096 + 4 096); one texture of an unknown format.
        let exact = [11_264, 36_928, 4, 11_192, 1];
        let o = check_gpu("check-gpu-exact", true, &gpu_table("[[gpu]]\n", exact));
        assert_eq!(o.verdict, Verdict::Passed, "{}", o.text);
        let want: Vec<(String, i64, i64, bool)> =
            METRICS.iter().zip(exact).map(|(m, v)| (m.to_string(), v as i64, 0, true)).collect();
        assert_eq!(gpu_results(&o), want);
        let j = report(&o);
        let first = &j["results"][0];
        assert_eq!(
            (&first["table"], &first["subject"], &first["domain"], &first["at"], &first["unit"], &first["line"]),
            (
                &"gpu".into(),
                &"(every GPU domain)".into(),
                &serde_json::Value::Null,
                &serde_json::Value::Null,
                &"bytes".into(),
                &2.into()
            )
        );
        assert_eq!(j["results"][2]["unit"], "count");
        assert!(o.text.contains("ok      gpu (every GPU domain): padding bytes"), "{}", o.text);

        let below = exact.map(|v| v - 1);
        let o = check_gpu("check-gpu-below", true, &gpu_table("[[gpu]]\n", below));
        assert_eq!(o.verdict, Verdict::Broken);
        let want: Vec<(String, i64, i64, bool)> =
            METRICS.iter().zip(exact).map(|(m, v)| (m.to_string(), v as i64, -1, false)).collect();
        assert_eq!(gpu_results(&o), want);
        assert_eq!(report(&o)["failed"], 5);
        assert!(
            o.text.contains(
                "gpu (every GPU domain): padding bytes: 11.0 KiB at the end, over the maximum 11.0 KiB by 1 B (b.toml:2)"
            ),
            "{}",
            o.text
        );
        assert!(
            o.text.contains(
                "gpu (every GPU domain): resources of unknown format: 1 at the end, over the maximum 0 by 1 (b.toml:6)"
            ),
            "{}",
            o.text
        );
        assert_eq!(o.junit.matches("classname=\"memreplay.budget.gpu\"").count(), 5, "{}", o.junit);
        assert_eq!(o.junit.matches("<failure").count(), 5, "{}", o.junit);
    }

    #[test]
    fn gpu_rules_read_a_label_one_domain_and_their_own_small_threshold() {
        // At "loaded" only the two first textures are live: the padded one and the BC7.
        let o = check_gpu("check-gpu-at", true, &gpu_table("[[gpu]]\nat = \"loaded\"\n", [8_192, 36_928, 0, 0, 0]));
        assert_eq!(o.verdict, Verdict::Passed, "{}", o.text);
        assert!(gpu_results(&o).iter().all(|r| r.2 == 0), "{:?}", gpu_results(&o));
        assert_eq!(report(&o)["results"][0]["at"], "loaded");
        // The file's `at` is inherited, as the other tables inherit it; a table's own wins.
        let toml = format!("at = \"loaded\"\n{}", gpu_table("[[gpu]]\n", [8_191, 36_928, 0, 0, 0]));
        let o = check_gpu("check-gpu-top-at", true, &toml);
        assert_eq!(gpu_results(&o)[0], ("padding_bytes".into(), 8_192, -1, false));
        assert!(o.text.contains("8.0 KiB at \"loaded\", over the maximum"), "{}", o.text);

        // One domain at the end: vram.local has the padded and the BC7 texture and the
        // unknown one; vram.shared the small ones and 3 072 bytes of padding.
        let toml = format!(
            "{}\n{}\n{}",
            gpu_table("[[gpu]]\ndomain = \"vram.local\"\n", [8_192, 36_928, 0, 0, 1]),
            gpu_table("[[gpu]]\ndomain = \"vram.shared\"\n", [3_072, 0, 4, 11_192, 0]),
            gpu_table("[[gpu]]\ndomain = \"vram.shared\"\nsmall = \"4KiB\"\n", [3_071, 0, 2, 3_000, 0])
        );
        let o = check_gpu("check-gpu-domain", true, &toml);
        let r = gpu_results(&o);
        assert_eq!(r.len(), 15);
        assert!(r.iter().enumerate().all(|(i, r)| i == 10 || (r.2 == 0 && r.3)), "{r:?}");
        // Below 4 KiB: the 1 000 and 2 000 byte buffers only (r[12], r[13]); the limit one
        // below the padding breaks.
        assert_eq!(r[10], ("padding_bytes".into(), 3_072, -1, false));
        assert_eq!(report(&o)["failed"], 1);
        let j = report(&o);
        assert_eq!(
            (&j["results"][0]["subject"], &j["results"][0]["domain"]),
            (&"vram.local".into(), &"vram.local".into())
        );
        assert!(o.text.contains("gpu vram.shared: small resources"), "{}", o.text);
    }

    #[test]
    fn a_gpu_rule_without_a_gpu_domain_breaks_saying_why() {
        let o = check_gpu("check-gpu-heap", true, "[[gpu]]\ndomain = \"heap\"\nmax_small_resources = 100\n");
        assert_eq!(o.verdict, Verdict::Broken);
        let j = report(&o);
        let r = &j["results"][0];
        assert_eq!(
            (&r["measured"], &r["margin"], &r["passed"]),
            (&serde_json::Value::Null, &serde_json::Value::Null, &false.into())
        );
        assert_eq!(
            r["message"],
            "gpu heap: small resources: no GPU domain \"heap\" in the log; GPU domains: \"vram.local\", \"vram.shared\" \
             (b.toml:3)"
        );
        assert!(o.text.contains("FAIL    gpu heap: small resources") && o.text.contains("no GPU domain"), "{}", o.text);

        let o = check_gpu(
            "check-gpu-none",
            false,
            "[[gpu]]\nmax_padding_bytes = \"1MiB\"\n[[gpu]]\ndomain = \"vram.local\"\nmax_npot_waste = 0\n",
        );
        assert_eq!(o.verdict, Verdict::Broken);
        let j = report(&o);
        assert_eq!(j["failed"], 2);
        let m0 = j["results"][0]["message"].as_str().unwrap();
        assert!(
            m0.starts_with("gpu (every GPU domain): padding bytes: the log has no GPU domain")
                && m0.ends_with("(b.toml:2)"),
            "{m0}"
        );
        assert_eq!(
            j["results"][1]["message"],
            "gpu vram.local: NPOT texture waste: no GPU domain \"vram.local\" in the log; GPU domains: none (b.toml:5)"
        );
    }

    #[test]
    fn a_gpu_rule_at_a_missing_label_cannot_run() {
        let args = CheckOptions {
            log: crate::testlog::gpu_log("check-gpu-no-label", true),
            budget_name: "b.toml".into(),
            budget: "[[gpu]]\nat = \"nowhere\"\nmax_padding_bytes = 0\n".into(),
            ..CheckOptions::default()
        };
        let Err(Error::Usage(e)) = build(&args, Progress::Hidden) else { panic!("a missing label is an error") };
        assert!(e.starts_with("b.toml:2: no label \"nowhere\" in the log"), "{e}");
    }
}
