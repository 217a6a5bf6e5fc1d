//! `gemctl mcp serve`'s stdin and stdout, read and written on the runtime's reactor where they
//! can be.
//!
//! tokio's `stdin()` and `stdout()` hand every read and write to a blocking thread, because a
//! terminal or a file cannot be polled: each message then crossed two more threads in `gemctl`
//! each way. MCP clients start `gemctl mcp serve` on pipes (Python's `subprocess`) or on Unix
//! socket pairs (Node's `child_process`, so Gemini CLI and Claude Code), and both can be
//! polled: those are made non-blocking and registered with the reactor. Anything else (a
//! terminal, a file) keeps tokio's own. The descriptors' status flags are put back as found
//! when the relay ends: `O_NONBLOCK` belongs to the open file, which whoever started us may
//! share.

use tokio::io::{AsyncRead, AsyncWrite};

pub type Input = Box<dyn AsyncRead + Unpin + Send>;
pub type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// Standard input and output, for as long as this lives.
pub struct ClientEnd {
    pub input: Input,
    pub output: Output,
    #[cfg(unix)]
    _restore: [Option<unix::Flags>; 2],
}

impl ClientEnd {
    /// Whether stdin and stdout are both pipes or Unix stream sockets (what the daemon can
    /// take over; it refuses other sockets, whose close could linger).
    #[cfg(unix)]
    pub fn pollable(&self) -> bool {
        self._restore.iter().all(Option::is_some)
            && unix::local(unix::Std::In)
            && unix::local(unix::Std::Out)
    }

    /// Must be called inside the runtime.
    pub fn open() -> Self {
        #[cfg(unix)]
        {
            let (input, in_flags) = match unix::input() {
                Some((input, flags)) => (input, Some(flags)),
                None => (Box::new(tokio::io::stdin()) as Input, None),
            };
            let (output, out_flags) = match unix::output() {
                Some((output, flags)) => (output, Some(flags)),
                None => (Box::new(tokio::io::stdout()) as Output, None),
            };
            // Fields and arrays drop in order: the flags go back after the streams are gone,
            // the last taken first (stdin and stdout can be one socket, whose flags stdout's
            // took after stdin's were changed).
            ClientEnd { input, output, _restore: [out_flags, in_flags] }
        }
        #[cfg(not(unix))]
        {
            ClientEnd { input: Box::new(tokio::io::stdin()), output: Box::new(tokio::io::stdout()) }
        }
    }
}

#[cfg(unix)]
mod unix {
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::net::UnixStream;

    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use nix::sys::socket::{SockType, getsockopt, sockopt};
    use nix::sys::stat::{SFlag, fstat};
    use tokio::net::unix::pipe;

    use super::{Input, Output};

    #[derive(Clone, Copy)]
    pub enum Std {
        In,
        Out,
    }

    fn with_fd<R>(which: Std, f: impl FnOnce(std::os::fd::BorrowedFd<'_>) -> R) -> R {
        match which {
            Std::In => f(std::io::stdin().as_fd()),
            Std::Out => f(std::io::stdout().as_fd()),
        }
    }

    /// A standard descriptor's status flags as found, set again when dropped.
    pub struct Flags {
        which: Std,
        flags: OFlag,
    }

    impl Drop for Flags {
        fn drop(&mut self) {
            let _ = with_fd(self.which, |fd| fcntl(fd, FcntlArg::F_SETFL(self.flags)));
        }
    }

    enum Found {
        Pipe(OwnedFd),
        Socket(UnixStream),
    }

    /// A duplicate of the descriptor if it is a pipe or a stream socket, and its flags as
    /// they were.
    fn found(which: Std) -> Option<(Found, Flags)> {
        with_fd(which, |fd| {
            let mode = SFlag::from_bits_truncate(fstat(fd).ok()?.st_mode);
            let flags = Flags {
                which,
                flags: OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).ok()?),
            };
            let owned = fd.try_clone_to_owned().ok()?;
            let found = match mode & SFlag::S_IFMT {
                SFlag::S_IFIFO => Found::Pipe(owned),
                SFlag::S_IFSOCK
                    if getsockopt(&owned, sockopt::SockType).ok()? == SockType::Stream =>
                {
                    let s = UnixStream::from(owned);
                    s.set_nonblocking(true).ok()?;
                    Found::Socket(s)
                }
                _ => return None,
            };
            Some((found, flags))
        })
    }

    /// Whether the descriptor is an anonymous pipe or a Unix socket (not a network one, and
    /// not a named FIFO: the daemon refuses those, since opening one may wait on the
    /// filesystem it lives in, so they are relayed).
    pub fn local(which: Std) -> bool {
        use nix::sys::socket::{AddressFamily, SockaddrLike as _, SockaddrStorage, getsockname};
        use std::os::fd::AsRawFd as _;
        let anonymous = |fd: std::os::fd::BorrowedFd<'_>| {
            std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                .is_ok_and(|l| l.to_string_lossy().starts_with("pipe:["))
        };
        with_fd(which, |fd| match fstat(fd).map(|s| SFlag::from_bits_truncate(s.st_mode)) {
            Ok(m) if m & SFlag::S_IFMT == SFlag::S_IFIFO => anonymous(fd),
            Ok(m) if m & SFlag::S_IFMT == SFlag::S_IFSOCK => {
                getsockname::<SockaddrStorage>(fd.as_raw_fd())
                    .is_ok_and(|a| a.family() == Some(AddressFamily::Unix))
            }
            _ => false,
        })
    }

    pub fn input() -> Option<(Input, Flags)> {
        let (found, flags) = found(Std::In)?;
        let input: Input = match found {
            Found::Pipe(fd) => Box::new(pipe::Receiver::from_owned_fd(fd).ok()?),
            Found::Socket(s) => Box::new(tokio::net::UnixStream::from_std(s).ok()?),
        };
        Some((input, flags))
    }

    pub fn output() -> Option<(Output, Flags)> {
        let (found, flags) = found(Std::Out)?;
        let output: Output = match found {
            Found::Pipe(fd) => Box::new(pipe::Sender::from_owned_fd(fd).ok()?),
            Found::Socket(s) => Box::new(tokio::net::UnixStream::from_std(s).ok()?),
        };
        Some((output, flags))
    }
}
