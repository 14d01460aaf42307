//! A real HTTP store for bundles: Debian's Apache httpd with mod_dav (WebDAV), started on
//! loopback by the tests. It serves GET with ETags and PUT with the conditional requests of
//! RFC 9110 (`If-Match`, `If-None-Match: *`, 412 when they fail), as object stores and WebDAV
//! servers do; `.ci/run` installs it (`apt-get install apache2`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub struct WebDav {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Child,
}

const APACHE: &str = "/usr/sbin/apache2";
const MODULES: &str = "/usr/lib/apache2/modules";

impl WebDav {
    pub fn start() -> WebDav {
        assert!(
            Path::new(APACHE).exists(),
            "these tests need Apache httpd with mod_dav (apt-get install apache2)"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let www = dir.path().join("www");
        std::fs::create_dir_all(&www).expect("www");
        // The server drops to `nobody` when started as root: it must be able to write here.
        for path in [dir.path(), www.as_path()] {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let d = dir.path().display();
        let config = format!(
            "ServerName 127.0.0.1\nListen 127.0.0.1:{port}\nPidFile {d}/httpd.pid\n\
             ErrorLog {d}/error.log\nLogFormat \"%r %>s\" plain\nCustomLog {d}/access.log plain\n\
             LoadModule mpm_event_module {MODULES}/mod_mpm_event.so\n\
             LoadModule authz_core_module {MODULES}/mod_authz_core.so\n\
             LoadModule dav_module {MODULES}/mod_dav.so\n\
             LoadModule dav_fs_module {MODULES}/mod_dav_fs.so\n\
             User nobody\nGroup nogroup\nDAVLockDB {d}/davlock\nDocumentRoot {d}/www\n\
             <Directory {d}/www>\n  Dav On\n  Require all granted\n</Directory>\n"
        );
        let conf = dir.path().join("httpd.conf");
        std::fs::write(&conf, config).expect("config");
        let child = Command::new(APACHE)
            .arg("-f")
            .arg(&conf)
            .arg("-DFOREGROUND")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start apache2");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "Apache never listened: {}",
                std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        WebDav { dir, port, child }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join("www").join(name)
    }

    /// The request lines and statuses the server logged (`PUT /x HTTP/1.1 412`).
    pub fn access_log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for WebDav {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A writer that comes between a publisher's read and its write: a proxy in front of the
/// real server that forwards every request unchanged, except that before the first PUT to
/// `path` it PUTs `body` there itself, as another publisher would. The real server then
/// judges the publisher's conditional PUT.
pub struct Interposer {
    pub port: u16,
    _runtime: tokio::runtime::Runtime,
}

impl Interposer {
    pub fn start(upstream: &WebDav, path: &str, body: Vec<u8>) -> Interposer {
        use axum::body::Bytes;
        use axum::http::{HeaderMap, Method, StatusCode, Uri};
        use std::sync::{Arc, Mutex};
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let upstream = format!("http://127.0.0.1:{}", upstream.port);
        let armed = Arc::new(Mutex::new(Some((path.to_string(), body))));
        let client = reqwest::Client::new();
        let handler = move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (upstream, armed, client) = (upstream.clone(), armed.clone(), client.clone());
            async move {
                let url = format!("{upstream}{uri}");
                if method == Method::PUT {
                    let other = {
                        let mut armed = armed.lock().expect("armed");
                        match armed.as_ref() {
                            Some((p, _)) if uri.path() == p => armed.take(),
                            _ => None,
                        }
                    };
                    if let Some((_, other)) = other {
                        let answer = client.put(&url).body(other).send().await.expect("put");
                        assert!(answer.status().is_success(), "the other write: {answer:?}");
                    }
                }
                let mut request = client.request(method, &url).body(body);
                for (name, value) in &headers {
                    if name != "host" && name != "content-length" {
                        request = request.header(name, value);
                    }
                }
                let answer = request.send().await.expect("forward");
                let status = StatusCode::from_u16(answer.status().as_u16()).expect("status");
                let mut out = HeaderMap::new();
                for (name, value) in answer.headers() {
                    if name != "content-length" && name != "transfer-encoding" {
                        out.insert(name.clone(), value.clone());
                    }
                }
                let bytes = answer.bytes().await.expect("body");
                (status, out, bytes)
            }
        };
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let app = axum::Router::new().fallback(handler);
        runtime.spawn(async move { axum::serve(listener, app).await });
        Interposer {
            port,
            _runtime: runtime,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}
