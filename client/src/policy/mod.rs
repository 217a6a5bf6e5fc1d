//! What decides a call: `gemctl policy`, `hooks` and `audit`.

pub mod audit;
pub mod hooks;
pub mod rules;
