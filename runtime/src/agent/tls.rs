//! TLS for the agent's API (`berth agent --tls-cert --tls-key`): rustls with ring, a PEM
//! certificate chain and key, HTTP/1.1 offered by ALPN.
//!
//! Handshakes run in their own tasks, with a time limit, so a client that stalls in its
//! handshake holds up no one else; only finished connections reach the HTTP server.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::server::TlsStream;

/// How long a client may take to finish its handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Finished handshakes waiting for the server to take them.
const READY: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the certificate chain `{path}`: {message}")]
    Certificate { path: String, message: String },
    #[error("cannot read the private key `{path}`: {message}")]
    Key { path: String, message: String },
    #[error("the certificate and key do not make a TLS server: {0}")]
    Config(String),
}

/// A server configuration from PEM files: the certificate chain (leaf first) and its key.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let certificate = |message: String| TlsError::Certificate {
        path: cert.display().to_string(),
        message,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| certificate(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| certificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(certificate("no PEM certificate in it".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.display().to_string(),
        message: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A TCP listener whose connections are TLS streams, for `axum::serve`.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    finished: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> TlsListener {
        let (finished, ready) = mpsc::channel(READY);
        TlsListener {
            tcp,
            acceptor: TlsAcceptor::from(config),
            finished,
            ready,
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                Some(done) = self.ready.recv() => return done,
                accepted = self.tcp.accept() => match accepted {
                    Ok((stream, address)) => {
                        let (acceptor, finished) = (self.acceptor.clone(), self.finished.clone());
                        tokio::spawn(async move {
                            // A failed or stalled handshake is the client's problem: dropped.
                            if let Ok(Ok(tls)) =
                                tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await
                            {
                                let _ = finished.send((tls, address)).await;
                            }
                        });
                    }
                    // Out of file descriptors and the like: wait rather than spin.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                },
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
