//! Environment variables in settings: the two expansion passes and redaction, exactly as
//! Gemini CLI does them (COMPAT §1.2 and §1.4). The stdio spawn (MCP) and the hook runner
//! both use [`sanitize_environment`]; it is the single place that decides what looks secret.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// An environment: name → value.
pub(crate) type Env = BTreeMap<String, String>;

static SETTINGS_VAR: LazyLock<Regex> = LazyLock::new(|| {
    // `$VAR`, `${VAR}`, `${VAR:-default}`; `${FOO.BAR}` allowed.
    crate::literal::regex(r"\$(?:(\w+)|\{([^}]+?)(?::-([^}]*))?\})")
});

static SPAWN_VAR: LazyLock<Regex> = LazyLock::new(|| {
    // dotenv-expand 12: `${expression}` (anything but braces inside) or `$NAME`.
    crate::literal::regex(r"\$\{([^{}]+)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
});

/// Replacements one spawn-time expansion makes at most (dotenv-expand re-reads its result
/// after each one, so a value that expands to itself must end).
const MAX_EXPANSIONS: usize = 10_000;

/// Settings-load expansion of one string: defined variables are replaced, undefined ones are
/// left as written (`$UNDEFINED` stays), `${VAR:-default}` falls back to the default.
pub(crate) fn expand_settings_str(s: &str, env: &Env) -> String {
    if !s.contains('$') {
        return s.to_owned();
    }
    SETTINGS_VAR
        .replace_all(s, |c: &Captures<'_>| {
            let name = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
            match (env.get(name), c.get(3)) {
                (Some(v), _) => v.clone(),
                (None, Some(default)) => default.as_str().to_owned(),
                (None, None) => c[0].to_owned(),
            }
        })
        .into_owned()
}

/// Settings-load expansion of every string in a JSON value (object keys are not expanded).
pub(crate) fn expand_settings_value(value: &mut serde_json::Value, env: &Env) {
    match value {
        serde_json::Value::String(s) => *s = expand_settings_str(s, env),
        serde_json::Value::Array(items) => {
            items.iter_mut().for_each(|v| expand_settings_value(v, env))
        }
        serde_json::Value::Object(map) => {
            map.values_mut().for_each(|v| expand_settings_value(v, env))
        }
        _ => {}
    }
}

/// Spawn-time expansion (a server's `env` and `headers` values), with dotenv-expand 12's
/// semantics as Gemini CLI's `expandEnvVars` uses them: `$VAR` and `${VAR}`; `${VAR:-d}` and
/// `${VAR-d}` give `d` when VAR is unset *or empty*; `${VAR:+x}` and `${VAR+x}` give `x` when
/// VAR is set and not empty, else nothing; a missing variable is empty; the name inside braces
/// may be anything (`${A.B}`). Replaced text is expanded again (chained values), a value that
/// would expand to a text already seen falls back to its default (self-reference), and `\$`
/// is a literal `$`. On Windows `%VAR%` is expanded first.
pub(crate) fn expand_env_vars(s: &str, env: &Env) -> String {
    let mut result = if cfg!(windows) {
        static PERCENT: LazyLock<Regex> = LazyLock::new(|| crate::literal::regex(r"%(\w+)%"));
        PERCENT
            .replace_all(s, |c: &Captures<'_>| env.get(&c[1]).cloned().unwrap_or_default())
            .into_owned()
    } else {
        s.to_owned()
    };
    if !result.contains('$') {
        return result;
    }
    // JavaScript truthiness: an empty value is no value.
    let value = |k: &str| env.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    for _ in 0..MAX_EXPANSIONS {
        // The first reference not escaped by a backslash.
        let found = SPAWN_VAR.captures_iter(&result).find(|c| {
            let start = c.get(0).map_or(0, |m| m.start());
            start == 0 || result.as_bytes()[start - 1] != b'\\'
        });
        let Some(c) = found else { break };
        let (Some(whole), Some(expr)) = (c.get(0), c.get(1).or_else(|| c.get(2))) else { break };
        let (range, expr) = (whole.range(), expr.as_str().to_owned());
        seen.insert(result.clone());
        let (key, op, rest) = split_operator(&expr);
        let replacement = match op {
            Some(":+" | "+") => {
                if value(key).is_some() {
                    rest.to_owned()
                } else {
                    String::new()
                }
            }
            _ => match value(key) {
                Some(v) if !seen.contains(v) => v.to_owned(),
                _ => rest.to_owned(),
            },
        };
        result.replace_range(range, &replacement);
    }
    result.replace("\\$", "$")
}

/// `key`, the first operator (`:+`, `+`, `:-` or `-`, the leftmost), and the text after it.
fn split_operator(expr: &str) -> (&str, Option<&'static str>, &str) {
    for (i, _) in expr.char_indices() {
        let at = &expr[i..];
        for op in [":+", "+", ":-", "-"] {
            if at.starts_with(op) {
                return (&expr[..i], Some(op), &expr[i + op.len()..]);
            }
        }
    }
    (expr, None, "")
}

/// `security.environmentVariableRedaction` settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Redaction {
    /// Redact at all (MCP stdio forces this on).
    pub enabled: bool,
    /// Names always kept (case-insensitive).
    pub allowed: Vec<String>,
    /// Names always redacted (case-insensitive).
    pub blocked: Vec<String>,
}

impl Redaction {
    /// Read `security.environmentVariableRedaction` from merged settings.
    pub(crate) fn from_settings(settings: &serde_json::Value) -> Self {
        let r = &settings["security"]["environmentVariableRedaction"];
        let list = |k: &str| {
            r[k].as_array()
                .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                .unwrap_or_default()
        };
        Self {
            enabled: r["enabled"].as_bool().unwrap_or(false),
            allowed: list("allowed"),
            blocked: list("blocked"),
        }
    }
}

const ALWAYS_ALLOWED: &[&str] = &[
    "PATH",
    "SYSTEMROOT",
    "COMSPEC",
    "PATHEXT",
    "WINDIR",
    "TEMP",
    "TMP",
    "USERPROFILE",
    "SYSTEMDRIVE",
    "HOME",
    "LANG",
    "SHELL",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "TERM",
    "COLORTERM",
    "ADDITIONAL_CONTEXT",
    "AVAILABLE_LABELS",
    "BRANCH_NAME",
    "DESCRIPTION",
    "EVENT_NAME",
    "GITHUB_ENV",
    "IS_PULL_REQUEST",
    "ISSUES_TO_TRIAGE",
    "ISSUE_BODY",
    "ISSUE_NUMBER",
    "ISSUE_TITLE",
    "PULL_REQUEST_NUMBER",
    "REPOSITORY",
    "TITLE",
    "TRIGGERING_ACTOR",
];

const NEVER_ALLOWED: &[&str] = &[
    "CLIENT_ID",
    "DB_URI",
    "CONNECTION_STRING",
    "AWS_DEFAULT_REGION",
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "SLACK_WEBHOOK_URL",
    "TWILIO_ACCOUNT_SID",
    "DATABASE_URL",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_ACCOUNT",
    "FIREBASE_PROJECT_ID",
];

const SECRET_NAME_PARTS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "AUTH",
    "CREDENTIAL",
    "CREDS",
    "PRIVATE",
    "CERT",
];

static SECRET_VALUES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"-----BEGIN (RSA|OPENSSH|EC|PGP) PRIVATE KEY-----",
        r"-----BEGIN CERTIFICATE-----",
        r"(https?|ftp|smtp)://[^:\s]+:[^@\s]+@",
        r"(ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{36,}",
        r"AIzaSy[A-Za-z0-9_\\-]{33}",
        r"AKIA[A-Z0-9]{16}",
        r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*",
        r"(s|r)k_(live|test)_[0-9A-Za-z]{24}",
        r"xox[abpr]-[A-Za-z0-9-]+",
    ]
    .iter()
    .map(|p| crate::literal::regex_ignoring_case(p))
    .collect()
});

/// Whether a value has the shape of a credential (key material, tokens, credentials in URLs).
pub(crate) fn value_looks_secret(value: &str) -> bool {
    SECRET_VALUES.iter().any(|r| r.is_match(value))
}

/// Whether a variable name suggests a secret (`TOKEN`, `KEY`, `AUTH`, ... anywhere in it).
pub(crate) fn name_looks_secret(name: &str) -> bool {
    let upper = name.to_uppercase();
    SECRET_NAME_PARTS.iter().any(|p| upper.contains(p))
}

/// Strict mode (CI): everything not explicitly allowed is redacted.
fn strict(env: &Env) -> bool {
    env.contains_key("GITHUB_SHA") || env.get("SURFACE").is_some_and(|s| s == "Github")
}

fn should_redact(name: &str, value: &str, cfg: &Redaction, strict: bool) -> bool {
    let key = name.to_uppercase();
    let listed = |list: &[String]| list.iter().any(|k| k.trim().eq_ignore_ascii_case(&key));
    if key.starts_with("GEMINI_CLI_") {
        return false;
    }
    if value_looks_secret(value) {
        return true;
    }
    if key.starts_with("GIT_CONFIG_") || listed(&cfg.allowed) {
        return false;
    }
    if listed(&cfg.blocked) {
        return true;
    }
    if ALWAYS_ALLOWED.contains(&key.as_str()) {
        return false;
    }
    if NEVER_ALLOWED.contains(&key.as_str()) || strict {
        return true;
    }
    name_looks_secret(&key)
}

/// Gemini CLI's `sanitizeEnvironment`: the variables that may be passed on. With redaction
/// disabled (and not in strict mode) everything is kept.
pub(crate) fn sanitize_environment(env: &Env, cfg: &Redaction) -> Env {
    let strict = strict(env);
    if !cfg.enabled && !strict {
        return env.clone();
    }
    env.iter()
        .filter(|(k, v)| !should_redact(k, v, cfg, strict))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// What `config/get` shows for an `env` or `headers` value: the value, unless the name or the
/// value looks secret.
pub(crate) fn display_value(name: &str, value: &str) -> String {
    let header_secret = matches!(
        name.to_ascii_lowercase().as_str(),
        "authorization" | "cookie" | "proxy-authorization"
    );
    if header_secret
        || name_looks_secret(name)
        || value_looks_secret(value)
        || NEVER_ALLOWED.contains(&name.to_uppercase().as_str())
    {
        REDACTED.to_owned()
    } else {
        value.to_owned()
    }
}

/// The placeholder shown instead of a secret.
pub(crate) const REDACTED: &str = "[redacted]";

/// `text` with the user information of every URL in it (`http://user:password@host/`)
/// replaced by [`REDACTED`], and the value of every query parameter whose name looks secret
/// (`?api_key=`, `token`, `sig`, `password`, `auth`, ...): a URL in a server's settings,
/// status, events, error messages or the daemon's log never shows a password or a key.
pub(crate) fn redact_urls(text: &str) -> std::borrow::Cow<'_, str> {
    static USERINFO: LazyLock<Regex> =
        LazyLock::new(|| crate::literal::regex(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s@]+@"));
    // A parameter's name, after `?`, `&` or `;`, with a part that looks secret; its value runs
    // to the next separator, quote or backslash (so a JSON string or an escape ends it).
    static QUERY: LazyLock<Regex> = LazyLock::new(|| {
        crate::literal::regex_ignoring_case(
            r#"([?&;][A-Za-z0-9_.\-\[\]]*(?:key|token|secret|passw|pwd|auth|sig|credential|session|code|jwt|bearer)[A-Za-z0-9_.\-\[\]]*=)([^&;#\s"'<>\\]+)"#,
        )
    });
    let mut out = std::borrow::Cow::Borrowed(text);
    if out.contains('@')
        && let std::borrow::Cow::Owned(o) =
            USERINFO.replace_all(&out, |c: &Captures<'_>| format!("{}{REDACTED}@", &c[1]))
    {
        out = std::borrow::Cow::Owned(o);
    }
    if out.contains('=')
        && let std::borrow::Cow::Owned(o) = QUERY.replace_all(&out, |c: &Captures<'_>| {
            // A variable's name as written (`?key=${API_KEY}`) is no secret, and is shown.
            let value = if is_reference(&c[2]) { &c[2] } else { REDACTED };
            format!("{}{value}", &c[1])
        })
    {
        out = std::borrow::Cow::Owned(o);
    }
    out
}

/// Whether `value` is wholly a variable's name as written: `$NAME` or `${NAME}`.
fn is_reference(value: &str) -> bool {
    let name = value.strip_prefix("${").and_then(|v| v.strip_suffix('}'));
    let name = name.or_else(|| value.strip_prefix('$')).unwrap_or_default();
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Variables that differ between two shells of the same user and mean nothing to a server
/// (working directory, shell depth, terminal size and ids, per-connection SSH and TTY names).
/// They are removed from a stdio child's inherited environment.
pub(crate) const VOLATILE_ENV: &[&str] = &[
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "COLUMNS",
    "LINES",
    "TERM_SESSION_ID",
    "ITERM_SESSION_ID",
    "WINDOWID",
    "KITTY_WINDOW_ID",
    "WEZTERM_PANE",
    "TMUX_PANE",
    "STY",
    "SSH_TTY",
    "SSH_CLIENT",
    "SSH_CONNECTION",
    "GPG_TTY",
];

#[cfg(test)]
mod tests;
