//! Slash commands (COMPAT §7.2): custom commands from `.toml` files ([`load`]), and the names a
//! front-end offers for them, MCP prompts and skills after Gemini CLI's conflict rules
//! ([`resolve`]).

pub(crate) mod expand;
pub(crate) mod ignore;
pub(crate) mod load;
pub(crate) mod plain;
pub(crate) mod resolve;

/// Why a command's prompt cannot be expanded, or an `@{path}` not included.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExpandError {
    /// An injection's braces do not balance.
    #[error(
        "an unclosed `{trigger}` at character {at}: its braces must balance (paths or commands \
         with unbalanced braces are not supported)"
    )]
    Unclosed {
        /// `!{` or `@{`.
        trigger: String,
        /// Where it starts, in characters.
        at: usize,
    },
    /// `@{path}` names nothing.
    #[error("Path not found in workspace: {0}")]
    NotFound(String),
    /// `@{path}` names something outside the workspace.
    #[error("{given} is outside the workspace ({}): not included", root.display())]
    Outside {
        /// The path as written.
        given: String,
        /// The workspace.
        root: std::path::PathBuf,
    },
    /// A file to include could not be read.
    #[error("{}: {source}", file.display())]
    Read {
        /// The file.
        file: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// What `@{path}` names is larger than may be included.
    #[error("{} is larger than the {} KiB that may be included", .0.display(), expand::MAX_INCLUDED >> 10)]
    TooLarge(std::path::PathBuf),
    /// `{{args}}` stands where no reference to the arguments is safe.
    #[error(
        "line {line}: `{{{{args}}}}` {context} in `!{{{content}}}` cannot be given to the \
         shell safely, so nothing runs; {fix}"
    )]
    UnsafeArgs {
        /// The line of the prompt.
        line: usize,
        /// Where it stands (a here-document, arithmetic).
        context: &'static str,
        /// The injection as written.
        content: String,
        /// How to write it instead.
        fix: &'static str,
    },
    /// One kind of injection inside the other (`!{echo @{f}}`, `@{x!{y}}`).
    #[error(
        "line {line}: `{inner}` inside `{outer}…}}` is not supported: a file is never pasted \
         into a shell command, nor a command into a path; {fix}"
    )]
    Nested {
        /// The line of the prompt.
        line: usize,
        /// `@{` or `!{`.
        inner: &'static str,
        /// `!{` or `@{`.
        outer: &'static str,
        /// How to write it instead.
        fix: &'static str,
    },
    /// What `@{path}` names is not a regular file or folder (a FIFO, a device, a socket).
    #[error("{} is not a regular file: not included", .0.display())]
    NotRegular(std::path::PathBuf),
}

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
pub(crate) fn injections(prompt: &str, trigger: &str) -> Result<Vec<Injection>, ExpandError> {
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
            return Err(ExpandError::Unclosed { trigger: trigger.to_owned(), at });
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

/// Neither kind of injection stands inside the other in `prompt`.
pub(crate) fn check_nesting(prompt: &str) -> Result<(), ExpandError> {
    let line = |at: usize| prompt[..at].matches('\n').count() + 1;
    let kinds = [
        ("!{", "@{", "read the file in the command instead (`!{cat path}`)"),
        ("@{", "!{", "name the file by its path"),
    ];
    for (outer, inner, fix) in kinds {
        if let Some(inj) =
            injections(prompt, outer)?.into_iter().find(|i| i.content.contains(inner))
        {
            return Err(ExpandError::Nested { line: line(inj.start), inner, outer, fix });
        }
    }
    Ok(())
}

/// Both kinds of injection balance in `prompt`.
pub(crate) fn check_braces(prompt: &str) -> Result<(), ExpandError> {
    injections(prompt, "@{")?;
    injections(prompt, "!{")?;
    Ok(())
}

#[cfg(test)]
mod tests;
