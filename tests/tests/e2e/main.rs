//! The end-to-end tests, one binary: each module starts the real `geminid` and `gemctl` on
//! temporary sockets and homes (the fixture MCP server in `tests/src/`, real third-party ones
//! in `tests/interop/`). One binary links the daemon once instead of once per file, and its
//! tests share the runner's threads. Run a file's tests with a filter on its module:
//! `cargo test -p geminid-tests --test e2e gateway::`. The soak is ignored here and runs on its
//! own (`soak.rs`).

mod agy;
mod artifacts;
mod artifacts_update;
mod backoff;
mod bad_input;
mod client;
mod clients;
mod clients_lock;
mod clients_project;
mod commands;
mod config;
mod confirm;
mod context;
mod custom_tools;
mod docs;
mod doctor;
mod examples;
mod extensions;
mod fixed_sleeps;
mod fixture;
mod forged_lines;
mod gateway;
mod gateway_flood;
mod gateway_handed;
mod gateway_handed_attack;
mod gateway_refused;
mod gemctl;
mod hooks;
mod hostile_git;
mod import;
mod keyring;
mod listing_caps;
mod many_clients;
mod mcp;
mod metrics;
mod oauth;
mod pins;
mod pipeline;
mod policy;
mod policy_tiers;
mod readme;
mod reload;
mod safe_defaults;
mod schema;
mod sealed;
mod server_asks;
mod service;
mod skills;
mod slow_start;
mod soak;
mod spine;
mod storage;
mod tasks;
mod telemetry;
mod telemetry_spans;
mod terminal_text;
mod tools;
mod top;
mod upstream;
mod warm;
