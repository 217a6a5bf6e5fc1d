//! Extensions (issue 22), begun: `integrity` is the HMAC-SHA256 integrity store Gemini CLI
//! keeps (COMPAT §6.4), read and written compatibly. Install, update, enablement, the
//! per-file record and the contributions to the rest of the daemon are still to come (see
//! the notes).

pub mod integrity;
pub mod key;
