//! `gemctl audit`: the audit log, the latest calls first.

use geminid_protocol::api::AuditApiClient;
use geminid_protocol::client::Client;

use crate::error::call_error;
use crate::output;
use crate::output::errln;
use crate::policy::rules::decision;

/// `gemctl audit`: the latest calls, newest first.
pub async fn audit(
    client: &Client,
    session: Option<String>,
    limit: u32,
    since: Option<u64>,
    json: bool,
) -> anyhow::Result<()> {
    // A page holds at most 1,000: page on until `limit` or the oldest record.
    let mut r = geminid_protocol::policy::AuditListResult { records: vec![], more: true, keeps: 0 };
    while r.more && r.records.len() < limit as usize {
        let p = geminid_protocol::policy::AuditListParams {
            session: session.clone(),
            limit: Some(limit - r.records.len() as u32),
            since,
            before: r.records.last().map(|a| a.seq),
        };
        let page = client.audit_list(Some(p)).await.map_err(call_error("audit/list"))?;
        r.records.extend(page.records);
        (r.more, r.keeps) = (page.more, page.keeps);
    }
    // Asked for more than the log keeps: say why there are no older ones.
    if r.keeps > 0 && u64::from(limit) > r.keeps && r.records.len() < limit as usize {
        errln!("the audit log keeps the latest {} records; older ones are forgotten", r.keeps);
    }
    if json {
        return output::json(&r);
    }
    use geminid_protocol::policy::AuditConfirmation as C;
    let rows: Vec<Vec<String>> = r
        .records
        .iter()
        .map(|a| {
            let confirmation = match a.confirmation {
                None => String::new(),
                Some(C::Answered(o)) => {
                    let o = serde_json::to_value(o).unwrap_or_default();
                    format!("answered {}", o.as_str().unwrap_or("?"))
                }
                Some(C::Remembered) => "remembered".to_owned(),
                Some(C::ByCaller) => "by the caller".to_owned(),
                Some(C::ByClient) => "by the client".to_owned(),
                Some(C::TimedOut) => "timed out".to_owned(),
                Some(C::NoAnswerer) => "nobody to ask".to_owned(),
                Some(C::AnswererGone) => "asked client went".to_owned(),
            };
            // Absent: geminid ran the session's hooks (those that matched).
            let hooks = match a.hooks {
                Some(geminid_protocol::policy::AuditHooks::ByClient) => "by the client",
                None => "",
            };
            let result = match (&a.error, a.ok) {
                (_, true) => "ok".to_owned(),
                (Some(e), false) => format!("error: {}", e.lines().next().unwrap_or_default()),
                (None, false) => "error".to_owned(),
            };
            vec![
                a.seq.to_string(),
                crate::output::ago::age(&a.time),
                output::short_session(&a.session),
                output::audit_subject(a),
                a.decision.map(decision).unwrap_or("-").to_owned(),
                confirmation,
                hooks.to_owned(),
                format!("{} ms", a.duration_ms),
                result,
            ]
        })
        .collect();
    output::table_or(
        "No calls recorded.",
        &["SEQ", "AGE", "SESSION", "TOOL", "POLICY", "CONFIRMATION", "HOOKS", "TOOK", "RESULT"],
        &rows,
    );
    Ok(())
}
