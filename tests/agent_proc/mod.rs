//! A real `berth agent` process for the tests: started, its stderr collected, its URL once
//! it says it listens.

#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Starts `command` (a `berth agent …` with `--listen 127.0.0.1:0`) with its stderr piped
/// into the returned log, and waits (at most 20 s) for `agent listening on URL`.
pub fn spawn(mut command: Command) -> (Child, String, Arc<Mutex<String>>) {
    let mut child = command
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start the agent");
    let log = Arc::new(Mutex::new(String::new()));
    let Some(stderr) = child.stderr.take() else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the agent's stderr is not piped");
    };
    let mut lines = BufReader::new(stderr);
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while lines.read_line(&mut line).unwrap_or(0) > 0 {
            sink.lock().expect("log").push_str(&line);
            line.clear();
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = log.lock().expect("log").clone();
        if let Some(url) = text
            .lines()
            .find_map(|l| l.strip_prefix("agent listening on ").map(str::to_string))
        {
            return (child, url, log);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the agent never listened: {text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `METHOD path` to the agent at `base` (`http://127.0.0.1:PORT`), with a bearer token when
/// given: the status code and the body (de-chunked).
pub fn http(base: &str, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let host = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(host).expect("connect to the agent");
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(stream, "{method} {path} HTTP/1.1\r\nhost: {host}\r\n{auth}content-length: 0\r\nconnection: close\r\n\r\n").expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    // Bodies may be chunked: keep the JSON or text between the chunk sizes.
    let body = if response
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(&body)
    } else {
        body
    };
    (code, body)
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// The state of workload `name` in an agent's status document.
pub fn workload_state(status: &Value, name: &str) -> Option<String> {
    status["workloads"]
        .as_array()?
        .iter()
        .find(|w| w["name"] == name)
        .and_then(|w| w["state"].as_str().map(str::to_string))
}
