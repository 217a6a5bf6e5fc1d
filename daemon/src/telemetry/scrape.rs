//! Prometheus `/metrics` on a loopback address (`--metrics-listen`, opt-in): the meter
//! provider's own aggregation, collected by a manual reader at each scrape (the same data the
//! OTLP exporter sends, so there is one source of truth for the numbers), written in
//! Prometheus' text exposition format (0.0.4) by OpenTelemetry's Prometheus compatibility
//! rules: `.` and any other character a name cannot hold become `_`, a unit `s` is the suffix
//! `_seconds` and `By` `_bytes`, a histogram is its `_bucket` (cumulative, `le`), `_sum` and
//! `_count`.
//!
//! The listener takes only loopback addresses (checked where the flag is read), answers
//! only `GET /metrics` from a client that named a loopback host (a web page that rebound a
//! name of its own to 127.0.0.1 is refused), 16 connections at once, a request's headers
//! within 10 s. What it shows is what the instruments record: methods, tool and server names,
//! states, counts, never arguments, URLs, headers or tokens.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, Temporality};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 16;
/// How long a request's headers may take.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection may stay open.
const CONNECTION_LIMIT: Duration = Duration::from_secs(30);

/// `addr` (`--metrics-listen`) if it is a loopback address and port.
pub(crate) fn loopback(addr: &str) -> Result<SocketAddr, String> {
    let parsed: SocketAddr =
        addr.parse().map_err(|_| format!("{addr} is not an address and port (127.0.0.1:9464)"))?;
    if !parsed.ip().is_loopback() {
        return Err(format!(
            "{parsed} is not a loopback address: /metrics listens on 127.0.0.1 or ::1 only"
        ));
    }
    Ok(parsed)
}

/// The manual reader a scrape collects through, shared with the meter provider.
#[derive(Debug, Clone, Default)]
pub(crate) struct Shared(Arc<ManualReader>);

impl MetricReader for Shared {
    fn register_pipeline(&self, pipeline: std::sync::Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

impl Shared {
    /// Everything recorded so far, collected now (the gauges' callbacks run), as Prometheus
    /// text.
    pub(crate) fn text(&self) -> String {
        let mut rm = ResourceMetrics::default();
        match self.0.collect(&mut rm) {
            Ok(()) => encode(&rm),
            Err(_) => String::new(),
        }
    }

    /// Everything recorded so far, collected now.
    pub(crate) fn collect(&self) -> Option<ResourceMetrics> {
        let mut rm = ResourceMetrics::default();
        self.0.collect(&mut rm).ok().map(|()| rm)
    }
}

/// A metric's or label's name as Prometheus takes it.
fn sanitized(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// The name with its unit's suffix.
fn family(name: &str, unit: &str) -> String {
    let base = sanitized(name);
    match unit {
        "s" => format!("{base}_seconds"),
        "By" => format!("{base}_bytes"),
        _ => base,
    }
}

/// A label value, escaped.
fn escaped(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `{a="x",b="y"}` of `attrs` with `extra` last (`le`), or nothing.
fn labels<'a>(attrs: impl Iterator<Item = &'a KeyValue>, extra: Option<(&str, &str)>) -> String {
    let mut parts: Vec<String> = attrs
        .map(|kv| {
            let value = match &kv.value {
                Value::String(s) => s.as_str().to_owned(),
                other => other.to_string(),
            };
            format!("{}=\"{}\"", sanitized(kv.key.as_str()), escaped(&value))
        })
        .collect();
    parts.sort();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() { String::new() } else { format!("{{{}}}", parts.join(",")) }
}

/// A sample's value as Prometheus writes it.
fn number(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf".to_owned() } else { "-Inf".to_owned() }
    } else {
        format!("{v}")
    }
}

/// One metric's samples, given its values as `f64`.
fn write_data<T: Copy>(out: &mut String, name: &str, data: &MetricData<T>, f: impl Fn(T) -> f64) {
    match data {
        MetricData::Gauge(g) => {
            let _ = writeln!(out, "# TYPE {name} gauge");
            for p in g.data_points() {
                let _ = writeln!(
                    out,
                    "{name}{} {}",
                    labels(p.attributes(), None),
                    number(f(p.value()))
                );
            }
        }
        MetricData::Sum(s) => {
            let kind = if s.is_monotonic() { "counter" } else { "gauge" };
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for p in s.data_points() {
                let _ = writeln!(
                    out,
                    "{name}{} {}",
                    labels(p.attributes(), None),
                    number(f(p.value()))
                );
            }
        }
        MetricData::Histogram(h) => {
            let _ = writeln!(out, "# TYPE {name} histogram");
            for p in h.data_points() {
                let mut cumulative = 0u64;
                let bounds: Vec<f64> = p.bounds().collect();
                for (i, count) in p.bucket_counts().enumerate() {
                    cumulative += count;
                    let le = bounds.get(i).map_or_else(|| "+Inf".to_owned(), |b| number(*b));
                    let l = labels(p.attributes(), Some(("le", &le)));
                    let _ = writeln!(out, "{name}_bucket{l} {cumulative}");
                }
                let l = labels(p.attributes(), None);
                let _ = writeln!(out, "{name}_sum{l} {}", number(f(p.sum())));
                let _ = writeln!(out, "{name}_count{l} {}", p.count());
            }
        }
        // Not recorded by geminid.
        MetricData::ExponentialHistogram(_) => {}
    }
}

/// `rm` in the text exposition format.
pub(crate) fn encode(rm: &ResourceMetrics) -> String {
    let mut out = String::new();
    for scope in rm.scope_metrics() {
        for metric in scope.metrics() {
            let name = family(metric.name(), metric.unit());
            let help = metric.description().replace('\\', "\\\\").replace('\n', "\\n");
            let _ = writeln!(out, "# HELP {name} {help}");
            match metric.data() {
                AggregatedMetrics::F64(d) => write_data(&mut out, &name, d, |v| v),
                #[expect(clippy::cast_precision_loss, reason = "a sample is a float")]
                AggregatedMetrics::U64(d) => write_data(&mut out, &name, d, |v| v as f64),
                #[expect(clippy::cast_precision_loss, reason = "a sample is a float")]
                AggregatedMetrics::I64(d) => write_data(&mut out, &name, d, |v| v as f64),
            }
        }
    }
    out
}

/// Whether the request's `Host` names the loopback interface (or there is none: HTTP/1.0).
fn loopback_host(req: &Request<Incoming>) -> bool {
    let Some(host) = req.headers().get(hyper::header::HOST) else { return true };
    let Ok(host) = host.to_str() else { return false };
    let name = match host.rsplit_once(':') {
        Some((n, port)) if port.bytes().all(|b| b.is_ascii_digit()) => n,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn plain(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from(body)));
    *res.status_mut() = status;
    res.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    res
}

async fn answer(reader: Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if !loopback_host(&req) {
        return plain(StatusCode::FORBIDDEN, "not a loopback host\n".to_owned());
    }
    if req.uri().path() != "/metrics" {
        return plain(StatusCode::NOT_FOUND, "only /metrics is here\n".to_owned());
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n".to_owned());
    }
    let text = tokio::task::spawn_blocking(move || reader.text()).await.unwrap_or_default();
    plain(StatusCode::OK, text)
}

/// Serve `/metrics` from `reader` on `listener` until `stop`.
pub(crate) async fn serve(listener: TcpListener, reader: Shared, stop: CancellationToken) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stop.cancelled() => return,
        };
        let Ok((tcp, _)) = accepted else {
            // Out of descriptors, most likely: try again in a moment.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let reader = reader.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let handler = hyper::service::service_fn(move |req| {
                let reader = reader.clone();
                async move { Ok::<_, Infallible>(answer(reader, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(tcp), handler);
            tokio::select! {
                _ = conn => {}
                () = tokio::time::sleep(CONNECTION_LIMIT) => {}
                () = stop.cancelled() => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_are_written_as_prometheus_reads_them() {
        assert_eq!(
            family("mcp.client.operation.duration", "s"),
            "mcp_client_operation_duration_seconds"
        );
        assert_eq!(family("geminid.mcp.idle_memory", "By"), "geminid_mcp_idle_memory_bytes");
        assert_eq!(family("9x-y", "{server}"), "_9x_y");
        assert_eq!(escaped("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let kv = [KeyValue::new("gen_ai.tool.name", "x\"} evil 1\n")];
        assert_eq!(
            labels(kv.iter(), Some(("le", "+Inf"))),
            "{gen_ai_tool_name=\"x\\\"} evil 1\\n\",le=\"+Inf\"}"
        );
    }

    #[test]
    fn only_loopback_addresses_are_taken() {
        assert!(loopback("127.0.0.1:9464").is_ok());
        assert!(loopback("[::1]:9464").is_ok());
        assert!(loopback("0.0.0.0:9464").unwrap_err().contains("not a loopback"));
        assert!(loopback("192.168.1.2:9464").is_err());
        assert!(loopback("localhost:9464").is_err());
    }
}
