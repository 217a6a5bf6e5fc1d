//! `gemctl prompt` and `gemctl read`, with the lists they take names from (`gemctl mcp
//! prompts|resources`): MCP prompts and resources.

use geminid_protocol::client::Client;

use crate::error::call_error;
use crate::output;
use crate::tools::list::none;

/// `gemctl mcp prompts`.
pub async fn prompts(client: &Client, session: String, json: bool) -> anyhow::Result<()> {
    use geminid_protocol::api::PromptsApiClient;
    use geminid_protocol::tools::CatalogParams;
    let r =
        client.prompts_list(CatalogParams { session }).await.map_err(call_error("prompts/list"))?;
    if json {
        return output::json(&r);
    }
    let rows: Vec<Vec<String>> = r
        .prompts
        .iter()
        .map(|p| {
            let args: Vec<String> = p
                .arguments
                .iter()
                .map(|a| {
                    let n = a["name"].as_str().unwrap_or_default();
                    if a["required"] == true { format!("--{n}") } else { format!("[--{n}]") }
                })
                .collect();
            vec![format!("/{}", p.name), p.server.clone(), args.join(" "), p.description.clone()]
        })
        .collect();
    output::table_or(&none("prompts"), &["COMMAND", "SERVER", "ARGUMENTS", "DESCRIPTION"], &rows);
    Ok(())
}

/// `gemctl prompt NAME [args…]`: prints the prompt text Gemini CLI would submit.
pub async fn prompt(
    client: &Client,
    session: String,
    name: String,
    args: Vec<String>,
    json: bool,
) -> anyhow::Result<()> {
    use geminid_protocol::api::PromptsApiClient;
    use geminid_protocol::tools::PromptsGetParams;
    let name = name.trim_start_matches('/').to_owned();
    // The shell has split the words; put them back as the user would have typed them.
    let text = args.iter().map(|a| retype(a)).collect::<Vec<_>>().join(" ");
    let r = client
        .prompts_get(PromptsGetParams { session, name, args: Some(text), arguments: None })
        .await
        .map_err(call_error("prompts/get"))?;
    if json {
        return output::json(&r);
    }
    let text: String = serde_json::from_str(&r.submit).unwrap_or(r.submit);
    output::result_out(&text);
    Ok(())
}

/// One shell word as it would be typed on Gemini CLI's prompt line, where words are split at
/// spaces: a value (of `--key=value`, or a positional) that has a space, is empty or starts
/// with a quote goes in quotes, with `"` and `\` escaped.
fn retype(word: &str) -> String {
    let needs_quotes = |v: &str| v.is_empty() || v.contains(' ') || v.starts_with('"');
    let quoted = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
    if let Some((key, value)) = word.strip_prefix("--").and_then(|r| r.split_once('='))
        && !key.is_empty()
    {
        return if needs_quotes(value) {
            format!("--{key}={}", quoted(value))
        } else {
            word.to_owned()
        };
    }
    if needs_quotes(word) { quoted(word) } else { word.to_owned() }
}

/// `gemctl mcp resources`.
pub async fn resources(client: &Client, session: String, json: bool) -> anyhow::Result<()> {
    use geminid_protocol::api::ResourcesApiClient;
    use geminid_protocol::tools::CatalogParams;
    let r = client
        .resources_list(CatalogParams { session })
        .await
        .map_err(call_error("resources/list"))?;
    if json {
        return output::json(&r);
    }
    let rows: Vec<Vec<String>> = r
        .resources
        .iter()
        .map(|e| {
            let mime = e.resource["mimeType"].as_str().unwrap_or_default().to_owned();
            let name = e.resource["name"].as_str().unwrap_or_default().to_owned();
            vec![e.reference.clone(), name, mime]
        })
        .collect();
    output::table_or(&none("resources"), &["REFERENCE", "NAME", "MIME TYPE"], &rows);
    Ok(())
}

/// `gemctl read @server:uri`.
pub async fn read(
    client: &Client,
    session: String,
    reference: String,
    json: bool,
) -> anyhow::Result<()> {
    use geminid_protocol::api::ResourcesApiClient;
    use geminid_protocol::tools::ResourcesReadParams;
    let p = ResourcesReadParams { session, reference: Some(reference), ..Default::default() };
    let r = client.resources_read(p).await.map_err(call_error("resources/read"))?;
    if json {
        return output::json(&r);
    }
    for part in r.parts.iter().skip(1) {
        if let Some(t) = part["text"].as_str() {
            output::result_out(t);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::retype;

    #[test]
    fn words_are_retyped_for_the_prompt_line() {
        assert_eq!(retype("Ann"), "Ann");
        assert_eq!(retype("Ada Lovelace"), r#""Ada Lovelace""#);
        assert_eq!(retype("--name=Ada Lovelace"), r#"--name="Ada Lovelace""#);
        assert_eq!(retype("--style=warm"), "--style=warm");
        assert_eq!(retype("--name="), r#"--name="""#);
        assert_eq!(retype(""), r#""""#);
        assert_eq!(retype(r#""quoted""#), r#""\"quoted\"""#);
        assert_eq!(retype(r#"--say=a "b" \c"#), r#"--say="a \"b\" \\c""#);
        assert_eq!(retype(r#"x"y"#), r#"x"y"#);
    }
}
