//! Installing skills (`skills/install`, `skills/link`, `skills/uninstall`) and turning them on
//! and off (`skills/enable`, `skills/disable`, then a reload).

use std::path::PathBuf;

use geminid_protocol::config::WriteScope;
use geminid_protocol::skills::{
    SkillEnableResult, SkillInstallParams, SkillInstallResult, SkillInstallScope,
    SkillUninstallResult,
};

use super::{Skills, SkillsError, skills_on};
use crate::services::reload::Reloader;
use crate::skills::{SkillError, install};

impl Skills {
    /// The skills folder of a scope.
    fn target(&self, session: &str, scope: SkillInstallScope) -> Result<PathBuf, SkillsError> {
        Ok(match scope {
            SkillInstallScope::User => self.home().join(".gemini").join("skills"),
            SkillInstallScope::Workspace => {
                let ws = PathBuf::from(self.sessions.record(session)?.workspace);
                if ws == self.home() {
                    return Err(SkillError::Refused(
                        "the workspace is the home directory: use --scope user".into(),
                    )
                    .into());
                }
                ws.join(".gemini").join("skills")
            }
        })
    }

    /// `skills/install` and `skills/link`.
    pub(crate) async fn install(
        &self,
        p: SkillInstallParams,
        link: bool,
    ) -> Result<SkillInstallResult, SkillsError> {
        let target = self.target(&p.session, p.scope)?;
        let base = PathBuf::from(self.sessions.record(&p.session)?.workspace);
        let t = target.clone();
        let (result, names) = tokio::task::spawn_blocking(move || {
            let plan = install::plan(&p.source, &base, p.path.as_deref(), &t, link)?;
            if p.consent {
                install::apply(&plan, &t, link)?;
            }
            let names: Vec<String> = plan.skills.iter().map(|s| s.0.name.clone()).collect();
            Ok::<_, SkillError>((
                SkillInstallResult {
                    installed: p.consent,
                    skills: plan.installed(),
                    consent: plan.consent.clone(),
                    target: t.display().to_string(),
                },
                names,
            ))
        })
        .await
        .map_err(|e| SkillError::Io(format!("the install failed: {e}")))??;
        if result.installed {
            tracing::info!(skills = ?names, target = %target.display(), link, "skills installed");
            self.config.watch_changed().notify_one();
        }
        Ok(result)
    }

    /// `skills/uninstall`.
    pub(crate) async fn uninstall(
        &self,
        session: &str,
        name: &str,
        scope: SkillInstallScope,
    ) -> Result<SkillUninstallResult, SkillsError> {
        let target = self.target(session, scope)?;
        let n = name.to_owned();
        let removed = tokio::task::spawn_blocking(move || {
            let dir = install::find(&target, &n)?;
            install::remove_entry(&dir)?;
            Ok::<_, SkillError>(dir)
        })
        .await
        .map_err(|e| SkillError::Io(format!("the uninstall failed: {e}")))??;
        tracing::info!(skill = name, removed = %removed.display(), "skill uninstalled");
        Ok(SkillUninstallResult { name: name.to_owned(), removed: removed.display().to_string() })
    }

    /// `skills/enable` and `skills/disable`: `skills.disabled` in the settings files (disable:
    /// the scope's; enable: the user's and the workspace's), then the configuration reloaded.
    pub(crate) async fn set_enabled(
        &self,
        reloader: &Reloader,
        session: &str,
        name: &str,
        enabled: bool,
        scope: WriteScope,
    ) -> Result<SkillEnableResult, SkillsError> {
        let ws = PathBuf::from(self.sessions.record(session)?.workspace);
        let (files, still) =
            crate::config::ops::set_skill_enabled(self.config.paths(), &ws, scope, name, enabled)
                .map_err(|e| SkillError::Refused(e.to_string()))?;
        if let Err(e) = reloader
            .reload(Some(session), if enabled { "skills/enable" } else { "skills/disable" })
            .await
        {
            tracing::warn!(error = %e, "could not apply the skills change at once");
        }
        let (reg, e) = self.registry(session)?;
        let now = reg.get(name).is_some_and(|x| x.enabled)
            || (enabled && reg.get(name).is_none() && skills_on(&e.public.settings));
        Ok(SkillEnableResult {
            name: name.to_owned(),
            files: files.iter().map(|f| f.display().to_string()).collect(),
            enabled: now,
            still_disabled_in: still,
        })
    }
}
