//! The test server's own conventions, checked with kube's client: WATCH streams (events of
//! every write, resourceVersion semantics, bookmarks, timeoutSeconds, 410 Expired), the 422
//! for a Job's immutable pod template, and 429 with Retry-After.

use super::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use std::time::Instant;

const TOKEN: &str = "watch-test-token";

fn client(server: &TestServer) -> kube::Client {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, kubeconfig(&[("test", server)], TOKEN)).expect("write kubeconfig");
    let configs = berth_runtime::backends::k8s::kubeconfig::Kubeconfigs::from_paths(&[path]);
    // The client's buffer task needs the runtime it will run on.
    server.block_on(async {
        let mut config = configs
            .config("test")
            .await
            .unwrap_or_else(|_| panic!("the test context resolves"));
        // The server's answers as they are, not kube's retries of them.
        config.default_retry = false;
        kube::Client::try_from(config).expect("client")
    })
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn config_map(name: &str, value: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "ml", "labels": labels},
           "data": {"k": value}})
}

/// The type, name and resourceVersion of each event (bookmarks: type and version).
fn summary<K: kube::Resource>(event: &WatchEvent<K>) -> (String, String, String) {
    let meta = |o: &K| {
        (
            o.meta().name.clone().unwrap_or_default(),
            o.meta().resource_version.clone().unwrap_or_default(),
        )
    };
    match event {
        WatchEvent::Added(o) => ("ADDED".into(), meta(o).0, meta(o).1),
        WatchEvent::Modified(o) => ("MODIFIED".into(), meta(o).0, meta(o).1),
        WatchEvent::Deleted(o) => ("DELETED".into(), meta(o).0, meta(o).1),
        WatchEvent::Bookmark(b) => (
            "BOOKMARK".into(),
            String::new(),
            b.metadata.resource_version.clone(),
        ),
        WatchEvent::Error(s) => (
            format!("ERROR {} {}", s.code, s.reason),
            String::new(),
            String::new(),
        ),
    }
}

#[test]
fn a_namespaced_watch_streams_every_write_after_its_version() {
    let server = TestServer::start(TOKEN);
    server.seed("admin", namespace("ml"));
    let client = client(&server);
    let api: Api<ConfigMap> = Api::namespaced(client, "ml");
    let managed = json!({"app.kubernetes.io/managed-by": "berth"});
    server.seed("berth", config_map("before", "0", managed.clone()));
    let events = server.block_on(async {
        let list = api.list(&ListParams::default()).await.expect("list");
        let version = list.metadata.resource_version.expect("list version");
        let params = WatchParams::default()
            .timeout(5)
            .labels("app.kubernetes.io/managed-by=berth");
        let mut stream = api.watch(&params, &version).await.expect("watch").boxed();
        // Writes after the watch opened: an apply, a foreign object the selector excludes,
        // a status-free change by seeding, and a delete.
        let patch = PatchParams::apply("berth");
        api.patch(
            "a",
            &patch,
            &Patch::Apply(config_map("a", "1", managed.clone())),
        )
        .await
        .expect("create");
        server.seed("kubectl", config_map("foreign", "1", json!({})));
        api.patch(
            "a",
            &patch,
            &Patch::Apply(config_map("a", "2", managed.clone())),
        )
        .await
        .expect("update");
        // A no-op apply is no write: no event.
        api.patch(
            "a",
            &patch,
            &Patch::Apply(config_map("a", "2", managed.clone())),
        )
        .await
        .expect("no-op");
        api.delete("a", &DeleteParams::background())
            .await
            .expect("delete");
        let mut events = Vec::new();
        while events.len() < 3 {
            match stream.next().await {
                Some(Ok(WatchEvent::Bookmark(_))) => {}
                Some(Ok(event)) => events.push(summary(&event)),
                other => panic!("stream ended early: {other:?}"),
            }
        }
        events
    });
    let kinds: Vec<(&str, &str)> = events
        .iter()
        .map(|(t, n, _)| (t.as_str(), n.as_str()))
        .collect();
    assert_eq!(kinds, [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]);
    let versions: Vec<u64> = events
        .iter()
        .map(|(_, _, v)| v.parse().expect("numeric version"))
        .collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    assert_eq!(
        versions[2],
        server.resource_version(),
        "the delete is the last write"
    );
}

#[test]
fn a_cluster_scoped_watch_from_zero_starts_with_the_current_objects_and_times_out() {
    let server = TestServer::start(TOKEN);
    server.seed("admin", namespace("ml"));
    server.seed("admin", namespace("burst"));
    server.set_bookmark_interval(Duration::from_millis(100));
    let api: Api<Namespace> = Api::all(client(&server));
    let started = Instant::now();
    let events = server.block_on(async {
        let params = WatchParams::default().timeout(1);
        let stream = api.watch(&params, "0").await.expect("watch");
        stream
            .map(|e| summary(&e.expect("event")))
            .collect::<Vec<_>>()
            .await
    });
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4),
        "timeoutSeconds=1 ended the watch after {elapsed:?}"
    );
    assert_eq!(events[0].0, "ADDED");
    assert_eq!(events[1].0, "ADDED");
    let names = [events[0].1.as_str(), events[1].1.as_str()];
    assert_eq!(names, ["burst", "ml"]);
    let bookmarks: Vec<&(String, String, String)> =
        events[2..].iter().filter(|e| e.0 == "BOOKMARK").collect();
    assert!(bookmarks.len() >= 3, "bookmarks every 100 ms: {events:?}");
    assert_eq!(
        bookmarks.len(),
        events.len() - 2,
        "nothing else: {events:?}"
    );
    assert!(
        bookmarks
            .iter()
            .all(|b| b.2 == server.resource_version().to_string()),
        "{bookmarks:?}"
    );
}

#[test]
fn a_watch_from_a_compacted_version_is_expired() {
    let server = TestServer::start(TOKEN);
    server.seed("admin", namespace("ml"));
    let old = server.resource_version();
    server.seed("admin", namespace("burst"));
    let api: Api<Namespace> = Api::all(client(&server));
    // Before compaction the history replays the change after `old`.
    let replay = server.block_on(async {
        let stream = api
            .watch(&WatchParams::default().timeout(1), &old.to_string())
            .await
            .expect("watch");
        stream
            .map(|e| summary(&e.expect("event")))
            .collect::<Vec<_>>()
            .await
    });
    assert_eq!(
        (replay[0].0.as_str(), replay[0].1.as_str()),
        ("ADDED", "burst")
    );
    server.compact();
    let first = server.block_on(async {
        let mut stream = api
            .watch(&WatchParams::default().timeout(5), &old.to_string())
            .await
            .expect("watch")
            .boxed();
        let first = stream.next().await.expect("one event").expect("an event");
        assert!(
            stream.next().await.is_none(),
            "the stream ends after the error"
        );
        summary(&first)
    });
    assert_eq!(first.0, "ERROR 410 Expired");
}

#[test]
fn a_jobs_pod_template_is_immutable() {
    let server = TestServer::start(TOKEN);
    server.seed("admin", namespace("ml"));
    let api: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client(&server), "ml");
    let job = |image: &str, parallelism: i64| {
        json!({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "train", "namespace": "ml"},
               "spec": {"parallelism": parallelism, "template": {"spec": {
                   "restartPolicy": "Never", "containers": [{"name": "c", "image": image}]}}}})
    };
    let patch = PatchParams::apply("berth");
    let error = server.block_on(async {
        api.patch("train", &patch, &Patch::Apply(job("a:1", 1)))
            .await
            .expect("create");
        api.patch("train", &patch, &Patch::Apply(job("a:1", 2)))
            .await
            .expect("parallelism may change");
        api.patch(
            "train",
            &patch.clone().dry_run(),
            &Patch::Apply(job("a:2", 2)),
        )
        .await
        .expect_err("the template may not")
    });
    let kube::Error::Api(status) = error else {
        panic!("an API error: {error:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status
            .message
            .starts_with("Job.batch \"train\" is invalid: spec.template: Invalid value")
            && status.message.ends_with("field is immutable"),
        "{}",
        status.message
    );
    let causes = status.details.expect("details").causes;
    assert_eq!(causes[0].field, "spec.template");
}

#[test]
fn throttling_carries_retry_after() {
    let server = TestServer::start(TOKEN);
    server.inject(Fault {
        method: None,
        path: Some("/api/v1/namespaces".to_string()),
        kind: FaultKind::Throttle {
            retry_after_seconds: 3,
        },
        times: 1,
        after_writes: 0,
    });
    let api: Api<Namespace> = Api::all(client(&server));
    let error = server
        .block_on(api.list(&ListParams::default()))
        .expect_err("throttled");
    let kube::Error::Api(status) = error else {
        panic!("an API error: {error:?}")
    };
    assert_eq!(status.code, 429);
    assert_eq!(status.details.expect("details").retry_after_seconds, 3);
    // The header too, as the API server sends it.
    server.inject(Fault {
        method: None,
        path: None,
        kind: FaultKind::Throttle {
            retry_after_seconds: 3,
        },
        times: 1,
        after_writes: 0,
    });
    let mut stream = std::net::TcpStream::connect(server.addr).expect("connect");
    std::io::Write::write_all(
        &mut stream,
        format!(
            "GET /api/v1/nodes HTTP/1.1\r\nhost: test\r\nauthorization: Bearer {TOKEN}\r\nconnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .expect("request");
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut stream, &mut answer).expect("answer");
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(
        answer.to_lowercase().contains("retry-after: 3\r\n"),
        "{answer}"
    );
}

#[test]
fn an_object_leaving_a_watchs_selection_is_deleted_for_it() {
    let server = TestServer::start(TOKEN);
    server.seed("admin", namespace("ml"));
    let api: Api<ConfigMap> = Api::namespaced(client(&server), "ml");
    let from = server.resource_version().to_string();
    server.seed("kubectl", config_map("x", "1", json!({})));
    server.seed("kubectl", config_map("x", "1", json!({"team": "a"})));
    server.seed("kubectl", config_map("x", "2", json!({"team": "a"})));
    server.seed("kubectl", config_map("x", "2", json!({"team": "b"})));
    let events = server.block_on(async {
        let params = WatchParams::default().timeout(1).labels("team=a");
        let stream = api.watch(&params, &from).await.expect("watch");
        stream
            .filter_map(|e| async move {
                match e.expect("event") {
                    WatchEvent::Bookmark(_) => None,
                    event => Some(summary(&event).0),
                }
            })
            .collect::<Vec<_>>()
            .await
    });
    assert_eq!(events, ["ADDED", "MODIFIED", "DELETED"]);
}
