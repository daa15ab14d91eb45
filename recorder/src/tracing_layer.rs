//! A `tracing_subscriber::Layer` that turns entered spans into memreplay contexts, so a
//! program already instrumented with `tracing` (a Bevy app, for one) gets a context tree
//! without new code:
//!
//! ```ignore
//! use tracing_subscriber::prelude::*;
//! tracing_subscriber::registry()
//!     .with(memreplay::tracing_layer::ContextLayer::new().with_fields(&["asset"]))
//!     .init();
//! let _span = tracing::info_span!("load", asset = "rock.dds").entered();
//! // allocations here belong to the context "load asset=rock.dds" of type "load"
//! ```
//!
//! **Types and names.** A span's context type is, by default, its name in its metadata
//! (Bevy's `schedule`, `system`, `system_commands`), so spans of different kinds never
//! share a context: the analyzer keys a context by its parent, type and name, and
//! `system{name="foo"}` and `system_commands{name="foo"}` become `system:foo` and
//! `system_commands:foo` (with [`ContextLayer::name_from_field`]`("name")`).
//! [`ContextLayer::type_from`] picks the type from the metadata another way (the target,
//! a table); [`ContextLayer::with_type`] gives every span one type. A context's name is
//! the span's name, or the value of the field chosen by `name_from_field`, followed by
//! the fields chosen by [`ContextLayer::with_fields`].
//!
//! **Threads.** A thread's contexts nest as it enters spans. A span whose parent is
//! entered on another thread right now (work handed to a worker with `parent: &span`, or
//! under a span captured with `Span::current()`) first gets its missing ancestors: those
//! of the parent's chain that are entered somewhere and not already on this thread's
//! path, root first. They are popped with the span, so the worker's allocations land
//! under `schedule:Update/system:foo` as the spawning thread's would. An ancestor entered
//! nowhere only says where the span was created (Bevy makes a system's span once, when
//! the system is added) and is left out. Re-entering a span already on the thread's path
//! pushes nothing; a span exited before spans entered after it keeps its contexts until
//! they exit, so the log's context stack stays balanced.
//!
//! **Cost.** The name and type are computed once, when the span is created, and kept in
//! the span's extensions. An entry whose parent is on top of the thread's path (or that
//! has no parent) costs one context push and pop, a look-up of the span, a scan of the
//! thread's short list of entries and a reference count taken and given back (how a
//! span is known to be entered elsewhere). The names and the per-thread lists are
//! allocated and freed with recording suspended, so the log sees neither half of them.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::Arc;

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

/// Turns spans into contexts. See the module documentation.
#[derive(Debug, Clone)]
pub struct ContextLayer {
    context_type: ContextType,
    fields: Vec<&'static str>,
    name_field: Option<&'static str>,
    instance: bool,
}

/// How a span's context type is chosen.
#[derive(Debug, Clone, Copy)]
enum ContextType {
    /// The same for every span ([`ContextLayer::with_type`]).
    Fixed(&'static str),
    /// From the span's metadata ([`ContextLayer::type_from`]; its name by default).
    From(fn(&'static Metadata<'static>) -> &'static str),
}

impl Default for ContextLayer {
    fn default() -> Self {
        Self::new()
    }
}

/// What the layer keeps of a span, in its extensions. Allocated and freed unrecorded.
///
/// Each entry in progress holds a clone of the `Arc` (its exit needs no look-up), so a
/// span is entered on some thread when its count is above one: an ancestor entered
/// nowhere is not pushed.
struct SpanContext {
    ty: &'static str,
    name: String,
    /// The parent (as this layer sees it), as `Id::into_u64`.
    parent: Option<u64>,
}

/// Zero-sized: inserted and removed (recorded) before the [`SpanContext`] is inserted
/// (unrecorded), so that the extension map's table never grows unrecorded.
struct Room;

impl ContextLayer {
    /// Contexts typed by their span's name (`load`, `system`) and named after the span.
    pub fn new() -> Self {
        ContextLayer {
            context_type: ContextType::From(Metadata::name),
            fields: Vec::new(),
            name_field: None,
            instance: false,
        }
    }

    /// Gives every span's context this type, whatever the span (by default each span's
    /// context type is the span's name). Spans of different kinds with the same name then
    /// share a context.
    pub fn with_type(mut self, context_type: &'static str) -> Self {
        self.context_type = ContextType::Fixed(context_type);
        self
    }

    /// Takes each span's context type from its metadata: `|m| m.target()` types contexts
    /// by module, `|m| match m.name() { "system" | "system_commands" => "System", n => n }`
    /// merges kinds. The default is `|m| m.name()`.
    pub fn type_from(mut self, f: fn(&'static Metadata<'static>) -> &'static str) -> Self {
        self.context_type = ContextType::From(f);
        self
    }

    /// Appends these fields, when a span has them, to its context name: `load asset=rock.dds`.
    pub fn with_fields(mut self, fields: &[&'static str]) -> Self {
        self.fields = fields.to_vec();
        self
    }

    /// Names the context after this field's value instead of the span's name, when the
    /// span has it (Bevy's `schedule`, `system` and `system_commands` spans carry the
    /// schedule's or the system's name in `name`).
    pub fn name_from_field(mut self, field: &'static str) -> Self {
        self.name_field = Some(field);
        self
    }

    /// Counts every entry as an instance (for spans that stand for one object each).
    /// Ancestors pushed for a span entered on another thread are not counted again.
    pub fn instances(mut self, on: bool) -> Self {
        self.instance = on;
        self
    }

    fn context_type(&self, meta: &'static Metadata<'static>) -> &'static str {
        match self.context_type {
            ContextType::Fixed(ty) => ty,
            ContextType::From(f) => f(meta),
        }
    }

    fn context_name(&self, span_name: &str, attrs: &Attributes<'_>) -> String {
        let mut v = FieldCollector { layer: self, name: None, extra: String::new() };
        attrs.record(&mut v);
        let mut name = v.name.unwrap_or_else(|| span_name.to_owned());
        name.push_str(&v.extra);
        name
    }

    /// Pushes the contexts of `span` and of its ancestors, root first, down from the
    /// first that is on this thread's path already or entered nowhere (and then not
    /// `span`'s either).
    fn push_ancestors<S: for<'a> LookupSpan<'a>>(stack: &mut Stack, span: SpanRef<'_, S>) {
        let id = span.id().into_u64();
        let ext = span.extensions();
        let Some(c) = ext.get::<Arc<SpanContext>>() else { return };
        if Arc::strong_count(c) == 1 || stack.0.iter().any(|i| i.id == id) {
            return;
        }
        if let Some(parent) = span.parent() {
            Self::push_ancestors(stack, parent);
        }
        stack.push(Item { id, flags: PUSHED, span: None });
        // Not a new instance of the ancestor.
        context_push(c.ty, &c.name, false);
    }
}

struct FieldCollector<'a> {
    layer: &'a ContextLayer,
    name: Option<String>,
    extra: String,
}

impl Visit for FieldCollector<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.take(field, format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.take(field, format_args!("{value:?}"));
    }
}

impl FieldCollector<'_> {
    fn take(&mut self, field: &Field, value: std::fmt::Arguments<'_>) {
        if self.layer.name_field == Some(field.name()) {
            self.name = Some(value.to_string());
        } else if self.layer.fields.contains(&field.name()) {
            let _ = write!(self.extra, " {}={}", field.name(), value);
        }
    }
}

#[inline]
fn context_push(ty: &'static str, name: &str, instance: bool) {
    #[cfg(feature = "capture_replay_log")]
    crate::imp::context_push(ty, format_args!("{name}"), instance);
    #[cfg(not(feature = "capture_replay_log"))]
    let _ = (ty, name, instance);
}

#[inline]
fn context_pop() {
    #[cfg(feature = "capture_replay_log")]
    crate::imp::context_pop();
}

/// One entry of a thread's [`Stack`]: a span entered on the thread, or an ancestor pushed
/// for the entry above it.
struct Item {
    /// The span, as `Id::into_u64`.
    id: u64,
    flags: u8,
    /// An entry's hold on its span's context, until it exits.
    span: Option<Arc<SpanContext>>,
}

/// The item is an entry of its span (else an ancestor pushed for the next entry above).
const ENTRY: u8 = 1;
/// The item pushed a context (a re-entry pushes none).
const PUSHED: u8 = 2;
/// The entry has exited, but entries above it have not: its contexts wait for theirs.
const EXITED: u8 = 4;

/// The spans entered on this thread, and the ancestors pushed for them, innermost last:
/// one item for each context pushed, and one for each re-entry. Its memory is the
/// layer's, not the program's: it grows and is freed unrecorded.
struct Stack(Vec<Item>);

impl Stack {
    #[inline]
    fn push(&mut self, item: Item) {
        if self.0.len() == self.0.capacity() {
            self.grow();
        }
        self.0.push(item);
    }

    #[cold]
    fn grow(&mut self) {
        crate::untracked(|| self.0.reserve(16));
    }

    /// Removes an exited entry from the top, with the ancestors pushed for it, for as long
    /// as the top is one: the number of contexts to pop.
    fn unwind(&mut self) -> usize {
        let mut pops = 0;
        while let Some(top) = self.0.last() {
            if top.flags & EXITED == 0 {
                break;
            }
            pops += usize::from(top.flags & PUSHED != 0);
            self.0.pop();
            while self.0.last().is_some_and(|i| i.flags & ENTRY == 0) {
                self.0.pop();
                pops += 1;
            }
        }
        pops
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        crate::untracked(|| drop(std::mem::take(&mut self.0)));
    }
}

thread_local! {
    static STACK: RefCell<Stack> = const { RefCell::new(Stack(Vec::new())) };
}

impl<S> Layer<S> for ContextLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !crate::ENABLED {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().map(|p| p.id().into_u64());
        let mut ext = span.extensions_mut();
        // The extension map's table is the registry's: it keeps it with the span's slot
        // and frees it, recorded, when it is dropped. So it must also grow where that is
        // recorded: make room for one more entry first (a zero-sized value allocates
        // nothing but the table, and removing it keeps the room).
        ext.insert(Room);
        let _ = ext.remove::<Room>();
        // The name is the layer's memory, not the program's: keep it out of the log. It
        // is freed in `on_close`, unrecorded too (the registry would free it recorded).
        crate::untracked(|| {
            ext.insert(Arc::new(SpanContext {
                ty: self.context_type(span.metadata()),
                name: self.context_name(span.name(), attrs),
                parent,
            }))
        });
    }

    fn on_record(&self, _id: &Id, _values: &Record<'_>, _ctx: Context<'_, S>) {}

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !crate::ENABLED {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let Some(c) = span.extensions().get::<Arc<SpanContext>>().cloned() else { return };
        let held = STACK.try_with(|stack| {
            // This thread is inside the layer already (a span entered by something the
            // layer calls): leave this entry out, its exit finds no entry either.
            let Ok(mut stack) = stack.try_borrow_mut() else { return Some(c) };
            let me = id.into_u64();
            let (mut mine, mut parents) = (false, false);
            for item in stack.0.iter().rev() {
                mine |= item.id == me;
                parents |= Some(item.id) == c.parent;
            }
            if mine {
                // Already on this thread's path: an entry that pushes nothing.
                stack.push(Item { id: me, flags: ENTRY, span: Some(c) });
                return None;
            }
            if !parents {
                // The parent is not on this thread's path: push those of its chain that
                // are entered on other threads, root first.
                if let Some(p) = c.parent.and_then(|p| ctx.span(&Id::from_u64(p))) {
                    Self::push_ancestors(&mut stack, p);
                }
            }
            context_push(c.ty, &c.name, self.instance);
            stack.push(Item { id: me, flags: ENTRY | PUSHED, span: Some(c) });
            None
        });
        if let Ok(Some(c)) = held {
            crate::untracked(|| drop(c));
        }
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        if !crate::ENABLED {
            return;
        }
        let (held, pops) = STACK
            .try_with(|stack| {
                let Ok(mut stack) = stack.try_borrow_mut() else { return (None, 0) };
                let me = id.into_u64();
                // This thread's latest entry of the span still in progress; none when the
                // span was entered before the layer saw it, or on another thread.
                let Some(item) = stack.0.iter_mut().rev().find(|i| i.id == me && i.flags & (ENTRY | EXITED) == ENTRY)
                else {
                    return (None, 0);
                };
                item.flags |= EXITED;
                let held = item.span.take();
                (held, stack.unwind())
            })
            .unwrap_or((None, 0));
        if let Some(c) = held {
            // The last hold frees the context when the span closed first: unrecorded, as
            // it was allocated.
            crate::untracked(|| drop(c));
        }
        for _ in 0..pops {
            context_pop();
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        // Layers see `on_close` before the registry clears the span's extensions (its
        // close guard clears them when `try_close` returns), so the name is still here.
        if let Some(span) = ctx.span(&id) {
            let mut ext = span.extensions_mut();
            crate::untracked(|| drop(ext.remove::<Arc<SpanContext>>()));
        }
    }
}
