//! Which Azure credential berth uses for Azure Resource Manager: the Azure SDK for Rust's
//! identity crate, chosen from the environment as the Azure tools choose, never a token flow
//! written here. Tokens live inside the credential (and its cache); berth never prints one.
//!
//! `BERTH_AZURE_CREDENTIAL` names one (`client_secret`, `workload_identity`,
//! `managed_identity`, `azure_cli`); unset, the first that the environment configures:
//!
//! 1. `client_secret`: a service principal, `AZURE_TENANT_ID`, `AZURE_CLIENT_ID`,
//!    `AZURE_CLIENT_SECRET`;
//! 2. `workload_identity`: `AZURE_FEDERATED_TOKEN_FILE` (with `AZURE_TENANT_ID`,
//!    `AZURE_CLIENT_ID`), as on a Kubernetes pod with workload identity;
//! 3. `managed_identity`: `IDENTITY_ENDPOINT` with `IDENTITY_HEADER` (App Service, Functions,
//!    Container Apps), `AZURE_CLIENT_ID` naming a user-assigned identity; on a VM (IMDS, which
//!    sets no variable) name it with `BERTH_AZURE_CREDENTIAL`. `azure_identity` 1.0 supports
//!    only those two sources: Cloud Shell (`MSI_ENDPOINT`), Azure Arc-enabled servers
//!    (`IDENTITY_ENDPOINT` with `IMDS_ENDPOINT`), Azure ML and Service Fabric it refuses, so
//!    they are not chosen here (Cloud Shell falls to the Azure CLI, which it has logged in);
//! 4. `azure_cli`: the account `az login` left.
//!
//! `AZURE_AUTHORITY_HOST` points the credentials at another Microsoft Entra authority (a
//! sovereign cloud, or the test double); it must be `https`.

use super::transport::ReqwestTransport;
use azure_core::cloud::{Audiences, CloudConfiguration, CustomConfiguration};
use azure_core::credentials::{Secret, TokenCredential};
use azure_core::http::{ClientOptions, Transport};
use azure_identity::{
    AzureCliCredential, ClientAssertionCredentialOptions, ClientSecretCredential,
    ClientSecretCredentialOptions, ManagedIdentityCredential, ManagedIdentityCredentialOptions,
    UserAssignedId, WorkloadIdentityCredential, WorkloadIdentityCredentialOptions,
};
use std::sync::Arc;

/// The kinds of credential berth can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialKind {
    ClientSecret,
    WorkloadIdentity,
    ManagedIdentity,
    AzureCli,
}

impl CredentialKind {
    pub fn name(self) -> &'static str {
        match self {
            CredentialKind::ClientSecret => "client_secret",
            CredentialKind::WorkloadIdentity => "workload_identity",
            CredentialKind::ManagedIdentity => "managed_identity",
            CredentialKind::AzureCli => "azure_cli",
        }
    }

    fn parse(text: &str) -> Option<CredentialKind> {
        [
            CredentialKind::ClientSecret,
            CredentialKind::WorkloadIdentity,
            CredentialKind::ManagedIdentity,
            CredentialKind::AzureCli,
        ]
        .into_iter()
        .find(|k| k.name() == text)
    }
}

/// The environment variables the choice reads, as a lookup (the process environment in
/// production; a map in tests).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The credential kind the environment selects, or why none can be used.
pub fn choose(env: Env<'_>) -> Result<CredentialKind, String> {
    let set = |name: &str| env(name).is_some_and(|v| !v.is_empty());
    if let Some(named) = env("BERTH_AZURE_CREDENTIAL").filter(|v| !v.is_empty()) {
        return CredentialKind::parse(&named).ok_or_else(|| {
            format!(
                "`BERTH_AZURE_CREDENTIAL={named}` names no credential (use `client_secret`, \
                 `workload_identity`, `managed_identity` or `azure_cli`)"
            )
        });
    }
    Ok(if set("AZURE_CLIENT_SECRET") {
        CredentialKind::ClientSecret
    } else if set("AZURE_FEDERATED_TOKEN_FILE") {
        CredentialKind::WorkloadIdentity
    } else if set("IDENTITY_ENDPOINT") && set("IDENTITY_HEADER") {
        CredentialKind::ManagedIdentity
    } else {
        CredentialKind::AzureCli
    })
}

/// The credential `kind`, its HTTP going through `http`.
pub fn build(
    kind: CredentialKind,
    env: Env<'_>,
    http: &reqwest::Client,
) -> Result<Arc<dyn TokenCredential>, String> {
    let need = |name: &str| {
        env(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("the `{}` credential needs `{name}`", kind.name()))
    };
    let mut client_options = ClientOptions {
        transport: Some(Transport::new(Arc::new(ReqwestTransport(http.clone())))),
        ..ClientOptions::default()
    };
    if let Some(host) = env("AZURE_AUTHORITY_HOST").filter(|v| !v.is_empty()) {
        client_options.cloud = Some(Arc::new(CloudConfiguration::Custom(custom_cloud(host))));
    }
    let failed =
        |e: azure_core::Error| format!("cannot set up the `{}` credential: {e}", kind.name());
    Ok(match kind {
        CredentialKind::ClientSecret => ClientSecretCredential::new(
            &need("AZURE_TENANT_ID")?,
            need("AZURE_CLIENT_ID")?,
            Secret::new(need("AZURE_CLIENT_SECRET")?),
            Some(ClientSecretCredentialOptions { client_options }),
        )
        .map_err(failed)?,
        CredentialKind::WorkloadIdentity => {
            WorkloadIdentityCredential::new(Some(WorkloadIdentityCredentialOptions {
                credential_options: ClientAssertionCredentialOptions { client_options },
                client_id: Some(need("AZURE_CLIENT_ID")?),
                tenant_id: Some(need("AZURE_TENANT_ID")?),
                token_file_path: Some(need("AZURE_FEDERATED_TOKEN_FILE")?.into()),
            }))
            .map_err(failed)?
        }
        CredentialKind::ManagedIdentity => {
            ManagedIdentityCredential::new(Some(ManagedIdentityCredentialOptions {
                user_assigned_id: env("AZURE_CLIENT_ID")
                    .filter(|v| !v.is_empty())
                    .map(UserAssignedId::ClientId),
                client_options,
            }))
            .map_err(failed)?
        }
        CredentialKind::AzureCli => AzureCliCredential::new(None).map_err(failed)?,
    })
}

fn custom_cloud(authority_host: String) -> CustomConfiguration {
    let mut cloud = CustomConfiguration::default();
    cloud.authority_host = authority_host;
    cloud.audiences = Audiences::new();
    cloud
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn chosen(vars: &[(&str, &str)]) -> Result<CredentialKind, String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        choose(&|name: &str| map.get(name).cloned())
    }

    #[test]
    fn the_environment_chooses_as_the_azure_tools_do() {
        assert_eq!(chosen(&[]), Ok(CredentialKind::AzureCli));
        assert_eq!(
            chosen(&[
                ("AZURE_CLIENT_SECRET", "x"),
                ("AZURE_FEDERATED_TOKEN_FILE", "/t")
            ]),
            Ok(CredentialKind::ClientSecret)
        );
        assert_eq!(
            chosen(&[
                ("AZURE_FEDERATED_TOKEN_FILE", "/t"),
                ("IDENTITY_ENDPOINT", "http://x")
            ]),
            Ok(CredentialKind::WorkloadIdentity)
        );
        assert_eq!(
            chosen(&[("IDENTITY_ENDPOINT", "http://x"), ("IDENTITY_HEADER", "h")]),
            Ok(CredentialKind::ManagedIdentity)
        );
        // Cloud Shell's and Arc-enabled servers' endpoints: not sources azure_identity 1.0
        // supports.
        assert_eq!(
            chosen(&[("MSI_ENDPOINT", "http://x")]),
            Ok(CredentialKind::AzureCli)
        );
        assert_eq!(
            chosen(&[
                ("IDENTITY_ENDPOINT", "http://x"),
                ("IMDS_ENDPOINT", "http://y")
            ]),
            Ok(CredentialKind::AzureCli)
        );
        assert_eq!(
            chosen(&[
                ("BERTH_AZURE_CREDENTIAL", "azure_cli"),
                ("AZURE_CLIENT_SECRET", "x")
            ]),
            Ok(CredentialKind::AzureCli)
        );
        let err = chosen(&[("BERTH_AZURE_CREDENTIAL", "password")]).unwrap_err();
        assert!(
            err.contains("`BERTH_AZURE_CREDENTIAL=password` names no credential"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_variable_is_named() {
        let env = |name: &str| (name == "AZURE_TENANT_ID").then(|| "t".to_string());
        let err = build(CredentialKind::ClientSecret, &env, &reqwest::Client::new())
            .expect_err("no client id");
        assert_eq!(
            err,
            "the `client_secret` credential needs `AZURE_CLIENT_ID`"
        );
    }
}
