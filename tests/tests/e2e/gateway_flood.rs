//! The gateway against a client that floods it (issue 67's open attack findings), handed over
//! and relayed: a client that sends and never reads its answers is held by back-pressure (the
//! daemon stops reading it; its memory stays flat; nothing is dropped), while another session
//! is served; a message over the limit is answered with an error that names it, and the
//! session goes on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use geminid_tests::{Daemon, TestHome};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

use super::gateway_handed_attack::{Kind, Served, session, started};

/// The daemon's resident memory now, in KiB (`/proc/PID/status`).
fn rss_kib(daemon: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.pid()));
    let status = status.unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or_default();
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
}

const MODES: [&[&str]; 2] = [&[], &["--relay"]];

/// Requests in the flood.
const FLOOD: u64 = 20_000;

/// A client writes 20,000 `tools/list` requests and reads none of the answers. Each answer
/// is a few KiB: without back-pressure the daemon read every request and kept every answer
/// (hundreds of MiB). Now it stops reading the client while its answers wait; another
/// session's client is answered meanwhile; and when the flooder reads, every answer comes,
/// once. Seen failing without the bound: the daemon grew by
/// hundreds of MiB.
#[tokio::test]
async fn a_client_that_never_reads_is_held_and_another_session_is_served() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let daemon = started(&home).await?;
    let other = session(&home, &daemon).await?;
    for mode in MODES {
        let mut good =
            Served::start(&home, Kind::Pipes, &[&["--session", &other], mode].concat()).await?;
        let mut flooder = Served::start(&home, Kind::Pipes, mode).await?;
        good.echo("before").await?;
        flooder.request("tools/list", json!({})).await?;
        let before = rss_kib(&daemon);
        let written = Arc::new(AtomicUsize::new(0));
        let first = flooder.next;
        let (mut to, count) = (flooder.to, written.clone());
        let writer = tokio::spawn(async move {
            for id in first..first + FLOOD {
                let line = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list" });
                to.write_all(format!("{line}\n").as_bytes()).await?;
                count.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(to)
        });
        // Until the writer is held (no request taken for a second) or done.
        let mut most = before;
        let mut last = (usize::MAX, Instant::now());
        let started = Instant::now();
        while !writer.is_finished() && last.1.elapsed() < Duration::from_secs(1) {
            let now = written.load(Ordering::Relaxed);
            if now != last.0 {
                last = (now, Instant::now());
            }
            most = most.max(rss_kib(&daemon));
            anyhow::ensure!(started.elapsed() < Duration::from_secs(60), "{mode:?}: no end");
            // Poll: the daemon's memory, sampled while the flood goes on.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        most = most.max(rss_kib(&daemon));
        let taken = written.load(Ordering::Relaxed);
        eprintln!(
            "{mode:?}: {taken} of {FLOOD} requests taken; the daemon's RSS {before} KiB before, \
             {most} KiB at most"
        );
        // Another session's client is answered at once meanwhile.
        let asked = Instant::now();
        good.echo("during the flood").await?;
        let took = asked.elapsed();
        assert!(took < Duration::from_secs(5), "{mode:?}: a call took {took:?} beside the flood");
        assert!(
            most < before + 48 * 1024,
            "{mode:?}: the daemon grew from {before} KiB to {most} KiB ({taken} requests taken)"
        );
        // The flooder reads: every answer comes, once each.
        let mut seen = std::collections::HashSet::new();
        let mut line = String::new();
        while seen.len() < FLOOD as usize {
            line.clear();
            let read =
                tokio::time::timeout(Duration::from_secs(30), flooder.from.read_line(&mut line));
            anyhow::ensure!(read.await?? > 0, "{mode:?}: stdout closed after {}", seen.len());
            let v: Value = serde_json::from_str(&line)?;
            let Some(id) = v["id"].as_u64() else { continue };
            anyhow::ensure!(v["result"]["tools"].is_array(), "{mode:?}: {line:.300}");
            anyhow::ensure!(seen.insert(id), "{mode:?}: {id} answered twice");
        }
        flooder.to = writer.await??;
        flooder.next = first + FLOOD;
        flooder.echo("after the flood").await?;
    }
    Ok(())
}

/// A request whose line is longer than the 16 MiB limit (100 MB here), handed over and
/// relayed: answered with an Invalid Request error that names the limit, with its id when its
/// start shows it (`null` when not), never buffered whole; the session goes on. Seen failing
/// without the gateway's own framing: no answer came (rmcp dropped the line with a log line).
#[tokio::test]
async fn a_message_over_the_limit_is_answered_and_the_session_goes_on() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let daemon = started(&home).await?;
    let pad = "x".repeat(100_000_000);
    for mode in MODES {
        let mut s = Served::start(&home, Kind::Pipes, mode).await?;
        s.echo("before").await?;
        let before = rss_kib(&daemon);
        // The id first, as clients write it; then one whose id comes after the padding.
        let id = s.next;
        s.next += 1;
        let head = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"fx__echo","arguments":{{"text":""#
        );
        let tail = format!(
            r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"fx__echo","arguments":{{"text":"{}"}}}},"id":{}}}"#,
            &pad[..20_000_000],
            id + 1
        );
        s.next += 1;
        let started = Instant::now();
        s.to.write_all(head.as_bytes()).await?;
        s.to.write_all(pad.as_bytes()).await?;
        s.to.write_all(b"\"}}}\n").await?;
        let answer = s.until(|v| v.get("error").is_some()).await?;
        eprintln!("{mode:?}: answered {:?} after the line began", started.elapsed());
        assert_eq!(answer["id"], id, "{mode:?}: {answer}");
        assert_eq!(answer["error"]["code"], -32600, "{mode:?}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("16777216 bytes"), "{mode:?}: {answer}");
        s.to.write_all(format!("{tail}\n").as_bytes()).await?;
        let answer = s.until(|v| v.get("error").is_some()).await?;
        assert_eq!(answer["id"], Value::Null, "{mode:?}: {answer}");
        assert_eq!(answer["error"]["data"]["limit"], 16_777_216, "{mode:?}: {answer}");
        s.echo("after").await?;
        let after = rss_kib(&daemon);
        assert!(after < before + 40 * 1024, "{mode:?}: {before} KiB before, {after} KiB after");
    }
    Ok(())
}
