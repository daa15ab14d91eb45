//! What the callstack views share: the symbol options, opening a [`Symbolizer`] on a
//! replayed log, and grouping sites by allocating function or by whole stack.

use std::collections::HashMap;
use std::sync::Arc;

use crate::Error;
use memreplay_symbols::{Module, ModuleMap, SiteName, SymbolOptions, Symbolizer};

use crate::loaded::Loaded;
use crate::sites::SiteFigures;

/// Refuses symbol search directories that are not directories (`--symbols DIR`).
pub fn check_symbol_dirs(opts: &SymbolOptions) -> Result<(), Error> {
    for d in &opts.search_dirs {
        if !d.is_dir() {
            return Err(Error::Usage(format!("--symbols {}: no such directory", d.display())));
        }
    }
    Ok(())
}

/// A symbolizer for the replayed log `l`, over the modules the replay found in it.
pub fn symbolizer(l: &Loaded, opts: &SymbolOptions) -> Result<Symbolizer, Error> {
    check_symbol_dirs(opts)?;
    let state = l.state();
    let modules = state
        .modules
        .iter()
        .map(|m| Module {
            base: m.base,
            size: m.size,
            load_bias: m.load_bias,
            path: state.string(m.path),
            build_id: m.build_id.clone(),
        })
        .collect();
    Ok(Symbolizer::new(ModuleMap::new(modules), opts.clone()))
}

/// Sites merged under one name: the allocating function, or the whole stack.
#[derive(Debug, Clone)]
pub struct Group {
    /// The key: the function, or the stack key.
    pub key: String,
    /// A representative site (the one with the most of the metric).
    pub site: Arc<SiteName>,
    /// Callstack ids merged, ascending.
    pub stacks: Vec<u32>,
    /// Distinct (file, line) the function allocated from, in order.
    pub lines: Vec<(String, u32)>,
    pub figures: SiteFigures,
    best: u64,
}

/// Groups `(stack, figures)` of one domain by allocating function (`by_stack`: by whole
/// symbolicated stack), keeping for each group the site with most `weight`.
pub fn group_sites(
    l: &Loaded,
    syms: &mut Symbolizer,
    rows: impl IntoIterator<Item = (u32, SiteFigures)>,
    by_stack: bool,
    weight: impl Fn(&SiteFigures) -> u64,
) -> Vec<Group> {
    let state = l.state();
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (stack, figures) in rows {
        let site = syms.site(stack, state.stacks.get(stack));
        let key = if by_stack { site.stack_key() } else { site.function_key() };
        let w = weight(&figures);
        let i = *index.entry(key.clone()).or_insert_with(|| {
            groups.push(Group {
                key,
                site: site.clone(),
                stacks: Vec::new(),
                lines: Vec::new(),
                figures: SiteFigures::default(),
                best: 0,
            });
            groups.len() - 1
        });
        let g = &mut groups[i];
        g.figures.add(&figures);
        g.stacks.push(stack);
        if let (Some(f), Some(n)) = (&site.file, site.line) {
            if !g.lines.iter().any(|(gf, gn)| gf == f && *gn == n) {
                g.lines.push((f.clone(), n));
            }
        }
        if w > g.best {
            g.best = w;
            g.site = site;
        }
    }
    for g in &mut groups {
        g.stacks.sort_unstable();
        g.stacks.dedup();
        g.lines.sort();
    }
    groups
}

/// `game.rs:12, 40` — the lines a group allocated from, by file, for tables.
pub fn lines_text(lines: &[(String, u32)]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let file = &lines[i].0;
        let mut nums = Vec::new();
        while i < lines.len() && &lines[i].0 == file {
            nums.push(lines[i].1.to_string());
            i += 1;
        }
        out.push(format!("{}:{}", memreplay_symbols::short_path(file), nums.join(",")));
    }
    out.join(" ")
}
