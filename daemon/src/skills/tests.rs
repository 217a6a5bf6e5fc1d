//! The loader's and the registry's rules, Gemini CLI's own skill test cases among them
//! (`packages/core/src/skills/skillLoader.test.ts`, `skillManager.test.ts`) as data.

use std::path::Path;

use geminid_protocol::skills::SkillScope;

use super::load::{Cache, parse_skill};
use super::registry::{Registry, places};

/// (case, SKILL.md text, expected name, description and body; None: not a skill)
type Case = (&'static str, &'static str, Option<(&'static str, &'static str, &'static str)>);

const CASES: &[Case] = &[
    (
        "valid",
        "---\nname: my-skill\ndescription: A test skill\n---\n# Instructions\nDo something.\n",
        Some(("my-skill", "A test skill", "# Instructions\nDo something.")),
    ),
    ("no frontmatter", "# No frontmatter here", None),
    (
        "colon in description (issue #16323)",
        "---\nname: foo\ndescription: Simple story generation assistant for fiction writing. Use for creating characters, scenes, storylines, and prose. Trigger words: character, scene, storyline, story, prose, fiction, writing.\n---\n# Instructions\nDo something.\n",
        Some((
            "foo",
            "Simple story generation assistant for fiction writing. Use for creating characters, scenes, storylines, and prose. Trigger words: character, scene, storyline, story, prose, fiction, writing.",
            "# Instructions\nDo something.",
        )),
    ),
    (
        "several colons",
        "---\nname: multi-colon\ndescription: Use this for tasks like: coding, reviewing, testing. Keywords: async, await, promise.\n---\n# Instructions\nDo something.\n",
        Some((
            "multi-colon",
            "Use this for tasks like: coding, reviewing, testing. Keywords: async, await, promise.",
            "# Instructions\nDo something.",
        )),
    ),
    (
        "quoted YAML description",
        "---\nname: quoted-skill\ndescription: \"A skill with colons: like this one: and another.\"\n---\n# Instructions\nDo something.\n",
        Some((
            "quoted-skill",
            "A skill with colons: like this one: and another.",
            "# Instructions\nDo something.",
        )),
    ),
    (
        "multi-line YAML description",
        "---\nname: multiline-skill\ndescription:\n  Expertise in reviewing code for style, security, and performance. Use when the\n  user asks for \"feedback,\" a \"review,\" or to \"check\" their changes.\n---\n# Instructions\nDo something.\n",
        Some((
            "multiline-skill",
            "Expertise in reviewing code for style, security, and performance. Use when the user asks for \"feedback,\" a \"review,\" or to \"check\" their changes.",
            "# Instructions\nDo something.",
        )),
    ),
    ("empty name and description", "---\nname: \ndescription: \n---\n", Some(("", "", ""))),
    (
        "indented fields",
        "---\n  name: indented-name\n  description: indented-desc\n---\n",
        Some(("indented-name", "indented-desc", "")),
    ),
    (
        "no space after the colon",
        "---\nname:no-space-name\ndescription:no-space-desc\n---\n",
        Some(("no-space-name", "no-space-desc", "")),
    ),
    (
        "name sanitized",
        "---\nname: gke:prs-troubleshooter\ndescription: Test sanitization\n---\n",
        Some(("gke-prs-troubleshooter", "Test sanitization", "")),
    ),
    (
        "CRLF line ends",
        "---\r\nname: crlf\r\ndescription: d\r\n---\r\nbody\r\n",
        Some(("crlf", "d", "body")),
    ),
    ("missing name", "---\ndescription: only this\n---\nbody\n", None),
    ("missing description", "---\nname: only-name\n---\nbody\n", None),
    ("invalid YAML, no fields", "---\n[unclosed: {\n---\n", None),
    (
        "a number as the name (line reader)",
        "---\nname: 123\ndescription: d\n---\n",
        Some(("123", "d", "")),
    ),
];

#[test]
fn gemini_cli_loader_cases() {
    for (case, text, want) in CASES {
        let got = parse_skill(Path::new("/s/SKILL.md"), text);
        match (want, got) {
            (Some((name, description, body)), Ok(s)) => {
                assert_eq!(
                    (s.name.as_str(), s.description.as_str(), s.body.as_str()),
                    (*name, *description, *body),
                    "{case}"
                );
            }
            (None, Err((pos, why))) => {
                assert!(pos.is_some(), "{case}: the problem has a position");
                assert!(why.contains("frontmatter"), "{case}: {why}");
            }
            (want, got) => panic!("{case}: wanted {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn invalid_yaml_names_its_line() {
    let (pos, why) = parse_skill(Path::new("/s/SKILL.md"), "---\nname: a\n  bad: [\n---\n")
        .expect_err("invalid");
    assert!(why.contains("not valid YAML") && why.contains("`description`"), "{why}");
    assert!(pos.is_some_and(|(line, _)| line >= 3), "{pos:?}");
}

fn skill(dir: &Path, folder: &str, name: &str) -> std::io::Result<()> {
    let d = if folder.is_empty() { dir.to_path_buf() } else { dir.join(folder) };
    std::fs::create_dir_all(&d)?;
    std::fs::write(
        d.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: {name} from {}\n---\nbody of {name}\n",
            dir.display()
        ),
    )
}

#[test]
fn depth_zero_and_one_only_hidden_and_node_modules_skipped() -> anyhow::Result<()> {
    let t = tempfile::tempdir()?;
    let d = t.path();
    skill(d, "", "top")?;
    skill(d, "one", "one")?;
    skill(&d.join("one"), "two", "too-deep")?;
    skill(d, ".hidden", "hidden")?;
    skill(d, "node_modules", "module")?;
    std::fs::create_dir_all(d.join("not-a-skill"))?;
    std::fs::write(d.join("not-a-skill").join("notes.txt"), "x")?;
    let f = Cache::default().folder(d);
    let names: Vec<&str> = f.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["top", "one"]);
    assert!(f.diagnostics.is_empty(), "{:?}", f.diagnostics);
    assert!(Cache::default().folder(&d.join("missing")).skills.is_empty());
    Ok(())
}

#[test]
fn only_changed_files_are_read_again() -> anyhow::Result<()> {
    let t = tempfile::tempdir()?;
    for i in 0..5 {
        skill(t.path(), &format!("s{i}"), &format!("s{i}"))?;
    }
    let cache = Cache::default();
    assert_eq!(cache.folder(t.path()).skills.len(), 5);
    assert_eq!(cache.reads(), 5);
    assert_eq!(cache.folder(t.path()).skills.len(), 5);
    assert_eq!(cache.reads(), 5, "nothing changed, nothing read");
    std::fs::write(
        t.path().join("s3").join("SKILL.md"),
        "---\nname: s3\ndescription: changed, longer\n---\n",
    )?;
    let f = cache.folder(t.path());
    assert_eq!(cache.reads(), 6, "only the edited file is read");
    assert!(f.skills.iter().any(|s| s.description == "changed, longer"));
    Ok(())
}

#[test]
fn bad_files_are_diagnosed_and_the_rest_load() -> anyhow::Result<()> {
    let t = tempfile::tempdir()?;
    let d = t.path();
    skill(d, "good", "good")?;
    std::fs::create_dir_all(d.join("nofm"))?;
    std::fs::write(d.join("nofm").join("SKILL.md"), "# just text")?;
    std::fs::create_dir_all(d.join("huge"))?;
    let mut big = String::from("---\nname: huge\ndescription: d\n---\n");
    big.push_str(&"x".repeat(10 << 20));
    std::fs::write(d.join("huge").join("SKILL.md"), big)?;
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(d.join("loop"), d.join("loop"))?;
        std::os::unix::fs::symlink(d, d.join("back"))?;
    }
    let f = Cache::default().folder(d);
    let names: Vec<&str> = f.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    let text: Vec<String> =
        f.diagnostics.iter().map(|d| format!("{}: {}", d.file, d.message)).collect();
    assert!(text.iter().any(|m| m.contains("nofm") && m.contains("no frontmatter")), "{text:?}");
    assert!(text.iter().any(|m| m.contains("huge") && m.contains("1 MiB")), "{text:?}");
    #[cfg(unix)]
    assert!(text.iter().any(|m| m.contains("loop") && m.contains("link")), "{text:?}");
    Ok(())
}

#[test]
fn precedence_overrides_and_disabled() -> anyhow::Result<()> {
    let t = tempfile::tempdir()?;
    let (home, ws, ext) = (t.path().join("home"), t.path().join("ws"), t.path().join("ext-skills"));
    skill(&ext, "a", "shared")?;
    skill(&ext, "e", "ext-only")?;
    skill(&home.join(".gemini/skills"), "a", "shared")?;
    skill(&home.join(".agents/skills"), "a", "shared")?;
    skill(&ws.join(".gemini/skills"), "a", "shared")?;
    skill(&ws.join(".agents/skills"), "a", "Shared-WS")?;
    let exts = [("my-ext".to_owned(), ext.clone())];
    let cache = Cache::default();

    let trusted =
        Registry::resolve(&cache, &places(&home, &ws, true, &exts), &["SHARED-ws".to_owned()]);
    let shared = trusted.skills.get("shared").expect("shared");
    assert_eq!(shared.place.scope, SkillScope::Workspace);
    assert!(shared.skill.location.starts_with(ws.join(".gemini/skills")));
    let overridden: Vec<SkillScope> = shared.overrides.iter().map(|(_, p)| p.scope).collect();
    assert_eq!(overridden, [SkillScope::Extension, SkillScope::User, SkillScope::User]);
    assert_eq!(trusted.diagnostics.len(), 3, "{:?}", trusted.diagnostics);
    assert!(trusted.diagnostics.iter().all(|d| d.message.starts_with("Skill conflict")));
    // Names are compared exactly for precedence, without case for `skills.disabled`.
    let ws_only = trusted.skills.get("Shared-WS").expect("exact names");
    assert!(!ws_only.enabled);
    assert!(trusted.skills.get("shared").is_some_and(|e| e.enabled));
    assert!(trusted.get("ext-ONLY").is_some(), "lookup without case");

    let untrusted = Registry::resolve(&cache, &places(&home, &ws, false, &exts), &[]);
    let shared = untrusted.skills.get("shared").expect("shared");
    assert!(
        shared.skill.location.starts_with(home.join(".agents/skills")),
        "the user's .agents wins"
    );
    assert!(
        !untrusted.skills.contains_key("Shared-WS"),
        "an untrusted workspace's skills are skipped"
    );
    Ok(())
}

#[test]
fn antigravity_clis_user_skills_sit_below_gemini_clis() -> anyhow::Result<()> {
    let t = tempfile::tempdir()?;
    let (home, ws, ext) = (t.path().join("home"), t.path().join("ws"), t.path().join("plugin"));
    skill(&ext, "p", "from-plugin")?;
    skill(&ext, "x", "both")?;
    skill(&home.join(".gemini/antigravity-cli/skills"), "a", "both")?;
    skill(&home.join(".gemini/antigravity-cli/skills"), "b", "agy-only")?;
    skill(&home.join(".gemini/skills"), "a", "both")?;
    let exts = [("a-plugin".to_owned(), ext.clone())];
    let reg = Registry::resolve(&Cache::default(), &places(&home, &ws, true, &exts), &[]);
    let both = reg.skills.get("both").expect("both");
    assert!(both.skill.location.starts_with(home.join(".gemini/skills")));
    let under: Vec<_> = both.overrides.iter().map(|(s, _)| s.location.clone()).collect();
    assert!(
        under[0].starts_with(&ext) && under[1].starts_with(home.join(".gemini/antigravity-cli"))
    );
    let agy = reg.skills.get("agy-only").expect("agy's own skill");
    assert_eq!(agy.place.scope, SkillScope::User);
    assert_eq!(reg.skills.get("from-plugin").map(|e| e.place.scope), Some(SkillScope::Extension));
    Ok(())
}

#[test]
fn two_skills_one_name_in_one_folder() -> anyhow::Result<()> {
    let t = tempfile::tempdir()?;
    skill(t.path(), "a", "twin")?;
    skill(t.path(), "b", "twin")?;
    let place = super::registry::Place {
        scope: SkillScope::User,
        owner: None,
        dir: t.path().to_path_buf(),
    };
    let r = Registry::resolve(&Cache::default(), &[place], &[]);
    assert_eq!(r.skills.len(), 1);
    assert!(r.skills["twin"].skill.location.starts_with(t.path().join("b")));
    assert!(r.diagnostics[0].message.contains("two skills in one folder"), "{:?}", r.diagnostics);
    Ok(())
}

#[test]
fn prompt_lists_enabled_skills_escaped() {
    let mut r = Registry::default();
    let place = super::registry::Place { scope: SkillScope::User, owner: None, dir: "/s".into() };
    let mk = |name: &str, description: &str| {
        std::sync::Arc::new(super::load::Skill {
            name: name.into(),
            description: description.into(),
            location: format!("/s/{name}/SKILL.md").into(),
            body: String::new(),
        })
    };
    r.add(mk("a", "uses <tags> & more"), place.clone());
    r.add(mk("b", "off"), place);
    if let Some(e) = r.skills.get_mut("b") {
        e.enabled = false;
    }
    let p = super::registry::prompt(&r);
    assert!(p.starts_with("# Available Agent Skills"));
    assert!(p.contains("<skill>\n    <name>a</name>\n    <description>uses &lt;tags&gt; &amp; more</description>\n    <location>/s/a/SKILL.md</location>\n  </skill>"), "{p}");
    assert!(!p.contains("<name>b</name>"));
    assert_eq!(super::registry::prompt(&Registry::default()), "");
}

fn skill_zip(path: &Path, entries: &[(&str, &str)]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut z = zip::ZipWriter::new(std::fs::File::create(path)?);
    for (name, text) in entries {
        z.start_file(*name, zip::write::SimpleFileOptions::default())?;
        z.write_all(text.as_bytes())?;
    }
    z.finish()?;
    Ok(())
}

#[test]
fn skill_archives_install_and_entries_that_leave_are_refused() -> anyhow::Result<()> {
    let t = tempfile::tempdir()?;
    let target = t.path().join("home/.gemini/skills");
    let good = t.path().join("good.skill");
    skill_zip(
        &good,
        &[
            ("SKILL.md", "---\nname: zipped\ndescription: from a zip\n---\nDo it.\n"),
            ("scripts/run.sh", "echo\n"),
        ],
    )?;
    let plan = super::install::plan(&good.display().to_string(), t.path(), None, &target, false)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_eq!(plan.installed()[0].name, "zipped");
    assert!(plan.consent.contains("zipped: from a zip"), "{}", plan.consent);
    super::install::apply(&plan, &target, false).map_err(|e| anyhow::anyhow!("{e}"))?;
    assert!(target.join("zipped/scripts/run.sh").is_file());
    drop(plan);
    let left: Vec<String> = std::fs::read_dir(&target)?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["zipped"], "no staging folder is left behind");

    for (case, entry) in
        [("parent", "../escaped/SKILL.md"), ("absolute", "/tmp/geminid-escaped/SKILL.md")]
    {
        let bad = t.path().join(format!("{case}.skill"));
        skill_zip(&bad, &[(entry, "---\nname: evil\ndescription: e\n---\n")])?;
        let e = super::install::plan(&bad.display().to_string(), t.path(), None, &target, false)
            .expect_err("an entry leaving the folder is refused");
        assert!(
            e.to_string().contains("..")
                || e.to_string().contains("absolute")
                || e.to_string().contains("outside"),
            "{case}: {e}"
        );
    }
    assert!(
        !t.path().join("home/.gemini/escaped").exists()
            && !Path::new("/tmp/geminid-escaped").exists()
    );
    assert!(!target.join("evil").exists());
    Ok(())
}

#[test]
fn agent_definitions_are_validated() -> anyhow::Result<()> {
    use super::agents::parse;
    let src = geminid_protocol::skills::SkillSource {
        scope: SkillScope::User,
        extension: None,
        server: None,
        dir: "/a".into(),
    };
    let f = Path::new("/a/x.md");
    let ok = parse(f, "---\nname: researcher\ndescription: Reads\ntools: [read_file, mcp_fx_*]\nmodel: m\nmax_turns: 5\n---\nYou research.\n", &src)
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    assert_eq!(
        ok[0].info.tools.as_deref(),
        Some(&["read_file".to_owned(), "mcp_fx_*".to_owned()][..])
    );
    assert_eq!(ok[0].system_prompt, "You research.");
    let remote = parse(
        f,
        "---\nkind: remote\nname: far\nagent_card_url: https://a.example/card\n---\n",
        &src,
    )
    .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    assert_eq!(remote[0].info.kind, geminid_protocol::skills::AgentKind::Remote);
    for (case, text, needle) in [
        ("no frontmatter", "You research.", "no frontmatter"),
        ("invalid YAML", "---\nname: [x\n---\n", "not valid YAML"),
        ("not a slug", "---\nname: Research Bot\ndescription: d\n---\n", "not a slug"),
        ("no description", "---\nname: r\n---\n", "description"),
        ("unknown field", "---\nname: r\ndescription: d\ncolour: red\n---\n", "colour"),
        ("bad tool", "---\nname: r\ndescription: d\ntools: [\"mcp__x\"]\n---\n", "not a tool name"),
        (
            "two cards",
            "---\nkind: remote\nname: r\nagent_card_url: https://a\nagent_card_json: \"{}\"\n---\n",
            "exactly one",
        ),
        ("zero turns", "---\nname: r\ndescription: d\nmax_turns: 0\n---\n", "positive"),
    ] {
        let (pos, why) = parse(f, text, &src).expect_err(case);
        assert!(why.contains(needle), "{case}: {why}");
        assert!(pos.is_some(), "{case}");
    }
    Ok(())
}
