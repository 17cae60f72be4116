//! Connections the sandbox can drop on purpose.
//!
//! A handler cannot make hyper close a connection without answering, so the sandbox serves
//! through its own [`Listener`]: every accepted socket is wrapped in a [`KillableIo`] whose
//! [`KillSwitch`] reaches the handlers as `ConnectInfo<ConnHandle>`. Pulling the switch makes
//! every later read and write on the socket fail, so hyper gives up on the connection and drops
//! the socket before a byte of the answer is written: the client sees the connection close in
//! the middle of its request (reqwest: a request error, "connection closed before message
//! completed").

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Shared between a connection's IO and the handlers serving requests on it.
#[derive(Debug, Default)]
pub struct KillSwitch {
    killed: AtomicBool,
    wakers: Mutex<[Option<Waker>; 2]>,
}

impl KillSwitch {
    /// Make every later read and write on the connection fail, and wake whoever waits on it.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        let wakers = {
            let mut w = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
            [w[0].take(), w[1].take()]
        };
        for w in wakers.into_iter().flatten() {
            w.wake();
        }
    }

    /// Has [`KillSwitch::kill`] been called?
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    fn register(&self, slot: usize, waker: &Waker) {
        let mut w = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
        match &w[slot] {
            Some(old) if old.will_wake(waker) => {}
            _ => w[slot] = Some(waker.clone()),
        }
    }
}

fn killed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "connection dropped by sandbox fault",
    )
}

/// A TCP stream with a [`KillSwitch`].
#[derive(Debug)]
pub struct KillableIo {
    inner: TcpStream,
    switch: Arc<KillSwitch>,
}

impl KillableIo {
    fn check(&self, slot: usize, cx: &Context<'_>) -> Result<(), io::Error> {
        if self.switch.is_killed() {
            return Err(killed_error());
        }
        self.switch.register(slot, cx.waker());
        // Checked again: a kill between the first check and the registration woke nobody.
        if self.switch.is_killed() {
            return Err(killed_error());
        }
        Ok(())
    }
}

impl AsyncRead for KillableIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Err(e) = this.check(0, cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Err(e) = this.check(1, cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Err(e) = this.check(1, cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Err(e) = this.check(1, cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.switch.is_killed() {
            // Nothing more to say; dropping the socket closes it.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// A [`TcpListener`] that hands out [`KillableIo`]s.
#[derive(Debug)]
pub struct KillableListener {
    inner: TcpListener,
}

impl KillableListener {
    /// Wrap a bound listener.
    pub fn new(inner: TcpListener) -> Self {
        KillableListener { inner }
    }
}

impl Listener for KillableListener {
    type Io = KillableIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    let _ = stream.set_nodelay(true);
                    let io = KillableIo {
                        inner: stream,
                        switch: Arc::new(KillSwitch::default()),
                    };
                    return (io, addr);
                }
                Err(e) => {
                    let transient = matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionRefused
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                    );
                    if !transient {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!("sandbox accept error: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// What handlers get as `ConnectInfo<ConnHandle>`: the peer and the connection's kill switch.
#[derive(Debug, Clone)]
pub struct ConnHandle {
    /// The client's address.
    pub peer: SocketAddr,
    pub(crate) switch: Arc<KillSwitch>,
}

impl ConnHandle {
    /// Drop the connection without an answer (see the module docs).
    pub fn kill(&self) {
        self.switch.kill();
    }
}

impl Connected<IncomingStream<'_, KillableListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, KillableListener>) -> Self {
        ConnHandle {
            peer: *stream.remote_addr(),
            switch: stream.io().switch.clone(),
        }
    }
}
