//! `gemctl mcp import` and `gemctl mcp unimport` as a Gemini CLI user's file sees them: the
//! undo gives back the bytes the user had (issue 65, item 5), where they did not edit since.

use geminid_tests::{Daemon, TestHome};

/// `settings.json` as `gemini mcp add -s user` writes it: 2-space JSON, an array's items one a
/// line, no final newline.
fn written_by_gemini_cli(server: &str) -> String {
    format!(
        "{{\n  \"security\": {{\n    \"auth\": {{\n      \"selectedType\": \"gemini-api-key\"\n    }}\n  }},\n  \"mcpServers\": {{\n    \"fx\": {{\n      \"command\": {server},\n      \"args\": [\n        \"--rich\",\n        \"--quiet\"\n      ]\n    }},\n    \"web\": {{\n      \"httpUrl\": \"http://127.0.0.1:9/mcp\"\n    }}\n  }}\n}}"
    )
}

/// A file written by hand: comments, 4-space indentation, one-line entries, a final newline.
fn written_by_hand(server: &str) -> String {
    format!(
        "{{\n    // my Gemini CLI settings\n    \"security\": {{ \"auth\": {{ \"selectedType\": \"gemini-api-key\" }} }},\n    \"mcpServers\": {{\n        // the fixture\n        \"fx\": {{ \"command\": {server}, \"args\": [ \"--rich\" ], \"trust\": false }},\n        \"web\": {{ \"httpUrl\": \"http://127.0.0.1:9/mcp\", \"timeout\": 30000 }} /* remote */\n    }}\n}}\n"
    )
}

#[tokio::test]
async fn unimport_gives_back_the_users_bytes() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let gemini = home.root().join("home/.gemini");
    let user = gemini.join("settings.json");
    let server = serde_json::to_string(&geminid_tests::mcp::fixture())?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let edit = "    \"ui\": { \"theme\": \"dark\" },\n";
    let anchor = "    // my Gemini CLI settings\n";
    // (what the file holds, imports, an edit of the user's between import and unimport)
    let cases = [
        (written_by_gemini_cli(&server), 1, false),
        (written_by_hand(&server), 1, false),
        (written_by_hand(&server), 2, false),
        (written_by_hand(&server), 1, true),
    ];
    for (before, imports, edited) in cases {
        for entry in std::fs::read_dir(&gemini)? {
            let path = entry?.path();
            if path.display().to_string().contains("before-geminid") {
                std::fs::remove_file(path)?;
            }
        }
        std::fs::write(&user, &before)?;
        let case = format!("{imports} import(s), edited: {edited}, file:\n{before}");
        for _ in 0..imports {
            let (code, _, err) = home.gemctl_run(&["mcp", "import"])?;
            assert_eq!(code, 0, "{case}\n{err}");
        }
        let imported = std::fs::read_to_string(&user)?;
        assert!(imported.contains("--confirm"), "{case}\nimport wrote:\n{imported}");
        let mut expected = before.clone();
        if edited {
            // The user adds a setting after the import: the undo keeps it.
            std::fs::write(&user, imported.replacen(anchor, &format!("{anchor}{edit}"), 1))?;
            expected = before.replacen(anchor, &format!("{anchor}{edit}"), 1);
        }
        let (code, out, err) = home.gemctl_run(&["mcp", "unimport"])?;
        assert_eq!(code, 0, "{case}\n{err}");
        assert!(out.contains("fx, web"), "{case}\n{out}");
        pretty_assertions::assert_eq!(std::fs::read_to_string(&user)?, expected, "{case}");
    }
    Ok(())
}
