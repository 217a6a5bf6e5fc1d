//! The connection stream both ends of the control socket use.
//!
//! On Unix it is [`QuietStream`]: a Unix stream socket watched by the event loop for reading
//! only. tokio's `UnixStream` watches every socket for writability too, and a Unix socket
//! signals "writable" each time its peer reads what was sent, so every message made its sender
//! wake up once more for nothing (one extra thread wake-up per call on each side: measured with
//! strace and `/proc/PID/task/*/schedstat`, see BENCHMARKS.md). A `QuietStream` writes
//! straight to the socket and asks the event loop about writability only while a write is
//! waiting for room. On Windows it is the named-pipe stream of `interprocess`.

#[cfg(unix)]
pub use unix::QuietStream as LocalStream;

/// See the module documentation.
#[cfg(not(unix))]
pub type LocalStream = interprocess::local_socket::tokio::Stream;

/// The [`LocalStream`] of a connected `interprocess` stream (connected or accepted).
pub fn local_stream(
    stream: interprocess::local_socket::tokio::Stream,
) -> std::io::Result<LocalStream> {
    #[cfg(unix)]
    {
        use interprocess::local_socket::tokio::Stream;
        let fd = match stream {
            Stream::UdSocket(s) => std::os::fd::OwnedFd::try_from(s)?,
        };
        unix::QuietStream::new(std::os::unix::net::UnixStream::from(fd))
    }
    #[cfg(not(unix))]
    {
        Ok(stream)
    }
}

#[cfg(unix)]
mod unix {
    use std::io::{self, Read as _};
    use std::os::fd::{AsFd, AsRawFd};
    use std::os::unix::net::UnixStream;
    use std::pin::Pin;
    use std::task::{Context, Poll, ready};

    use nix::sys::socket::{MsgFlags, send};
    use tokio::io::unix::AsyncFd;
    use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

    /// A connected Unix stream socket, registered with the event loop for reading; see the
    /// [module documentation](super).
    #[derive(Debug)]
    pub struct QuietStream {
        /// Registered for readability only.
        read: AsyncFd<UnixStream>,
        /// A duplicate of the socket registered for writability, only while writes find the
        /// socket's buffer full; dropped (unregistered) once a write goes through whole.
        write: Option<AsyncFd<UnixStream>>,
    }

    impl QuietStream {
        /// Wrap a connected socket (made non-blocking here).
        pub fn new(socket: UnixStream) -> io::Result<Self> {
            socket.set_nonblocking(true)?;
            Ok(Self { read: register(socket, Interest::READABLE)?, write: None })
        }

        /// The socket (for its peer's credentials, say).
        pub fn socket(&self) -> &UnixStream {
            self.read.get_ref()
        }
    }

    #[allow(unsafe_code)]
    fn register(socket: UnixStream, interest: Interest) -> io::Result<AsyncFd<UnixStream>> {
        // SAFETY: the `UnixStream` owns its descriptor, keeps it open until it is dropped
        // (with the `AsyncFd`), and always returns the same one from `as_raw_fd`.
        unsafe { AsyncFd::register_with_interest(socket, interest) }.map_err(|e| e.into_parts().1)
    }

    fn send_now(socket: &UnixStream, buf: &[u8]) -> io::Result<usize> {
        // MSG_NOSIGNAL: a closed peer is an EPIPE error, never a SIGPIPE.
        send(socket.as_raw_fd(), buf, MsgFlags::MSG_NOSIGNAL).map_err(io::Error::from)
    }

    impl AsyncRead for QuietStream {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            loop {
                let mut guard = ready!(self.read.poll_read_ready(cx))?;
                let unfilled = buf.initialize_unfilled();
                let room = unfilled.len();
                match guard.try_io(|s| s.get_ref().read(unfilled)) {
                    Ok(Ok(n)) => {
                        if n > 0 && n < room {
                            // Drained (as tokio's own streams assume): wait for the next
                            // event instead of asking again only to hear "would block".
                            guard.clear_ready();
                        }
                        buf.advance(n);
                        return Poll::Ready(Ok(()));
                    }
                    Ok(Err(e)) => return Poll::Ready(Err(e)),
                    Err(_would_block) => {}
                }
            }
        }
    }

    impl AsyncWrite for QuietStream {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            loop {
                let Some(write) = &this.write else {
                    match send_now(this.read.get_ref(), buf) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            // Registering reports writability at once if room appeared
                            // since: no wake-up is lost.
                            let dup =
                                UnixStream::from(this.read.get_ref().as_fd().try_clone_to_owned()?);
                            this.write = Some(register(dup, Interest::WRITABLE)?);
                            continue;
                        }
                        r => return Poll::Ready(r),
                    }
                };
                let mut guard = ready!(write.poll_write_ready(cx))?;
                match guard.try_io(|s| send_now(s.get_ref(), buf)) {
                    Ok(Ok(n)) => {
                        if n == buf.len() {
                            // Room again: stop hearing about every read the peer makes.
                            this.write = None;
                        }
                        return Poll::Ready(Ok(n));
                    }
                    Ok(Err(e)) => return Poll::Ready(Err(e)),
                    Err(_would_block) => {}
                }
            }
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            // A peer that is already gone needs no end-of-stream.
            match self.read.get_ref().shutdown(std::net::Shutdown::Write) {
                Err(e) if e.kind() != io::ErrorKind::NotConnected => Poll::Ready(Err(e)),
                _ => Poll::Ready(Ok(())),
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        fn pair() -> io::Result<(QuietStream, QuietStream)> {
            let (a, b) = UnixStream::pair()?;
            Ok((QuietStream::new(a)?, QuietStream::new(b)?))
        }

        #[tokio::test]
        async fn a_message_larger_than_the_socket_buffer_arrives_whole() -> io::Result<()> {
            let (mut a, mut b) = pair()?;
            // Several MiB: far more than a Unix socket buffers, so writes must wait for room.
            let sent: Vec<u8> = (0..6 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
            let expected = sent.clone();
            let writer = tokio::spawn(async move {
                a.write_all(&sent).await?;
                let registered = a.write.is_some();
                a.shutdown().await?;
                io::Result::Ok(registered)
            });
            let mut got = Vec::new();
            // Read slowly at first, so the writer finds the buffer full.
            let mut chunk = vec![0; 4096];
            for _ in 0..8 {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                let n = b.read(&mut chunk).await?;
                got.extend_from_slice(&chunk[..n]);
            }
            b.read_to_end(&mut got).await?;
            let still_registered = writer.await.map_err(io::Error::other)??;
            assert!(!still_registered, "the write registration outlived the pressure");
            assert_eq!(got.len(), expected.len());
            assert!(got == expected, "bytes differ");
            Ok(())
        }

        #[tokio::test]
        async fn messages_both_ways_then_end_of_stream() -> io::Result<()> {
            let (mut a, mut b) = pair()?;
            for i in 0..100u32 {
                a.write_all(&i.to_le_bytes()).await?;
                let mut four = [0; 4];
                b.read_exact(&mut four).await?;
                assert_eq!(u32::from_le_bytes(four), i);
                b.write_all(&four).await?;
                a.read_exact(&mut four).await?;
                assert_eq!(u32::from_le_bytes(four), i);
            }
            drop(a);
            let mut rest = Vec::new();
            assert_eq!(b.read_to_end(&mut rest).await?, 0);
            // Writing to a closed peer is an error, not a signal that ends the process.
            let mut failed = false;
            for _ in 0..10 {
                if b.write_all(b"x").await.is_err() {
                    failed = true;
                    break;
                }
            }
            assert!(failed, "writes to a closed peer kept succeeding");
            Ok(())
        }
    }
}
