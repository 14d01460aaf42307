//! TLS for the agent's API (`berth agent --tls-cert --tls-key`): rustls with ring, a PEM
//! certificate chain and key, HTTP/1.1 offered by ALPN.
//!
//! Handshakes run in each connection's own task, with a time limit, and count against the
//! same connection bounds as plain HTTP ([`super::api`]), so a client that stalls in its
//! handshake holds up no one else.

use std::path::Path;
use std::sync::Arc;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

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
