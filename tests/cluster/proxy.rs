//! The fault proxy (`tests/fault_proxy`) in front of a cluster's real API server, with a
//! serving certificate of the cluster's CA.

use super::fault_proxy::FaultProxy;

use super::Cluster;

impl FaultProxy {
    /// A proxy to `cluster`'s API server on a new loopback port.
    pub fn start(cluster: &Cluster) -> FaultProxy {
        let (cert, key) = cluster.pki.serving();
        let dir = cluster
            .dir
            .join(format!("proxy-{}", super::process::free_port()));
        std::fs::create_dir_all(&dir).expect("proxy dir");
        std::fs::write(dir.join("tls.crt"), cert).expect("proxy cert");
        std::fs::write(dir.join("tls.key"), key).expect("proxy key");
        FaultProxy::forward_to(
            super::runtime(),
            cluster.server(),
            &std::fs::read(&cluster.pki.ca_cert).expect("ca"),
            &dir.join("tls.crt"),
            &dir.join("tls.key"),
        )
    }
}
