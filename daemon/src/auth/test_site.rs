//! A loopback HTTP server for the auth tests: answers each path from its routes (settable once
//! its address is known; 404 otherwise) and records every request it was sent.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A status, a content type and a body.
pub(super) type Answer = (u16, &'static str, String);

/// One request as it arrived: method, target (path and query), headers (lower-case names),
/// body.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub(super) method: String,
    pub(super) target: String,
    pub(super) headers: HashMap<String, String>,
    pub(super) body: String,
}

pub(super) struct Site {
    pub(super) base: String,
    routes: Arc<Mutex<HashMap<String, Answer>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn end_of_head(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

impl Site {
    pub(super) async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let routes: Arc<Mutex<HashMap<String, Answer>>> = Arc::default();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let (served, log) = (routes.clone(), seen.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else { return };
                let (routes, log) = (served.clone(), log.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let head_end = loop {
                        if let Some(end) = end_of_head(&buf) {
                            break end;
                        }
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(m) => buf.extend_from_slice(&chunk[..m]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                    let mut lines = head.lines();
                    let first = lines.next().unwrap_or_default().to_owned();
                    let headers: HashMap<String, String> = lines
                        .filter_map(|l| l.split_once(':'))
                        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                        .collect();
                    let len: usize =
                        headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
                    while buf.len() < head_end + len {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(m) => buf.extend_from_slice(&chunk[..m]),
                        }
                    }
                    let body = String::from_utf8_lossy(&buf[head_end..]).into_owned();
                    let mut parts = first.split_whitespace();
                    let method = parts.next().unwrap_or_default().to_owned();
                    let target = parts.next().unwrap_or("/").to_owned();
                    let path = target.split('?').next().unwrap_or_default().to_owned();
                    log.lock().push(Seen { method, target, headers, body });
                    let found = routes.lock().get(&path).cloned();
                    let (status, ctype, body) =
                        found.unwrap_or((404, "text/plain", "not found".into()));
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                });
            }
        });
        Self { base, routes, seen }
    }

    pub(super) fn route(&self, path: &str, answer: Answer) {
        self.routes.lock().insert(path.to_owned(), answer);
    }

    /// The requests for `path`, oldest first.
    pub(super) fn seen(&self, path: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .iter()
            .filter(|s| s.target.split('?').next() == Some(path))
            .cloned()
            .collect()
    }
}
