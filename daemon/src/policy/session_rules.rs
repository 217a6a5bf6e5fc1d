//! A session's policy: its places' rules and the rules its settings imply, as one set.

use parking_lot::Mutex;
use std::path::Path;
use std::sync::Arc;

use geminid_protocol::common::{Diagnostic, Severity};
use geminid_protocol::policy as wire;

use super::engine::PolicySet;
use super::files::{Place, Reader, places};
use super::rule::Rule;
use super::settings::settings_rules;
use super::{ApprovalMode, Decision, Tier};
use crate::config::{ConfigPaths, Effective};

/// Reads sessions' policies, keeping each file's last good rules and the sets last built.
#[derive(Debug, Default)]
pub(crate) struct Policies {
    reader: Reader,
    built: Mutex<Vec<Built>>,
}

impl Policies {
    /// Policies whose files' last good text is kept in `store` across restarts.
    pub(crate) fn with_store(store: crate::store::Store, key: super::accept::KeySource) -> Self {
        let accepted = super::accept::Acceptances::new(store.clone(), key);
        Self { reader: Reader::with_store(store, Some(accepted)), built: Mutex::default() }
    }

    /// The workspace's policy folder as read now, where it stands against what the user
    /// accepted, and the rules accepting it would add (`policy/review`). `home`: the
    /// workspace is the home, whose `.gemini` is the user's own (no workspace tier).
    pub(crate) fn review(
        &self,
        workspace: &str,
        trusted: bool,
        home: bool,
    ) -> wire::PolicyReviewResult {
        self.reviewed(workspace, trusted, home).0
    }

    fn reviewed(
        &self,
        workspace: &str,
        trusted: bool,
        home: bool,
    ) -> (wire::PolicyReviewResult, super::accept::Snapshot) {
        use super::accept::{REVIEW, snapshot};
        use wire::WorkspacePolicyState as State;
        let snap = snapshot(Path::new(workspace));
        let mut diagnostics = snap.refused.clone();
        let mut rules = Vec::new();
        for (_, path, text) in snap.files.iter().filter(|_| !home) {
            let mut loaded = super::load::load(&path.display().to_string(), text, Tier::Workspace);
            if loaded.unreadable {
                for d in &mut loaded.problems {
                    d.message.push_str(
                        "; it does not parse, so nothing of it is loaded, accepted or not \
                         (no rules of an earlier version either)",
                    );
                }
            }
            rules.extend(loaded.rules);
            diagnostics.extend(loaded.problems);
        }
        let rules = PolicySet::new(rules).rules().iter().map(entry).collect();
        let standing = match &self.reader.accepted {
            _ if home => super::accept::Standing {
                state: State::None,
                reason: "the workspace is your home: its .gemini/policies is your own policy \
                         folder (the user tier), loaded without an acceptance"
                    .to_owned(),
                files: vec![],
            },
            _ if !trusted => super::accept::Standing {
                state: State::None,
                reason: "the folder is not trusted, so its policy files are never read (`gemctl \
                         trust` trusts it)"
                    .to_owned(),
                files: vec![],
            },
            Some(acc) => acc.standing(workspace, &snap),
            None => super::accept::Standing {
                state: State::New,
                reason: "geminid has no place to keep their acceptance".to_owned(),
                files: vec![],
            },
        };
        let reason = match standing.state {
            State::New | State::Changed | State::Unverified => {
                format!("not loaded: {}; {REVIEW}", standing.reason)
            }
            _ => standing.reason,
        };
        let result = wire::PolicyReviewResult {
            workspace: workspace.to_owned(),
            folder: snap.folder.display().to_string(),
            state: standing.state,
            reason,
            files: standing.files,
            rules,
            diagnostics,
            digest: snap.digest.clone(),
        };
        (result, snap)
    }

    /// Accept the workspace's policy folder as it is now, if that is what `digest` (from
    /// `policy/review`) says was reviewed (`policy/accept`).
    pub(crate) fn accept(
        &self,
        workspace: &str,
        trusted: bool,
        home: bool,
        digest: Option<&str>,
    ) -> Result<wire::PolicyReviewResult, String> {
        use wire::WorkspacePolicyState as State;
        let (mut review, snap) = self.reviewed(workspace, trusted, home);
        if !trusted || home {
            return Err(format!("{workspace}: {}", review.reason));
        }
        if let Some(d) = digest
            && d != review.digest
        {
            return Err(format!(
                "the policy files of {workspace} changed since they were reviewed: `gemctl policy \
                 review` again"
            ));
        }
        let Some(acc) = &self.reader.accepted else {
            return Err("geminid has no place to keep the acceptance".to_owned());
        };
        if review.state == State::None && snap.files.is_empty() {
            return Err(format!("{}: no policy files to accept", review.folder));
        }
        acc.accept(workspace, &snap)?;
        review.state = State::Accepted;
        review.reason = "accepted now: they are loaded until they change".to_owned();
        for f in &mut review.files {
            f.change = "same".to_owned();
        }
        review.files.retain(|f| snap.files.iter().any(|(n, ..)| *n == f.name));
        Ok(review)
    }
}

/// Sets built for this many different inputs are kept (a workspace and its settings each).
const KEEP_BUILT: usize = 16;

/// A set built, and what it was built from: the same inputs give the same set without
/// copying and sorting its rules again (10,000 rules take milliseconds; issue 39).
#[derive(Debug)]
struct Built {
    places: Vec<Place>,
    /// The settings the session's own rules come from, serialized.
    settings: String,
    interactive: bool,
    /// Each file's rules, as the reader gave them.
    files: Vec<Arc<Vec<Rule>>>,
    set: Arc<PolicySet>,
    /// What building said (extension rules dropped).
    dropped: Vec<Diagnostic>,
}

/// A session's rules and the problems in its files.
#[derive(Debug)]
pub(crate) struct SessionRules {
    /// The rules.
    pub set: Arc<PolicySet>,
    /// Problems in the policy files.
    pub problems: Vec<Diagnostic>,
    /// Files with no good version known: every call is refused while there are any.
    pub refusing: Vec<Diagnostic>,
}

impl Policies {
    /// The policy of a session whose configuration is `effective`, for an interactive
    /// session or not (headless sessions may auto-allow their servers).
    pub(crate) fn for_session(
        &self,
        paths: &ConfigPaths,
        effective: &Effective,
        interactive: bool,
    ) -> SessionRules {
        let public = &effective.public;
        // The enabled extensions' policies come first: tier 2, under every other file's.
        let mut at: Vec<Place> = effective
            .extensions
            .iter()
            .filter_map(|c| c.policies.clone())
            .map(|path| Place { path, tier: Tier::Extension })
            .collect();
        let (named, named_problems) =
            places(paths, Path::new(&public.workspace), public.trust.trusted, &public.settings);
        at.extend(named);
        let mut read = self.reader.read(&at);
        read.problems.extend(named_problems);
        // The servers as the session resolved them (every scope's, merged), for `trust`.
        let mut settings = public.settings.clone();
        if let Some(map) = settings.as_object_mut() {
            let servers: serde_json::Map<String, serde_json::Value> = effective
                .servers
                .iter()
                .map(|(name, spec)| {
                    (name.clone(), serde_json::json!({ "trust": spec.config.trust }))
                })
                .collect();
            map.insert("mcpServers".to_owned(), serde_json::Value::Object(servers));
        }
        let key = settings.to_string();
        let mut problems = read.problems;
        let refusing = read.refusing;
        let lock = || self.built.lock();
        let same = |b: &Built| {
            b.interactive == interactive
                && b.places == at
                && b.settings == key
                && b.files.len() == read.files.len()
                && b.files.iter().zip(&read.files).all(|(a, b)| Arc::ptr_eq(a, b))
        };
        if let Some(b) = lock().iter().find(|b| same(b)) {
            problems.extend(b.dropped.iter().cloned());
            return SessionRules { set: b.set.clone(), problems, refusing };
        }
        let mut dropped = Vec::new();
        let mut rules = defaults().to_vec();
        rules.extend(
            read.files
                .iter()
                .flat_map(|f| f.iter())
                .filter(|r| extension_may(r, &mut dropped))
                .cloned(),
        );
        let mut implied = settings_rules(&settings, interactive);
        credit_extensions(&mut implied, &effective.extensions);
        rules.extend(implied);
        let set = Arc::new(PolicySet::new(rules));
        problems.extend(dropped.iter().cloned());
        let mut built = lock();
        // A set built from these places and settings before holds rules no longer read.
        built.retain(|b| !(b.interactive == interactive && b.places == at && b.settings == key));
        if built.len() >= KEEP_BUILT {
            built.remove(0);
        }
        built.push(Built {
            places: at,
            settings: key,
            interactive,
            files: read.files,
            set: set.clone(),
            dropped,
        });
        SessionRules { set, problems, refusing }
    }
}

/// Whether a rule may stand: an extension may not allow a call, nor write a rule for yolo
/// mode (Gemini CLI drops both); what is dropped is said.
fn extension_may(rule: &Rule, problems: &mut Vec<Diagnostic>) -> bool {
    if rule.origin.tier != Tier::Extension {
        return true;
    }
    let why = if rule.decision == Decision::Allow {
        "an extension may not allow a call"
    } else if rule.modes.contains(&ApprovalMode::Yolo) {
        "an extension may not write rules for yolo mode"
    } else {
        return true;
    };
    problems.push(Diagnostic {
        severity: Severity::Warning,
        file: rule.origin.file.clone(),
        line: rule.origin.line,
        column: None,
        message: format!("the rule for {} is ignored: {why}", rule.tool_name),
    });
    false
}

/// The name the built-in rule file is shown by.
pub(crate) const DEFAULTS_FILE: &str = "(built in) defaults.toml";

/// geminid's default tier: rules giving Gemini CLI's default decisions
/// (`daemon/policies/defaults.toml`, compiled in).
pub(crate) fn defaults() -> &'static [Rule] {
    static RULES: std::sync::OnceLock<Vec<Rule>> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        let text = include_str!("../../policies/defaults.toml");
        let loaded = super::load::load(DEFAULTS_FILE, text, super::Tier::Default);
        for p in &loaded.problems {
            // A test keeps this from happening; said loudly if it ever does.
            tracing::error!(line = ?p.line, message = %p.message, "the built-in policy rules have a problem");
        }
        loaded.rules
    })
}

/// Where a rule is written, on the wire.
pub(crate) fn source(r: &Rule) -> wire::PolicyRuleSource {
    wire::PolicyRuleSource {
        file: r.origin.file.clone(),
        line: r.origin.line,
        tier: r.origin.tier.name().to_owned(),
        priority: r.origin.priority,
        effective_priority: r.effective_priority(),
    }
}

/// A rule as `policy/list` shows it.
pub(crate) fn entry(r: &Rule) -> wire::PolicyRuleEntry {
    wire::PolicyRuleEntry {
        tool_name: r.tool_name.clone(),
        mcp_name: r.mcp_name.clone(),
        decision: r.decision,
        modes: r.modes.clone(),
        interactive: r.interactive,
        matches_args: r.args.is_some(),
        args_pattern: r.args.as_ref().map(|a| a.text().to_owned()),
        subagent: r.subagent.clone(),
        deny_message: r.deny_message.clone(),
        source: source(r),
    }
}

/// Why a verdict is what it is, in words.
pub(crate) fn reason(
    decision: Decision,
    rule: Option<&Rule>,
    mode: ApprovalMode,
    interactive: bool,
) -> String {
    match rule {
        Some(r) => {
            let at = match r.origin.line {
                Some(line) => format!("{}:{line}", r.origin.file),
                None => r.origin.file.clone(),
            };
            let base = format!(
                "{} by the rule in {at} ({} tier, priority {}, effective {})",
                match decision {
                    Decision::Allow => "allowed",
                    Decision::Deny => "denied",
                    Decision::AskUser => "to be confirmed",
                },
                r.origin.tier.name(),
                r.origin.priority,
                r.effective_priority()
            );
            match &r.deny_message {
                Some(m) if decision == Decision::Deny => format!("{base}: {m}"),
                _ => base,
            }
        }
        None if mode == ApprovalMode::Yolo => "no rule matches; YOLO mode allows it".to_owned(),
        None if interactive => {
            "no rule matches; the person is asked (the session is interactive)".to_owned()
        }
        None => "no rule matches, and the session is not interactive: denied".to_owned(),
    }
}

/// An extension's `excludeTools` joins `tools.exclude` (as in Gemini CLI); its rule names the
/// extension, not the user's settings, as where it comes from (issue 63, C17).
fn credit_extensions(rules: &mut [Rule], extensions: &[crate::config::extend::Contribution]) {
    for r in rules.iter_mut().filter(|r| r.origin.file == "settings: tools.exclude") {
        if let Some(c) = extensions.iter().find(|c| c.exclude_tools.contains(&r.tool_name)) {
            r.origin.file = format!("extension {}: excludeTools", c.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use geminid_protocol::config as wire_config;

    use super::*;
    use crate::policy::ToolCall;
    use crate::policy::files::tests::paths;

    fn decide(
        tool: &str,
        server: Option<&str>,
        args: Value,
        annotations: Option<Value>,
        mode: ApprovalMode,
        interactive: bool,
    ) -> Decision {
        let set = PolicySet::new(defaults().to_vec());
        let annotations = annotations.and_then(|a| a.as_object().cloned());
        let call = ToolCall {
            name: tool,
            server,
            args: args.as_object(),
            annotations: annotations.as_ref(),
            subagent: None,
        };
        set.verdict(&call, mode, interactive).decision
    }

    fn effective(ws: &Path, trusted: bool, settings: Value) -> Effective {
        Effective {
            public: wire_config::EffectiveConfig {
                workspace: ws.display().to_string(),
                trust: wire_config::TrustInfo { trusted, reason: "test".into() },
                files: vec![],
                mcp_servers: vec![],
                settings,
                diagnostics: vec![],
            },
            servers: Default::default(),
            shown_settings: json!({}),
            hook_files: vec![],
            extensions: vec![],
            refusing: vec![],
            upstream: None,
        }
    }

    /// The sets built are kept by their inputs: the same inputs give the very same set; a
    /// change of a file, the settings, trust or interactivity gives another; a set a file's
    /// edit made stale is dropped, not kept beside the new one; and no more than
    /// `KEEP_BUILT` are kept.
    #[test]
    fn a_built_set_is_shared_while_its_inputs_stay_and_replaced_when_they_change() {
        let root = tempfile::tempdir().unwrap();
        let (p, ws) = (paths(root.path()), root.path().join("ws"));
        let user = root.path().join("home/.gemini/policies");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::create_dir_all(ws.join(".gemini/policies")).unwrap();
        let rule = |tool: &str| {
            format!("[[rule]]\ntoolName = \"{tool}\"\ndecision = \"deny\"\npriority = 1\n")
        };
        std::fs::write(user.join("u.toml"), rule("a")).unwrap();
        std::fs::write(ws.join(".gemini/policies/w.toml"), rule("w")).unwrap();
        let policies = Policies::default();
        let kept = || policies.built.lock().len();
        let e = effective(&ws, true, json!({}));
        let first = policies.for_session(&p, &e, true).set;
        assert!(Arc::ptr_eq(&first, &policies.for_session(&p, &e, true).set), "same inputs");
        assert_eq!(kept(), 1);

        let others = [
            policies.for_session(&p, &e, false).set,
            policies.for_session(&p, &effective(&ws, false, json!({})), true).set,
            policies
                .for_session(&p, &effective(&ws, true, json!({"tools": {"allowed": ["x"]}})), true)
                .set,
        ];
        for other in &others {
            assert!(!Arc::ptr_eq(&first, other), "interactivity, trust or settings changed");
        }
        assert_eq!(kept(), 4);
        let untrusted = policies.for_session(&p, &effective(&ws, false, json!({})), true);
        assert!(Arc::ptr_eq(&others[1], &untrusted.set), "each kept by its own inputs");

        // An edit: a new set, with the new rule, and the stale one for these inputs is gone.
        std::fs::write(user.join("u.toml"), rule("b")).unwrap();
        let edited = policies.for_session(&p, &e, true).set;
        assert!(!Arc::ptr_eq(&first, &edited));
        let names = |set: &PolicySet| -> Vec<String> {
            set.rules().iter().map(|r| r.tool_name.clone()).collect()
        };
        assert!(names(&edited).contains(&"b".to_owned()), "{:?}", names(&edited));
        assert!(!names(&edited).contains(&"a".to_owned()));
        assert_eq!(kept(), 4, "the stale set was replaced, not kept beside");
        assert!(Arc::ptr_eq(&edited, &policies.for_session(&p, &e, true).set));

        // Many workspaces: the oldest sets go.
        for i in 0..KEEP_BUILT + 4 {
            let w = root.path().join(format!("ws{i}"));
            policies.for_session(&p, &effective(&w, true, json!({})), true);
        }
        assert_eq!(kept(), KEEP_BUILT);
        assert!(!Arc::ptr_eq(&edited, &policies.for_session(&p, &e, true).set), "evicted");
    }

    #[test]
    fn the_built_in_rules_load_without_a_problem() {
        let text = include_str!("../../policies/defaults.toml");
        let loaded = super::super::load::load(DEFAULTS_FILE, text, super::super::Tier::Default);
        assert!(loaded.problems.is_empty(), "{:#?}", loaded.problems);
        assert_eq!(defaults().len(), loaded.rules.len());
        assert!(defaults().iter().all(|r| r.effective_priority() < 2.0));
    }

    /// Gemini CLI's default decisions (its `policies/*.toml`), case by case.
    #[test]
    fn the_built_in_rules_give_gemini_clis_default_decisions() {
        use ApprovalMode::{AutoEdit, Default as Normal, Plan, Yolo};
        use Decision::{Allow, AskUser, Deny};
        let none = json!({});
        let plan_file = json!({"file_path": "/home/u/.gemini/tmp/proj/s1/plans/p.md"});
        type Case<'a> =
            (&'a str, Option<&'a str>, &'a Value, Option<Value>, ApprovalMode, bool, Decision);
        let cases: &[Case<'_>] = &[
            ("read_file", None, &none, None, Normal, true, Allow),
            ("read_file", None, &none, None, Normal, false, Allow),
            ("grep_search", None, &none, None, Plan, true, Allow),
            ("write_file", None, &none, None, Normal, true, AskUser),
            ("write_file", None, &none, None, Normal, false, Deny),
            ("write_file", None, &none, None, AutoEdit, true, Allow),
            ("replace", None, &none, None, AutoEdit, false, Allow),
            ("run_shell_command", None, &json!({"command": "ls"}), None, AutoEdit, true, AskUser),
            ("run_shell_command", None, &json!({"command": "ls"}), None, Normal, false, Deny),
            ("run_shell_command", None, &json!({"command": "ls"}), None, Yolo, false, Allow),
            ("web_fetch", None, &none, None, AutoEdit, true, Allow),
            ("discovered_tool_x", None, &none, None, Normal, true, AskUser),
            ("discovered_tool_x", None, &none, None, Normal, false, Deny),
            ("ask_user", None, &none, None, Normal, false, Deny),
            ("ask_user", None, &none, None, Yolo, true, AskUser),
            ("enter_plan_mode", None, &none, None, Yolo, true, Deny),
            ("enter_plan_mode", None, &none, None, Normal, true, AskUser),
            ("enter_plan_mode", None, &none, None, Normal, false, Allow),
            ("enter_plan_mode", None, &none, None, Plan, true, Deny),
            ("exit_plan_mode", None, &none, None, Normal, true, Deny),
            ("exit_plan_mode", None, &none, None, Plan, true, AskUser),
            ("exit_plan_mode", None, &none, None, Plan, false, Allow),
            ("invoke_agent", None, &json!({"agent_name": "x"}), None, Normal, false, Allow),
            ("invoke_agent", None, &json!({"agent_name": "x"}), None, Plan, true, Deny),
            ("invoke_agent", None, &json!({"agent_name": "cli_help"}), None, Plan, true, Allow),
            ("write_file", None, &plan_file, None, Plan, true, Allow),
            ("replace", None, &json!({"file_path": "plans/p.md"}), None, Plan, true, Allow),
            ("write_file", None, &json!({"file_path": "p.md"}), None, Plan, true, Allow),
            ("write_file", None, &json!({"file_path": "src/main.rs"}), None, Plan, true, Deny),
            // Build file protection: an allowed edit of a build file is asked about, or denied.
            ("write_file", None, &json!({"file_path": "package.json"}), None, Yolo, false, Deny),
            ("replace", None, &json!({"file_path": "a/Makefile"}), None, AutoEdit, true, AskUser),
            ("write_file", None, &json!({"file_path": "src/main.rs"}), None, Yolo, false, Allow),
            ("write_file", None, &json!({"file_path": "/x/plans/p.md"}), None, Plan, true, Deny),
            ("mcp_docs_search", Some("docs"), &none, None, Normal, true, AskUser),
            ("mcp_docs_search", Some("docs"), &none, None, Normal, false, Deny),
            ("mcp_docs_search", Some("docs"), &none, None, Yolo, false, Allow),
            ("mcp_docs_search", Some("docs"), &none, None, Plan, true, Deny),
            (
                "mcp_docs_search",
                Some("docs"),
                &none,
                Some(json!({"readOnlyHint": true})),
                Plan,
                true,
                AskUser,
            ),
            (
                "mcp_docs_search",
                Some("docs"),
                &none,
                Some(json!({"readOnlyHint": true})),
                Plan,
                false,
                Deny,
            ),
        ];
        for (tool, server, args, annotations, mode, interactive, want) in cases {
            let got =
                decide(tool, *server, (*args).clone(), annotations.clone(), *mode, *interactive);
            assert_eq!(
                got, *want,
                "{tool} {args} annotations {annotations:?} in {mode:?}, interactive {interactive}"
            );
        }
    }
}
