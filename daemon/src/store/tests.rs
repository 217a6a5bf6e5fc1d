use super::*;
use pretty_assertions::assert_eq;

fn rec(id: &str, workspace: &str, is_default: bool) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        workspace: workspace.into(),
        is_default,
        created_ms: 1,
        last_seen_ms: 2,
        state: SessionState::default(),
    }
}

#[test]
fn sessions_round_trip_and_paginate() -> anyhow::Result<()> {
    let store = Store::temporary()?;
    for id in ["a", "b", "c"] {
        store.put_session(&rec(id, "/w", id == "b"))?;
    }
    assert_eq!(store.session("b")?, Some(rec("b", "/w", true)));
    assert_eq!(store.default_session("/w", None)?.as_deref(), Some("b"));
    let after_a: Vec<_> = store.sessions_after(Some("a")).map(|r| r.map(|r| r.id)).collect();
    assert_eq!(after_a.into_iter().collect::<Result<Vec<_>, _>>()?, vec!["b", "c"]);
    store.delete_session(&rec("b", "/w", true))?;
    assert_eq!(store.default_session("/w", None)?, None);
    assert_eq!(store.session_count(), 2);
    Ok(())
}

#[test]
fn newer_record_versions_are_reported_not_misread() -> anyhow::Result<()> {
    let store = Store::temporary()?;
    store.sessions_tree().insert(session_key("x"), br#"{"v":99,"id":"x"}"#.to_vec())?;
    store.sessions_tree().insert(session_key("y"), b"not json".to_vec())?;
    let err = store.session("x").err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("record version 99 is newer"), "{err}");
    assert!(store.session("y").is_err());
    // Listing skips what it cannot read instead of failing.
    store.put_session(&rec("z", "/w", false))?;
    let ids: Vec<_> = store.sessions_after(None).filter_map(Result::ok).map(|r| r.id).collect();
    assert_eq!(ids, vec!["z"]);
    Ok(())
}

#[test]
fn newer_schema_is_refused() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    {
        let db = sled::Config::new().path(dir.path()).flush_every_ms(None).open()?;
        db.open_tree("meta")?.insert("schema", &7u32.to_be_bytes())?;
        db.flush()?;
    }
    let err = Store::open_again(dir.path()).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("schema version 7"), "{err}");
    Ok(())
}

/// Servers started together pin their first listings at once: every write succeeds and the
/// manifest names every record.
#[test]
fn pin_records_written_at_once_all_succeed_and_all_are_in_the_manifest() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path())?;
    for round in 0..20 {
        let keys: Vec<String> = (0..4).map(|i| format!("k{round}-{i}")).collect();
        let written: Vec<Result<(), String>> = std::thread::scope(|s| {
            let handles: Vec<_> = keys
                .iter()
                .map(|k| s.spawn(|| store.put_pins_record(k, b"{}").map_err(|e| e.to_string())))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
                .collect()
        });
        assert!(written.iter().all(Result::is_ok), "round {round}: {written:?}");
        let named = store.pins_manifest().map_err(anyhow::Error::msg)?;
        for k in &keys {
            assert!(named.contains(k), "round {round}: {k} not in the manifest {named:?}");
        }
    }
    Ok(())
}
