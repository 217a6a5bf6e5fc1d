//! The gateway on descriptors handed over (Unix): `gemctl mcp serve` asks with `fds=1`, and
//! after the upgrade sends its own client's stdin and stdout over the connection
//! (`SCM_RIGHTS`), so the gateway reads and writes the client's pipes itself and no process
//! relays its bytes. gemctl then waits on the connection: the daemon closes it when the session
//! ends, which ends gemctl; gemctl going (killed) ends the session as its stdin closing would,
//! and the client's pipes are closed at once, as they were when the relay died with it.
//! `geminid_protocol::gateway::HAND_HEADER` describes the exchange.

use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, SockType, getsockopt, recvmsg, sockopt};
use nix::sys::stat::{SFlag, fstat};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, Interest, ReadBuf};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// The most of the client's first message gemctl read before handing over (gemctl's own cap).
const MAX_READ_AHEAD: u64 = 1 << 20;

type Input = Box<dyn AsyncRead + Unpin + Send>;
type Output = Box<dyn AsyncWrite + Unpin + Send>;
/// A descriptor until gemctl goes.
type Slot<T> = Arc<Mutex<Option<T>>>;

/// The client's stdin and stdout, taken from gemctl, and its connection to watch.
pub(super) struct Handed {
    pub input: UntilGone<Input>,
    pub output: UntilGone<Output>,
    /// gemctl's connection: closed (dropped) when the session ends, which ends gemctl.
    pub conn: UnixStream,
    pub closer: Closer,
}

/// What closes the client's descriptors when gemctl goes.
pub(super) struct Closer {
    /// Fires when gemctl goes.
    gone: CancellationToken,
    /// Both descriptors, to close them the moment gemctl goes.
    close: (Slot<Input>, Slot<Output>),
}

impl Closer {
    /// gemctl went: close the client's pipes now (the client sees them close as it did when
    /// the relay died), and end the session as the client's stdin closing would.
    pub(super) fn gemctl_gone(&self) {
        self.close.0.lock().take();
        self.close.1.lock().take();
        self.gone.cancel();
    }
}

/// Take the descriptors gemctl hands over on the connection whose descriptor is `raw` (held
/// open by the caller, in hyper's upgraded connection, for as long as this runs).
pub(super) async fn take(raw: RawFd) -> io::Result<Handed> {
    #[allow(
        unsafe_code,
        reason = "the connection's descriptor, owned by the upgraded connection the caller holds"
    )]
    // SAFETY: `raw` is the accepted connection's descriptor; the caller holds the upgraded
    // connection that owns it for the whole call, so it is open; it is only duplicated here.
    let borrowed = unsafe { BorrowedFd::borrow_raw(raw) };
    let conn =
        UnixStream::from_std(std::os::unix::net::UnixStream::from(borrowed.try_clone_to_owned()?))?;
    let mut conn = conn;
    // Now that hyper is done with the connection: gemctl may send.
    conn.write_all(b"\n").await?;
    let (len, fds) = conn.async_io(Interest::READABLE, || receive(conn.as_raw_fd())).await?;
    let [input, output]: [OwnedFd; 2] = fds
        .try_into()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not two descriptors"))?;
    if len > MAX_READ_AHEAD {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "an oversized first message"));
    }
    let mut first = Vec::new();
    (&mut conn).take(len).read_to_end(&mut first).await?;
    if first.len() as u64 != len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let input: Input = match classify(&input)? {
        Kind::Pipe => Box::new(pipe::Receiver::from_owned_fd(input)?),
        Kind::Socket => Box::new(socket(input)?),
    };
    let output: Output = match classify(&output)? {
        Kind::Pipe => Box::new(pipe::Sender::from_owned_fd(output)?),
        Kind::Socket => Box::new(socket(output)?),
    };
    let input: Input = Box::new(std::io::Cursor::new(first).chain(input));
    let gone = CancellationToken::new();
    let (input, output) = (UntilGone::new(input, &gone), UntilGone::new(output, &gone));
    let close = (input.inner.clone(), output.inner.clone());
    Ok(Handed { input, output, conn, closer: Closer { gone, close } })
}

/// One `recvmsg`: the 8 bytes of the read-ahead's length and the two descriptors, received
/// close-on-exec (the servers the daemon starts must not hold the client's pipes).
fn receive(fd: RawFd) -> io::Result<(u64, Vec<OwnedFd>)> {
    let mut len = [0u8; 8];
    let mut space = nix::cmsg_space!([RawFd; 2]);
    let (bytes, fds) = {
        let mut iov = [io::IoSliceMut::new(&mut len)];
        let msg = recvmsg::<()>(fd, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC)?;
        let mut fds = Vec::new();
        for c in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(raw) = c {
                #[allow(
                    unsafe_code,
                    reason = "descriptors the kernel just installed for this process (SCM_RIGHTS)"
                )]
                // SAFETY: each is a new descriptor of this process that nothing else owns.
                fds.extend(raw.into_iter().map(|r| unsafe { OwnedFd::from_raw_fd(r) }));
            }
        }
        (msg.bytes, fds)
    };
    if bytes != len.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "a short handover message"));
    }
    Ok((u64::from_le_bytes(len), fds))
}

enum Kind {
    Pipe,
    Socket,
}

/// Only pipes and stream sockets are handed over (what gemctl polls itself).
fn classify(fd: &OwnedFd) -> io::Result<Kind> {
    let mode = SFlag::from_bits_truncate(fstat(fd.as_fd())?.st_mode);
    match mode & SFlag::S_IFMT {
        SFlag::S_IFIFO => Ok(Kind::Pipe),
        SFlag::S_IFSOCK if getsockopt(fd, sockopt::SockType)? == SockType::Stream => {
            Ok(Kind::Socket)
        }
        _ => Err(io::Error::new(io::ErrorKind::InvalidInput, "neither a pipe nor a stream socket")),
    }
}

fn socket(fd: OwnedFd) -> io::Result<UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true)?;
    UnixStream::from_std(s)
}

/// gemctl's connection ends: gemctl went (or the daemon closed it). Nothing is sent on it.
pub(super) async fn ended(conn: &mut UnixStream) {
    let mut b = [0u8; 64];
    while let Ok(n) = conn.read(&mut b).await {
        if n == 0 {
            break;
        }
    }
}

/// A handed descriptor that is closed the moment gemctl goes: reading it then ends (the
/// session ends as if the client had closed its stdin), writing it fails as writing to the
/// relay that died with gemctl did, and the client sees its pipes close at once.
pub(super) struct UntilGone<T> {
    inner: Slot<T>,
    gone: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<T> UntilGone<T> {
    fn new(inner: T, gone: &CancellationToken) -> Self {
        let inner = Arc::new(Mutex::new(Some(inner)));
        Self { inner, gone: Box::pin(gone.clone().cancelled_owned()) }
    }

    /// Run `f` on the descriptor, unless gemctl went (`None`: it is closed).
    fn with<R>(
        &mut self,
        cx: &mut Context<'_>,
        f: impl FnOnce(Pin<&mut T>, &mut Context<'_>) -> R,
    ) -> Option<R>
    where
        T: Unpin,
    {
        let mut inner = self.inner.lock();
        if inner.is_some() && self.gone.as_mut().poll(cx).is_ready() {
            *inner = None;
        }
        inner.as_mut().map(|t| f(Pin::new(t), cx))
    }
}

impl<T> std::fmt::Debug for UntilGone<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UntilGone").field("open", &self.inner.lock().is_some()).finish()
    }
}

impl std::fmt::Debug for Handed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handed").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Closer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Closer").field("gone", &self.gone.is_cancelled()).finish()
    }
}

use std::future::Future as _;

impl<T: AsyncRead + Unpin> AsyncRead for UntilGone<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.get_mut().with(cx, |t, cx| t.poll_read(cx, buf)).unwrap_or(Poll::Ready(Ok(())))
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "gemctl went: the client's pipes are closed")
}

impl<T: AsyncWrite + Unpin> AsyncWrite for UntilGone<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().with(cx, |t, cx| t.poll_write(cx, buf)).unwrap_or(Poll::Ready(Err(closed())))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().with(cx, |t, cx| t.poll_flush(cx)).unwrap_or(Poll::Ready(Err(closed())))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().with(cx, |t, cx| t.poll_shutdown(cx)).unwrap_or(Poll::Ready(Ok(())))
    }
}
