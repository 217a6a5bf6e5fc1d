//! A call as the audit log keeps it (`crate::audit`): time, session, tool, server, policy's
//! decision and its rule, the confirmation, duration, ok or error. Argument values are never
//! kept: their names, and a hash of their stable form.

use std::time::Duration;

use geminid_protocol::policy::{AuditHooks, AuditRecord};
use sha2::{Digest, Sha256};

use super::seats::{Audit, Ended};
use super::{Call, Origin};
use crate::audit::AuditLog;
use crate::clock;

impl Audit for AuditLog {
    fn record(&self, call: &Call, ended: &Ended, took: Duration) {
        self.write(|seq| record_of(seq, call, ended, took));
    }
}

fn record_of(seq: u64, call: &Call, ended: &Ended, took: Duration) -> AuditRecord {
    let took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    let (arg_keys, args_hash) = match &call.args {
        Some(args) => {
            let mut keys: Vec<String> = args.keys().cloned().collect();
            keys.sort();
            let stable = crate::policy::stringify::stable_stringify_map(args);
            let digest = Sha256::digest(stable.as_bytes());
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let mut hex = String::with_capacity(32);
            for b in digest.iter().take(16) {
                hex.push(char::from(HEX[usize::from(b >> 4)]));
                hex.push(char::from(HEX[usize::from(b & 15)]));
            }
            (keys, Some(hex))
        }
        None => (Vec::new(), None),
    };
    let (ok, error) = match ended {
        Ended::Answered { is_error: false } => (true, None),
        Ended::Answered { is_error: true } => {
            (false, Some("the tool reported an error".to_owned()))
        }
        Ended::Failed(why) => (false, Some(why.clone())),
    };
    let note = call.policy.as_ref();
    AuditRecord {
        seq,
        time: clock::rfc3339(clock::now_ms().saturating_sub(took_ms)),
        session: call.session.clone(),
        tool: call.name.clone(),
        server: call.server.clone(),
        origin: match call.origin {
            Origin::ToolsCall => "tools/call",
            Origin::McpCallTool => "mcp/callTool",
            Origin::Gateway => "gateway",
        }
        .to_owned(),
        arg_keys,
        args_hash,
        decision: note.map(|n| n.decision),
        rule: note.and_then(|n| n.rule.clone()),
        confirmation: note.and_then(|n| n.confirmation),
        hooks: call.hooks_by_client.then_some(AuditHooks::ByClient),
        duration_ms: took_ms,
        ok,
        error,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(args: serde_json::Value) -> Call {
        Call {
            session: "s1".into(),
            origin: Origin::ToolsCall,
            call_id: None,
            name: "mcp_fx_echo".into(),
            server: "fx".into(),
            tool: "echo".into(),
            args: args.as_object().cloned(),
            annotations: None,
            confirmed: false,
            hooks_by_client: false,
            policy: None,
            tail_of: None,
        }
    }

    #[test]
    fn a_record_keeps_argument_names_and_a_hash_never_values() {
        let a = call(json!({"text": "hunter2", "a": 1}));
        let r = record_of(7, &a, &Ended::Answered { is_error: false }, Duration::from_millis(3));
        assert_eq!((r.seq, r.ok, r.duration_ms), (7, true, 3));
        assert_eq!(r.arg_keys, ["a", "text"]);
        let stable = crate::policy::stringify::stable_stringify_map(a.args.as_ref().unwrap());
        let digest = Sha256::digest(stable.as_bytes());
        let want: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        assert_eq!(r.args_hash.as_deref(), Some(want.as_str()));
        assert!(!serde_json::to_string(&r).unwrap().contains("hunter2"));
        let other = record_of(
            8,
            &call(json!({"text": "other", "a": 1})),
            &Ended::Failed("x".into()),
            Duration::ZERO,
        );
        assert_ne!(other.args_hash, r.args_hash, "different values, different hashes");
        assert_eq!((other.ok, other.error.as_deref()), (false, Some("x")));
    }
}
