//! Slash commands (COMPAT §7.2): custom commands from `.toml` files ([`load`]), and the names a
//! front-end offers for them, MCP prompts and skills after Gemini CLI's conflict rules
//! ([`resolve`]).

pub(crate) mod expand;
pub(crate) mod ignore;
pub(crate) mod load;
pub(crate) mod resolve;

/// An injection (`!{...}` or `@{...}`) in a prompt: where it starts and ends (after its `}`),
/// and what is inside, trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Injection {
    /// Where its trigger starts (a byte offset).
    pub start: usize,
    /// After its closing brace.
    pub end: usize,
    /// What is inside, trimmed.
    pub content: String,
}

/// The injections of `trigger` in `prompt`, braces counted as Gemini CLI counts them; an
/// unclosed one is an error naming where it starts.
pub(crate) fn injections(prompt: &str, trigger: &str) -> Result<Vec<Injection>, String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = prompt[from..].find(trigger) {
        let start = from + found;
        let inner = start + trigger.len();
        let mut depth = 1usize;
        let mut end = None;
        for (i, c) in prompt[inner..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(inner + i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = end else {
            let at = prompt[..start].chars().count();
            return Err(format!(
                "an unclosed `{trigger}` at character {at}: its braces must balance (paths or \
                 commands with unbalanced braces are not supported)"
            ));
        };
        out.push(Injection {
            start,
            end: close + 1,
            content: prompt[inner..close].trim().to_owned(),
        });
        from = close + 1;
    }
    Ok(out)
}

/// Both kinds of injection balance in `prompt`.
pub(crate) fn check_braces(prompt: &str) -> Result<(), String> {
    injections(prompt, "@{")?;
    injections(prompt, "!{")?;
    Ok(())
}

#[cfg(test)]
mod tests;
