//! The extensions service (`extensions/*`): each change made in the extensions folder (on a
//! blocking thread: copying and hashing read many files), then the configuration reloaded, so
//! the caller's next request sees the extension's servers and hooks come or go.

use std::path::{Path, PathBuf};

use geminid_protocol::config::WriteScope;
use geminid_protocol::event::EventBody;
use geminid_protocol::extensions::{
    ExtensionEnableResult, ExtensionInfo, ExtensionInstallParams, ExtensionInstallResult,
    ExtensionProgress, ExtensionSetting, ExtensionUninstallResult, ExtensionUpdateEntry,
    ExtensionUpdateParams, ExtensionUpdateResult, ExtensionsListResult,
};

use std::sync::Arc;

use crate::extensions::fetch::Source;
use crate::extensions::{ExtensionError, Extensions, Scan};
use crate::services::configs::Configs;
use crate::services::reload::Reloader;
use crate::session::SessionError;

/// Why an `extensions/*` request failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExtensionsError {
    /// The session is unknown.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The extensions refused or failed.
    #[error(transparent)]
    Extension(#[from] ExtensionError),
}

/// Extensions listed, verified, installed, updated, enabled and removed.
#[derive(Debug)]
pub(crate) struct ExtensionService {
    config: Arc<Configs>,
    /// Sessions.
    sessions: Arc<crate::session::Sessions>,
    /// Installed extensions.
    extensions: Arc<crate::extensions::Extensions>,
    /// The event bus.
    events: Arc<crate::events::EventBus>,
    /// Each change is applied by a reload.
    reloader: Arc<Reloader>,
}

impl ExtensionService {
    pub(crate) fn new(
        config: Arc<Configs>,
        sessions: Arc<crate::session::Sessions>,
        extensions: Arc<crate::extensions::Extensions>,
        events: Arc<crate::events::EventBus>,
        reloader: Arc<Reloader>,
    ) -> Self {
        Self { config, sessions, extensions, events, reloader }
    }

    fn workspace_of(&self, session: &str) -> Result<PathBuf, SessionError> {
        Ok(self.sessions.record(session)?.workspace.into())
    }

    /// Run `f` on the extensions on a blocking thread.
    async fn on_extensions<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Extensions) -> Result<T, ExtensionError> + Send + 'static,
    ) -> Result<T, ExtensionsError> {
        let ext = self.extensions.clone();
        tokio::task::spawn_blocking(move || f(&ext))
            .await
            .map_err(|e| ExtensionError::Io(format!("the extensions task failed: {e}")))?
            .map_err(ExtensionsError::from)
    }

    async fn extensions_changed(&self, session: &str, reason: &str) {
        if let Err(e) = self.reloader.reload(Some(session), reason).await {
            tracing::warn!(reason, error = %e, "could not apply the extensions' change at once");
        }
    }

    fn listing(scan: &Scan, workspace: &Path, only: Option<&str>) -> ExtensionsListResult {
        let extensions = scan
            .installed
            .iter()
            .filter(|e| only.is_none_or(|n| e.name.eq_ignore_ascii_case(n)))
            .map(|e| Extensions::info(e, scan.enablement.is_enabled(&e.name, workspace)))
            .collect();
        ExtensionsListResult { extensions, diagnostics: scan.diagnostics.clone() }
    }

    fn one(&self, workspace: &Path, name: &str) -> Result<ExtensionInfo, ExtensionsError> {
        Self::listing(&self.extensions.current(), workspace, Some(name))
            .extensions
            .into_iter()
            .next()
            .ok_or_else(|| ExtensionError::NotFound(name.to_owned()).into())
    }

    /// `extensions/list`.
    pub(crate) fn list(&self, session: &str) -> Result<ExtensionsListResult, ExtensionsError> {
        let ws = self.workspace_of(session)?;
        Ok(Self::listing(&self.extensions.current(), &ws, None))
    }

    /// `extensions/verify`: every file hashed again now.
    pub(crate) async fn verify(
        &self,
        session: &str,
        name: Option<&str>,
    ) -> Result<ExtensionsListResult, ExtensionsError> {
        let ws = self.workspace_of(session)?;
        let scan = self.on_extensions(|x| Ok(x.rescan(true))).await?;
        if let Some(n) = name
            && scan.find(n).is_none()
        {
            return Err(ExtensionError::NotFound(n.to_owned()).into());
        }
        self.extensions_changed(session, "extensions/verify").await;
        Ok(Self::listing(&scan, &ws, name))
    }

    /// `extensions/accept`.
    pub(crate) async fn accept(
        &self,
        session: &str,
        name: &str,
    ) -> Result<ExtensionInfo, ExtensionsError> {
        let ws = self.workspace_of(session)?;
        let n = name.to_owned();
        self.on_extensions(move |x| x.accept(&n)).await?;
        self.extensions_changed(session, "extensions/accept").await;
        self.one(&ws, name)
    }

    /// `extensions/enable` and `extensions/disable`.
    pub(crate) async fn set_enabled(
        &self,
        session: &str,
        name: &str,
        enabled: bool,
        scope: WriteScope,
    ) -> Result<ExtensionEnableResult, ExtensionsError> {
        let ws = self.workspace_of(session)?;
        let at = match scope {
            WriteScope::User => self.config.paths().home.clone(),
            WriteScope::Project => ws.clone(),
        };
        let n = name.to_owned();
        let (name, rule) = self.on_extensions(move |x| x.set_enabled(&n, enabled, &at)).await?;
        self.extensions_changed(
            session,
            if enabled { "extensions/enable" } else { "extensions/disable" },
        )
        .await;
        let now = self.extensions.current().enablement.is_enabled(&name, &ws);
        Ok(ExtensionEnableResult { name, rule, enabled: now })
    }

    /// Tells the session's subscribers each step of an install or update.
    fn progress(&self, session: &str, what: &str) -> impl Fn(&str) + Send + 'static {
        let (events, session, what) = (self.events.clone(), session.to_owned(), what.to_owned());
        move |step: &str| {
            events.emit(EventBody::ExtensionProgress(ExtensionProgress {
                session: session.clone(),
                what: what.clone(),
                step: step.to_owned(),
            }));
        }
    }

    /// `extensions/install` (`link`: `extensions/link`).
    pub(crate) async fn install(
        &self,
        session: &str,
        p: &ExtensionInstallParams,
        link: bool,
    ) -> Result<ExtensionInstallResult, ExtensionsError> {
        let ws = self.workspace_of(session)?;
        let home = self.config.paths().home.clone();
        let consent = p.consent;
        let progress = self.progress(session, &p.source);
        let done = if link {
            let source = ws.join(&p.source);
            self.on_extensions(move |x| x.link(&source, consent, &home)).await?
        } else {
            let source = Source::infer(&p.source, p.reference.clone(), &ws)?;
            let given = p.settings.clone();
            self.on_extensions(move |x| x.install(&source, consent, &given, &home, &progress))
                .await?
        };
        let settings = done
            .settings
            .iter()
            .map(|s| ExtensionSetting {
                name: s.name.clone(),
                description: s.description.clone(),
                env_var: s.env_var.clone(),
                sensitive: s.sensitive,
            })
            .collect();
        if !done.installed {
            let consent = done.consent;
            return Ok(ExtensionInstallResult {
                installed: false,
                consent,
                settings,
                extension: None,
            });
        }
        tracing::info!(extension = done.name, link, "extension installed");
        let reason = if link { "extensions/link" } else { "extensions/install" };
        self.extensions_changed(session, reason).await;
        let info = self.one(&ws, &done.name)?;
        Ok(ExtensionInstallResult {
            installed: true,
            consent: done.consent,
            settings,
            extension: Some(info),
        })
    }

    /// `extensions/update`.
    pub(crate) async fn update(
        &self,
        p: &ExtensionUpdateParams,
    ) -> Result<ExtensionUpdateResult, ExtensionsError> {
        self.workspace_of(&p.session)?;
        if p.name.is_none() && !p.all {
            return Err(ExtensionError::Refused(
                "name an extension to update, or update them all (`--all`)".into(),
            )
            .into());
        }
        if p.reference.is_some() && p.all {
            return Err(ExtensionError::Refused(
                "--ref moves one extension's pin: name it instead of `--all`".into(),
            )
            .into());
        }
        let name = if p.all { None } else { p.name.clone() };
        let reference = p.reference.clone();
        let found = self
            .on_extensions(move |x| x.check_updates(name.as_deref(), reference.as_deref()))
            .await?;
        let mut out = Vec::new();
        let mut changed = false;
        for a in found {
            let mut entry = ExtensionUpdateEntry {
                name: a.name.clone(),
                version: a.version,
                available: a.update.clone(),
                updated: false,
                to: None,
                consent: None,
                error: a.error,
                pinned: a.pinned,
            };
            if !p.check && a.update.is_some() {
                let (n, consent, reference) = (a.name.clone(), p.consent, p.reference.clone());
                let progress = self.progress(&p.session, &a.name);
                let update = move |x: &crate::extensions::Extensions| {
                    x.update(&n, consent, reference.as_deref(), &progress)
                };
                match self.on_extensions(update).await {
                    Ok(u) => {
                        changed |= u.updated;
                        entry.updated = u.updated;
                        entry.to = u.updated.then_some(u.to);
                        entry.consent = u.consent;
                    }
                    // One extension named: its failure is the answer.
                    Err(e) if !p.all => return Err(e),
                    Err(e) => entry.error = Some(e.to_string()),
                }
            }
            out.push(entry);
        }
        if changed {
            self.extensions_changed(&p.session, "extensions/update").await;
        }
        Ok(ExtensionUpdateResult { extensions: out })
    }

    /// `extensions/uninstall`.
    pub(crate) async fn uninstall(
        &self,
        session: &str,
        name: &str,
    ) -> Result<ExtensionUninstallResult, ExtensionsError> {
        self.workspace_of(session)?;
        let n = name.to_owned();
        let (name, path) = self.on_extensions(move |x| x.uninstall(&n)).await?;
        tracing::info!(extension = name, "extension uninstalled");
        self.extensions_changed(session, "extensions/uninstall").await;
        Ok(ExtensionUninstallResult { name, path: path.display().to_string() })
    }
}

/// Extensions as an input: their folder, scanned again before every reload (what they
/// contribute is part of the sessions' configurations).
#[derive(Debug)]
pub(crate) struct ExtensionsInput(pub(crate) std::sync::Arc<crate::extensions::Extensions>);

impl crate::services::reload::Input for ExtensionsInput {
    fn name(&self) -> &'static str {
        "extensions"
    }

    fn watch(&self, _: &[crate::config::Effective], into: &mut crate::services::reload::Watched) {
        into.dirs.extend(self.0.watched_dirs());
    }

    fn before(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let extensions = self.0.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || extensions.rescan(false)).await {
                tracing::warn!(error = %e, "the extensions scan failed");
            }
        })
    }
}
