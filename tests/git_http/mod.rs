//! Git's smart HTTP protocol on 127.0.0.1, served by git's own `git http-backend` (as CGI,
//! one process per request), for the repositories under one folder: fetch and push, as a
//! Git server would offer them to Flux's source-controller and to berth.

#![allow(dead_code)]

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use std::path::{Path, PathBuf};

/// Runs `git ARGS` in `dir`; its stdout (the test fails when git does).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub struct GitHttp {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    _runtime: tokio::runtime::Runtime,
}

impl GitHttp {
    /// Serves the repositories under `root` (push allowed: `REMOTE_USER` is set).
    pub fn start(root: &Path) -> GitHttp {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let root = root.to_path_buf();
        let router = Router::new().fallback(move |method, uri, headers, body| {
            cgi(root.clone(), method, uri, headers, body)
        });
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        runtime.spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        GitHttp {
            url: format!("http://127.0.0.1:{port}"),
            _runtime: runtime,
        }
    }
}

async fn cgi(root: PathBuf, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let mut command = tokio::process::Command::new("git");
    command
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", &root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REMOTE_USER", "berth-test")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("REQUEST_METHOD", method.as_str())
        .env("PATH_INFO", uri.path())
        .env("QUERY_STRING", uri.query().unwrap_or(""))
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(kind) = headers.get("content-type").and_then(|v| v.to_str().ok()) {
        command.env("CONTENT_TYPE", kind);
    }
    for (name, value) in &headers {
        if let Ok(value) = value.to_str() {
            let name = format!(
                "HTTP_{}",
                name.as_str().to_ascii_uppercase().replace('-', "_")
            );
            command.env(name, value);
        }
        if name.as_str().eq_ignore_ascii_case("git-protocol")
            && let Ok(value) = value.to_str()
        {
            command.env("GIT_PROTOCOL", value);
        }
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return status(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let _ = stdin.write_all(&body).await;
    });
    let output = match child.wait_with_output().await {
        Ok(output) => output,
        Err(e) => return status(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let _ = writer.await;
    // CGI: header lines, a blank line, the body.
    let out = output.stdout;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((end, gap)) = split else {
        return status(
            StatusCode::INTERNAL_SERVER_ERROR,
            &String::from_utf8_lossy(&output.stderr),
        );
    };
    let mut response = Response::builder();
    let mut code = StatusCode::OK;
    for line in String::from_utf8_lossy(&out[..end]).lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            code = value
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok())
                .and_then(|c| StatusCode::from_u16(c).ok())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        } else {
            response = response.header(name.trim(), value);
        }
    }
    response
        .status(code)
        .body(Body::from(out[end + gap..].to_vec()))
        .expect("response")
}

fn status(code: StatusCode, message: &str) -> Response {
    Response::builder()
        .status(code)
        .body(Body::from(message.to_string()))
        .expect("response")
}
