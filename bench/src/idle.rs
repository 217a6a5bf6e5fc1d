//! `--poll-idle`: keep the CPUs out of their halting idle states for the run, as latency
//! benchmarks usually do (cyclictest does it by default), through the kernel's PM QoS
//! interface: a process that holds `/dev/cpu_dma_latency` open after writing 0 asks for an
//! idle-exit latency of 0 µs, so idle CPUs poll instead of halting. The request ends when the
//! file is closed, at the latest when the process exits.
//!
//! Why it matters here: on a virtual machine, waking a halted vCPU costs a trip through the
//! hypervisor, and a call through geminid wakes two more processes than a direct call does.
//! How much that costs depends on the host's load, not on geminid; `BENCHMARKS.md` gives
//! the call path's figures both ways.

use std::fs::{File, OpenOptions};
use std::io::Write;

use anyhow::Context;

const PM_QOS: &str = "/dev/cpu_dma_latency";

/// The held request; dropping it restores the default idle states.
#[derive(Debug)]
pub struct PollIdle {
    _file: File,
}

/// Ask for polling idle until the returned guard is dropped.
pub fn hold() -> anyhow::Result<PollIdle> {
    let mut file = OpenOptions::new().write(true).open(PM_QOS).with_context(|| {
        format!("--poll-idle: cannot open {PM_QOS} (it needs root, or write access to it)")
    })?;
    file.write_all(&0i32.to_ne_bytes())
        .with_context(|| format!("--poll-idle: cannot write to {PM_QOS}"))?;
    Ok(PollIdle { _file: file })
}

/// The table row that says how the run's CPUs idled, so a pasted table carries it.
pub fn row(held: bool) -> String {
    if held {
        "| CPUs' idle states held at polling for this run (`--poll-idle`) | | | |".to_owned()
    } else {
        "| CPUs idle as the machine's default lets them (no `--poll-idle`) | | | |".to_owned()
    }
}
