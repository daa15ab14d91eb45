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
//! // allocations here belong to the context "load asset=rock.dds" of type "Span"
//! ```
//!
//! The context's name is computed once, when the span is created, and kept in the span's
//! extensions; entering and leaving a span then cost one context push and pop. The name
//! is allocated and freed with recording suspended (`on_new_span`, `on_close`), so the
//! log sees neither half of it.

use std::fmt::Write as _;

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::Subscriber;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Turns spans into contexts. See the module documentation.
#[derive(Debug, Clone)]
pub struct ContextLayer {
    context_type: &'static str,
    fields: Vec<&'static str>,
    name_field: Option<&'static str>,
    instance: bool,
}

impl Default for ContextLayer {
    fn default() -> Self {
        Self::new()
    }
}

/// The context name of a span, stored in its extensions. Allocated and freed unrecorded.
struct ContextName(String);

/// Zero-sized: inserted and removed (recorded) before [`ContextName`] is inserted
/// (unrecorded), so that the extension map's table never grows unrecorded.
struct Room;

impl ContextLayer {
    /// Contexts of type "Span" named after the span.
    pub fn new() -> Self {
        ContextLayer { context_type: "Span", fields: Vec::new(), name_field: None, instance: false }
    }

    /// The context type every span's context gets (default "Span").
    pub fn with_type(mut self, context_type: &'static str) -> Self {
        self.context_type = context_type;
        self
    }

    /// Appends these fields, when a span has them, to its context name: `load asset=rock.dds`.
    pub fn with_fields(mut self, fields: &[&'static str]) -> Self {
        self.fields = fields.to_vec();
        self
    }

    /// Names the context after this field's value instead of the span's name, when the
    /// span has it (Bevy's `system` spans carry the system's name in `name`).
    pub fn name_from_field(mut self, field: &'static str) -> Self {
        self.name_field = Some(field);
        self
    }

    /// Counts every entry as an instance (for spans that stand for one object each).
    pub fn instances(mut self, on: bool) -> Self {
        self.instance = on;
        self
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
        crate::untracked(|| ext.insert(ContextName(self.context_name(span.name(), attrs))));
    }

    fn on_record(&self, _id: &Id, _values: &Record<'_>, _ctx: Context<'_, S>) {}

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            let ext = span.extensions();
            let name = ext.get::<ContextName>().map_or(span.name(), |n| n.0.as_str());
            #[cfg(feature = "capture_replay_log")]
            crate::imp::context_push(self.context_type, format_args!("{name}"), self.instance);
            #[cfg(not(feature = "capture_replay_log"))]
            let _ = name;
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
