//! What a server behind the gateway is told its clients answer: a client that confirms calls
//! itself (`--confirm client`, what `gemctl mcp import` writes) and declares no elicitation or
//! sampling gets the tools the server lists to such a client, from a process of its kind that
//! every such client shares (issue 65, item 4: Gemini CLI got server-everything's three
//! `trigger-*` tools after import, and they failed when called).

use std::process::Stdio;

use geminid_tests::mcp::stdio;
use geminid_tests::{Daemon, TestHome};
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::RunningService;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// A client that declares what it is given, and answers nothing.
#[derive(Debug, Clone, Copy)]
struct Declaring {
    elicitation: bool,
    sampling: bool,
}

impl ClientHandler for Declaring {
    #[allow(
        deprecated,
        reason = "sampling is SEP-2577-deprecated; this client is of the earlier eras"
    )]
    fn get_info(&self) -> ClientConfig {
        let mut c = ClientConfig::default();
        if self.elicitation {
            c.capabilities.elicitation = Some(Default::default());
        }
        if self.sampling {
            c.capabilities.sampling = Some(Default::default());
        }
        c
    }
}

struct Client {
    service: RunningService<RoleClient, Declaring>,
    _child: Child,
}

/// `gemctl mcp serve` with `args` in the home's workspace, and a client declaring `declares`.
async fn serve(home: &TestHome, args: &[&str], declares: Declaring) -> anyhow::Result<Client> {
    let mut all = vec!["mcp", "serve"];
    all.extend_from_slice(args);
    let mut cmd: Command = home.gemctl_cmd(&all).into();
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        anyhow::bail!("no pipes");
    };
    let service = declares.serve((stdout, stdin)).await?;
    Ok(Client { service, _child: child })
}

impl Client {
    async fn tools(&self) -> anyhow::Result<Vec<String>> {
        let listed = self.service.list_all_tools().await?;
        let mut names: Vec<String> = listed.into_iter().map(|t| t.name.to_string()).collect();
        names.sort();
        Ok(names)
    }

    async fn pid(&self) -> anyhow::Result<String> {
        let r = self.service.call_tool(CallToolRequestParams::new("pid")).await?;
        let v = serde_json::to_value(&r)?;
        Ok(v["content"][0]["text"].as_str().unwrap_or_default().to_owned())
    }
}

const NOTHING: Declaring = Declaring { elicitation: false, sampling: false };
const EVERYTHING: Declaring = Declaring { elicitation: true, sampling: true };

fn names(list: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = list.iter().map(|s| (*s).to_owned()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn a_server_entry_lists_what_the_server_lists_for_the_client_that_uses_it()
-> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    std::fs::write(
        home.root().join("home/.gemini/settings.json"),
        serde_json::to_string(&json!({ "mcpServers": { "fx": stdio(&["--capable-tools"]) } }))?,
    )?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let base = ["echo", "pid", "crash", "sleep", "grow", "env"];
    let mut all: Vec<&str> = base.to_vec();
    all.extend(["elicit_only", "sample_only"]);
    let as_import = ["--server", "fx", "--confirm", "client"];
    // One that declares both, first (its list is what the tool pins record: every copy is
    // checked against the same pins), and a gateway geminid confirms for (its session is
    // shared with `gemctl attach`, which answers for it): the server is told everything.
    let d = serve(&home, &as_import, EVERYTHING).await?;
    assert_eq!(d.tools().await?, names(&all));
    let wide = d.pid().await?;
    let e = serve(&home, &["--server", "fx"], NOTHING).await?;
    assert_eq!(e.tools().await?, names(&all));
    assert_eq!(e.pid().await?, wide, "the directory's session runs the server told everything");
    // Two Gemini CLIs (which declare neither) behind import: the tools the server lists to
    // them, from one process of their own.
    let a = serve(&home, &as_import, NOTHING).await?;
    let b = serve(&home, &as_import, NOTHING).await?;
    assert_eq!(a.tools().await?, names(&base), "a client that declares neither");
    assert_eq!(b.tools().await?, names(&base));
    let narrow = a.pid().await?;
    assert!(!narrow.is_empty() && narrow != wide, "{narrow} {wide}");
    assert_eq!(b.pid().await?, narrow, "clients of one kind share one process");
    // One that elicits but does not sample: what the server lists to it.
    let elicits = Declaring { elicitation: true, sampling: false };
    let c = serve(&home, &as_import, elicits).await?;
    let mut with_elicit: Vec<&str> = base.to_vec();
    with_elicit.push("elicit_only");
    assert_eq!(c.tools().await?, names(&with_elicit));
    assert!(![narrow.clone(), wide.clone()].contains(&c.pid().await?));
    // The directory's own session (what `gemctl` commands and attach use) runs that one.
    let listed = home.gemctl_json(&["mcp", "list"])?;
    let pids: Vec<Value> = listed
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["name"] == "fx")
        .map(|s| s["pid"].clone())
        .collect();
    assert_eq!(pids, vec![json!(wide.parse::<u64>()?)], "{listed}");
    // Every copy, each saying what it is told.
    let all = home.gemctl_json(&["mcp", "list", "--all"])?;
    let mut told: Vec<(Value, Value)> = all
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["name"] == "fx")
        .map(|s| {
            assert_eq!(s["pins"]["pinned"], 8, "one pin record for every copy: {s}");
            (s["pid"].clone(), s["told"].clone())
        })
        .collect();
    told.sort_by_key(|(_, t)| t.to_string());
    let elicits_pid = c.pid().await?.parse::<u64>()?;
    let mut expected = vec![
        (json!(narrow.parse::<u64>()?), json!({"elicitation": false, "sampling": false})),
        (json!(elicits_pid), json!({"elicitation": true, "sampling": false})),
        (json!(wide.parse::<u64>()?), Value::Null),
    ];
    expected.sort_by_key(|(_, t)| t.to_string());
    assert_eq!(told, expected, "{all}");
    let (code, text, _) = home.gemctl_run(&["mcp", "list", "--all"])?;
    assert_eq!(code, 0);
    assert!(text.contains("told: no elicitation, no sampling"), "{text}");
    Ok(())
}
