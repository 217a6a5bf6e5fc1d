//! Agent Skills and agent definitions: what exists for a session, which copy wins, what is
//! enabled, and activation. Gemini CLI's files are read in place (COMPAT.md §5):
//!
//! - [`load`] reads one skills folder, parsing each `SKILL.md` again only when it changed;
//! - [`registry`] puts the folders in precedence order and applies `skills.disabled`;
//! - [`tree`] renders a skill's resources for activation;
//! - [`install`] installs, links and uninstalls;
//! - [`agents`] reads agent definitions.

pub(crate) mod agents;
pub(crate) mod frontmatter;
pub(crate) mod install;
pub(crate) mod load;
pub(crate) mod registry;
pub(crate) mod tree;

#[cfg(test)]
mod tests;

/// Why a skills request failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SkillError {
    /// No such skill (or agent).
    #[error("{0}")]
    NotFound(String),
    /// Refused, with why and what to do.
    #[error("{0}")]
    Refused(String),
    /// The file system failed.
    #[error("{0}")]
    Io(String),
}

/// The activation text a model gets (Gemini CLI's `<activated_skill>` shape).
pub(crate) fn activation_text(name: &str, body: &str, resources: &str) -> String {
    format!(
        "<activated_skill name=\"{name}\">\n  <instructions>\n    {body}\n  </instructions>\n\n  \
         <available_resources>\n    {resources}\n  </available_resources>\n</activated_skill>"
    )
}
