//! End-to-end test helpers: run the demo, and replay a log's events into the facts the
//! tests assert on (who allocated what, in which contexts, what is still live, what was
//! freed on another thread).
//!
//! The replay is deliberately simple and independent of the analyzer: events in global
//! order ([`merge_by_seq`]), a context stack per thread, a live map per domain, and
//! attaches resolved to the live heap allocation that contains their address.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memreplay_format::{context_flags, merge_by_seq, DomainKind, Event, Log, Part, ResourceDesc, HEAP_DOMAIN};

/// A fresh path for a test's log, in a directory of this test process.
pub fn temp_log(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memreplay-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the temp dir");
    dir.join(name)
}

/// Runs a demo binary (`exe`) with `args`; panics with its output if it fails.
pub fn run_demo(exe: &str, args: &[&str]) -> Output {
    let out = Command::new(exe).args(args).env_remove("MEMREPLAY_LOG").output().expect("run the demo");
    assert!(
        out.status.success(),
        "demo {args:?} failed: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Opens a log, panicking with the reason if it cannot be read.
pub fn open(path: &Path) -> Log {
    Log::open(path).unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()))
}

/// A context as entered: its type's name, its name, whether it counts instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ctx {
    pub ty: String,
    pub name: String,
    pub instance: bool,
}

/// One allocation (heap or domain) as replayed.
#[derive(Debug, Clone)]
pub struct Allocation {
    pub domain: u32,
    pub addr: u64,
    pub size: u64,
    /// The stream (thread) that made it.
    pub thread: u32,
    pub seq: u64,
    pub stack: u32,
    /// The context stack of its thread when it was made, outermost first.
    pub contexts: Vec<Ctx>,
    /// The allocation (index into [`Replay::allocs`]) its thread was attached to.
    pub attached_to: Option<usize>,
    /// Made by the allocation half of a realloc.
    pub by_realloc: bool,
    /// Described by a `Resource` record.
    pub resource: Option<ResourceDesc>,
    /// The stream that freed it (or reallocated it away), if it was freed.
    pub freed_by: Option<u32>,
    /// The callstack of that free (0 if none).
    pub free_stack: u32,
    /// The last usage reported for it.
    pub used: Option<u64>,
}

impl Allocation {
    /// Whether the innermost context is of type `ty` (and named `name`, if given).
    pub fn innermost_is(&self, ty: &str, name: Option<&str>) -> bool {
        self.contexts.last().is_some_and(|c| c.ty == ty && name.is_none_or(|n| c.name == n))
    }

    /// Whether any enclosing context is of type `ty` named `name`.
    pub fn within(&self, ty: &str, name: &str) -> bool {
        self.contexts.iter().any(|c| c.ty == ty && c.name == name)
    }
}

/// A domain as defined in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainDef {
    pub id: u32,
    pub name: String,
    pub kind: DomainKind,
    pub capacity: u64,
    pub parent: Option<u32>,
}

/// Everything the tests ask of a log.
#[derive(Debug, Default)]
pub struct Replay {
    pub strings: HashMap<u32, String>,
    /// Every allocation, in global order.
    pub allocs: Vec<Allocation>,
    /// Live allocations at the end: (domain, addr) → index into `allocs`.
    pub live: HashMap<(u32, u64), usize>,
    /// Frees (and realloc frees) of addresses not live at the time: memory allocated
    /// before the recording started, or by a thread the recorder does not see.
    pub unknown_frees: u64,
    /// Frees that carry a callstack.
    pub frees_with_stack: u64,
    /// Label names in global order.
    pub labels: Vec<String>,
    /// Frame numbers in global order.
    pub frames: Vec<u64>,
    /// Stream → last name the thread gave itself.
    pub thread_names: HashMap<u32, String>,
    pub domains: Vec<DomainDef>,
    /// Every context push: (stream, context).
    pub pushes: Vec<(u32, Ctx)>,
    /// Every attach: (stream, address, allocation it resolved to).
    pub attaches: Vec<(u32, u64, Option<usize>)>,
    pub define_stacks: u64,
    pub reallocs: u64,
}

impl Replay {
    /// Replays `log` in global sequence order.
    pub fn of(log: &Log) -> Replay {
        let mut r = Replay::default();
        for (_, e) in log.events() {
            match e {
                Event::DefineString { id, text } => {
                    r.strings.insert(*id, text.clone());
                }
                Event::DefineStack { .. } => r.define_stacks += 1,
                _ => {}
            }
        }
        let string = |strings: &HashMap<u32, String>, id: u32| strings.get(&id).cloned().unwrap_or_default();
        let mut types: HashMap<u32, String> = HashMap::new();
        for (_, e) in log.events() {
            match e {
                Event::DefineContextType { id, name } => {
                    types.insert(*id, string(&r.strings, *name));
                }
                Event::DefineDomain { id, name, kind, capacity, parent } => r.domains.push(DomainDef {
                    id: *id,
                    name: string(&r.strings, *name),
                    kind: *kind,
                    capacity: *capacity,
                    parent: *parent,
                }),
                _ => {}
            }
        }

        let mut st = State::default();
        for m in merge_by_seq(&log.blocks) {
            let t = m.thread;
            match (m.event, m.part) {
                (Event::Alloc { seq, domain, addr, size, stack, .. }, _) => {
                    st.alloc(&mut r, t, *domain, *addr, *size, *seq, *stack, false)
                }
                (Event::Free { domain, addr, stack, .. }, _) => st.free(&mut r, t, *domain, *addr, *stack),
                (Event::Realloc { old_addr, .. }, Part::ReallocFree) => {
                    r.reallocs += 1;
                    // The free half of a realloc has no callstack of its own.
                    st.free(&mut r, t, HEAP_DOMAIN, *old_addr, 0)
                }
                (Event::Realloc { seq, new_addr, new_size, stack, .. }, _) => {
                    st.alloc(&mut r, t, HEAP_DOMAIN, *new_addr, *new_size, *seq, *stack, true)
                }
                (Event::Resource { domain, addr, desc }, _) => {
                    if let Some(&i) = r.live.get(&(*domain, *addr)) {
                        r.allocs[i].resource = Some(desc.clone());
                    }
                }
                (Event::Usage { addr, used, .. }, _) => {
                    if let Some(&i) = r.live.get(&(HEAP_DOMAIN, *addr)) {
                        r.allocs[i].used = Some(*used);
                    }
                }
                (Event::ContextPush { ty, name, flags }, _) => {
                    let ctx = Ctx {
                        ty: types.get(ty).cloned().unwrap_or_default(),
                        name: string(&r.strings, *name),
                        instance: flags & context_flags::INSTANCE != 0,
                    };
                    r.pushes.push((t, ctx.clone()));
                    st.contexts.entry(t).or_default().push(ctx);
                }
                (Event::ContextPop, _) => {
                    st.contexts.entry(t).or_default().pop();
                }
                (Event::AttachPush { addr, .. }, _) => {
                    let owner = st
                        .heap
                        .range(..=*addr)
                        .next_back()
                        .filter(|&(start, &i)| *addr < *start + r.allocs[i].size.max(1))
                        .map(|(_, &i)| i);
                    r.attaches.push((t, *addr, owner));
                    st.attached.entry(t).or_default().push(owner);
                }
                (Event::AttachPop, _) => {
                    st.attached.entry(t).or_default().pop();
                }
                (Event::Label { name, .. }, _) => r.labels.push(string(&r.strings, *name)),
                (Event::FrameStart { frame, .. }, _) => r.frames.push(*frame),
                (Event::ThreadInfo { name, .. }, _) if *name != 0 => {
                    r.thread_names.insert(t, string(&r.strings, *name));
                }
                _ => {}
            }
        }
        r
    }

    /// The domain named `name`.
    pub fn domain(&self, name: &str) -> Option<&DomainDef> {
        self.domains.iter().find(|d| d.name == name)
    }

    /// The stream of the thread named `name`.
    pub fn thread(&self, name: &str) -> Option<u32> {
        self.thread_names.iter().find(|(_, n)| *n == name).map(|(&t, _)| t)
    }

    /// Allocations still live at the end of the log, in `domain`.
    pub fn live_in(&self, domain: u32) -> impl Iterator<Item = &Allocation> {
        self.live.iter().filter(move |((d, _), _)| *d == domain).map(|(_, &i)| &self.allocs[i])
    }

    /// Allocations freed by another thread than the one that made them.
    pub fn cross_thread_frees(&self) -> impl Iterator<Item = &Allocation> {
        self.allocs.iter().filter(|a| a.freed_by.is_some_and(|f| f != a.thread))
    }
}

/// Per-thread replay state.
#[derive(Default)]
struct State {
    contexts: HashMap<u32, Vec<Ctx>>,
    attached: HashMap<u32, Vec<Option<usize>>>,
    /// Live heap allocations by address, to resolve interior pointers.
    heap: BTreeMap<u64, usize>,
}

impl State {
    #[allow(clippy::too_many_arguments)]
    fn alloc(
        &mut self,
        r: &mut Replay,
        t: u32,
        domain: u32,
        addr: u64,
        size: u64,
        seq: u64,
        stack: u32,
        by_realloc: bool,
    ) {
        let i = r.allocs.len();
        r.allocs.push(Allocation {
            domain,
            addr,
            size,
            thread: t,
            seq,
            stack,
            contexts: self.contexts.get(&t).cloned().unwrap_or_default(),
            attached_to: self.attached.get(&t).and_then(|a| a.last().copied().flatten()),
            by_realloc,
            resource: None,
            freed_by: None,
            free_stack: 0,
            used: None,
        });
        r.live.insert((domain, addr), i);
        if domain == HEAP_DOMAIN {
            self.heap.insert(addr, i);
        }
    }

    fn free(&mut self, r: &mut Replay, t: u32, domain: u32, addr: u64, stack: u32) {
        match r.live.remove(&(domain, addr)) {
            Some(i) => {
                r.allocs[i].freed_by = Some(t);
                r.allocs[i].free_stack = stack;
                if domain == HEAP_DOMAIN {
                    self.heap.remove(&addr);
                }
            }
            None => r.unknown_frees += 1,
        }
        if stack != 0 {
            r.frees_with_stack += 1;
        }
    }
}
