//! OTLP/HTTP export: the SDK's providers with bounded batching, their requests sent by the
//! reqwest client the daemon already builds (opentelemetry-http's client trait implemented
//! here), on the daemon's runtime.
//!
//! The SDK's batch span processor and periodic metric reader each run on a thread of their own
//! and wait on the export there; a request is spawned on the daemon's runtime (reqwest needs
//! it) and its end awaited. Spans queue in a bounded queue (2048; past that they are dropped
//! and counted by the SDK, never held), one request of at most 512 at a time, each within the
//! request timeout: a collector that is down costs a call nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider,
};

use super::settings::Settings;

/// Spans held at most while the exporter is busy or failing.
pub(crate) const MAX_QUEUE: usize = 2048;
/// Spans per request.
const MAX_BATCH: usize = 512;
/// How long one request may take (`OTEL_EXPORTER_OTLP_TIMEOUT`'s default).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether the last export failed (said by `gemctl doctor`).
#[derive(Debug, Default)]
pub(crate) struct Health {
    failing: AtomicBool,
}

impl Health {
    /// Whether the last request to the collector failed.
    pub(crate) fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }
}

/// opentelemetry-http's client over the daemon's reqwest, on the daemon's runtime.
#[derive(Debug, Clone)]
struct Client {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
    health: Arc<Health>,
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let http = self.http.clone();
        let send = async move {
            let mut req = http.post(parts.uri.to_string()).body(body);
            for (k, v) in &parts.headers {
                req = req.header(k, v);
            }
            let res = req.send().await?;
            let status = res.status();
            let body = res.bytes().await?;
            Ok::<_, reqwest::Error>((status, body))
        };
        let result = self.runtime.spawn(send).await;
        let (status, body) = match result {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                self.health.failing.store(true, Ordering::Relaxed);
                return Err(Box::new(e));
            }
            Err(e) => {
                self.health.failing.store(true, Ordering::Relaxed);
                return Err(Box::new(e));
            }
        };
        self.health.failing.store(!status.is_success(), Ordering::Relaxed);
        let mut res = Response::new(body);
        *res.status_mut() = status;
        Ok(res)
    }
}

/// The providers the daemon's spans and metrics go through.
#[derive(Debug)]
pub(crate) struct Providers {
    pub tracer: SdkTracerProvider,
    pub meter: SdkMeterProvider,
    pub health: Arc<Health>,
}

/// Build the providers: exporting over OTLP/HTTP for `otlp` (their requests sent on
/// `runtime`), and metrics read by `scrape` too (`/metrics`). Without `otlp`, spans are not
/// sampled (a span still times its operation for the histograms).
pub(crate) fn providers(
    otlp: Option<&Settings>,
    runtime: tokio::runtime::Handle,
    metric_interval: Duration,
    reader: super::scrape::Shared,
) -> anyhow::Result<Providers> {
    let Some(settings) = otlp else {
        let tracer = SdkTracerProvider::builder().with_sampler(Sampler::AlwaysOff).build();
        let meter =
            SdkMeterProvider::builder().with_resource(resource("geminid")).with_reader(reader);
        return Ok(Providers { tracer, meter: meter.build(), health: Arc::default() });
    };
    let http = reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build()?;
    let health = Arc::new(Health::default());
    let client = Client { http, runtime, health: health.clone() };
    let resource = resource(&settings.service_name);
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client.clone())
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(settings.traces_url.clone())
        .with_timeout(REQUEST_TIMEOUT)
        .build()?;
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(MAX_QUEUE)
        .with_max_export_batch_size(MAX_BATCH)
        .with_scheduled_delay(Duration::from_secs(1))
        .build();
    let processor = BatchSpanProcessor::builder(spans).with_batch_config(batch).build();
    let tracer = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource.clone())
        .build();
    let metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(settings.metrics_url.clone())
        .with_timeout(REQUEST_TIMEOUT)
        .build()?;
    let periodic = PeriodicReader::builder(metrics).with_interval(metric_interval).build();
    let meter = SdkMeterProvider::builder()
        .with_reader(periodic)
        .with_reader(reader)
        .with_resource(resource)
        .build();
    Ok(Providers { tracer, meter, health })
}

fn resource(service_name: &str) -> Resource {
    Resource::builder().with_service_name(service_name.to_owned()).build()
}
