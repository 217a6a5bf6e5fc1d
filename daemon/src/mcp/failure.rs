//! How a failed connection or request is told: an error and its sources, joined, with rmcp's
//! wrappers followed into and named for what failed; and whether it was an HTTP 401.

use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::sse::SseError;

/// An error and its sources, joined; a transport error inside an initialize error is followed
/// into (rmcp does not expose it as a source). rmcp's wrappers, whose text names generic
/// transport types, are replaced by what failed.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    for err in chain(e) {
        let text =
            if let Some(rmcp::service::ClientInitializeError::TransportError { context, .. }) =
                err.downcast_ref::<rmcp::service::ClientInitializeError>()
            {
                format!("{context} failed")
            } else if let Some(rmcp::ServiceError::TransportSend(_)) =
                err.downcast_ref::<rmcp::ServiceError>()
            {
                "sending the request failed".to_owned()
            } else if let Some(StreamableHttpError::Client(_)) =
                err.downcast_ref::<StreamableHttpError<reqwest::Error>>()
            {
                continue;
            } else if let Some(why) = super::authed::explain(err) {
                why
            } else {
                err.to_string()
            };
        if err.downcast_ref::<rmcp::transport::DynamicTransportError>().is_some()
            || matches!(
                err.downcast_ref::<rmcp::service::ClientInitializeError>(),
                Some(rmcp::service::ClientInitializeError::LegacyFallbackFailed { .. })
            )
        {
            continue;
        }
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    crate::config::env::redact_urls(&parts.join(": ")).into_owned()
}

/// `e`, its sources, and the errors inside rmcp's transport wrappers.
pub(crate) fn chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Vec<&'a (dyn std::error::Error + 'static)> {
    let mut out = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        out.push(err);
        cur = match err.downcast_ref::<rmcp::service::ClientInitializeError>() {
            Some(rmcp::service::ClientInitializeError::TransportError { error, .. }) => {
                Some(error.error.as_ref())
            }
            // `server/discover` was answered as the earlier eras answer it, and the handshake
            // of those eras then failed: that failure is the one to tell.
            Some(rmcp::service::ClientInitializeError::LegacyFallbackFailed {
                fallback, ..
            }) => Some(fallback.as_ref()),
            _ => match err.downcast_ref::<rmcp::transport::DynamicTransportError>() {
                Some(d) => Some(d.error.as_ref()),
                None => match err.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                    Some(StreamableHttpError::Client(inner)) => Some(inner),
                    _ => err.source(),
                },
            },
        };
    }
    out
}

/// Whether a failure anywhere in the chain is an HTTP 401.
pub(crate) fn is_unauthorized(e: &(dyn std::error::Error + 'static)) -> bool {
    chain(e).into_iter().any(|err| {
        if let Some(h) = err.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            match h {
                StreamableHttpError::AuthRequired(_) => return true,
                StreamableHttpError::HttpStatus(s) if s.status == 401 => return true,
                // A 401 without a challenge (a refused Authorization header) reaches here as
                // the status line and the body.
                StreamableHttpError::UnexpectedServerResponse(m) if m.starts_with("HTTP 401") => {
                    return true;
                }
                _ => {}
            }
        }
        if err
            .downcast_ref::<rmcp::transport::streamable_http_client::HttpStatusError>()
            .is_some_and(|s| s.status == 401)
        {
            return true;
        }
        err.downcast_ref::<SseError>().is_some_and(SseError::is_unauthorized)
    })
}
