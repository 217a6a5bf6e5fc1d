//! The gateway on descriptors handed over (Linux): `gemctl mcp serve` asks with `fds=1`, and
//! after the upgrade sends its own client's stdin and stdout over the connection
//! (`SCM_RIGHTS`), so the gateway reads and writes the client's pipes itself and no process
//! relays its bytes. gemctl then waits on the connection: the daemon closes it when the session
//! ends, which ends gemctl; gemctl going (killed) ends the session and cancels its calls, and the
//! client's pipes are closed at once, as they were when the relay died with it.
//! `geminid_protocol::gateway::HAND_HEADER` describes the exchange.
//!
//! Other processes may share the open files handed over (whoever started the client's
//! `gemctl`, its siblings), and any of them can change their status flags (`O_NONBLOCK`) at any
//! time. So nothing here depends on those flags: a pipe is opened anew through
//! `/proc/self/fd` (an open file of the daemon's own, non-blocking, that no other process
//! holds), and a socket is read and written with `MSG_DONTWAIT`, which never blocks whatever
//! its flags say. Only anonymous pipes and Unix stream sockets are taken (a TCP socket's close
//! could linger). What is not taken is closed on a blocking thread, and said to a gemctl that
//! asked (`refused=say`): descriptors the daemon cannot take (another kind, a pipe that does
//! not open again, the daemon at its limit of open files) are relayed on the connection
//! instead; an exchange that is not gemctl's, or a connection to the daemon itself, is closed.

use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use nix::sys::socket::{AddressFamily, MsgFlags, SockType, SockaddrLike as _, SockaddrStorage};
use nix::sys::socket::{getsockname, getsockopt, recv, send, sockopt};
use nix::sys::stat::{SFlag, fstat};
use parking_lot::Mutex;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, Interest, ReadBuf};
use tokio::net::UnixStream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// The most of the client's first message gemctl read before handing over (gemctl's own cap).
const MAX_READ_AHEAD: u64 = 1 << 20;
/// How long gemctl has to send the descriptors once told to (it does at once).
pub(super) const HAND_WITHIN: Duration = Duration::from_secs(5);
/// The most descriptors one `SCM_RIGHTS` message can carry (Linux's `SCM_MAX_FD`): the room
/// received into, so that every descriptor sent is received (and closed when not wanted).
const MAX_FDS: usize = 253;

type Input = Box<dyn AsyncRead + Unpin + Send>;
type Output = Box<dyn AsyncWrite + Unpin + Send>;
/// A descriptor until the session ends.
type Slot<T> = Arc<Mutex<Option<T>>>;

/// The client's stdin and stdout, taken from gemctl, and its connection to watch.
pub(super) struct Handed {
    pub input: UntilGone<Input>,
    pub output: UntilGone<Output>,
    /// gemctl's connection: closed (dropped) when the session ends, which ends gemctl.
    pub conn: UnixStream,
    pub closer: Closer,
    /// A second look at the client's stdout: ready when the client closed it.
    pub stdout: OwnedFd,
}

/// What closes the client's descriptors when the client or gemctl goes.
pub(super) struct Closer {
    /// Fires when the client or gemctl goes (also when writing to the client fails).
    pub gone: CancellationToken,
    /// Both descriptors, to close them the moment gemctl goes.
    close: (Slot<Input>, Slot<Output>),
}

impl Closer {
    /// gemctl or the client went: close the client's pipes now (the client sees them close as
    /// it did when the relay died), and end the session and its calls.
    pub(super) fn end(&self) {
        self.close.0.lock().take();
        self.close.1.lock().take();
        self.gone.cancel();
    }
}

/// Why the descriptors handed over were not taken.
pub(super) enum Refusal {
    /// An exchange that is not what gemctl sends, or a connection back to the daemon itself:
    /// said (where the sender asked) and closed.
    Closed { why: io::Error, conn: Option<UnixStream> },
    /// Descriptors the daemon cannot take (a kind it does not serve, a pipe it cannot open
    /// again, its limit on open descriptors): the session is relayed on `conn` instead, its
    /// input starting with `first` (what gemctl read ahead).
    Relay { why: io::Error, conn: UnixStream, first: Vec<u8> },
}

impl Refusal {
    pub(super) fn why(&self) -> &io::Error {
        match self {
            Self::Closed { why, .. } | Self::Relay { why, .. } => why,
        }
    }
}

fn broken(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Take the descriptors gemctl hands over on the connection whose descriptor is `raw` (held
/// open by the caller, in hyper's upgraded connection, for as long as this runs), within
/// [`HAND_WITHIN`].
pub(super) async fn take(raw: RawFd) -> Result<Handed, Refusal> {
    tokio::time::timeout(HAND_WITHIN, take_now(raw)).await.unwrap_or_else(|_| {
        let why =
            io::Error::new(io::ErrorKind::TimedOut, "gemctl did not hand its descriptors over");
        Err(Refusal::Closed { why, conn: None })
    })
}

async fn take_now(raw: RawFd) -> Result<Handed, Refusal> {
    let closed = |why: io::Error| Refusal::Closed { why, conn: None };
    #[allow(
        unsafe_code,
        reason = "the connection's descriptor, owned by the upgraded connection the caller holds"
    )]
    // SAFETY: `raw` is the accepted connection's descriptor; the caller holds the upgraded
    // connection that owns it for the whole call, so it is open; it is only duplicated here.
    let borrowed = unsafe { BorrowedFd::borrow_raw(raw) };
    let own = borrowed.try_clone_to_owned().map_err(closed)?;
    let conn = std::os::unix::net::UnixStream::from(own);
    let mut conn = UnixStream::from_std(conn).map_err(closed)?;
    // Now that hyper is done with the connection: gemctl may send.
    conn.write_all(b"\n").await.map_err(closed)?;
    let received = conn.async_io(Interest::READABLE, || receive(conn.as_raw_fd())).await;
    let (len, fds, truncated) = match received {
        Ok(r) => r,
        Err(why) => return Err(Refusal::Closed { why, conn: Some(conn) }),
    };
    let refuse = |why: io::Error, conn: UnixStream, fds: Vec<OwnedFd>| {
        close_aside(fds);
        Refusal::Closed { why, conn: Some(conn) }
    };
    if len > MAX_READ_AHEAD {
        return Err(refuse(broken("an oversized first message"), conn, fds));
    }
    // What gemctl read ahead comes next, whether the descriptors are taken or not.
    let mut first = Vec::new();
    if let Err(why) = (&mut conn).take(len).read_to_end(&mut first).await {
        return Err(refuse(why, conn, fds));
    }
    if first.len() as u64 != len {
        return Err(refuse(io::ErrorKind::UnexpectedEof.into(), conn, fds));
    }
    if truncated && fds.len() < 2 {
        // The kernel had no room for them: the daemon is at its limit of open descriptors.
        close_aside(fds);
        let why = "geminid is at its limit of open files (RLIMIT_NOFILE)";
        return Err(Refusal::Relay { why: io::Error::other(why), conn, first });
    }
    if truncated || fds.len() != 2 {
        return Err(refuse(broken("not two descriptors"), conn, fds));
    }
    if let Err(why) = screen(&fds) {
        close_aside(fds);
        return Err(match why.kind() {
            io::ErrorKind::AddrInUse => Refusal::Closed { why, conn: Some(conn) },
            _ => Refusal::Relay { why, conn, first },
        });
    }
    let [input, output]: [OwnedFd; 2] = fds.try_into().map_err(|_| closed(broken("two")))?;
    let gone = CancellationToken::new();
    let clients = Client::new(input, Way::Read, gone.clone())
        .and_then(|i| Ok((i, Client::new(output, Way::Write, gone.clone())?)))
        .and_then(|(i, o)| Ok((o.fd.get_ref().try_clone()?, i, o)));
    let (stdout, input, output) = match clients {
        Ok(c) => c,
        // A pipe that does not open again (another user's, a /proc without it).
        Err(why) => return Err(Refusal::Relay { why, conn, first }),
    };
    let input: Input = Box::new(std::io::Cursor::new(first).chain(input));
    let output: Output = Box::new(output);
    let (input, output) = (UntilGone::new(input, &gone), UntilGone::new(output, &gone));
    let close = (input.inner.clone(), output.inner.clone());
    Ok(Handed { input, output, conn, closer: Closer { gone, close }, stdout })
}

/// Each descriptor is an anonymous pipe or a Unix stream socket, and no socket is a
/// connection to the daemon itself (`AddrInUse`: the daemon would hold both ends, and the
/// session, its descriptors and its connection slot would outlive the sender).
fn screen(fds: &[OwnedFd]) -> io::Result<()> {
    for fd in fds {
        kind_without_filesystem(fd)?;
        if is_socket(fd)? && peer_is_us(fd)? {
            return Err(io::Error::new(io::ErrorKind::AddrInUse, "a connection to geminid itself"));
        }
    }
    Ok(())
}

/// Close descriptors not taken on a blocking thread: whatever they are, their close must not
/// hold the event loop (a TCP socket lingering over unsent data, a terminal draining, a file
/// on a FUSE server that does not answer).
fn close_aside(fds: Vec<OwnedFd>) {
    if !fds.is_empty() {
        drop(tokio::task::spawn_blocking(move || drop(fds)));
    }
}

/// One `recvmsg`: the 8 bytes of the read-ahead's length and the descriptors, received
/// close-on-exec (the servers the daemon starts must not hold the client's pipes), and
/// whether the kernel cut the descriptors short (`MSG_CTRUNC`: no room for them). Every
/// descriptor received is owned before anything is checked, so a message with more than
/// two, or one cut short, leaves none behind.
fn receive(fd: RawFd) -> io::Result<(u64, Vec<OwnedFd>, bool)> {
    use nix::libc;
    let mut len = [0u8; 8];
    // `cmsghdr` is 8-aligned: a buffer of u64s is aligned for it.
    let mut space = [0u64; (MAX_FDS * 4 + 64) / 8];
    let mut iov = libc::iovec { iov_base: len.as_mut_ptr().cast(), iov_len: len.len() };
    #[allow(unsafe_code, reason = "recvmsg(2) and the CMSG_* walk of its control buffer")]
    // SAFETY: every pointer given to recvmsg points into `len` and `space`, alive and as long
    // as said; the walk reads only headers the kernel wrote within `msg_controllen`, and each
    // SCM_RIGHTS entry holds descriptors the kernel just installed for this process, which
    // nothing else owns.
    let (bytes, flags, fds) = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&space) as _;
        let n = libc::recvmsg(fd, &raw mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut fds = Vec::new();
        let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c);
                let room = (*c).cmsg_len as usize - (data as usize - c as usize);
                for i in 0..room / size_of::<RawFd>() {
                    let raw = data.add(i * size_of::<RawFd>()).cast::<RawFd>().read_unaligned();
                    fds.push(OwnedFd::from_raw_fd(raw));
                }
            }
            c = libc::CMSG_NXTHDR(&raw const msg, c);
        }
        (n as usize, msg.msg_flags, fds)
    };
    if bytes != len.len() {
        close_aside(fds);
        return Err(broken("a short handover message"));
    }
    Ok((u64::from_le_bytes(len), fds, flags & libc::MSG_CTRUNC != 0))
}

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Read,
    Write,
}

/// One of the client's descriptors, read or written by calls that never block whatever its
/// status flags: a pipe through an open file of the daemon's own, a socket with
/// `MSG_DONTWAIT`. A write that fails (the client closed its stdout) ends the session.
struct Client {
    fd: AsyncFd<OwnedFd>,
    socket: bool,
    gone: CancellationToken,
}

impl Client {
    fn new(fd: OwnedFd, way: Way, gone: CancellationToken) -> io::Result<Self> {
        // Screened already (`screen`).
        let socket = is_socket(&fd)?;
        let fd = if socket { fd } else { reopen(&fd, way)? };
        let interest = if way == Way::Read { Interest::READABLE } else { Interest::WRITABLE };
        Ok(Self { fd: register(fd, interest)?, socket, gone })
    }
}

/// `fd` registered with the runtime's reactor for `interest`.
fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    #[allow(unsafe_code, reason = "tokio's registration of a descriptor it then owns")]
    // SAFETY: an `OwnedFd` is open and stays the same descriptor of the same open file until
    // the `AsyncFd`, which owns it, drops it.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(|e| e.into_parts().1)
}

/// Refuses anything but an anonymous pipe or a socket, seen from its `/proc/self/fd` link
/// alone: a named FIFO's `fstat` or open may wait on the filesystem it lives in (a FUSE
/// server of the sender's could hold a daemon worker there for as long as it likes).
fn kind_without_filesystem(fd: &OwnedFd) -> io::Result<()> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    let link = link.to_string_lossy();
    if link.starts_with("pipe:[") || link.starts_with("socket:[") {
        return Ok(());
    }
    Err(io::Error::new(io::ErrorKind::InvalidInput, "neither an anonymous pipe nor a socket"))
}

/// Whether the socket's other end was made by the daemon itself: a connection to its own
/// socket handed back to it (the daemon would then hold both ends, and the session, its
/// descriptors and its connection slot would outlive the sender).
fn peer_is_us(fd: &OwnedFd) -> io::Result<bool> {
    let peer = getsockopt(fd, sockopt::PeerCredentials)?;
    Ok(u32::try_from(peer.pid()).is_ok_and(|pid| pid == std::process::id()))
}

/// Whether it is a Unix stream socket (else a pipe; anything else is refused).
fn is_socket(fd: &OwnedFd) -> io::Result<bool> {
    let mode = SFlag::from_bits_truncate(fstat(fd.as_fd())?.st_mode);
    let unix_stream = || -> io::Result<bool> {
        let family = getsockname::<SockaddrStorage>(fd.as_raw_fd())?.family();
        Ok(getsockopt(fd, sockopt::SockType)? == SockType::Stream
            && family == Some(AddressFamily::Unix))
    };
    match mode & SFlag::S_IFMT {
        SFlag::S_IFIFO => Ok(false),
        SFlag::S_IFSOCK if unix_stream()? => Ok(true),
        _ => Err(io::Error::new(io::ErrorKind::InvalidInput, "neither a pipe nor a Unix socket")),
    }
}

/// The pipe `fd` opened anew, non-blocking, as an open file no other process holds (its
/// other end is untouched: the client's flags are its own). Only where `/proc/self/fd`
/// opens a pipe (Linux); elsewhere the daemon does not take descriptors.
fn reopen(fd: &OwnedFd, way: Way) -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut open = std::fs::OpenOptions::new();
    match way {
        Way::Read => open.read(true),
        Way::Write => open.write(true),
    };
    // Never waits for the other end (a pipe's write side without a reader fails instead).
    open.custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits());
    let own: OwnedFd = open.open(format!("/proc/self/fd/{}", fd.as_raw_fd()))?.into();
    let (was, is) = (fstat(fd.as_fd())?, fstat(own.as_fd())?);
    if (was.st_dev, was.st_ino) != (is.st_dev, is.st_ino) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "the pipe did not open again"));
    }
    Ok(own)
}

fn nonblocking(r: nix::Result<usize>) -> io::Result<usize> {
    r.map_err(io::Error::from)
}

impl AsyncRead for Client {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let mut guard = ready!(this.fd.poll_read_ready(cx))?;
            let into = buf.initialize_unfilled();
            let read = guard.try_io(|fd| {
                let fd = fd.get_ref();
                nonblocking(match this.socket {
                    true => recv(fd.as_raw_fd(), into, MsgFlags::MSG_DONTWAIT),
                    false => nix::unistd::read(fd, into),
                })
            });
            match read {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => {}
            }
        }
    }
}

impl AsyncWrite for Client {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            let mut guard = ready!(this.fd.poll_write_ready(cx))?;
            let wrote = guard.try_io(|fd| {
                let fd = fd.get_ref();
                let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
                nonblocking(match this.socket {
                    true => send(fd.as_raw_fd(), buf, flags),
                    false => nix::unistd::write(fd, buf),
                })
            });
            match wrote {
                Ok(Ok(n)) => return Poll::Ready(Ok(n)),
                Ok(Err(e)) => {
                    // The client closed its stdout: the session ends, as the relay's did.
                    this.gone.cancel();
                    return Poll::Ready(Err(e));
                }
                Err(_would_block) => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Until the client closes its stdout (the other end of `fd`, a second descriptor of the
/// daemon's own for it): a pipe without a reader reports an error, a socket whose peer closed
/// a hang-up. A socket shut for writing only (its peer's stdin closed) is no hang-up, and
/// tokio keeps saying it is readable from then on: it is looked at now and then instead.
pub(super) async fn closed(fd: OwnedFd) {
    let Ok(fd) = register(fd, Interest::READABLE) else {
        return std::future::pending().await;
    };
    loop {
        let Ok(mut guard) = fd.ready(Interest::READABLE | Interest::ERROR).await else { return };
        if hung_up(fd.get_ref()) {
            return;
        }
        if guard.ready().is_read_closed() {
            while !hung_up(fd.get_ref()) {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            return;
        }
        guard.clear_ready();
    }
}

/// Whether `fd`'s other end is gone (`poll(2)` says so now).
fn hung_up(fd: &OwnedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut look = [PollFd::new(fd.as_fd(), PollFlags::empty())];
    matches!(poll(&mut look, PollTimeout::ZERO), Ok(n) if n > 0)
        && look[0].revents().is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR))
}

/// Until the connection whose descriptor is `raw` (held open by the caller, in hyper's
/// upgraded connection) is closed both ways: gemctl went, not only its client's stdin.
pub(super) fn hangup(raw: RawFd) -> Option<impl std::future::Future<Output = ()>> {
    #[allow(
        unsafe_code,
        reason = "the connection's descriptor, owned by the upgraded connection the caller holds"
    )]
    // SAFETY: as in `take_now`: open for as long as the caller holds the connection; only
    // duplicated here (the duplicate goes with the future the caller drops with it).
    let borrowed = unsafe { BorrowedFd::borrow_raw(raw) };
    let own = borrowed.try_clone_to_owned().ok()?;
    Some(closed(own))
}

/// gemctl's connection ends: gemctl went (or the daemon closed it). Nothing is sent on it;
/// descriptors sent on it later are dropped by the kernel (read without room for them).
pub(super) async fn ended(conn: &mut UnixStream) {
    let mut b = [0u8; 64];
    while let Ok(n) = conn.read(&mut b).await {
        if n == 0 {
            break;
        }
    }
}

/// A handed descriptor that is closed the moment the session is over: reading it then ends
/// (the session ends as if the client had closed its stdin), writing it fails as writing to
/// the relay that died with gemctl did, and the client sees its pipes close at once.
pub(super) struct UntilGone<T> {
    inner: Slot<T>,
    gone: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<T> UntilGone<T> {
    fn new(inner: T, gone: &CancellationToken) -> Self {
        let inner = Arc::new(Mutex::new(Some(inner)));
        Self { inner, gone: Box::pin(gone.clone().cancelled_owned()) }
    }

    /// Run `f` on the descriptor, unless the session is over (`None`: it is closed).
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

fn closed_error() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the session is over: the client's pipes are closed")
}

impl<T: AsyncWrite + Unpin> AsyncWrite for UntilGone<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.with(cx, |t, cx| t.poll_write(cx, buf)).unwrap_or(Poll::Ready(Err(closed_error())))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut()
            .with(cx, |t, cx| t.poll_flush(cx))
            .unwrap_or(Poll::Ready(Err(closed_error())))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().with(cx, |t, cx| t.poll_shutdown(cx)).unwrap_or(Poll::Ready(Ok(())))
    }
}
