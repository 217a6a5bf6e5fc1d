//! Roots: what `roots/list` answers for a session, and who may share a server that asks.
//!
//! A session's roots are its folders (`config::folders`: its workspace and its
//! `context.includeDirectories`), as `file://` URIs named by their last
//! component, in that order and without repeats: what Gemini CLI's `roots/list` answers.
//!
//! Sharing: a server is shared by identity (its launch spec). Once a server has asked for
//! roots, its answer depends on the session, so from then on (and across daemon restarts:
//! the mark is kept in the store) sessions share it only when their roots are equal: each set
//! of roots runs its own server, whose identity is the spec's with the roots mixed in
//! ([`split_identity`]). The server that asked first keeps the sessions whose roots it was
//! given; the others move to their own at once.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::env::Env;
use crate::config::folders::dirs;

/// The set of marks in the store naming spec identities whose servers asked for roots.
pub(crate) const ROOTS_SET: &str = "asks-roots";

/// One root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Root {
    /// `file://…`.
    pub uri: String,
    /// The folder's last component.
    pub name: String,
}

/// A session's roots, in order.
pub(crate) type Roots = Arc<[Root]>;

/// The roots of a session in `workspace` with these merged settings.
pub(crate) fn of(workspace: &Path, settings: &Value, env: &Env) -> Roots {
    dirs(workspace, settings, env)
        .iter()
        .filter_map(|d| {
            let uri = reqwest::Url::from_directory_path(d).ok()?.to_string();
            let uri = uri.strip_suffix('/').filter(|u| u.len() > "file://".len()).unwrap_or(&uri);
            let name = d
                .file_name()
                .map_or_else(|| d.display().to_string(), |n| n.to_string_lossy().into_owned());
            Some(Root { uri: uri.to_owned(), name })
        })
        .collect()
}

/// The identity of the server a spec of identity `base` runs as for sessions with `roots`,
/// once it is known to ask for them.
pub(crate) fn split_identity(base: &str, roots: &Roots) -> String {
    let mut h = Sha256::new();
    h.update(base.as_bytes());
    for r in roots.iter() {
        h.update(b"\0");
        h.update(r.uri.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `roots/list`'s result.
#[allow(
    deprecated,
    reason = "roots are SEP-2577-deprecated; servers of the eras before 2026-07-28 use them"
)]
pub(crate) fn result(roots: &Roots) -> rmcp::model::ListRootsResult {
    rmcp::model::ListRootsResult::new(
        roots
            .iter()
            .map(|r| rmcp::model::Root::new(r.uri.clone()).with_name(r.name.clone()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env() -> Env {
        Env::from([("HOME".to_owned(), "/home/u".to_owned())])
    }

    #[test]
    fn workspace_then_include_directories_without_repeats() {
        let s = json!({"context": {"includeDirectories": ["../lib", "~/notes", "/w/p", "", "./docs/.."]}});
        let roots = of(Path::new("/w/p"), &s, &env());
        let uris: Vec<&str> = roots.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["file:///w/p", "file:///w/lib", "file:///home/u/notes"]);
        let names: Vec<&str> = roots.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["p", "lib", "notes"]);
    }

    #[test]
    fn spaces_are_escaped_and_split_identities_differ_by_roots() {
        let a = of(Path::new("/w/my project"), &json!({}), &env());
        assert_eq!(a[0].uri, "file:///w/my%20project");
        let b = of(Path::new("/w/other"), &json!({}), &env());
        assert_ne!(split_identity("x", &a), split_identity("x", &b));
        assert_eq!(split_identity("x", &a), split_identity("x", &a.clone()));
        assert_ne!(split_identity("x", &a), "x");
    }
}
