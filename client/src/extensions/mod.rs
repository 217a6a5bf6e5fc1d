//! Extensions: `gemctl extensions`.

pub mod manage;
pub mod new;
