//! The control plane's processes: each runs under a small shell guard that kills it when the
//! test process's end of its stdin closes, so a test that panics, times out or is killed
//! (`kill -9` included) never leaves an etcd or an API server behind.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `"$@"` in the background and waits for it; when stdin reaches end of file (the test
/// dropped its end, or died), the command is killed.
/// (A background job's stdin is /dev/null unless redirected, hence the copy in fd 3.)
const GUARD: &str = r#"exec 3<&0
"$@" <&- & child=$!
{ while read -r _ <&3; do :; done; kill -TERM "$child" 2>/dev/null; sleep 2; kill -KILL "$child" 2>/dev/null; } &
wait "$child""#;

/// One running component (etcd, kube-apiserver, …) with its log file.
pub struct Process {
    pub name: String,
    pub log: PathBuf,
    child: Child,
    guard: Option<ChildStdin>,
}

impl Process {
    /// Starts `program args` with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, program: &Path, args: &[String], log: &Path) -> Process {
        let out = File::create(log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let err = out.try_clone().expect("clone log handle");
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(GUARD)
            .arg("berth-test-guard")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name} ({}): {e}", program.display()));
        let guard = child.stdin.take();
        Process {
            name: name.to_string(),
            log: log.to_path_buf(),
            child,
            guard,
        }
    }

    /// `Some(status)` once the component has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last `lines` lines of the component's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops the component: closes its guard's stdin (TERM, then KILL after 2 s) and waits.
    pub fn stop(&mut self) {
        self.guard.take();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A free TCP port on 127.0.0.1 (bound, then released for the component to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}
