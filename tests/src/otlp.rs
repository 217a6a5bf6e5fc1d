//! A loopback OTLP/HTTP receiver for the telemetry tests: `POST /v1/traces` and
//! `/v1/metrics` with protobuf bodies, decoded with the official messages
//! (`opentelemetry-proto`), kept for the test to look at. It stops when dropped, so a test can
//! also play a collector that went away.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use prost::Message;
use tokio::sync::watch;

/// One span as received, its ids in hex.
#[derive(Debug, Clone)]
pub struct Span {
    /// Its name.
    pub name: String,
    /// `SPAN_KIND_SERVER`, ... (the enum's name).
    pub kind: String,
    /// Its trace.
    pub trace_id: String,
    /// Its id.
    pub span_id: String,
    /// Its parent's id (empty: a root).
    pub parent: String,
    /// Its attributes, each value as text.
    pub attributes: BTreeMap<String, String>,
    /// `STATUS_CODE_ERROR`, ... (the enum's name).
    pub status: String,
    /// The resource's `service.name`.
    pub service: String,
}

/// What was received.
#[derive(Debug, Default)]
struct Got {
    spans: Vec<Span>,
    /// Each metric's name with each data point's attributes.
    metrics: Vec<(String, BTreeMap<String, String>)>,
    requests: u64,
}

/// The receiver (stopped when dropped).
#[derive(Debug)]
pub struct Receiver {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    got: Arc<Mutex<Got>>,
    changed: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn text(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(
    kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue],
) -> BTreeMap<String, String> {
    kvs.iter().map(|kv| (kv.key.clone(), text(kv.value.as_ref()))).collect()
}

fn traces(got: &mut Got, body: &[u8]) -> Result<Vec<u8>, prost::DecodeError> {
    use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, status::StatusCode};
    let req = ExportTraceServiceRequest::decode(body)?;
    for rs in req.resource_spans {
        let resource = rs.resource.map(|r| attributes(&r.attributes)).unwrap_or_default();
        let service = resource.get("service.name").cloned().unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                let kind = SpanKind::try_from(s.kind)
                    .map_or_else(|_| s.kind.to_string(), |k| k.as_str_name().to_owned());
                let status = s.status.as_ref().map_or(0, |s| s.code);
                let status = StatusCode::try_from(status)
                    .map_or_else(|_| status.to_string(), |c| c.as_str_name().to_owned());
                got.spans.push(Span {
                    name: s.name.clone(),
                    kind,
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent: hex(&s.parent_span_id),
                    attributes: attributes(&s.attributes),
                    status,
                    service: service.clone(),
                });
            }
        }
    }
    Ok(opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse::default()
        .encode_to_vec())
}

fn metrics(got: &mut Got, body: &[u8]) -> Result<Vec<u8>, prost::DecodeError> {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    let req = ExportMetricsServiceRequest::decode(body)?;
    for rm in req.resource_metrics {
        for sm in rm.scope_metrics {
            for m in sm.metrics {
                let points: Vec<BTreeMap<String, String>> = match &m.data {
                    Some(Data::Histogram(h)) => h
                        .data_points
                        .iter()
                        .map(|p| {
                            let mut a = attributes(&p.attributes);
                            a.insert("_bounds".into(), format!("{:?}", p.explicit_bounds));
                            a.insert("_count".into(), p.count.to_string());
                            a
                        })
                        .collect(),
                    Some(Data::Gauge(g)) => {
                        g.data_points.iter().map(|p| attributes(&p.attributes)).collect()
                    }
                    Some(Data::Sum(s)) => {
                        s.data_points.iter().map(|p| attributes(&p.attributes)).collect()
                    }
                    _ => Vec::new(),
                };
                got.metrics.extend(points.into_iter().map(|p| (m.name.clone(), p)));
            }
        }
    }
    Ok(opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse::default()
        .encode_to_vec())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Receiver {
    /// Listen on a free loopback port.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        Self::on(listener)
    }

    /// Listen on `listener` (a port a stopped receiver had, to come back on it).
    pub fn on(listener: tokio::net::TcpListener) -> anyhow::Result<Self> {
        use hyper_util::rt::{TokioExecutor, TokioIo};
        use hyper_util::server::conn::auto::Builder;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let got: Arc<Mutex<Got>> = Arc::default();
        let (tx, changed) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let shared = got.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (got, tx) = (shared.clone(), tx.clone());
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let (got, tx) = (got.clone(), tx.clone());
                        async move {
                            let path = req.uri().path().to_owned();
                            let body = req
                                .into_body()
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let mut g =
                                got.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                            let answer = match path.as_str() {
                                "/v1/traces" => traces(&mut g, &body),
                                "/v1/metrics" => metrics(&mut g, &body),
                                _ => Ok(Vec::new()),
                            };
                            g.requests += 1;
                            let n = g.requests;
                            drop(g);
                            tx.send_replace(n);
                            let (status, body) = match answer {
                                Ok(b) => (200, b),
                                Err(e) => (400, e.to_string().into_bytes()),
                            };
                            let res = hyper::Response::builder()
                                .status(status)
                                .header("content-type", "application/x-protobuf")
                                .body(Full::new(Bytes::from(body)))
                                .unwrap_or_default();
                            Ok::<_, Infallible>(res)
                        }
                    },
                );
                tokio::spawn(async move {
                    let _ = Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self { endpoint, got, changed, task })
    }

    /// The spans received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.got.lock().unwrap_or_else(std::sync::PoisonError::into_inner).spans.clone()
    }

    /// The metrics' data points received so far (name, attributes; a histogram's also has
    /// `_bounds` and `_count`).
    pub fn metrics(&self) -> Vec<(String, BTreeMap<String, String>)> {
        self.got.lock().unwrap_or_else(std::sync::PoisonError::into_inner).metrics.clone()
    }

    /// Wait (up to `within`) until `done` holds of what was received; whether it did.
    pub async fn until(&self, within: std::time::Duration, done: impl Fn(&Self) -> bool) -> bool {
        let mut changed = self.changed.clone();
        tokio::time::timeout(within, async {
            loop {
                if done(self) {
                    return;
                }
                if changed.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        })
        .await
        .is_ok()
    }
}
