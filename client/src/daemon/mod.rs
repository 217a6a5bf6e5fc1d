//! The daemon: `gemctl status`, `version`, `daemon`, `doctor` and `rpc`.

pub mod bridge;
pub mod commands;
pub mod connect;
pub mod doctor;
pub mod service;
