//! A real `berth agent` process for the tests: started, its stderr collected, its URL once
//! it says it listens.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
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
