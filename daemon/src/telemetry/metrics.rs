//! The daemon's instruments, to the MCP semantic conventions: the operation and session
//! duration histograms (seconds, the conventions' buckets) and the daemon's gauges (servers by
//! state, idle servers' memory against its budget, definitions held, pending asks), read from
//! the daemon by the function its composition registers ([`gauges_from`]) each time a reader
//! collects (the OTLP exporter's interval, a Prometheus scrape).

use std::sync::OnceLock;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter};

/// The conventions' buckets for the operation and session durations, in seconds.
pub(crate) const BUCKETS: [f64; 14] =
    [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

/// What the daemon holds at one moment, for the gauges.
#[derive(Debug, Default, Clone)]
pub(crate) struct DaemonGauges {
    /// Servers by state (its wire name, `connected`, `crash_loop`...), each state once.
    pub servers: Vec<(&'static str, u64)>,
    /// Resident memory of the idle servers, in bytes, as last measured.
    pub idle_memory: u64,
    /// The idle servers' memory budget (`--mcp-idle-memory`), unless unlimited.
    pub idle_memory_budget: Option<u64>,
    /// Definitions the running servers listed, by kind (`tool`, `prompt`, `resource`).
    pub definitions: [(&'static str, u64); 3],
    /// Questions waiting for a person's answer.
    pub pending_asks: u64,
}

type Source = Box<dyn Fn() -> DaemonGauges + Send + Sync>;

static SOURCE: OnceLock<Source> = OnceLock::new();

/// Where the gauges read the daemon (set once, by the composition, when it is built).
pub(crate) fn gauges_from(source: impl Fn() -> DaemonGauges + Send + Sync + 'static) {
    let _ = SOURCE.set(Box::new(source));
}

fn read() -> Option<DaemonGauges> {
    SOURCE.get().map(|f| f())
}

/// The instruments geminid records into.
#[derive(Debug)]
pub(crate) struct Instruments {
    /// `mcp.server.operation.duration`.
    pub server_operation: Histogram<f64>,
    /// `mcp.client.operation.duration`.
    pub client_operation: Histogram<f64>,
    /// `mcp.server.session.duration`.
    pub server_session: Histogram<f64>,
    /// `mcp.client.session.duration`.
    pub client_session: Histogram<f64>,
}

/// The instruments on `meter`, and the gauges observed on it.
pub(crate) fn instruments(meter: &Meter) -> Instruments {
    let histogram = |name: &'static str, what: &'static str| {
        meter
            .f64_histogram(name)
            .with_unit("s")
            .with_description(what)
            .with_boundaries(BUCKETS.to_vec())
            .build()
    };
    gauges(meter);
    Instruments {
        server_operation: histogram(
            "mcp.server.operation.duration",
            "MCP request or notification duration as observed on the receiver from the time it was received until the result or ack is sent.",
        ),
        client_operation: histogram(
            "mcp.client.operation.duration",
            "The duration of the MCP request or notification as observed on the sender from the time it was sent until the response or ack is received.",
        ),
        server_session: histogram(
            "mcp.server.session.duration",
            "The duration of the MCP session as observed on the MCP server.",
        ),
        client_session: histogram(
            "mcp.client.session.duration",
            "The duration of the MCP session as observed on the MCP client.",
        ),
    }
}

/// The daemon's gauges, observed from [`gauges_from`]'s source at each collection.
fn gauges(meter: &Meter) {
    meter
        .u64_observable_gauge("geminid.mcp.servers")
        .with_unit("{server}")
        .with_description("MCP servers the daemon runs, by state.")
        .with_callback(|o| {
            for (state, n) in read().map(|g| g.servers).unwrap_or_default() {
                o.observe(n, &[KeyValue::new("geminid.mcp.server.state", state)]);
            }
        })
        .build();
    meter
        .u64_observable_gauge("geminid.mcp.idle_memory")
        .with_unit("By")
        .with_description("Resident memory of idle MCP servers (no session uses them).")
        .with_callback(|o| {
            if let Some(g) = read() {
                o.observe(g.idle_memory, &[]);
            }
        })
        .build();
    meter
        .u64_observable_gauge("geminid.mcp.idle_memory.budget")
        .with_unit("By")
        .with_description(
            "The idle MCP servers' memory budget (--mcp-idle-memory); absent when unlimited.",
        )
        .with_callback(|o| {
            if let Some(budget) = read().and_then(|g| g.idle_memory_budget) {
                o.observe(budget, &[]);
            }
        })
        .build();
    meter
        .u64_observable_gauge("geminid.mcp.definitions")
        .with_unit("{definition}")
        .with_description("Tools, prompts and resources the running MCP servers listed.")
        .with_callback(|o| {
            if let Some(g) = read() {
                for (kind, n) in g.definitions {
                    o.observe(n, &[KeyValue::new("geminid.definition.kind", kind)]);
                }
            }
        })
        .build();
    meter
        .u64_observable_gauge("geminid.asks.pending")
        .with_unit("{ask}")
        .with_description("Confirmations and other questions waiting for a person's answer.")
        .with_callback(|o| {
            if let Some(g) = read() {
                o.observe(g.pending_asks, &[]);
            }
        })
        .build();
}
