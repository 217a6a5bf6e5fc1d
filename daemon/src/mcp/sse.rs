//! The legacy HTTP+SSE transport of MCP 2024-11-05, client side, as an rmcp [`Transport`]:
//! GET the event stream, wait for the `endpoint` event, POST every message to that endpoint,
//! and read the server's messages from `message` events. rmcp no longer ships it; some
//! servers still speak only this.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{StatusCode, Url};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::SseStream;
use tokio::sync::mpsc;

/// Messages buffered between the event stream and the MCP client.
const INBOX: usize = 64;

/// What can go wrong with an SSE server.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SseError {
    /// The URL or a header cannot be used.
    #[error("{0}")]
    Invalid(String),
    /// The request failed (connection refused, DNS, TLS…).
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    /// The server answered with an error status.
    #[error("HTTP {status}{}", challenge.as_ref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Status {
        /// The status.
        status: u16,
        /// Its `WWW-Authenticate` header, for a 401.
        challenge: Option<String>,
    },
    /// The stream is not an MCP SSE stream.
    #[error("{0}")]
    Protocol(String),
}

impl SseError {
    /// Whether the server asked for credentials.
    pub(crate) fn is_unauthorized(&self) -> bool {
        matches!(self, Self::Status { status: 401, .. })
    }
}

/// A connected legacy SSE session.
#[derive(Debug)]
pub(crate) struct SseTransport {
    http: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    inbox: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: tokio::task::JoinHandle<()>,
}

/// Turn configured headers into a header map.
pub(crate) fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::try_from(k.as_str())
            .map_err(|_| format!("header name {k:?} is not a valid HTTP header name"))?;
        let value = HeaderValue::try_from(v.as_str())
            .map_err(|_| format!("the value of header {k:?} is not a valid HTTP header value"))?;
        map.insert(name, value);
    }
    Ok(map)
}

impl SseTransport {
    /// Open the event stream at `url` and wait for the `endpoint` event.
    pub(crate) async fn connect(
        http: reqwest::Client,
        url: &str,
        headers: HeaderMap,
    ) -> Result<Self, SseError> {
        let url =
            Url::parse(url).map_err(|e| SseError::Invalid(format!("bad URL {url:?}: {e}")))?;
        let response = http
            .get(url.clone())
            .headers(headers.clone())
            .header(ACCEPT, "text/event-stream")
            .send()
            .await?;
        let status = response.status();
        if !status.is_success() {
            let challenge = (status == StatusCode::UNAUTHORIZED)
                .then(|| response.headers().get(WWW_AUTHENTICATE))
                .flatten()
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            return Err(SseError::Status { status: status.as_u16(), challenge });
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if !content_type.starts_with("text/event-stream") {
            return Err(SseError::Protocol(format!(
                "expected an event stream (text/event-stream), got {:?}",
                content_type
            )));
        }
        let mut events = SseStream::from_bytes_stream(response.bytes_stream());
        let endpoint = loop {
            match events.next().await {
                Some(Ok(e)) if e.event.as_deref() == Some("endpoint") => {
                    let data = e.data.unwrap_or_default();
                    break url.join(data.trim()).map_err(|err| {
                        SseError::Protocol(format!("bad endpoint {data:?}: {err}"))
                    })?;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(SseError::Protocol(format!("event stream: {e}"))),
                None => {
                    return Err(SseError::Protocol(
                        "the event stream ended before the endpoint event".into(),
                    ));
                }
            }
        };
        if endpoint.origin() != url.origin() {
            return Err(SseError::Protocol(format!(
                "the endpoint {endpoint} is not on the server's origin"
            )));
        }
        let (tx, inbox) = mpsc::channel(INBOX);
        let reader = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let Ok(event) = event else { break };
                if !matches!(event.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let Some(data) = event.data else { continue };
                match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&data) {
                    Ok(msg) => {
                        if tx.send(msg).await.is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "ignoring an SSE message that is not JSON-RPC")
                    }
                }
            }
        });
        Ok(Self { http, endpoint, headers, inbox, reader })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn name() -> std::borrow::Cow<'static, str> {
        "sse".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = self.http.post(self.endpoint.clone()).headers(self.headers.clone());
        async move {
            let body = serde_json::to_vec(&item)
                .map_err(|e| SseError::Protocol(format!("cannot encode a message: {e}")))?;
            let response = request
                .header(CONTENT_TYPE, "application/json")
                .timeout(Duration::from_secs(60))
                .body(body)
                .send()
                .await?;
            let status = response.status();
            if status.is_success() {
                Ok(())
            } else {
                Err(SseError::Status { status: status.as_u16(), challenge: None })
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.inbox.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.inbox.close();
        Ok(())
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
