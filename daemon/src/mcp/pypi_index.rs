//! The user's Python package index for a server run by uv or pipx (`pypi.rs`): which index
//! the command uses (its `--index-url`, then uv's `UV_DEFAULT_INDEX`/`UV_INDEX_URL` and
//! `uv.toml` where uv installs it (uvx, and pipx's uv backend), or pip's `PIP_INDEX_URL` and
//! `pip.conf`, else PyPI), and what that index's project page (PEP 691 JSON, or PEP 503 HTML with `#sha256=` links) says of one version:
//! its distribution files, their `sha256` and upload times.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use geminid_protocol::pins::{Artifact, ArtifactKind};
use serde_json::Value;

/// Which tool runs the package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tool {
    /// `uvx` or `uv tool run`.
    Uv,
    /// `pipx run`.
    Pipx,
}

/// PEP 503's normalized name: lower case, each run of `-`, `_`, `.` one `-`.
pub(super) fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// Where the command runs: its environment (the index, the cache) and folder.
pub(super) struct Context<'a> {
    /// The server's environment.
    pub env: &'a BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: Option<&'a Path>,
}

impl Context<'_> {
    pub(super) fn var(&self, name: &str) -> Option<&str> {
        self.env.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// uv's cache folder, unless the environment turns its cache off.
    pub(super) fn uv_cache(&self) -> Option<PathBuf> {
        if self.var("UV_NO_CACHE").is_some_and(|v| !matches!(v, "0" | "false")) {
            return None;
        }
        if let Some(dir) = self.var("UV_CACHE_DIR") {
            return Some(PathBuf::from(dir));
        }
        let base = match self.var("XDG_CACHE_HOME") {
            Some(x) => PathBuf::from(x),
            None => Path::new(self.var("HOME")?).join(".cache"),
        };
        Some(base.join("uv"))
    }
}

/// PyPI's simple index: the tools' default.
const PYPI: &str = "https://pypi.org/simple";
/// How long the index may take to answer.
const FETCH_LIMIT: Duration = Duration::from_secs(30);
/// The largest project page read.
const PAGE_LIMIT: usize = 16 << 20;

/// The index a command uses.
pub(super) struct Index {
    /// Its URL, credentials and all (never shown: see `shown`).
    url: String,
}

/// `url` without the user name and password it may carry.
fn without_credentials(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Err(_) => "(an index URL that does not parse)".to_owned(),
    }
}

/// The value of `key` in an INI file's `section` (pip's configuration files).
fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = s.trim().to_owned();
        } else if current == section
            && let Some((k, v)) = line.split_once(['=', ':'])
            && k.trim().replace('_', "-") == key
        {
            return Some(v.trim().to_owned()).filter(|v| !v.is_empty());
        }
    }
    None
}

/// The default index a `uv.toml` names: `index-url`, or the `[[index]]` marked `default`.
fn uv_toml_index(text: &str) -> Option<String> {
    let doc = text.parse::<toml_edit::DocumentMut>().ok()?;
    if let Some(url) = doc.get("index-url").and_then(|v| v.as_str()) {
        return Some(url.to_owned());
    }
    let tables = doc.get("index")?.as_array_of_tables()?;
    tables
        .iter()
        .find(|t| t.get("default").and_then(|d| d.as_bool()) == Some(true))
        .and_then(|t| t.get("url")?.as_str().map(str::to_owned))
}

impl Index {
    /// The index a command uses where it runs: uv's settings where uv installs (`by_uv`), else
    /// pip's (`flag`: what its `--index-url` says).
    pub(super) fn of(by_uv: bool, flag: Option<&str>, ctx: &Context<'_>) -> Self {
        let from_settings = || {
            if by_uv {
                ["UV_DEFAULT_INDEX", "UV_INDEX_URL"]
                    .iter()
                    .find_map(|v| ctx.var(v).map(str::to_owned))
                    .or_else(|| config_files(ctx, true).find_map(|t| uv_toml_index(&t)))
            } else {
                ctx.var("PIP_INDEX_URL").map(str::to_owned).or_else(|| {
                    config_files(ctx, false).find_map(|t| {
                        ini_value(&t, "install", "index-url")
                            .or_else(|| ini_value(&t, "global", "index-url"))
                    })
                })
            }
        };
        let url = flag.map(str::to_owned).or_else(from_settings);
        Self { url: url.unwrap_or_else(|| PYPI.to_owned()) }
    }

    /// Its URL as it may be shown and recorded: without credentials.
    pub(super) fn shown(&self) -> String {
        without_credentials(&self.url)
    }
}

/// The configuration files that may name the index, in the order the tool reads them (the
/// first that names one wins).
fn config_files<'a>(ctx: &'a Context<'_>, by_uv: bool) -> impl Iterator<Item = String> + 'a {
    let home = ctx.var("HOME").map(PathBuf::from);
    let config = ctx
        .var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let mut files: Vec<PathBuf> = Vec::new();
    if by_uv && ctx.var("UV_NO_CONFIG").is_none() {
        if let Some(f) = ctx.var("UV_CONFIG_FILE") {
            files.push(f.into());
        } else {
            files.extend(ctx.cwd.map(|c| c.join("uv.toml")));
            files.extend(config.map(|c| c.join("uv/uv.toml")));
            files.push("/etc/uv/uv.toml".into());
        }
    } else if !by_uv && ctx.var("PIP_CONFIG_FILE") != Some("/dev/null") {
        // pip reads none where PIP_CONFIG_FILE is os.devnull.
        files.extend(ctx.var("PIP_CONFIG_FILE").map(PathBuf::from));
        files.extend(config.map(|c| c.join("pip/pip.conf")));
        files.extend(home.map(|h| h.join(".pip/pip.conf")));
        files.extend(["/etc/xdg/pip/pip.conf", "/etc/pip.conf"].map(PathBuf::from));
    }
    files.into_iter().filter_map(|f: PathBuf| std::fs::read_to_string(Path::new(&f)).ok())
}

/// One distribution file on a project page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct File {
    pub filename: String,
    pub sha256: Option<String>,
    pub uploaded: Option<String>,
    pub yanked: bool,
}

/// A project page's files: PEP 691 JSON, else PEP 503 HTML.
pub(super) fn parse_page(body: &str) -> Vec<File> {
    if let Ok(json) = serde_json::from_str::<Value>(body) {
        let files = json["files"].as_array().cloned().unwrap_or_default();
        return files
            .iter()
            .filter_map(|f| {
                Some(File {
                    filename: f["filename"].as_str()?.to_owned(),
                    sha256: f["hashes"]["sha256"].as_str().map(str::to_ascii_lowercase),
                    uploaded: f["upload-time"].as_str().map(str::to_owned),
                    yanked: f["yanked"].as_bool().unwrap_or(false) || f["yanked"].is_string(),
                })
            })
            .collect();
    }
    let mut out = Vec::new();
    let lower = body.to_ascii_lowercase();
    let mut at = 0;
    while let Some(start) = lower[at..].find("<a ").map(|s| s + at) {
        let Some(tag_end) = lower[start..].find('>').map(|e| e + start) else { break };
        let close = lower[tag_end..].find("</a>").map_or(body.len(), |e| e + tag_end);
        let (tag, text) = (&body[start..tag_end], &body[tag_end + 1..close]);
        at = close;
        let Some(href) = attribute(tag, "href") else { continue };
        let (link, fragment) = href.split_once('#').unwrap_or((&href, ""));
        let filename = match unescape(text.trim()) {
            t if !t.is_empty() => t,
            _ => link.rsplit('/').next().unwrap_or_default().to_owned(),
        };
        let sha256 = fragment.strip_prefix("sha256=").map(str::to_ascii_lowercase);
        let yanked = tag.to_ascii_lowercase().contains("data-yanked");
        out.push(File { filename, sha256, uploaded: None, yanked });
    }
    out
}

/// An HTML attribute's value in `tag`.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let at = lower.find(&format!("{name}="))? + name.len() + 1;
    let rest = &tag[at..];
    let value = match rest.chars().next()? {
        q @ ('"' | '\'') => rest[1..].split(q).next()?,
        _ => rest.split([' ', '>']).next()?,
    };
    Some(unescape(value))
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The version a distribution file of `name` (normalized) is of.
pub(super) fn file_version(filename: &str, name: &str) -> Option<String> {
    let version_like = |v: &str| v.starts_with(|c: char| c.is_ascii_digit()) && !v.contains('-');
    if let Some(stem) = filename.strip_suffix(".whl") {
        let mut parts = stem.split('-');
        let n = parts.next()?;
        let v = parts.next().filter(|v| version_like(v))?;
        return (normalize(n) == name).then(|| v.to_owned());
    }
    let stem =
        [".tar.gz", ".zip", ".tar.bz2", ".tgz"].iter().find_map(|s| filename.strip_suffix(s))?;
    stem.match_indices('-')
        .find(|(i, _)| normalize(&stem[..*i]) == name)
        .map(|(i, _)| stem[i + 1..].to_owned())
        .filter(|v| version_like(v))
}

/// A final release's ordering key (`1.2.3`, `1.2.3.post1`); `None` for a pre- or dev-release
/// or a version it does not read.
pub(super) fn release_key(version: &str) -> Option<(Vec<u64>, u64)> {
    let v = version.trim_start_matches(['v', 'V']).to_ascii_lowercase();
    let (release, post) = match v.split_once(".post").or_else(|| v.split_once("post")) {
        Some((r, p)) => (r.to_owned(), p.parse::<u64>().ok()? + 1),
        None => (v.clone(), 0),
    };
    let parts = release.split('.').map(|p| p.parse::<u64>().ok()).collect::<Option<Vec<u64>>>()?;
    let mut parts = parts;
    while parts.len() > 1 && parts.last() == Some(&0) {
        parts.pop();
    }
    Some((parts, post))
}

/// Whether two version strings name the same version.
fn same_version(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b) || release_key(a).is_some_and(|k| Some(k) == release_key(b))
}

/// The artifact `version` (or the newest final release) of `name` is on a page: the one
/// distribution file the tools take (a wheel if there are wheels, else the sdist), its
/// `sha256:<hex>`; where several wheels (or sdists) are of that version, `sha256-files:<hex>`
/// of all of them (`<filename> <sha256>` lines, sorted), so that any one replaced differs.
pub(super) fn artifact_of(
    files: &[File],
    name: &str,
    version: Option<&str>,
) -> Result<Artifact, String> {
    let versioned: Vec<(&File, String)> =
        files.iter().filter_map(|f| Some((f, file_version(&f.filename, name)?))).collect();
    let version = match version {
        Some(v) => v.to_owned(),
        None => versioned
            .iter()
            .filter(|(f, _)| !f.yanked)
            .filter_map(|(_, v)| Some((release_key(v)?, v)))
            .max_by(|a, b| a.0.cmp(&b.0))
            .map(|(_, v)| v.clone())
            .ok_or(format!("the index lists no release of {name}"))?,
    };
    let of_version: Vec<&File> =
        versioned.iter().filter(|(_, v)| same_version(v, &version)).map(|(f, _)| *f).collect();
    let wheels: Vec<&File> =
        of_version.iter().copied().filter(|f| f.filename.ends_with(".whl")).collect();
    let mut chosen = if wheels.is_empty() { of_version } else { wheels };
    if chosen.is_empty() {
        return Err(format!("the index has no {name} {version}"));
    }
    chosen.sort_by(|a, b| a.filename.cmp(&b.filename));
    let mut lines = String::new();
    for f in &chosen {
        let hash = f
            .sha256
            .as_deref()
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        let hash = hash.ok_or(format!("the index gives no sha256 for {}", f.filename))?;
        lines.push_str(&format!("{} {hash}\n", f.filename));
    }
    let digest = match chosen.as_slice() {
        [one] => format!("sha256:{}", one.sha256.as_deref().unwrap_or_default()),
        _ => {
            use sha2::Digest;
            let h = sha2::Sha256::digest(lines.as_bytes());
            format!("sha256-files:{}", crate::pins::canon::hex(&h))
        }
    };
    Ok(Artifact {
        kind: ArtifactKind::Pypi,
        name: name.to_owned(),
        version: Some(version),
        digest,
        published: chosen.iter().filter_map(|f| f.uploaded.clone()).max(),
        interpreter: None,
    })
}

fn client() -> Result<&'static reqwest::Client, String> {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(c) = CLIENT.get() {
        return Ok(c);
    }
    let c = reqwest::Client::builder()
        .timeout(FETCH_LIMIT)
        .user_agent(concat!("geminid/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("no HTTP client: {}", e.without_url()))?;
    Ok(CLIENT.get_or_init(|| c))
}

/// What `index` says `name` (normalized) `version` (or its newest release) is now.
pub(super) async fn resolve(
    index: &Index,
    name: &str,
    version: Option<&str>,
) -> Result<Artifact, String> {
    let page = format!("{}/{name}/", index.url.trim_end_matches('/'));
    let shown = format!("{}/{name}/", index.shown().trim_end_matches('/'));
    let asked = client()?
        .get(&page)
        .header(
            reqwest::header::ACCEPT,
            "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1",
        )
        .send()
        .await
        .map_err(|e| format!("the index {shown} did not answer: {}", e.without_url()))?;
    let status = asked.status();
    if !status.is_success() {
        return Err(format!("the index {shown} answered {status}"));
    }
    if asked.content_length().is_some_and(|n| n as usize > PAGE_LIMIT) {
        return Err(format!("the index page {shown} is larger than 16 MiB"));
    }
    let body =
        asked.bytes().await.map_err(|e| format!("the index {shown}: {}", e.without_url()))?;
    if body.len() > PAGE_LIMIT {
        return Err(format!("the index page {shown} is larger than 16 MiB"));
    }
    let files = parse_page(&String::from_utf8_lossy(&body));
    artifact_of(&files, name, version).map_err(|e| format!("{e} ({shown})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HTML: &str = r#"<!DOCTYPE html><html><body>
<a href="../../files/fixture_srv-1.0.0-py3-none-any.whl#sha256=AA00000000000000000000000000000000000000000000000000000000000000">fixture_srv-1.0.0-py3-none-any.whl</a><br/>
<a href="https://files.example.invalid/fixture-srv-1.0.0.tar.gz#sha256=bb00000000000000000000000000000000000000000000000000000000000000">fixture-srv-1.0.0.tar.gz</a>
<A HREF='x/fixture_srv-1.0.1-py3-none-any.whl#sha256=cc00000000000000000000000000000000000000000000000000000000000000' data-yanked="">fixture_srv-1.0.1-py3-none-any.whl</A>
<a href="fixture_srv-2.0.0rc1-py3-none-any.whl#sha256=dd00000000000000000000000000000000000000000000000000000000000000">fixture_srv-2.0.0rc1-py3-none-any.whl</a>
<a href="fixture_srv-0.9-py3-none-any.whl">fixture_srv-0.9-py3-none-any.whl</a>
</body></html>"#;

    #[test]
    fn a_pep_503_page_names_each_version_s_file_and_sha256() {
        let files = parse_page(HTML);
        assert_eq!(files.len(), 5);
        assert!(files[2].yanked && !files[0].yanked);
        // The newest final release not yanked; a wheel before the sdist.
        let a = artifact_of(&files, "fixture-srv", None).unwrap();
        assert_eq!(a.version.as_deref(), Some("1.0.0"));
        assert_eq!(a.digest, format!("sha256:aa{}", "0".repeat(62)));
        // A yanked version named exactly is what the tools install.
        let a = artifact_of(&files, "fixture-srv", Some("1.0.1")).unwrap();
        assert_eq!(a.digest, format!("sha256:cc{}", "0".repeat(62)));
        assert!(artifact_of(&files, "fixture-srv", Some("3.0")).is_err());
        assert!(artifact_of(&files, "fixture-srv", Some("0.9")).unwrap_err().contains("no sha256"));
        assert!(artifact_of(&files, "other", None).is_err());
    }

    #[test]
    fn a_pep_691_page_gives_upload_times_and_several_wheels_are_one_digest() {
        let h = |c: char| c.to_string().repeat(64);
        let json = serde_json::json!({"meta": {"api-version": "1.1"}, "files": [
            {"filename": "srv-1.0-cp311-cp311-manylinux_2_17_x86_64.whl", "hashes": {"sha256": h('a')},
             "upload-time": "2026-12-01T10:00:00Z", "yanked": false},
            {"filename": "srv-1.0-cp312-cp312-manylinux_2_17_x86_64.whl", "hashes": {"sha256": h('b')},
             "upload-time": "2026-12-01T10:05:00Z", "yanked": false},
            {"filename": "srv-1.0.post1.tar.gz", "hashes": {"sha256": h('c')}, "yanked": "broken"},
        ]});
        let files = parse_page(&json.to_string());
        let a = artifact_of(&files, "srv", None).unwrap();
        assert_eq!(a.version.as_deref(), Some("1.0"), "a yanked release is not the newest");
        assert!(a.digest.starts_with("sha256-files:"), "{}", a.digest);
        assert_eq!(a.published.as_deref(), Some("2026-12-01T10:05:00Z"));
        let mut other = files.clone();
        other[1].sha256 = Some(h('d'));
        assert_ne!(artifact_of(&other, "srv", None).unwrap().digest, a.digest);
    }

    #[test]
    fn a_hostile_or_broken_page_gives_no_artifact_and_no_panic() {
        for page in [
            "<a href=",
            "<a ",
            "<a href='x.whl#sha256=zz'>srv-1.0-py3-none-any.whl",
            "{\"files\": 3}",
            "é<a href=\"é\">é</a>",
            "",
        ] {
            let files = parse_page(page);
            assert!(artifact_of(&files, "srv", None).is_err(), "{page}: {files:?}");
        }
        // A sha256 that is not 64 hex digits is none.
        let files = parse_page(
            "<a href='srv-1.0-py3-none-any.whl#sha256=../../x'>srv-1.0-py3-none-any.whl</a>",
        );
        assert!(artifact_of(&files, "srv", Some("1.0")).unwrap_err().contains("no sha256"));
    }

    #[test]
    fn versions_and_configuration() {
        assert_eq!(file_version("My_Pkg-1.2-py3-none-any.whl", "my-pkg").as_deref(), Some("1.2"));
        assert_eq!(file_version("my-pkg-1.2.tar.gz", "my-pkg").as_deref(), Some("1.2"));
        assert_eq!(file_version("my-pkg-extra-1.2.tar.gz", "my-pkg"), None);
        assert!(release_key("1.10") > release_key("1.9"));
        assert!(release_key("1.0.post1") > release_key("1.0"));
        assert_eq!(release_key("1.0"), release_key("1.0.0"));
        assert_eq!(release_key("2.0rc1"), None);
        assert!(same_version("1.0", "1.0.0"));
        let pip =
            "[global]\nindex-url = http://127.0.0.1:1/simple\n[install]\nindex_url=http://i/\n";
        assert_eq!(ini_value(pip, "install", "index-url").as_deref(), Some("http://i/"));
        assert_eq!(
            ini_value(pip, "global", "index-url").as_deref(),
            Some("http://127.0.0.1:1/simple")
        );
        let uv = "[[index]]\nurl = \"http://a/\"\n[[index]]\nurl = \"http://b/\"\ndefault = true\n";
        assert_eq!(uv_toml_index(uv).as_deref(), Some("http://b/"));
        assert_eq!(uv_toml_index("index-url = \"http://c/\"").as_deref(), Some("http://c/"));
        assert_eq!(
            without_credentials("https://me:s3cret@idx.example.invalid/simple"),
            "https://idx.example.invalid/simple"
        );
    }
}
