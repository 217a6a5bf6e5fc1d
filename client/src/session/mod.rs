//! Sessions: `gemctl session`, `attach`, `events` and `confirm`.

pub mod attach;
pub mod elicit;
