//! Skills, agents and slash commands: `gemctl skills`, `agents` and `commands`.

pub mod manage;
