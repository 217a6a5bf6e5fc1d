//! Following a server's list (`tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list`, `skills/list`) from page to page, within caps on the whole
//! listing: a server that hands out a new cursor with every page would otherwise be listed
//! until the timeout, its pages held in memory all the while (an attacker's server took the
//! daemon to 2 GB in 4 s). Gemini CLI reads one page; geminid reads them all, up to these.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

use rmcp::RoleClient;
use rmcp::model::{ClientRequest, CustomRequest, ServerResult};
use rmcp::service::{Peer, ServiceError};
use serde_json::Value;

/// Most items one listing keeps (tools, or prompts, ...).
pub(crate) const MOST_ITEMS: usize = 10_000;
/// Most bytes of JSON one listing's items and cursors come to.
pub(crate) const MOST_BYTES: usize = 64 << 20;
/// Most pages one listing reads (a server could send empty pages).
pub(crate) const MOST_PAGES: usize = 10_000;

/// One page: its items as JSON, the cursor of the next, its `ttlMs`.
pub(crate) struct Page {
    pub items: Vec<Value>,
    pub next: Option<String>,
    pub ttl_ms: Option<u64>,
}

/// Why a listing ended without its items.
#[derive(Debug)]
pub(crate) enum Stop {
    /// A request failed.
    Failed(ServiceError),
    /// It went past a cap: the words say which.
    Over(String),
}

impl From<ServiceError> for Stop {
    fn from(e: ServiceError) -> Self {
        Self::Failed(e)
    }
}

/// Every item of every page `page` fetches (given the cursor, `None` first), and the shortest
/// `ttlMs` of its pages. A cursor seen before ends the listing with what it has (the server
/// would list the same pages again); past [`MOST_ITEMS`], [`MOST_BYTES`] or [`MOST_PAGES`] it
/// fails with [`Stop::Over`], and what it had gathered is dropped.
pub(crate) async fn all_pages<F, Fut>(
    what: &str,
    mut page: F,
) -> Result<(Vec<Value>, Option<u64>), Stop>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<Page, Stop>>,
{
    let (mut items, mut bytes, mut pages) = (Vec::new(), 0usize, 0usize);
    let mut ttl: Option<u64> = None;
    let hasher = RandomState::new();
    let mut seen = HashSet::new();
    let mut cursor = None;
    loop {
        let p = page(cursor.take()).await?;
        pages += 1;
        bytes += p.items.iter().map(json_len).sum::<usize>();
        bytes += p.next.as_ref().map_or(0, String::len);
        items.extend(p.items);
        if let Some(t) = p.ttl_ms {
            ttl = Some(ttl.map_or(t, |old| old.min(t)));
        }
        let over = if items.len() > MOST_ITEMS {
            Some(format!("more than {} {what}", thousands(MOST_ITEMS)))
        } else if bytes > MOST_BYTES {
            Some(format!("more than {} MiB of {what}", MOST_BYTES >> 20))
        } else if p.next.is_some() && pages >= MOST_PAGES {
            Some(format!("more than {} pages of {what}", thousands(MOST_PAGES)))
        } else {
            None
        };
        if let Some(over) = over {
            return Err(Stop::Over(format!(
                "its {what} list went past geminid's cap on one listing ({over}, after {pages} \
                 pages); it is used without them"
            )));
        }
        match p.next {
            Some(c) if seen.insert(hasher.hash_one(&c)) => cursor = Some(c),
            Some(_) => {
                tracing::warn!("a {what} list repeated a cursor; the listing ends there");
                return Ok((items, ttl));
            }
            None => return Ok((items, ttl)),
        }
    }
}

/// One page of `method` (a list other than `tools/list`, whose answer is read leniently
/// elsewhere), its items under `key` as rmcp's types accept them: an answer they refuse is a
/// failed request, as it was through rmcp's own `list_all_*`. Sent as is, not through rmcp's
/// response cache, which would keep every page of a listing.
pub(crate) async fn page(
    peer: &Peer<RoleClient>,
    method: &str,
    key: &str,
    cursor: Option<String>,
) -> Result<Page, Stop> {
    let params = cursor.map(|c| serde_json::json!({ "cursor": c }));
    let request = ClientRequest::CustomRequest(CustomRequest::new(method.to_owned(), params));
    let answer = match peer.send_request(request).await? {
        ServerResult::CustomResult(_) => return Err(ServiceError::UnexpectedResponse.into()),
        typed => serde_json::to_value(typed).map_err(|_| ServiceError::UnexpectedResponse)?,
    };
    let Value::Object(mut answer) = answer else {
        return Err(ServiceError::UnexpectedResponse.into());
    };
    let Some(Value::Array(items)) = answer.remove(key) else {
        return Err(ServiceError::UnexpectedResponse.into());
    };
    let next = answer.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
    Ok(Page { items, next, ttl_ms: answer.get("ttlMs").and_then(Value::as_u64) })
}

/// The length of `v` as JSON.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    let _ = serde_json::to_writer(&mut n, v);
    n.0
}

/// 10000 as "10,000".
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endless(
        per_page: usize,
        size: usize,
    ) -> impl FnMut(Option<String>) -> std::future::Ready<Result<Page, Stop>> {
        move |cursor| {
            let n: usize = cursor.as_deref().map_or(0, |c| c.parse().unwrap());
            let items = (0..per_page)
                .map(|i| serde_json::json!({"name": format!("t{n}_{i}"), "pad": "x".repeat(size)}))
                .collect();
            std::future::ready(Ok(Page { items, next: Some((n + 1).to_string()), ttl_ms: None }))
        }
    }

    #[tokio::test]
    async fn an_endless_listing_stops_at_a_cap() {
        let Err(Stop::Over(why)) = all_pages("tools", endless(1000, 10)).await else { panic!() };
        assert!(why.contains("more than 10,000 tools, after 11 pages"), "{why}");
        let Err(Stop::Over(why)) = all_pages("prompts", endless(10, 1 << 20)).await else {
            panic!()
        };
        assert!(why.contains("more than 64 MiB of prompts"), "{why}");
        let Err(Stop::Over(why)) = all_pages("resources", endless(0, 0)).await else { panic!() };
        assert!(why.contains("more than 10,000 pages of resources"), "{why}");
    }

    #[tokio::test]
    async fn a_repeated_cursor_ends_the_listing() {
        let mut calls = 0;
        let page = |cursor: Option<String>| {
            calls += 1;
            let next = if cursor.is_none() { "a" } else { "b" };
            let items = vec![serde_json::json!({"name": calls})];
            std::future::ready(Ok(Page { items, next: Some(next.to_owned()), ttl_ms: Some(5) }))
        };
        let Ok((items, ttl)) = all_pages("tools", page).await else { panic!() };
        assert_eq!((items.len(), ttl), (3, Some(5)));
    }
}
