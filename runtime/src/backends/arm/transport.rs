//! The HTTP transport of the Azure SDK's credential pipelines: berth's own reqwest client
//! (rustls with ring, the roots berth trusts), so that tokens are fetched through the same
//! TLS stack and trust as every other request berth makes, and no second TLS stack is built.

use azure_core::error::{Error, ErrorKind};
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::{AsyncRawResponse, Body, HttpClient, Method, Request};
use futures::stream;

/// A reqwest client as the Azure SDK's `HttpClient`.
#[derive(Debug)]
pub struct ReqwestTransport(pub reqwest::Client);

#[async_trait::async_trait]
impl HttpClient for ReqwestTransport {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let method = match request.method() {
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            Method::Put => reqwest::Method::PUT,
            Method::Delete => reqwest::Method::DELETE,
            Method::Head => reqwest::Method::HEAD,
            Method::Patch => reqwest::Method::PATCH,
            other => {
                return Err(Error::with_message(
                    ErrorKind::Other,
                    format!("unsupported HTTP method {other:?}"),
                ));
            }
        };
        let mut builder = self.0.request(method, request.url().as_str());
        for (name, value) in request.headers().iter() {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let builder = match request.body() {
            Body::Bytes(bytes) => builder.body(bytes.to_vec()),
            Body::SeekableStream(_) => {
                return Err(Error::with_message(
                    ErrorKind::Other,
                    "streamed request bodies are not used by the credentials",
                ));
            }
        };
        let response = builder.send().await.map_err(|e| {
            let kind = if e.is_connect() {
                ErrorKind::Connection
            } else {
                ErrorKind::Io
            };
            Error::with_error(kind, e, "the request failed")
        })?;
        let status = response.status().as_u16();
        let mut headers = Headers::new();
        for (name, value) in response.headers() {
            if let Ok(value) = value.to_str() {
                headers.insert(
                    HeaderName::from(name.as_str().to_owned()),
                    HeaderValue::from(value.to_owned()),
                );
            }
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| Error::with_error(ErrorKind::Io, e, "the response body failed"))?;
        Ok(AsyncRawResponse::new(
            status.into(),
            headers,
            Box::pin(stream::once(async move { Ok(body) })),
        ))
    }
}
