//! How a failed command is told: the daemon's errors as they print, and `--json`'s error object.

use geminid_protocol::error::code_name;

use crate::output::color;
use crate::output::shown;
use crate::output::{errln, outln};

/// The command printed its result, and that result is a failure (a server that did not
/// start, say): exit 1 without another message.
#[derive(Debug)]
pub struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the command's result is a failure")
    }
}

impl std::error::Error for Failed {}

/// An error the daemon returned for a call: its message is meant for people as it is.
#[derive(Debug)]
pub struct CallError {
    code: i32,
    message: String,
    /// The hooks that blocked the call or stopped the turn (the error's `data.hooks`).
    hooks: Vec<String>,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallError {}

/// Turn a client error into one that prints well: the daemon's own message for a call error,
/// otherwise the transport error with the method named.
pub fn call_error(
    method: &'static str,
) -> impl FnOnce(jsonrpsee::core::client::Error) -> anyhow::Error {
    move |e| match e {
        jsonrpsee::core::client::Error::Call(obj) => {
            let hooks = obj
                .data()
                .and_then(|d| serde_json::from_str::<serde_json::Value>(d.get()).ok())
                .and_then(|d| serde_json::from_value::<Vec<String>>(d["hooks"].clone()).ok())
                .unwrap_or_default();
            anyhow::Error::new(CallError {
                code: obj.code(),
                message: obj.message().to_owned(),
                hooks,
            })
        }
        other => anyhow::Error::new(other).context(method),
    }
}

/// Whether `e` says the session has no such server, or has not started it.
pub fn not_here(e: &anyhow::Error) -> bool {
    use geminid_protocol::error::ErrorCode;
    let code = e.chain().find_map(|c| c.downcast_ref::<CallError>().map(|c| c.code));
    [ErrorCode::ServerNotFound, ErrorCode::ServerUnavailable].iter().any(|c| code == Some(c.code()))
}

/// An error's JSON-RPC code and its name: the daemon's, or for what gemctl met itself,
/// `notRunning`, `cannotConnect` or `clientError` (no code: it never reached the daemon).
pub fn error_kind(e: &anyhow::Error) -> (Option<i32>, &'static str) {
    use geminid_protocol::client::ConnectError;
    use geminid_protocol::error::ErrorCode;
    for cause in e.chain() {
        if let Some(call) = cause.downcast_ref::<CallError>() {
            return (Some(call.code), code_name(call.code).unwrap_or("clientError"));
        }
        if let Some(connect) = cause.downcast_ref::<ConnectError>() {
            return match connect {
                ConnectError::NotRunning { .. } => (None, "notRunning"),
                ConnectError::VersionMismatch(_) => {
                    let code = ErrorCode::VersionMismatch;
                    (Some(code.code()), code.name())
                }
                ConnectError::Rpc(jsonrpsee::core::client::Error::Call(obj)) => {
                    (Some(obj.code()), code_name(obj.code()).unwrap_or("clientError"))
                }
                _ => (None, "cannotConnect"),
            };
        }
    }
    (None, "clientError")
}

/// Errors go to stderr; with `--json` also as `{"error": {...}}` on stdout.
pub fn report(e: &anyhow::Error, json: bool) {
    // The error may quote a server or a rule (a denyMessage): its colour codes are escaped,
    // gemctl's own too, as no part of the message is gemctl's colouring.
    let message = format!("{e:#}");
    errln!("{} {}", color::paint_err("gemctl:", color::Tone::Bad), shown::block(&message));
    // Which hook decided, and how to turn it off: the message is what the model reads.
    let hooks = e.chain().find_map(|c| c.downcast_ref::<CallError>()).map(|c| &c.hooks);
    for hook in hooks.into_iter().flatten() {
        let word = if hook.contains(char::is_whitespace) {
            format!("'{}'", hook.replace('\'', "'\\''"))
        } else {
            hook.clone()
        };
        errln!("note: decided by the hook '{hook}' (`gemctl hooks disable {word}` turns it off)");
    }
    if json {
        let (code, name) = error_kind(e);
        let body = serde_json::json!({ "error": { "message": format!("{e:#}"), "code": code, "name": name } });
        outln!("{body}");
    }
}
