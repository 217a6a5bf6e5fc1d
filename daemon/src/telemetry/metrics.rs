//! The daemon's instruments, to the MCP semantic conventions: the operation and session
//! duration histograms (seconds, the conventions' buckets) and the daemon's gauges (servers by
//! state, idle servers' memory against its budget, definitions held, pending asks), read from
//! the daemon by the function its composition registers ([`gauges_from`]) each time a reader
//! collects (the OTLP exporter's interval, a Prometheus scrape).

use std::collections::HashMap;
use std::sync::OnceLock;

use opentelemetry::metrics::{Histogram, Meter};
use opentelemetry::{Key, KeyValue};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};

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

/// The median and the 99th percentile, in seconds, of the histogram `metric` in `rm`, for each
/// value of the attribute `by` (its series summed over the other attributes): linear within
/// the bucket the rank falls in, as Prometheus' `histogram_quantile` estimates it (a rank in
/// the last, unbounded bucket is its lower bound, 300 s).
pub(crate) fn quantiles(
    rm: &ResourceMetrics,
    metric: &str,
    by: &str,
) -> HashMap<String, (f64, f64)> {
    let by = Key::from(by.to_owned());
    let mut sums: HashMap<String, (Vec<f64>, Vec<u64>)> = HashMap::new();
    let histograms = rm.scope_metrics().flat_map(|s| s.metrics()).filter(|m| m.name() == metric);
    for m in histograms {
        let AggregatedMetrics::F64(MetricData::Histogram(h)) = m.data() else { continue };
        for p in h.data_points() {
            let Some(name) = p.attributes().find(|kv| kv.key == by) else { continue };
            let (bounds, counts) = sums.entry(name.value.as_str().into_owned()).or_default();
            if bounds.is_empty() {
                *bounds = p.bounds().collect();
                *counts = vec![0; bounds.len() + 1];
            }
            for (c, n) in counts.iter_mut().zip(p.bucket_counts()) {
                *c += n;
            }
        }
    }
    sums.into_iter()
        .filter_map(|(name, (bounds, counts))| {
            Some((name, (quantile(0.5, &bounds, &counts)?, quantile(0.99, &bounds, &counts)?)))
        })
        .collect()
}

/// The `q` quantile of a histogram of `counts` in the buckets `bounds` makes; `None` if empty.
#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
fn quantile(q: f64, bounds: &[f64], counts: &[u64]) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 || bounds.is_empty() {
        return None;
    }
    let rank = q * total as f64;
    let mut below = 0u64;
    for (i, &n) in counts.iter().enumerate() {
        if (below + n) as f64 >= rank && n > 0 {
            let Some(&upper) = bounds.get(i) else { return bounds.last().copied() };
            let lower = if i == 0 { 0.0 } else { bounds[i - 1] };
            return Some(lower + (upper - lower) * (rank - below as f64) / n as f64);
        }
        below += n;
    }
    bounds.last().copied()
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_are_interpolated_within_their_bucket() {
        let bounds = [0.01, 0.1, 1.0];
        // 10 calls under 10 ms, 10 between 10 and 100 ms.
        let counts = [10, 10, 0, 0];
        assert!((quantile(0.5, &bounds, &counts).unwrap() - 0.01).abs() < 1e-9);
        assert!((quantile(0.25, &bounds, &counts).unwrap() - 0.005).abs() < 1e-9);
        let p99 = quantile(0.99, &bounds, &counts).unwrap();
        assert!((p99 - (0.01 + 0.09 * 9.8 / 10.0)).abs() < 1e-9, "{p99}");
        // Past the last bound: that bound.
        assert_eq!(quantile(0.99, &bounds, &[0, 0, 0, 5]), Some(1.0));
        assert_eq!(quantile(0.5, &bounds, &[0, 0, 0, 0]), None);
    }
}
