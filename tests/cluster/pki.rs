//! Certificates and keys of one test cluster: a CA, the API server's serving certificate
//! (127.0.0.1 and localhost), the service-account signing key, and bearer tokens.

use std::path::{Path, PathBuf};

pub struct Pki {
    pub ca_cert: PathBuf,
    /// The CA's certificate and key, for the fault proxy's serving certificate.
    pub ca: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
}

impl Pki {
    pub fn create(dir: &Path) -> Pki {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "berth test cluster CA");
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("CA");
        let (server_cert, server_key) = serving_pair(&ca);
        let sa = rcgen::KeyPair::generate().expect("service-account key");
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {name}: {e}"));
            path
        };
        Pki {
            ca_cert: write("ca.crt", ca.pem()),
            server_cert: write("apiserver.crt", server_cert),
            server_key: write("apiserver.key", server_key),
            sa_key: write("sa.key", sa.serialize_pem()),
            sa_pub: write("sa.pub", sa.public_key_pem()),
            ca,
        }
    }

    /// A serving certificate and key for 127.0.0.1 and localhost, signed by this CA.
    pub fn serving(&self) -> (String, String) {
        serving_pair(&self.ca)
    }
}

fn serving_pair(ca: &rcgen::CertifiedIssuer<'static, rcgen::KeyPair>) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("serving key");
    let cert =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .expect("serving params")
            .signed_by(&key, &**ca)
            .expect("serving certificate");
    (cert.pem(), key.serialize_pem())
}

/// A bearer token that cannot be mistaken for anything else in output.
pub fn token(user: &str) -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("random bytes");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{user}-secret-{hex}")
}
