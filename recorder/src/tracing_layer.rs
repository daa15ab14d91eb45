//! A `tracing_subscriber::Layer` that turns entered spans into memreplay contexts, so a
//! program already instrumented with `tracing` (Bevy's systems, for one) gets a context
//! tree without new code:
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
//! A span's context type is, by default, its name in its metadata (Bevy's `schedule`,
//! `system`, `system_commands`), so spans of different kinds never share a context: the
//! analyzer keys a context by its parent, type and name, and `system{name="foo"}` and
//! `system_commands{name="foo"}` become `system:foo` and `system_commands:foo` (with
//! [`ContextLayer::name_from_field`]`("name")`). [`ContextLayer::type_from`] picks the
//! type from the metadata another way (the target, a table); [`ContextLayer::with_type`]
//! gives every span one type.
//!
//! The context's type and name are computed once, when the span is created, and kept in
//! the span's extensions; entering and leaving a span then cost one context push and
//! pop. The name is allocated and freed with recording suspended (`on_new_span`,
//! `on_close`), so the log sees neither half of it.

use std::fmt::Write as _;

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

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

/// The context type and name of a span, stored in its extensions. Allocated and freed
/// unrecorded.
struct ContextName {
    ty: &'static str,
    name: String,
}

/// Zero-sized: inserted and removed (recorded) before [`ContextName`] is inserted
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

impl<S> Layer<S> for ContextLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
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
            ext.insert(ContextName {
                ty: self.context_type(span.metadata()),
                name: self.context_name(span.name(), attrs),
            })
        });
    }

    fn on_record(&self, _id: &Id, _values: &Record<'_>, _ctx: Context<'_, S>) {}

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            let ext = span.extensions();
            let (ty, name) = match ext.get::<ContextName>() {
                Some(c) => (c.ty, c.name.as_str()),
                None => (self.context_type(span.metadata()), span.name()),
            };
            #[cfg(feature = "capture_replay_log")]
            crate::imp::context_push(ty, format_args!("{name}"), self.instance);
            #[cfg(not(feature = "capture_replay_log"))]
            let _ = (ty, name);
        }
    }

    fn on_exit(&self, _id: &Id, _ctx: Context<'_, S>) {
        #[cfg(feature = "capture_replay_log")]
        crate::imp::context_pop();
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        // Layers see `on_close` before the registry clears the span's extensions (its
        // close guard clears them when `try_close` returns), so the name is still here.
        if let Some(span) = ctx.span(&id) {
            let mut ext = span.extensions_mut();
            crate::untracked(|| drop(ext.remove::<ContextName>()));
        }
    }
}
