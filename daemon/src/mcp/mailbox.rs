//! What a server's task is told ([`Cmd`]), through a mailbox that coalesces: any number of
//! restarts asked for before the task looks is one restart, and a stop wins over them.

use tokio::sync::watch;

/// What the task is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmd {
    /// Stop and start again, forgetting past failures.
    Restart,
    /// Stop for good.
    Stop,
}

/// The commands sent to a server task, coalesced: any number of restarts asked for before the
/// task looks is one restart, and a stop wins over them. Bounded by construction (two
/// numbers), where a queue of commands could grow while the task is busy.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Mailbox {
    restarts: u64,
    stop: bool,
}

impl Mailbox {
    /// Leave a command.
    pub(super) fn post(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Restart => self.restarts += 1,
            Cmd::Stop => self.stop = true,
        }
    }
}

/// The task's end of the [`Mailbox`].
#[derive(Debug)]
pub(super) struct Commands {
    rx: watch::Receiver<Mailbox>,
    restarts: u64,
    stopped: bool,
}

impl Commands {
    pub(super) fn new(rx: watch::Receiver<Mailbox>) -> Self {
        Self { rx, restarts: 0, stopped: false }
    }

    /// The next command: a stop first, then a restart asked for since the last one; `None`
    /// once the server is dropped. Cancel-safe (for `select!`).
    pub(super) async fn recv(&mut self) -> Option<Cmd> {
        loop {
            {
                let m = *self.rx.borrow_and_update();
                if m.stop && !self.stopped {
                    self.stopped = true;
                    return Some(Cmd::Stop);
                }
                if m.restarts > self.restarts {
                    self.restarts = m.restarts;
                    return Some(Cmd::Restart);
                }
            }
            if self.rx.changed().await.is_err() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn commands_coalesce_and_a_stop_comes_first() {
        let (tx, rx) = watch::channel(Mailbox::default());
        let mut cmds = Commands::new(rx);
        for _ in 0..1000 {
            tx.send_modify(|m| m.post(Cmd::Restart));
        }
        assert_eq!(cmds.recv().await, Some(Cmd::Restart), "a thousand restarts are one");
        tx.send_modify(|m| m.post(Cmd::Restart));
        tx.send_modify(|m| m.post(Cmd::Stop));
        assert_eq!(cmds.recv().await, Some(Cmd::Stop));
        assert_eq!(cmds.recv().await, Some(Cmd::Restart), "the restart asked before is still seen");
        let waiting = tokio::time::timeout(Duration::from_millis(20), cmds.recv()).await;
        assert!(waiting.is_err(), "nothing more until something is sent");
        drop(tx);
        assert_eq!(cmds.recv().await, None);
    }
}
