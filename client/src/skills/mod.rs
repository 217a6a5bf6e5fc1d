//! Skills, agents and slash commands: `gemctl skills`, `agents` and `commands`.

pub mod agents;
pub mod commands;
pub mod manage;
