//! Updating an installed extension with a real rollback. The new version is fetched and
//! checked in a staging folder while the old one stays in place and keeps loading; only a new
//! version whose manifest is valid, whose name is the same and whose files are signed is
//! swapped in (the old folder renamed aside first). If anything fails after that, the old
//! folder and its records come back, so the extension that was working still works. (Gemini
//! CLI's rollback copies an empty folder back: issue #21671.)
//!
//! An update that would bring other servers, hooks, context files, excluded tools, skills,
//! commands, agents or policies than the ones agreed to needs consent again.

use std::path::Path;

use geminid_protocol::extensions::IntegrityState;

use super::fetch::Source;
use super::install::{checked_manifest, consent_text, write_metadata};
use super::{ExtensionError, Extensions};

/// What an update check found for one extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Available {
    /// The extension.
    pub name: String,
    /// Its installed version.
    pub version: String,
    /// The version (or, for git, the commit) an update would bring; none: up to date.
    pub update: Option<String>,
    /// Why it could not be checked.
    pub error: Option<String>,
    /// The git ref its install follows (`--ref`), if one was given: a tag never moves.
    pub pinned: Option<String>,
}

/// `source` following `reference` instead of the one recorded, for `update --ref`.
fn repinned(source: Source, reference: Option<&str>) -> Result<Source, ExtensionError> {
    match (source, reference) {
        (s, None) => Ok(s),
        (Source::Git { url, .. }, Some(r)) => {
            Ok(Source::Git { url, reference: Some(super::git::check_ref(r)?.to_owned()) })
        }
        (_, Some(_)) => Err(ExtensionError::Refused(
            "--ref is for extensions installed from git; this one has no refs".into(),
        )),
    }
}

/// What an update did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Updated {
    /// The extension.
    pub name: String,
    /// The version before.
    pub from: String,
    /// The version now (the same when nothing was updated).
    pub to: String,
    /// Swapped in (false: consent is needed, `consent` says to what).
    pub updated: bool,
    /// What the new version brings, when that changed.
    pub consent: Option<String>,
}

impl Extensions {
    /// Whether updates are available (`name`, or every installed one that is not linked).
    /// `reference`: check against this git ref instead of the recorded one (`update --ref`).
    pub(crate) fn check_updates(
        &self,
        name: Option<&str>,
        reference: Option<&str>,
    ) -> Result<Vec<Available>, ExtensionError> {
        let scan = self.rescan(false);
        if let Some(n) = name
            && scan.find(n).is_none()
        {
            return Err(ExtensionError::NotFound(n.to_owned()));
        }
        let mut out = Vec::new();
        for e in &scan.installed {
            if name.is_some_and(|n| !e.name.eq_ignore_ascii_case(n))
                || e.install_type() == Some("link")
            {
                continue;
            }
            let version = e.manifest.as_ref().map(|m| m.version.clone()).unwrap_or_default();
            let migrated = e.manifest.as_ref().and_then(|m| m.migrated_to.clone());
            let source = match e.metadata.as_ref().and_then(Source::of_metadata) {
                Some(s) => Some(repinned(s, reference)?),
                None => None,
            };
            let pinned = match &source {
                Some(Source::Git { reference, .. }) => reference.clone(),
                _ => None,
            };
            let (update, error) = match (migrated, source) {
                (Some(to), _) => (Some(format!("migrated to {to}")), None),
                (None, None) => {
                    (None, Some("no install metadata: reinstall it to update it".to_owned()))
                }
                (None, Some(s)) => match s.check_update(&e.dir, &version) {
                    Ok(u) => (u, None),
                    Err(err) => (None, Some(err.to_string())),
                },
            };
            out.push(Available { name: e.name.clone(), version, update, error, pinned });
        }
        Ok(out)
    }

    /// Update `name` from its source (or the source it migrated to).
    /// `reference`: fetch this git ref instead of the recorded one, and record it.
    pub(crate) fn update(
        &self,
        name: &str,
        consent: bool,
        reference: Option<&str>,
        progress: &dyn Fn(&str),
    ) -> Result<Updated, ExtensionError> {
        let _busy = self.busy.lock();
        let scan = self.rescan_locked(false);
        let e = scan.find(name).ok_or_else(|| ExtensionError::NotFound(name.to_owned()))?.clone();
        if e.install_type() == Some("link") {
            return Err(ExtensionError::Refused(format!(
                "{} is linked: it is read in place from {}, so there is nothing to update",
                e.name,
                e.path.display()
            )));
        }
        if matches!(e.integrity, IntegrityState::Tampered | IntegrityState::Unverifiable) {
            return Err(ExtensionError::Refused(format!(
                "{} cannot be updated: {} (an update must start from the files that were signed)",
                e.name,
                e.why_not.clone().unwrap_or_default()
            )));
        }
        let old = e.manifest.clone().ok_or_else(|| {
            ExtensionError::Refused(format!(
                "{} cannot be updated: its manifest cannot be read; reinstall it",
                e.name
            ))
        })?;
        let mut source = e.metadata.as_ref().and_then(Source::of_metadata).ok_or_else(|| {
            ExtensionError::Refused(format!(
                "{} has no install metadata to update from: reinstall it",
                e.name
            ))
        })?;
        if let Some(to) = &old.migrated_to {
            source = Source::infer(to, None, Path::new("/"))?;
        }
        let source = repinned(source, reference)?;
        let staging = self.staging("updating")?;
        let result = self.update_staged(&e, &old, &source, &staging, consent, progress);
        if staging.exists() {
            let _ = std::fs::remove_dir_all(&staging);
        }
        result
    }

    fn update_staged(
        &self,
        e: &super::Installed,
        old: &super::manifest::Manifest,
        source: &Source,
        staging: &Path,
        consent: bool,
        progress: &dyn Fn(&str),
    ) -> Result<Updated, ExtensionError> {
        source.fetch(staging, progress)?;
        let (new, hooks) = checked_manifest(staging).map_err(|err| {
            ExtensionError::Refused(format!(
                "the new version of {} is broken, so the installed one stays: {err}",
                e.name
            ))
        })?;
        if !new.name.eq_ignore_ascii_case(&e.name) {
            return Err(ExtensionError::Refused(format!(
                "the new version is named \"{}\", not \"{}\": install it as a new extension",
                new.name, e.name
            )));
        }
        let strip = |text: String| text.lines().skip(1).collect::<Vec<_>>().join("\n");
        let before = strip(consent_text(old, &e.dir, e.hooks.as_ref()));
        let after = strip(consent_text(&new, staging, hooks.as_ref()));
        // Consent again only for more than the installed version brings (removing asks none).
        let changed = super::install::brings_more(&before, &after);
        let after_text =
            super::install::update_consent(&e.name, &old.version, &new.version, &before, &after);
        let outcome = |updated: bool, to: &str| Updated {
            name: e.name.clone(),
            from: old.version.clone(),
            to: to.to_owned(),
            updated,
            consent: changed.then(|| after_text.clone()),
        };
        if changed && !consent {
            return Ok(outcome(false, &old.version));
        }
        let metadata = source.metadata();
        write_metadata(staging, &metadata)?;
        progress("swapping in the new version");
        let aside = self.staging("previous")?;
        std::fs::rename(&e.dir, &aside).map_err(|err| {
            ExtensionError::Io(format!("cannot move {} aside: {err}", e.dir.display()))
        })?;
        let swapped = std::fs::rename(staging, &e.dir)
            .map_err(|err| {
                ExtensionError::Io(format!(
                    "cannot move the new version into {}: {err}",
                    e.dir.display()
                ))
            })
            .and_then(|()| self.sign(&e.name, &e.dir, Some(&metadata)));
        let loads = swapped.and_then(|()| {
            let now = self.rescan_locked(true);
            match now.find(&e.name) {
                Some(x) if x.loadable() => Ok(()),
                Some(x) => Err(ExtensionError::Refused(format!(
                    "the new version does not load ({}), so the installed one was put back",
                    x.why_not.clone().unwrap_or_default()
                ))),
                None => Err(ExtensionError::Refused(
                    "the new version vanished; the installed one was put back".into(),
                )),
            }
        });
        if let Err(err) = loads {
            progress("rolling back");
            let _ = std::fs::remove_dir_all(&e.dir);
            std::fs::rename(&aside, &e.dir).map_err(|back| {
                ExtensionError::Io(format!(
                    "{err}; and putting the old version back failed too ({back}): it is in {}",
                    aside.display()
                ))
            })?;
            self.sign(&e.name, &e.dir, e.metadata.as_ref())?;
            self.rescan_locked(true);
            return Err(err);
        }
        let _ = std::fs::remove_dir_all(&aside);
        progress("updated");
        Ok(outcome(true, &new.version))
    }
}
