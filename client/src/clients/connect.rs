//! `gemctl clients connect` and `disconnect` for every client but Gemini CLI (whose are `mcp
//! import` and `unimport`). Order of writes on connect: the record and the original bytes,
//! geminid's servers.json, then the client's file; so a server is never in neither file and
//! the user's bytes are kept before anything changes.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use serde_json::{Map, Value};

use super::edit::{self, Format};
use super::kinds::{Kind, Place, Target, is_gateway};
use super::record::{self, Record};
use crate::output::{self, errln, outln};

fn servers_json(place: &Place) -> Result<PathBuf> {
    place.servers_json().ok_or_else(|| anyhow!("cannot find the home folder: set HOME"))
}

fn target(place: &Place) -> Result<Target> {
    match (place.target(), &place.project) {
        (Some(t), _) => Ok(t),
        (None, None) => Err(anyhow!("cannot find the home folder: set HOME")),
        (None, Some(_)) => Err(anyhow!(
            "{} has no project file gemctl connects: `gemctl mcp import` moves the servers of \
             the user's settings only",
            place.kind.label()
        )),
    }
}

/// The servers of a file, or an error that names it and the fix.
fn servers_of(t: &Target, text: &str) -> Result<Map<String, Value>> {
    edit::servers(t.format, t.key, text).map_err(|e| {
        anyhow!(
            "cannot read {}: {e}. Nothing was changed: fix the file (its client cannot read it \
             either) and run the command again",
            t.path.display()
        )
    })
}

/// Which of the client's servers move to geminid, which are reached as geminid's already, and
/// which stay (with why).
struct Plan {
    moved: Map<String, Value>,
    gateways: Vec<String>,
    kept: Vec<(String, String)>,
}

fn plan(kind: Kind, theirs: &Map<String, Value>, ours: &Map<String, Value>) -> Plan {
    let mut p = Plan { moved: Map::new(), gateways: Vec::new(), kept: Vec::new() };
    for (name, entry) in theirs {
        if is_gateway(entry) {
            continue;
        }
        if name.is_empty() || name.starts_with('-') {
            let why = "a server's name must not be empty or start with '-' (the gateway's \
                       `--server NAME` would read it as an option)";
            p.kept.push((name.clone(), why.into()));
            continue;
        }
        match kind.as_geminid(entry) {
            Err(why) => p.kept.push((name.clone(), why)),
            Ok(ours_now) if ours.get(name).is_some_and(|o| *o != ours_now) => p.kept.push((
                name.clone(),
                "geminid already has a server of this name, defined differently: rename one".into(),
            )),
            Ok(v) => {
                if !ours.contains_key(name) {
                    p.moved.insert(name.clone(), v);
                }
            }
        }
    }
    let names_ok = |n: &str| {
        kind != Kind::Codex || n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    let kept: Vec<&String> = p.kept.iter().map(|(n, _)| n).collect();
    p.gateways = ours
        .keys()
        .chain(p.moved.keys())
        .filter(|n| !kept.contains(n) && names_ok(n))
        .cloned()
        .collect();
    p.gateways.sort();
    p.gateways.dedup();
    p
}

pub fn connect(place: &Place, command: Option<PathBuf>, json: bool) -> Result<()> {
    let kind = place.kind;
    let t = target(place)?;
    if place.project.is_none() && !kind.installed(&t) {
        bail!(
            "{} is not installed here (no {}, no folder of it, no `{}` on PATH): install it \
             first, or create the file",
            kind.label(),
            t.path.display(),
            t.path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
        );
    }
    if let Some(saved) = record::load(place)? {
        if json {
            return output::json(&shown(&saved.record, false));
        }
        outln!(
            "{} is already connected: it reaches {} through geminid. `gemctl clients disconnect \
             {}` undoes it.",
            kind.label(),
            saved.record.gateways.join(", "),
            place.words()
        );
        return Ok(());
    }
    let text = record::read(&t.path)?;
    let theirs = servers_of(&t, text.as_deref().unwrap_or_default())?;
    let own_path = servers_json(place)?;
    let own_text = record::read(&own_path)?.unwrap_or_default();
    let own_target = Target { path: own_path.clone(), format: Format::Json, key: "mcpServers" };
    let ours = servers_of(&own_target, &own_text)?;
    let plan = plan(kind, &theirs, &ours);
    if plan.gateways.is_empty() {
        outln!(
            "{} defines no server geminid can serve, and geminid's {} has none: nothing to \
             connect.",
            kind.label(),
            own_path.display()
        );
        for (n, why) in &plan.kept {
            outln!("  '{n}' stays with {}: {why}", kind.label());
        }
        return Ok(());
    }
    let exe = crate::mcp::import_path::choose(command)?.display().to_string();
    let entries: Vec<(String, Value)> = plan
        .gateways
        .iter()
        .map(|n| (n.clone(), kind.gateway_entry(&exe, n, place.project.as_deref())))
        .collect();
    let written =
        edit::set_entries(t.format, t.key, text.as_deref().unwrap_or_default(), &entries)?;
    let rec = Record {
        client: kind.word().into(),
        file: t.path.display().to_string(),
        existed: text.is_some(),
        moved: plan.moved.clone(),
        gateways: plan.gateways.clone(),
        kept: plan.kept.clone(),
        project: place.project.as_ref().map(|d| d.display().to_string()),
    };
    let dir = record::begin(place, &rec, text.as_deref())?;
    if !plan.moved.is_empty() {
        let moved: Vec<(String, Value)> =
            plan.moved.iter().map(|(n, v)| (n.clone(), v.clone())).collect();
        let own = edit::set_entries(Format::Json, "mcpServers", &own_text, &moved)?;
        record::write(&own_path, &own, Some(0o600))?;
    }
    record::write(&t.path, &written, Some(0o600))?;
    record::finish(place, &written)?;
    if json {
        return output::json(&shown(&rec, true));
    }
    let label = kind.label();
    if !plan.moved.is_empty() {
        let names: Vec<&String> = plan.moved.keys().collect();
        outln!("Moved to {}: {}", own_path.display(), join(&names));
    }
    outln!("{label} reaches through geminid: {}", plan.gateways.join(", "));
    for (n, why) in &plan.kept {
        outln!("  '{n}' stays with {label}: {why}");
    }
    outln!(
        "{} as it was: {}. `gemctl clients disconnect {}` puts it back.",
        t.path.display(),
        dir.join("original").display(),
        place.words()
    );
    Ok(())
}

/// What `--json` prints of a connection: names only, never a moved server's definition (its
/// `env` and `headers` may hold secrets).
fn shown(rec: &Record, written: bool) -> Value {
    serde_json::json!({
        "client": rec.client,
        "file": rec.file,
        "written": written,
        "moved": rec.moved.keys().collect::<Vec<_>>(),
        "throughGeminid": rec.gateways,
        "kept": rec.kept.iter().map(|(n, why)| serde_json::json!({"name": n, "why": why})).collect::<Vec<_>>(),
    })
}

fn join(names: &[&String]) -> String {
    names.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
}

pub fn disconnect(place: &Place, force: bool, json: bool) -> Result<()> {
    let kind = place.kind;
    let t = target(place)?;
    let Some(saved) = record::load(place)? else {
        if json {
            return output::json(&serde_json::json!({"client": kind.word(), "connected": false}));
        }
        outln!("{} is not connected: nothing to undo.", kind.label());
        return Ok(());
    };
    let dir = record::dir(place)?;
    let now = record::read(&t.path)?;
    let original = saved.original.clone();
    let merged = match (&now, &saved.written) {
        (Some(now), Some(w)) if now != w => {
            merged(&t, &saved.record, now, w, original.as_deref().unwrap_or_default())
        }
        _ => None,
    };
    let restored: Option<String> = match (&now, &saved.written, merged) {
        (now, Some(w), _) if now.as_deref() == Some(w.as_str()) => original.clone(),
        (_, _, Some((text, since))) => {
            errln!(
                "note: {} was changed since connect; what changed outside the servers connect                  wrote is kept",
                t.path.display()
            );
            if !since.is_empty() {
                errln!("note: kept the servers added or changed since: {}", since.join(", "));
            }
            Some(text)
        }
        _ if force => {
            if let Some(now) = &now {
                record::write(&dir.with_extension("at-disconnect"), now, Some(0o600))?;
            }
            original.clone()
        }
        _ => bail!(
            "{} was changed after `gemctl clients connect {}` (its servers are not the ones \
             connect wrote), so it was left as it is. The file as it was before connect is {}: \
             compare the two and put back what you want by hand, then run `gemctl clients \
             disconnect {} --force` to forget the connection (or run it now to put the old file \
             back whole; the file as it is now is kept as {})",
            t.path.display(),
            place.words(),
            if saved.record.existed {
                dir.join("original").display().to_string()
            } else {
                "none (there was no file)".into()
            },
            place.words(),
            dir.with_extension("at-disconnect").display()
        ),
    };
    match &restored {
        Some(text) => record::write(&t.path, text, None)?,
        None if now.is_some() => std::fs::remove_file(&t.path)
            .map_err(|e| anyhow!("cannot remove {}: {e}", t.path.display()))?,
        None => {}
    }
    let (removed, stayed) = release(place, &saved.record)?;
    record::forget(place)?;
    if json {
        return output::json(&serde_json::json!({
            "client": kind.word(), "connected": false, "file": t.path.display().to_string(),
            "removedFromGeminid": removed, "keptInGeminid": stayed,
        }));
    }
    match (&restored, saved.record.existed) {
        (_, true) => outln!("{} is as it was before connect.", t.path.display()),
        (_, false) => outln!("{} is gone again (there was none before connect).", t.path.display()),
    }
    if !removed.is_empty() {
        outln!("{} starts itself again: {}", kind.label(), removed.join(", "));
    }
    for n in &stayed {
        outln!(
            "  geminid keeps '{n}': another client reaches it through geminid, or it was edited"
        );
    }
    Ok(())
}

/// `now` with its servers put back as `original` had them, when every entry connect wrote is
/// still as written: what changed outside the servers is kept, and so is a server added (or one
/// of the client's own changed) since, with the names of those. `None` when an entry connect
/// wrote, or one it left, was changed or taken out, or the file no longer parses.
fn merged(
    t: &Target,
    rec: &Record,
    now: &str,
    written: &str,
    original: &str,
) -> Option<(String, Vec<String>)> {
    let (c, w) = (servers_of(t, now).ok()?, servers_of(t, written).ok()?);
    if rec.gateways.iter().any(|n| c.get(n) != w.get(n)) {
        return None;
    }
    if w.keys().any(|n| !c.contains_key(n)) {
        return None;
    }
    let since: Vec<(String, Value)> = c
        .iter()
        .filter(|(n, v)| !rec.gateways.contains(n) && w.get(*n) != Some(*v))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    let text = edit::restore_section(t.format, t.key, now, original).ok()?;
    let text = if since.is_empty() {
        text
    } else {
        edit::set_entries(t.format, t.key, &text, &since).ok()?
    };
    Some((text, since.into_iter().map(|(n, _)| n).collect()))
}

/// Take the servers connect moved out of geminid's servers.json again, each unless it was
/// edited there since or another connected client (or Gemini CLI's settings) reaches it.
fn release(place: &Place, rec: &Record) -> Result<(Vec<String>, Vec<String>)> {
    let own_path = servers_json(place)?;
    let own_text = record::read(&own_path)?.unwrap_or_default();
    let own_target = Target { path: own_path.clone(), format: Format::Json, key: "mcpServers" };
    let Ok(ours) = servers_of(&own_target, &own_text) else {
        return Ok((Vec::new(), rec.moved.keys().cloned().collect()));
    };
    let mut used: Vec<String> = Vec::new();
    for other in super::kinds::ALL.into_iter().filter(|k| *k != place.kind) {
        let other = Place { kind: other, project: place.project.clone() };
        if let Ok(Some(s)) = record::load(&other) {
            used.extend(s.record.gateways);
        }
    }
    if place.project.is_none()
        && let Some(g) = Kind::Gemini.target()
        && let Ok(Some(text)) = record::read(&g.path)
        && let Ok(servers) = edit::servers(g.format, g.key, &text)
    {
        used.extend(servers.iter().filter(|(_, v)| is_gateway(v)).map(|(n, _)| n.clone()));
    }
    let (mut removed, mut stayed) = (Vec::new(), Vec::new());
    let mut text = own_text.clone();
    for (name, was) in &rec.moved {
        if ours.get(name) == Some(was) && !used.contains(name) {
            text = remove_entry(&text, name)?;
            removed.push(name.clone());
        } else if ours.contains_key(name) {
            stayed.push(name.clone());
        }
    }
    if text != own_text {
        record::write(&own_path, &text, Some(0o600))?;
    }
    Ok((removed, stayed))
}

fn remove_entry(text: &str, name: &str) -> Result<String> {
    use jsonc_parser::cst::CstRootNode;
    let root = CstRootNode::parse(text, &Default::default()).map_err(|e| anyhow!("{e}"))?;
    if let Some(p) =
        root.object_value().and_then(|o| o.object_value("mcpServers")).and_then(|s| s.get(name))
    {
        p.remove();
    }
    Ok(root.to_string())
}
