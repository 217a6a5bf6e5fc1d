//! The audit log: one bounded record in sled per call through the pipeline (time, session,
//! tool, server, policy's decision and its rule, the confirmation, duration, ok or error).
//! Argument values are never kept: their names, and a hash of their stable form.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use geminid_protocol::policy::{AuditListParams, AuditListResult, AuditRecord};
use sha2::{Digest, Sha256};

use crate::calls::seats::{Audit, Ended};
use crate::calls::{Call, Origin};
use crate::clock;
use crate::store::Store;

/// Records kept; the oldest go first.
pub const KEEP: u64 = 10_000;
/// `audit/list`'s default page.
pub const DEFAULT_LIMIT: u32 = 50;
/// `audit/list`'s largest page.
pub const MAX_LIMIT: u32 = 1_000;

/// The audit log over the daemon's store.
#[derive(Debug)]
pub struct AuditLog {
    store: Store,
    next: AtomicU64,
}

impl AuditLog {
    /// The log in `store`, numbering on from its last record.
    pub fn new(store: Store) -> Self {
        let next = store.last_audit_seq() + 1;
        Self { store, next: AtomicU64::new(next) }
    }

    /// `audit/list`: newest first.
    pub fn list(&self, p: &AuditListParams) -> AuditListResult {
        let limit = p.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut records = Vec::new();
        self.store.audit_newest_first(|r: AuditRecord| {
            if p.since.is_some_and(|s| r.seq <= s) {
                return false;
            }
            if p.session.as_ref().is_none_or(|s| *s == r.session) {
                records.push(r);
            }
            records.len() < limit
        });
        AuditListResult { records }
    }

    /// A record of something that is not a call, about `server`'s `tool` (tool-definition
    /// pins: a definition held, accepted or rejected): `origin` says what.
    pub fn note(&self, server: &str, tool: &str, origin: &str, error: Option<String>) {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let rec = AuditRecord {
            seq,
            time: clock::rfc3339(clock::now_ms()),
            session: String::new(),
            tool: tool.to_owned(),
            server: server.to_owned(),
            origin: origin.to_owned(),
            arg_keys: vec![],
            args_hash: None,
            decision: None,
            rule: None,
            confirmation: None,
            duration_ms: 0,
            ok: error.is_none(),
            error,
        };
        if let Err(e) = self.store.put_audit(seq, &rec, KEEP) {
            tracing::warn!(error = %e, tool, "the audit record was not written");
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
            duration_ms: took_ms,
            ok,
            error,
        }
    }
}

impl Audit for AuditLog {
    fn record(&self, call: &Call, ended: &Ended, took: Duration) {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let rec = Self::record_of(seq, call, ended, took);
        if let Err(e) = self.store.put_audit(seq, &rec, KEEP) {
            tracing::warn!(error = %e, tool = %call.name, "the call's audit record was not written");
        }
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
            policy: None,
            tail_of: None,
        }
    }

    #[test]
    fn a_record_keeps_argument_names_and_a_hash_never_values() {
        let a = call(json!({"text": "hunter2", "a": 1}));
        let r = AuditLog::record_of(
            7,
            &a,
            &Ended::Answered { is_error: false },
            Duration::from_millis(3),
        );
        assert_eq!((r.seq, r.ok, r.duration_ms), (7, true, 3));
        assert_eq!(r.arg_keys, ["a", "text"]);
        let stable = crate::policy::stringify::stable_stringify_map(a.args.as_ref().unwrap());
        let digest = Sha256::digest(stable.as_bytes());
        let want: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        assert_eq!(r.args_hash.as_deref(), Some(want.as_str()));
        assert!(!serde_json::to_string(&r).unwrap().contains("hunter2"));
        let other = AuditLog::record_of(
            8,
            &call(json!({"text": "other", "a": 1})),
            &Ended::Failed("x".into()),
            Duration::ZERO,
        );
        assert_ne!(other.args_hash, r.args_hash, "different values, different hashes");
        assert_eq!((other.ok, other.error.as_deref()), (false, Some("x")));
    }

    #[test]
    fn the_log_keeps_the_latest_records_and_numbers_on_from_the_last_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let log = AuditLog::new(store.clone());
        for _ in 0..5 {
            let seq = log.next.fetch_add(1, Ordering::Relaxed);
            let rec = AuditLog::record_of(
                seq,
                &call(json!({})),
                &Ended::Answered { is_error: true },
                Duration::ZERO,
            );
            store.put_audit(seq, &rec, 3).unwrap();
        }
        let all = log.list(&AuditListParams { limit: Some(100), ..Default::default() });
        let seqs: Vec<u64> = all.records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [5, 4, 3], "newest first, the oldest forgotten");
        let since = log.list(&AuditListParams { since: Some(3), ..Default::default() });
        assert_eq!(since.records.len(), 2);
        let other = log.list(&AuditListParams { session: Some("s2".into()), ..Default::default() });
        assert!(other.records.is_empty());
        // A new log over the store (as at the next start) numbers on from its last record.
        // Not by reopening the directory here: sled lets go of it in the background.
        drop(log);
        let log = AuditLog::new(store);
        assert_eq!(log.next.load(Ordering::Relaxed), 6);
    }
}
