//! Whether and where the daemon exports telemetry: Gemini CLI's own `telemetry` settings
//! (`enabled`, `otlpEndpoint`, `otlpProtocol`, `target`), its `GEMINI_TELEMETRY_*` variables and
//! the standard `OTEL_*` ones, resolved once at the daemon's start. Off by default.
//!
//! Precedence, first found wins (Gemini CLI's own order, `resolveTelemetrySettings`, with the
//! standard variables Gemini CLI does not read placed after its own):
//! - on: `OTEL_SDK_DISABLED=true` turns it off whatever else says; else
//!   `GEMINI_TELEMETRY_ENABLED` (`true` or `1` is on, anything else off), else the settings'
//!   `telemetry.enabled`, else off.
//! - endpoint: `GEMINI_TELEMETRY_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`, the settings'
//!   `telemetry.otlpEndpoint`, else `http://localhost:4317`. For `http`, `/v1/traces` and
//!   `/v1/metrics` are appended to its path as Gemini CLI does; the per-signal
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` and `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` are used as
//!   they are and win over all of these.
//! - protocol: `GEMINI_TELEMETRY_OTLP_PROTOCOL`, the settings' `telemetry.otlpProtocol`,
//!   `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf` is `http`), else `grpc` (Gemini CLI's
//!   default).
//! - target: `GEMINI_TELEMETRY_TARGET`, the settings' `telemetry.target`, else `local`.
//! - service name: `OTEL_SERVICE_NAME`, else `geminid`.
//!
//! The settings are the system settings file's `telemetry` keys over the user's
//! (`~/.gemini/settings.json`) over the system defaults', key by key: telemetry is the daemon's,
//! not a workspace's, so workspace settings are not read.

use serde_json::Value;

/// Gemini CLI's default endpoint.
pub(crate) const DEFAULT_ENDPOINT: &str = "http://localhost:4317";

/// OTLP's wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// OTLP/HTTP with protobuf bodies.
    Http,
    /// OTLP/gRPC.
    Grpc,
}

/// Where Gemini CLI sends its telemetry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// A collector at the OTLP endpoint.
    Local,
    /// Google Cloud directly (Gemini CLI's own exporters), unless through a collector.
    Gcp,
}

/// The resolved settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Whether to export at all.
    pub enabled: bool,
    /// The endpoint as configured (without the signal's path).
    pub endpoint: String,
    /// The wire.
    pub protocol: Protocol,
    /// Gemini CLI's target.
    pub target: Target,
    /// Where spans go.
    pub traces_url: String,
    /// Where metrics go.
    pub metrics_url: String,
    /// `service.name`.
    pub service_name: String,
    /// Each setting that could not be used, said (the daemon's log and `gemctl doctor`).
    pub problems: Vec<String>,
}

/// `true` or `1`, as Gemini CLI's `parseBooleanEnvFlag` reads a flag.
fn flag(v: &str) -> bool {
    v == "true" || v == "1"
}

/// The endpoint with `path` appended to its own path (Gemini CLI's `buildUrl`).
fn joined(endpoint: &str, path: &str) -> String {
    let (base, query) = match endpoint.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (endpoint, None),
    };
    // An endpoint with no path after its authority gets the path directly.
    let base = base.trim_end_matches('/');
    let mut out = format!("{base}/{path}");
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// Resolve the settings from the variables (`var`) and the settings files' merged `telemetry`
/// object (`telemetry`, `Value::Null` when none says anything).
pub(crate) fn resolve(var: impl Fn(&str) -> Option<String>, telemetry: &Value) -> Settings {
    let var = |k: &str| var(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    let setting = |k: &str| telemetry.get(k);
    let mut problems = Vec::new();
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let enabled = !disabled
        && match var("GEMINI_TELEMETRY_ENABLED") {
            Some(v) => flag(&v),
            None => setting("enabled").and_then(Value::as_bool).unwrap_or(false),
        };
    let endpoint = var("GEMINI_TELEMETRY_OTLP_ENDPOINT")
        .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .or_else(|| setting("otlpEndpoint").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
    // Gemini CLI strips one pair of quotes a shell left in.
    let endpoint = endpoint.trim_matches(|c| c == '"' || c == '\'').to_owned();
    let raw_protocol = var("GEMINI_TELEMETRY_OTLP_PROTOCOL")
        .or_else(|| setting("otlpProtocol").and_then(Value::as_str).map(str::to_owned))
        .or_else(|| {
            var("OTEL_EXPORTER_OTLP_PROTOCOL").map(|p| match p.as_str() {
                "http/protobuf" => "http".to_owned(),
                _ => p,
            })
        });
    let protocol = match raw_protocol.as_deref() {
        None | Some("grpc") => Protocol::Grpc,
        Some("http") => Protocol::Http,
        Some(other) => {
            problems.push(format!(
                "telemetry: the OTLP protocol '{other}' is not one: use grpc or http"
            ));
            Protocol::Grpc
        }
    };
    let raw_target = var("GEMINI_TELEMETRY_TARGET")
        .or_else(|| setting("target").and_then(Value::as_str).map(str::to_owned));
    let target = match raw_target.as_deref() {
        None | Some("local") => Target::Local,
        Some("gcp") => Target::Gcp,
        Some(other) => {
            problems.push(format!("telemetry: the target '{other}' is not one: use local or gcp"));
            Target::Local
        }
    };
    let signal = |var_name: &str, path: &str| {
        var(var_name).unwrap_or_else(|| match protocol {
            Protocol::Http => joined(&endpoint, path),
            Protocol::Grpc => endpoint.clone(),
        })
    };
    let traces_url = signal("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "v1/traces");
    let metrics_url = signal("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "v1/metrics");
    let service_name = var("OTEL_SERVICE_NAME").unwrap_or_else(|| "geminid".to_owned());
    Settings {
        enabled,
        endpoint,
        protocol,
        target,
        traces_url,
        metrics_url,
        service_name,
        problems,
    }
}

/// The `telemetry` objects of the settings files, later ones over earlier ones key by key.
pub(crate) fn merged<'a>(files: impl IntoIterator<Item = &'a Value>) -> Value {
    let mut out = serde_json::Map::new();
    for file in files {
        if let Some(Value::Object(t)) = file.get("telemetry") {
            out.extend(t.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with(vars: &[(&str, &str)], telemetry: Value) -> Settings {
        let vars: Vec<(String, String)> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        resolve(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()), &telemetry)
    }

    #[test]
    fn off_by_default_with_gemini_clis_defaults() {
        let s = with(&[], Value::Null);
        assert!(!s.enabled);
        assert_eq!(s.endpoint, DEFAULT_ENDPOINT);
        assert_eq!(s.protocol, Protocol::Grpc);
        assert_eq!(s.target, Target::Local);
        assert_eq!(s.service_name, "geminid");
        assert!(s.problems.is_empty());
    }

    #[test]
    fn settings_turn_it_on_and_http_appends_the_signal_path() {
        let t = json!({"enabled": true, "otlpEndpoint": "http://127.0.0.1:4318/base/", "otlpProtocol": "http"});
        let s = with(&[], t);
        assert!(s.enabled);
        assert_eq!(s.traces_url, "http://127.0.0.1:4318/base/v1/traces");
        assert_eq!(s.metrics_url, "http://127.0.0.1:4318/base/v1/metrics");
    }

    #[test]
    fn variables_win_in_gemini_clis_order() {
        let t = json!({"enabled": true, "otlpEndpoint": "http://settings:1", "otlpProtocol": "grpc", "target": "gcp"});
        let s = with(
            &[
                ("GEMINI_TELEMETRY_ENABLED", "0"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:2"),
                ("GEMINI_TELEMETRY_OTLP_PROTOCOL", "http"),
                ("GEMINI_TELEMETRY_TARGET", "local"),
                ("OTEL_SERVICE_NAME", "mine"),
            ],
            t.clone(),
        );
        assert!(!s.enabled);
        assert_eq!(s.endpoint, "http://otel:2");
        assert_eq!(s.protocol, Protocol::Http);
        assert_eq!(s.target, Target::Local);
        assert_eq!(s.service_name, "mine");
        let s = with(
            &[
                ("GEMINI_TELEMETRY_OTLP_ENDPOINT", "http://gemini:3"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:2"),
            ],
            t.clone(),
        );
        assert_eq!(s.endpoint, "http://gemini:3");
        assert!(s.enabled);
        // Gemini CLI's flag reading: only `true` and `1` are on.
        assert!(!with(&[("GEMINI_TELEMETRY_ENABLED", "yes")], t.clone()).enabled);
        assert!(with(&[("GEMINI_TELEMETRY_ENABLED", "1")], Value::Null).enabled);
        assert!(!with(&[("OTEL_SDK_DISABLED", "true")], t).enabled);
    }

    #[test]
    fn the_standard_protocol_and_signal_endpoints() {
        let s = with(
            &[
                ("GEMINI_TELEMETRY_ENABLED", "true"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/x"),
            ],
            Value::Null,
        );
        assert_eq!(s.protocol, Protocol::Http);
        assert_eq!(s.traces_url, "http://t:9/x");
        assert_eq!(s.metrics_url, "http://c:4318/v1/metrics");
    }

    #[test]
    fn bad_values_are_said() {
        let s = with(&[], json!({"otlpProtocol": "udp", "target": "mars"}));
        assert_eq!(s.problems.len(), 2, "{:?}", s.problems);
        assert_eq!(s.protocol, Protocol::Grpc);
    }

    #[test]
    fn files_merge_key_by_key() {
        let user = json!({"telemetry": {"enabled": true, "otlpEndpoint": "http://u:1"}});
        let system = json!({"telemetry": {"otlpEndpoint": "http://s:2"}});
        let m = merged([&user, &system]);
        assert_eq!(m, json!({"enabled": true, "otlpEndpoint": "http://s:2"}));
    }
}
