//! Gemini CLI's stored OAuth credentials (`~/.gemini/mcp-oauth-tokens.json`, COMPAT §3.4),
//! read for import on first use and left in place. A file others can read is refused (the fix
//! is named); one that is not JSON is reported with its line and column, and never rewritten.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::token::Token;
use crate::secrets::Secret;

/// One server's credentials as Gemini CLI stored them.
#[derive(Debug, Clone)]
pub(crate) struct Imported {
    /// `serverName`.
    pub server: String,
    /// The token.
    pub token: Token,
    /// `clientId` (dynamic registration's, or configured).
    pub client_id: Option<String>,
    /// `tokenUrl`, for refresh.
    pub token_url: Option<String>,
    /// `mcpServerUrl`, the `resource` of refreshes.
    pub server_url: Option<String>,
}

/// Why the file was not imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ImportError {
    /// Others may read it: its tokens are not trusted to be the user's alone.
    #[cfg_attr(not(unix), allow(dead_code, reason = "permission bits are read on Unix only"))]
    #[error("{} is readable by others (mode {mode:o}): not imported; `chmod 600 {}` fixes it", .path.display(), .path.display())]
    LoosePermissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It does not parse; it is left as it is.
    #[error("{}:{line}:{column}: not Gemini CLI's token list ({why}); left as it is, nothing imported", .path.display())]
    NotJson {
        /// The file.
        path: PathBuf,
        /// Where.
        line: usize,
        /// Where.
        column: usize,
        /// What serde said.
        why: String,
    },
    /// It cannot be read.
    #[error("cannot read {}: {why}", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredToken {
    access_token: String,
    refresh_token: Option<String>,
    expires_at: Option<u64>,
    token_type: Option<String>,
    scope: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    server_name: String,
    token: StoredToken,
    client_id: Option<String>,
    token_url: Option<String>,
    mcp_server_url: Option<String>,
}

/// The credentials in Gemini CLI's token file; none when there is no file.
pub(crate) fn read(path: &Path) -> Result<Vec<Imported>, ImportError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ImportError::Unreadable { path: path.into(), why: e.to_string() }),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(ImportError::LoosePermissions { path: path.into(), mode });
        }
    }
    if !meta.is_file() {
        return Err(ImportError::Unreadable {
            path: path.into(),
            why: "not a regular file".into(),
        });
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| ImportError::Unreadable { path: path.into(), why: e.to_string() })?;
    let stored: Vec<Stored> = serde_json::from_str(&text).map_err(|e| ImportError::NotJson {
        path: path.into(),
        line: e.line(),
        column: e.column(),
        why: e.to_string().split(" at line").next().unwrap_or_default().to_owned(),
    })?;
    Ok(stored
        .into_iter()
        .map(|s| Imported {
            server: s.server_name,
            token: Token {
                access: Secret::new(s.token.access_token),
                refresh: s.token.refresh_token.map(Secret::new),
                expires_at_ms: s.token.expires_at,
                token_type: s.token.token_type.unwrap_or_else(|| "Bearer".into()),
                scope: s.token.scope,
            },
            client_id: s.client_id,
            token_url: s.token_url,
            server_url: s.mcp_server_url,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let p = dir.join("mcp-oauth-tokens.json");
        std::fs::write(&p, text).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        p
    }

    #[test]
    fn gemini_clis_token_file_is_read_as_it_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(&dir.path().join("absent.json")).unwrap().is_empty());
        let text = r#"[
  {
    "serverName": "remote",
    "token": { "accessToken": "AT-import", "refreshToken": "RT-import", "expiresAt": 1800000000000, "tokenType": "Bearer", "scope": "read" },
    "clientId": "cid",
    "tokenUrl": "https://auth.test/token",
    "mcpServerUrl": "https://mcp.test/mcp",
    "updatedAt": 1700000000000
  },
  { "serverName": "bare", "token": { "accessToken": "AT-2", "tokenType": "Bearer" }, "updatedAt": 1 }
]"#;
        let p = write(dir.path(), text, 0o600);
        let got = read(&p).unwrap();
        assert_eq!(got.len(), 2);
        let r = &got[0];
        assert_eq!((r.server.as_str(), r.client_id.as_deref()), ("remote", Some("cid")));
        assert_eq!(r.token.access.expose(), "AT-import");
        assert_eq!(r.token.refresh.as_ref().map(|t| t.expose().as_str()), Some("RT-import"));
        assert_eq!(r.token.expires_at_ms, Some(1_800_000_000_000));
        assert_eq!(r.server_url.as_deref(), Some("https://mcp.test/mcp"));
        assert!(got[1].token.refresh.is_none() && got[1].token.expires_at_ms.is_none());
        assert!(!format!("{got:?}").contains("AT-import"), "no token in Debug");
    }

    #[cfg(unix)]
    #[test]
    fn a_file_others_can_read_is_refused_and_one_that_does_not_parse_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "[]", 0o644);
        let e = read(&p).unwrap_err();
        assert!(matches!(e, ImportError::LoosePermissions { mode: 0o644, .. }), "{e:?}");
        assert!(e.to_string().contains(&format!("chmod 600 {}", p.display())), "{e}");
        let p = write(dir.path(), "[\n  {\"serverName\": ", 0o600);
        let e = read(&p).unwrap_err();
        assert!(matches!(e, ImportError::NotJson { line: 2, .. }), "{e:?}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "[\n  {\"serverName\": ", "left as it is");
    }
}
