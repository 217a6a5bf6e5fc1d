//! Trace context through a request's `params._meta` (SEP-414; the conventions' "Context
//! propagation"): `traceparent`, `tracestate` and `baggage`, unprefixed, read from a client's
//! request as the SERVER span's remote parent and written into the upstream request's `_meta`
//! from the CLIENT span. W3C Trace Context and Baggage, by the SDK's own propagators.

use opentelemetry::Context;
use opentelemetry::propagation::{
    Extractor, Injector, TextMapCompositePropagator, TextMapPropagator,
};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use serde_json::{Map, Value};

fn propagator() -> TextMapCompositePropagator {
    TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ])
}

/// The keys read and written: nothing else of a `_meta` is looked at.
const KEYS: [&str; 3] = ["traceparent", "tracestate", "baggage"];

struct Read<'a>(&'a Map<String, Value>);

impl Extractor for Read<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        KEYS.iter().copied().filter(|k| self.0.contains_key(*k)).collect()
    }
}

struct Write<'a>(&'a mut Map<String, Value>);

impl Injector for Write<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), Value::String(value));
    }
}

/// The context a request's `_meta` carries, over `base` (the current context): `base` itself
/// when it carries none, or none that parses.
pub(crate) fn extract(meta: Option<&Map<String, Value>>, base: &Context) -> Context {
    match meta {
        Some(m) if KEYS.iter().any(|k| m.contains_key(*k)) => {
            propagator().extract_with_context(base, &Read(m))
        }
        _ => base.clone(),
    }
}

/// `cx`'s trace context and baggage written into `meta` (replacing what the keys held).
pub(crate) fn inject(cx: &Context, meta: &mut Map<String, Value>) {
    propagator().inject_context(cx, &mut Write(meta));
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt;

    #[test]
    fn a_parent_read_is_written_back_with_its_state_and_baggage() {
        let mut m = Map::new();
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        m.insert("traceparent".into(), Value::String(tp.into()));
        m.insert("tracestate".into(), Value::String("rojo=00f067aa0ba902b7".into()));
        m.insert("baggage".into(), Value::String("userId=alice".into()));
        let cx = extract(Some(&m), &Context::new());
        let sc = cx.span().span_context().clone();
        assert!(sc.is_remote());
        assert_eq!(format!("{:032x}", sc.trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
        let mut out = Map::new();
        inject(&cx, &mut out);
        assert_eq!(out["traceparent"], tp);
        assert_eq!(out["tracestate"], "rojo=00f067aa0ba902b7");
        assert_eq!(out["baggage"], "userId=alice");
    }

    #[test]
    fn no_or_bad_context_leaves_the_base() {
        let cx = extract(None, &Context::new());
        assert!(!cx.span().span_context().is_valid());
        let mut m = Map::new();
        m.insert("traceparent".into(), Value::String("garbage".into()));
        m.insert("progressToken".into(), Value::from(1));
        let cx = extract(Some(&m), &Context::new());
        assert!(!cx.span().span_context().is_valid());
    }
}
