//! OCI artifacts for the model cache: `oci://REGISTRY/REPOSITORY[:TAG][@DIGEST]`, pulled with
//! the ORAS project's `oci-client` (distribution API, registry auth, ranged blob requests).
//!
//! The digest a bundle gives for an `oci://` artifact is its **manifest's**: what `oras push`
//! prints and what pins an artifact whatever its tag does later. The agent asks the registry
//! for the manifest by that digest (never by tag), checks that the bytes hash to it, and only
//! then trusts the layer digests it lists, each of which is checked again as its blob streams.
//! Both manifest forms are read: the image manifest (`layers`, what ORAS writes today) and the
//! artifact manifest of OCI 1.1's drafts (`blobs`).
//!
//! Credentials come from a file in Docker's `config.json` form (`auths.<registry>.auth`, or
//! `username`/`password`, or `registrytoken`), never from the bundle; they are never printed.

use base64::Engine;
use futures::StreamExt;
use futures::stream::BoxStream;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use std::collections::BTreeMap;
use std::path::Path;

/// The media types of manifests the agent reads.
const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.artifact.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// One layer (blob) of an artifact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    pub digest: String,
    pub size: u64,
    /// The file name it is stored as: its `org.opencontainers.image.title` annotation (as ORAS
    /// sets it), or the digest's hex when it has none.
    pub name: String,
}

/// The registries the agent pulls from, with their credentials.
pub struct Registries {
    client: Client,
    auths: BTreeMap<String, RegistryAuth>,
}

impl std::fmt::Debug for Registries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credentials.
        f.debug_struct("Registries")
            .field("registries_with_credentials", &self.auths.keys())
            .finish()
    }
}

impl Registries {
    /// A client trusting the built-in roots and `ca_pem` (PEM, possibly several), with the
    /// credentials of `auth_file` (Docker's `config.json` form).
    pub fn new(ca_pem: Option<&[u8]>, auth_file: Option<&Path>) -> Result<Registries, String> {
        // INVARIANT: reqwest 0.13 (through oci-client) is built without a crypto provider;
        // berth's is ring, installed once for the process.
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        let config = ClientConfig {
            protocol: ClientProtocol::Https,
            extra_root_certificates: ca_pem
                .map(|pem| {
                    vec![Certificate {
                        encoding: CertificateEncoding::Pem,
                        data: pem.to_vec(),
                    }]
                })
                .unwrap_or_default(),
            ..ClientConfig::default()
        };
        let client =
            Client::try_from(config).map_err(|e| format!("cannot make the OCI client: {e}"))?;
        let auths = match auth_file {
            None => BTreeMap::new(),
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!(
                        "cannot read the registry credentials `{}`: {e}",
                        path.display()
                    )
                })?;
                parse_auths(&text)
                    .map_err(|e| format!("registry credentials `{}`: {e}", path.display()))?
            }
        };
        Ok(Registries { client, auths })
    }

    /// [`Registries::new`] with the roots read from the PEM file `ca` (`--registry-ca`) and
    /// the credentials of `auth` (`--registry-auth`).
    pub fn from_files(ca: Option<&Path>, auth: Option<&Path>) -> Result<Registries, String> {
        let ca =
            match ca {
                Some(path) => Some(std::fs::read(path).map_err(|e| {
                    format!("cannot read the registry CA `{}`: {e}", path.display())
                })?),
                None => None,
            };
        Registries::new(ca.as_deref(), auth)
    }

    fn auth(&self, reference: &Reference) -> RegistryAuth {
        self.auths
            .get(reference.resolve_registry())
            .or_else(|| self.auths.get(reference.registry()))
            .cloned()
            .unwrap_or(RegistryAuth::Anonymous)
    }

    /// The manifest of `reference` (pinned by digest), checked against that digest.
    pub async fn manifest(&self, reference: &Reference) -> Result<Vec<Layer>, Pull> {
        self.manifest_bytes(reference)
            .await
            .map(|(_, layers)| layers)
    }

    /// [`Registries::manifest`], and the manifest's bytes as the registry served them.
    pub async fn manifest_bytes(
        &self,
        reference: &Reference,
    ) -> Result<(Vec<u8>, Vec<Layer>), Pull> {
        let (bytes, _) = self
            .client
            .pull_manifest_raw(reference, &self.auth(reference), MANIFEST_TYPES)
            .await
            .map_err(|e| Pull::Failed(e.to_string()))?;
        let actual = format!(
            "sha256:{}",
            berth_compiler::plan::hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes))
        );
        let expected = reference.digest().unwrap_or_default();
        if actual != expected {
            return Err(Pull::Mismatch {
                expected: expected.to_string(),
                actual,
            });
        }
        let layers = layers(&bytes).map_err(Pull::Refused)?;
        Ok((bytes.to_vec(), layers))
    }

    /// The bytes of `layer` from `offset` on; `true` when the registry honoured the range
    /// (`false`: the stream starts at byte 0).
    pub async fn blob(
        &self,
        reference: &Reference,
        layer: &Layer,
        offset: u64,
    ) -> Result<
        (
            bool,
            BoxStream<'static, Result<bytes::Bytes, std::io::Error>>,
        ),
        Pull,
    > {
        // INVARIANT: `manifest` ran first for this reference: the client keeps the
        // registry's token (or basic credentials) from it.
        let response = self
            .client
            .pull_blob_stream_partial(reference, layer.digest.as_str(), offset, None)
            .await
            .map_err(|e| Pull::Failed(e.to_string()))?;
        Ok(match response {
            oci_client::client::BlobResponse::Partial(s) => (true, s.stream),
            oci_client::client::BlobResponse::Full(s) => (offset == 0, s.stream.boxed()),
        })
    }
}

/// Why a pull failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pull {
    /// The registry could not be reached or refused the request (retried).
    Failed(String),
    /// The manifest's bytes do not hash to the pinned digest.
    Mismatch { expected: String, actual: String },
    /// The manifest is not one the agent can use.
    Refused(String),
}

/// `oci://REGISTRY/REPO[:TAG][@DIGEST]` pinned to `digest`: the reference the agent pulls.
pub fn reference(uri: &str, digest: &str) -> Result<Reference, String> {
    let rest = uri
        .strip_prefix("oci://")
        .ok_or_else(|| format!("`{uri}` is not an `oci://` reference"))?;
    let parsed: Reference = rest
        .parse()
        .map_err(|e| format!("`{uri}` is not an OCI reference: {e}"))?;
    if let Some(pinned) = parsed.digest()
        && pinned != digest
    {
        return Err(format!(
            "`{uri}` names digest `{pinned}` but the bundle pins `{digest}`"
        ));
    }
    Ok(Reference::with_digest(
        parsed.registry().to_string(),
        parsed.repository().to_string(),
        digest.to_string(),
    ))
}

/// The layers of an image manifest (`layers`) or artifact manifest (`blobs`).
pub fn layers(manifest: &[u8]) -> Result<Vec<Layer>, String> {
    let doc: serde_json::Value =
        serde_json::from_slice(manifest).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    let list = doc["layers"]
        .as_array()
        .or_else(|| doc["blobs"].as_array())
        .ok_or("the manifest lists no layers")?;
    if list.is_empty() {
        return Err("the manifest lists no layers".into());
    }
    let mut out: Vec<Layer> = Vec::new();
    for entry in list {
        let digest = entry["digest"].as_str().ok_or("a layer has no digest")?;
        let hex = digest
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| format!("layer digest `{digest}` is not `sha256:` and 64 hex digits"))?;
        let size = entry["size"].as_u64().ok_or("a layer has no size")?;
        let title = entry["annotations"]["org.opencontainers.image.title"].as_str();
        let name = match title {
            Some(t) if safe_name(t) => t.to_string(),
            Some(t) => return Err(format!("layer title `{t}` is not a plain file name")),
            None => hex.to_ascii_lowercase(),
        };
        if out.iter().any(|l| l.name == name) {
            return Err(format!("two layers are both named `{name}`"));
        }
        out.push(Layer {
            digest: digest.to_ascii_lowercase(),
            size,
            name,
        });
    }
    Ok(out)
}

/// A file name that stays inside the artifact's directory.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\\')
        && !name.contains('\0')
}

/// Credentials by registry from Docker's `config.json` form.
pub fn parse_auths(text: &str) -> Result<BTreeMap<String, RegistryAuth>, String> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let auths = doc["auths"]
        .as_object()
        .ok_or("no `auths` object (Docker's config.json form)")?;
    let mut out = BTreeMap::new();
    for (registry, entry) in auths {
        let registry = registry
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let auth = if let Some(token) = entry["registrytoken"].as_str() {
            RegistryAuth::Bearer(token.to_string())
        } else if let (Some(user), Some(password)) =
            (entry["username"].as_str(), entry["password"].as_str())
        {
            RegistryAuth::Basic(user.to_string(), password.to_string())
        } else if let Some(encoded) = entry["auth"].as_str() {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map_err(|_| format!("`auths.{registry}.auth` is not base64"))?;
            let decoded = String::from_utf8(decoded)
                .map_err(|_| format!("`auths.{registry}.auth` is not UTF-8"))?;
            let (user, password) = decoded
                .split_once(':')
                .ok_or_else(|| format!("`auths.{registry}.auth` is not `user:password`"))?;
            RegistryAuth::Basic(user.to_string(), password.to_string())
        } else {
            return Err(format!(
                "`auths.{registry}` has no `auth`, `username`/`password` or `registrytoken`"
            ));
        };
        out.insert(registry, auth);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:6c3c624b58dbbcd3c0dd82b4c53f04194d1247c6eebdaab7c610cf7d66709b3b";

    #[test]
    fn references_are_pinned_to_the_bundles_digest() {
        let r = reference("oci://127.0.0.1:5000/models/llm:4.2", D).expect("parses");
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "models/llm");
        assert_eq!(r.digest(), Some(D));
        let other = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
        let err = reference(&format!("oci://r.example/m@{other}"), D).unwrap_err();
        assert!(err.contains("but the bundle pins"), "{err}");
    }

    #[test]
    fn layers_are_read_from_either_manifest_form_and_titles_stay_inside() {
        let image = format!(
            r#"{{"schemaVersion":2,"layers":[{{"digest":"{D}","size":5,
            "annotations":{{"org.opencontainers.image.title":"model.safetensors"}}}}]}}"#
        );
        let l = layers(image.as_bytes()).expect("layers");
        assert_eq!(l[0].name, "model.safetensors");
        let artifact = format!(r#"{{"blobs":[{{"digest":"{D}","size":5}}]}}"#);
        assert_eq!(layers(artifact.as_bytes()).expect("blobs")[0].name, &D[7..]);
        let escape = image.replace("model.safetensors", "../../etc/passwd");
        assert!(layers(escape.as_bytes()).is_err());
    }

    #[test]
    fn docker_config_credentials_are_read() {
        let auths = parse_auths(
            r#"{"auths":{"https://reg.example:5000":{"auth":"Ym90OnMzY3IzdA=="},
                "plant.local":{"registrytoken":"tok"}}}"#,
        )
        .expect("parses");
        assert!(
            matches!(&auths["reg.example:5000"], RegistryAuth::Basic(u, p) if u == "bot" && p == "s3cr3t")
        );
        assert!(matches!(&auths["plant.local"], RegistryAuth::Bearer(t) if t == "tok"));
        assert!(parse_auths(r#"{"auths":{"x":{}}}"#).is_err());
    }
}
