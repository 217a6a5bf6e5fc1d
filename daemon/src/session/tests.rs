use super::*;
use pretty_assertions::assert_eq;

fn registry(
    store: Store,
) -> (Sessions, tokio::sync::broadcast::Receiver<Arc<crate::events::Published>>) {
    let bus = Arc::new(EventBus::new(64));
    let rx = bus.subscribe();
    let sessions = Sessions::new(store, bus);
    for c in 1..=4 {
        sessions.connection_opened(ConnId(c));
    }
    (sessions, rx)
}

#[tokio::test]
async fn a_call_that_finishes_after_its_connection_closed_does_not_attach() -> anyhow::Result<()> {
    let ws = tempfile::tempdir()?;
    let (sessions, _rx) = registry(Store::temporary()?);
    sessions.connection_closed(ConnId(1)).await;
    let s = sessions.create(ConnId(1), params(ws.path(), false)).await?;
    assert_eq!(s.attached_connections, 0);
    assert_eq!(sessions.attach(ConnId(1), &s.id, None).await?.attached_connections, 0);
    assert_eq!(sessions.counts(), (1, 0));
    Ok(())
}

fn params(workspace: &Path, reuse_default: bool) -> SessionCreateParams {
    SessionCreateParams {
        workspace: workspace.to_string_lossy().into_owned(),
        env: None,
        reuse_default,
        ..SessionCreateParams::default()
    }
}

fn kinds(
    rx: &mut tokio::sync::broadcast::Receiver<Arc<crate::events::Published>>,
) -> Vec<&'static str> {
    std::iter::from_fn(|| rx.try_recv().ok()).map(|p| p.event.body.kind()).collect()
}

#[tokio::test]
async fn lifecycle_counts_attachments_and_emits_events() -> anyhow::Result<()> {
    let ws = tempfile::tempdir()?;
    let (sessions, mut rx) = registry(Store::temporary()?);
    let (c1, c2) = (ConnId(1), ConnId(2));

    let s = sessions.create(c1, params(ws.path(), false)).await?;
    assert_eq!(s.attached_connections, 1);
    assert_eq!(s.workspace, std::fs::canonicalize(ws.path())?.to_string_lossy());
    assert_eq!(sessions.attach(c2, &s.id, None).await?.attached_connections, 2);
    // Attaching twice from one connection counts once.
    assert_eq!(sessions.attach(c2, &s.id, None).await?.attached_connections, 2);
    assert_eq!(sessions.detach(c1, &s.id).await?.attached_connections, 1);
    sessions.connection_closed(c2).await;
    assert_eq!(sessions.get(&s.id)?.attached_connections, 0);
    assert_eq!(sessions.counts(), (1, 0));
    let closed = sessions.close(&s.id).await?;
    assert_eq!(closed.id, s.id);
    assert!(matches!(sessions.get(&s.id), Err(SessionError::NotFound(_))));
    assert_eq!(
        kinds(&mut rx),
        [
            "session/created",
            "session/attached",
            "session/attached",
            "session/detached",
            "session/detached",
            "session/closed"
        ]
    );
    Ok(())
}

#[tokio::test]
async fn default_session_is_reused_per_workspace() -> anyhow::Result<()> {
    let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let (sessions, _rx) = registry(Store::temporary()?);
    let first = sessions.create(ConnId(1), params(a.path(), true)).await?;
    let again = sessions.create(ConnId(2), params(a.path(), true)).await?;
    let other = sessions.create(ConnId(3), params(b.path(), true)).await?;
    let fresh = sessions.create(ConnId(4), params(a.path(), false)).await?;
    assert_eq!(again.id, first.id);
    assert!(first.is_default && !fresh.is_default);
    assert_ne!(other.id, first.id);
    assert_ne!(fresh.id, first.id);
    // Closing the default makes the next default a new session.
    sessions.close(&first.id).await?;
    let next = sessions.create(ConnId(1), params(a.path(), true)).await?;
    assert_ne!(next.id, first.id);
    Ok(())
}

#[tokio::test]
async fn invalid_workspaces_and_unknown_ids_are_clear_errors() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("file");
    std::fs::write(&file, "x")?;
    let (sessions, _rx) = registry(Store::temporary()?);
    for (path, want) in [
        (dir.path().join("missing"), "does not exist"),
        (file.clone(), "is not a directory"),
        ("relative/dir".into(), "must be an absolute path"),
    ] {
        let err = sessions.create(ConnId(1), params(&path, false)).await.err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains(want), "{path:?}: {msg}");
    }
    let msg = sessions.attach(ConnId(1), "nope", None).await.err().map(|e| e.to_string());
    assert_eq!(
        msg.as_deref(),
        Some("no session with id \"nope\"; `gemctl session list` shows the sessions that exist")
    );
    assert_eq!(sessions.counts(), (0, 0));
    Ok(())
}

#[tokio::test]
async fn sessions_survive_reopen_but_env_and_attachments_do_not() -> anyhow::Result<()> {
    let (db, ws) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let env: ClientEnv = [("API_TOKEN".to_owned(), "s3cr3t-sentinel".to_owned())].into();
    let id = {
        let (sessions, _rx) = registry(Store::open(db.path())?);
        let mut p = params(ws.path(), false);
        p.env = Some(env.clone());
        let s = sessions.create(ConnId(1), p).await?;
        assert_eq!(s.env_source, EnvSource::Client);
        assert_eq!(sessions.client_env(&s.id).as_deref(), Some(&env));
        s.id
    };
    let (sessions, _rx) = registry(Store::open_again(db.path())?);
    let s = sessions.get(&id)?;
    assert_eq!((s.attached_connections, s.env_source), (0, EnvSource::Daemon));
    assert_eq!(sessions.client_env(&id), None);
    Ok(())
}

#[tokio::test]
async fn list_paginates_and_filters_by_workspace() -> anyhow::Result<()> {
    let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let (sessions, _rx) = registry(Store::temporary()?);
    let mut ids = Vec::new();
    for i in 0..5 {
        let ws = if i % 2 == 0 { a.path() } else { b.path() };
        ids.push(sessions.create(ConnId(1), params(ws, false)).await?.id);
    }
    let page =
        |cursor: Option<String>| SessionListParams { workspace: None, cursor, limit: Some(2) };
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let r = sessions.list(page(cursor))?;
        seen.extend(r.sessions.into_iter().map(|s| s.id));
        match r.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, ids);
    let only_a = sessions.list(SessionListParams {
        workspace: Some(a.path().to_string_lossy().into_owned()),
        ..Default::default()
    })?;
    assert_eq!(only_a.sessions.len(), 3);
    Ok(())
}
