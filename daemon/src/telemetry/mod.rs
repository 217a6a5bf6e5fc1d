//! OpenTelemetry: spans and metrics to the MCP semantic conventions (semantic-conventions-genai,
//! `docs/gen-ai/mcp.md`, status Development), exported over OTLP/HTTP when the user turns it on
//! (`settings.rs`), off by default.
//!
//! Off, every function here is one load of a `OnceLock` that was never set: no span is built,
//! no attribute formatted, nothing allocated. On, a request served by the gateway is a SERVER
//! span (`gateway/`), its parent the trace context its `params._meta` carried (`meta.rs`); what
//! happens on its way is a child of it, started where it is decided: the BeforeTool and
//! AfterTool hooks (`services/hooks.rs`), the policy decision (`services/policy/`), a
//! confirmation wait (`calls/ask.rs`), a wait for a server's start (`calls/resolve.rs`), and
//! the CLIENT span of the request to the upstream server (`mcp/request.rs`), whose context goes
//! in that request's `_meta`. A child finds its parent as the current context, which the
//! gateway attaches to the call's future.
//!
//! Never in an attribute: a tool's arguments or result (unless `GEMINID_TELEMETRY_TOOL_IO=1`,
//! the conventions' opt-in `gen_ai.tool.call.arguments`/`.result`), environment values,
//! headers, tokens, hook output.

mod export;
mod meta;
mod metrics;
pub(crate) mod scrape;
pub(crate) mod settings;

use std::borrow::Cow;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;

pub(crate) use meta::extract;
pub(crate) use metrics::{DaemonGauges, gauges_from};
pub(crate) use settings::Settings;

/// What exports, once on: spans and metrics over OTLP, metrics at `/metrics`, or both.
#[derive(Debug)]
pub(crate) struct Telemetry {
    tracer: SdkTracer,
    providers: export::Providers,
    tool_io: bool,
    /// Spans are exported (OTLP is on), not only metrics.
    traces: bool,
    /// The reader `/metrics` and `mcp/listServers`' latencies collect through.
    reader: scrape::Shared,
    /// Whether `/metrics` is served (`--metrics-listen`).
    scrape: bool,
    instruments: metrics::Instruments,
}

static ON: OnceLock<Telemetry> = OnceLock::new();

/// Telemetry, if it is on.
#[inline]
pub(crate) fn on() -> Option<&'static Telemetry> {
    ON.get()
}

/// The settings as resolved at the daemon's start, whether on or not.
static RESOLVED: OnceLock<Settings> = OnceLock::new();

/// The settings as resolved at the daemon's start (`gemctl doctor`), and whether the last
/// export failed, when on.
pub(crate) fn resolved() -> Option<(&'static Settings, Option<bool>)> {
    RESOLVED.get().map(|s| (s, on().map(|t| t.providers.health.failing())))
}

/// Why enabled settings export nothing, if they do not (this build's OTLP is HTTP only).
pub(crate) fn unusable(s: &Settings) -> Option<String> {
    match (s.target, s.protocol) {
        (settings::Target::Gcp, _) => Some(
            "telemetry: the target 'gcp' (Google Cloud directly) is not exported by geminid: \
             use 'local' with a collector at otlpEndpoint"
                .to_owned(),
        ),
        (_, settings::Protocol::Grpc) => Some(format!(
            "telemetry: geminid exports OTLP over HTTP only, and the OTLP protocol is grpc \
             (Gemini CLI's default) for {}: set telemetry.otlpProtocol to \"http\" (a collector's \
             OTLP/HTTP port is usually 4318)",
            s.endpoint
        )),
        _ => None,
    }
}

/// Keep `settings` and start what they and `scrape` (`--metrics-listen`) turn on, exporting
/// on `runtime`; each problem is logged. The reader `/metrics` is to be served from, when it
/// is on.
pub(crate) fn init(
    settings: Settings,
    runtime: tokio::runtime::Handle,
    tool_io: bool,
    scrape: bool,
) -> Option<scrape::Shared> {
    for p in &settings.problems {
        tracing::warn!("{p}");
    }
    let _ = RESOLVED.set(settings.clone());
    let otlp = settings.enabled
        && match unusable(&settings) {
            Some(why) => {
                tracing::warn!("{why}");
                false
            }
            None => true,
        };
    if !otlp && !scrape {
        return None;
    }
    let (traces, metrics) = (settings.traces_url.clone(), settings.metrics_url.clone());
    let otlp = otlp.then_some(settings);
    match start(otlp.as_ref(), runtime, tool_io, scrape) {
        Ok(()) if otlp.is_some() => {
            tracing::info!(%traces, %metrics, tool_io, "OpenTelemetry export on");
        }
        Ok(()) => {}
        Err(e) => tracing::warn!(error = %e, "OpenTelemetry export could not start"),
    }
    on().filter(|t| t.scrape).map(|t| t.reader.clone())
}

/// Each server's median and 99th-percentile call duration in seconds since the daemon
/// started, from `mcp.client.operation.duration` by `mcp.server.name`; empty when telemetry
/// is off. Collecting runs the gauges' callbacks: never call it holding a lock they take.
pub(crate) fn latencies() -> std::collections::HashMap<String, (f64, f64)> {
    let Some(t) = on() else { return std::collections::HashMap::new() };
    t.reader
        .collect()
        .map(|rm| metrics::quantiles(&rm, "mcp.client.operation.duration", "mcp.server.name"))
        .unwrap_or_default()
}

/// Turn it on: OTLP for `otlp` (settings known to be enabled and OTLP/HTTP), exporting on
/// `runtime`, and a reader for `/metrics` if `scrape`. A second call changes nothing.
fn start(
    otlp: Option<&Settings>,
    runtime: tokio::runtime::Handle,
    tool_io: bool,
    scrape: bool,
) -> anyhow::Result<()> {
    let interval = std::env::var("OTEL_METRIC_EXPORT_INTERVAL")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(10), Duration::from_millis);
    let reader = scrape::Shared::default();
    let providers = export::providers(otlp, runtime, interval, reader.clone())?;
    let tracer = providers.tracer.tracer("geminid");
    let instruments = metrics::instruments(&providers.meter.meter("geminid"));
    let traces = otlp.is_some();
    let t = Telemetry { tracer, providers, tool_io, traces, reader, scrape, instruments };
    let _ = ON.set(t);
    Ok(())
}

/// Write `cx`'s trace context into a request's `_meta`, when spans are exported.
pub(crate) fn inject(cx: &Context, meta: &mut serde_json::Map<String, serde_json::Value>) {
    if on().is_some_and(|t| t.traces) {
        meta::inject(cx, meta);
    }
}

/// Send what is queued and stop exporting (at the daemon's end), off the event loop: the
/// exporter's threads send on the runtime.
pub(crate) async fn stop() {
    let Some(t) = on() else { return };
    let (tracer, meter) = (t.providers.tracer.clone(), t.providers.meter.clone());
    let _ = tokio::task::spawn_blocking(move || {
        let _ = tracer.shutdown_with_timeout(Duration::from_secs(3));
        let _ = meter.shutdown_with_timeout(Duration::from_secs(3));
    })
    .await;
}

impl Telemetry {
    /// Whether tools' arguments and results go in spans (opted in).
    pub(crate) fn tool_io(&self) -> bool {
        self.tool_io
    }

    /// A span of `kind` named `name`, child of `parent`, with `attrs`.
    pub(crate) fn span(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        parent: &Context,
        attrs: Vec<KeyValue>,
    ) -> Active {
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attrs)
            .start_with_context(&self.tracer, parent);
        Active { cx: parent.with_span(span), started: Instant::now() }
    }
}

/// A span begun and not yet ended; ended when dropped (a caller that went away ends it too).
#[derive(Debug)]
pub(crate) struct Active {
    cx: Context,
    started: Instant,
}

impl Active {
    /// The context whose current span this is (for children, and for `_meta`).
    pub(crate) fn context(&self) -> &Context {
        &self.cx
    }

    /// Since the span began.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Add an attribute.
    pub(crate) fn set(&self, kv: KeyValue) {
        self.cx.span().set_attribute(kv);
    }

    /// The operation failed: `error.type` and the status, with `message` as its description.
    pub(crate) fn failed(
        &self,
        error_type: impl Into<opentelemetry::Value>,
        message: impl Into<Cow<'static, str>>,
    ) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("error.type", error_type));
        span.set_status(Status::error(message));
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.cx.span().end();
    }
}

/// A child of the current context's span, if telemetry is on: `INTERNAL` unless said.
pub(crate) fn child(name: &'static str, attrs: impl FnOnce() -> Vec<KeyValue>) -> Option<Active> {
    let t = on()?;
    Some(t.span(name, SpanKind::Internal, &Context::current(), attrs()))
}

/// A span of its own (the root of a trace: a server's start, a token's refresh, which
/// outlive or precede whatever call asked for them), if spans are exported.
pub(crate) fn own(
    name: impl FnOnce() -> String,
    attrs: impl FnOnce() -> Vec<KeyValue>,
) -> Option<Active> {
    let t = on().filter(|t| t.traces)?;
    Some(t.span(name(), SpanKind::Internal, &Context::new(), attrs()))
}

/// `work` run under the current context, when telemetry is on (a task spawned for a call
/// keeps its span as parent); `work` as it is when off.
pub(crate) fn carried<F: Future>(work: F) -> impl Future<Output = F::Output> {
    use futures::future::Either;
    use opentelemetry::trace::FutureExt as _;
    match on() {
        Some(_) => Either::Left(work.with_context(Context::current())),
        None => Either::Right(work),
    }
}

/// An MCP operation (`mcp.method.name` with its target), as a span and a duration recorded in
/// one of the operation histograms when it ends.
#[derive(Debug)]
pub(crate) struct Operation {
    span: Active,
    client: bool,
    attrs: Vec<KeyValue>,
}

/// Which side of an operation geminid is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// It serves the request (a client's, through the gateway): a SERVER span.
    Server,
    /// It makes the request (to an upstream server): a CLIENT span.
    Client,
}

impl Operation {
    /// `tools/call {tool}` begun, child of `parent`, with `more` attributes besides the
    /// conventions' own for a tool call; `None` when telemetry is off.
    pub(crate) fn tool_call(
        side: Side,
        tool: &str,
        parent: impl FnOnce() -> Context,
        more: impl FnOnce() -> Vec<KeyValue>,
    ) -> Option<Operation> {
        let own = || {
            vec![
                KeyValue::new("gen_ai.tool.name", tool.to_owned()),
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
            ]
        };
        Operation::begin(side, "tools/call", Some(tool), own, parent, more)
    }

    /// `method` (named `{method} {target}` when it has a low-cardinality target, a tool's or a
    /// prompt's name) begun, child of `parent`, with `own` attributes, which its histogram
    /// gets too, and `more`, which only a client's histogram gets (a served request's session
    /// and request ids would be one series each); `None` when telemetry is off.
    pub(crate) fn begin(
        side: Side,
        method: &'static str,
        target: Option<&str>,
        own: impl FnOnce() -> Vec<KeyValue>,
        parent: impl FnOnce() -> Context,
        more: impl FnOnce() -> Vec<KeyValue>,
    ) -> Option<Operation> {
        let t = on()?;
        let mut attrs = vec![KeyValue::new("mcp.method.name", method)];
        attrs.extend(own());
        let mut all = attrs.clone();
        all.extend(more());
        let kind = match side {
            Side::Server => SpanKind::Server,
            Side::Client => SpanKind::Client,
        };
        let attrs = if side == Side::Client { all.clone() } else { attrs };
        let name = match target {
            Some(target) => format!("{method} {target}"),
            None => method.to_owned(),
        };
        let span = t.span(name, kind, &parent(), all);
        Some(Operation { span, client: side == Side::Client, attrs })
    }

    /// The span's context (its children's parent; what `_meta` carries on).
    pub(crate) fn context(&self) -> &Context {
        self.span.context()
    }

    /// Add an attribute to the span.
    pub(crate) fn set(&self, kv: KeyValue) {
        self.span.set(kv);
    }

    /// The tool's arguments or result, as the conventions' opt-in attribute, if opted in.
    pub(crate) fn tool_io(&self, key: &'static str, value: impl FnOnce() -> String) {
        if on().is_some_and(Telemetry::tool_io) {
            self.span.set(KeyValue::new(key, value()));
        }
    }

    /// It ended, failing with `error` (`error.type`, the description) if it did; a JSON-RPC
    /// error's code is also `rpc.response.status_code`.
    pub(crate) fn end(mut self, error: Option<(String, String)>) {
        if let Some((kind, message)) = error {
            if kind.starts_with('-') || kind.parse::<i64>().is_ok() {
                let code = KeyValue::new("rpc.response.status_code", kind.clone());
                self.span.set(code.clone());
                self.attrs.push(code);
            }
            self.attrs.push(KeyValue::new("error.type", kind.clone()));
            self.span.failed(kind, message);
        }
        let seconds = self.span.elapsed().as_secs_f64();
        if let Some(t) = on() {
            let i = &t.instruments;
            let h = if self.client { &i.client_operation } else { &i.server_operation };
            h.record(seconds, &self.attrs);
        }
    }
}

/// `call` (a `tools/call` of `tool` served for `session` over the daemon's socket) as a SERVER
/// span, so that what the pipeline does under it has a parent; `failed` says how a result
/// failed (`error.type`, the description). The call as it is when telemetry is off.
pub(crate) async fn served<T, E>(
    tool: &str,
    session: &str,
    call: impl Future<Output = Result<T, E>>,
    failed: impl FnOnce(&Result<T, E>) -> Option<(String, String)>,
) -> Result<T, E> {
    use opentelemetry::trace::FutureExt as _;
    let Some(op) = Operation::tool_call(Side::Server, tool, Context::current, || {
        vec![
            KeyValue::new("mcp.session.id", session.to_owned()),
            KeyValue::new("network.transport", "pipe"),
        ]
    }) else {
        return call.await;
    };
    let done = call.with_context(op.context().clone()).await;
    op.end(failed(&done));
    done
}

/// An MCP session's life (a gateway client's, or a connection to an upstream server),
/// recorded in `mcp.server.session.duration` or `mcp.client.session.duration` when it ends
/// (dropped).
#[derive(Debug)]
pub(crate) struct Session {
    started: Instant,
    side: Side,
    attrs: Vec<KeyValue>,
}

impl Session {
    /// A session begun now with `attrs`; `None` when telemetry is off.
    pub(crate) fn begin(side: Side, attrs: impl FnOnce() -> Vec<KeyValue>) -> Option<Session> {
        on()?;
        Some(Session { started: Instant::now(), side, attrs: attrs() })
    }

    /// It ended with `error_type` (`error.type`).
    pub(crate) fn failed(&mut self, error_type: &'static str) {
        self.attrs.push(KeyValue::new("error.type", error_type));
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(t) = on() {
            let i = &t.instruments;
            let h = match self.side {
                Side::Server => &i.server_session,
                Side::Client => &i.client_session,
            };
            h.record(self.started.elapsed().as_secs_f64(), &self.attrs);
        }
    }
}
