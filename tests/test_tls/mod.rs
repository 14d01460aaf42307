//! A test CA and a serving certificate it signed for 127.0.0.1, as PEM files: for the agent's
//! TLS tests, the ARM test double and the OCI registry.

use std::path::{Path, PathBuf};

/// A CA and a certificate it signed for 127.0.0.1: (ca.pem, cert.pem, key.pem) under `dir`.
pub fn tls_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "berth test CA");
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("CA");
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .expect("params")
        .signed_by(&key, &*ca)
        .expect("certificate");
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca.pem()).expect("ca.pem");
    std::fs::write(&paths.1, cert.pem()).expect("cert.pem");
    std::fs::write(&paths.2, key.serialize_pem()).expect("key.pem");
    paths
}
