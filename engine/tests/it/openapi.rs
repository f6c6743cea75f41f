//! `GET /openapi.json` of a running engine against the routes it really serves:
//! every described operation is answered by a route (not the "no route" answer,
//! not 405), every other method on a described path is 405, every schema a
//! reference names exists, and the answers of the read endpoints have exactly
//! the properties their schemas describe.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::peers::free_port;
use serde_json::{Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ADMIN: &str = "openapi-admin";
const METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];

fn config(http: u16, mqtt: u16, modbus: u16) -> String {
    Gateway::new(&format!("openapi-{http}"), mqtt)
        .http(http, ADMIN)
        .device(
            Device::modbus("meter", modbus)
                .set("deviceNum", "M1")
                .tag(Tag::new("level", "40001", "UINT16", 1000)),
        )
        .yaml()
}

/// Sends one request and reads the status line and headers only (a stream
/// never ends); for a 404, also the body. Returns (status, body).
async fn probe(http: u16, method: &str, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", http))
        .await
        .expect("connect");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Authorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\n\r\n{{}}"
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let n = stream.read(&mut buffer).await.expect("read");
            seen.extend_from_slice(&buffer[..n]);
            let text = String::from_utf8_lossy(&seen);
            let status: Option<u16> = text.split(' ').nth(1).and_then(|s| s.parse().ok());
            if let (Some(status), Some((_, body))) = (status, text.split_once("\r\n\r\n"))
                && (status != 404 || n == 0 || body.ends_with('}'))
            {
                return (status, body.to_owned());
            }
            if n == 0 {
                panic!("{method} {path}: the connection closed: {text}");
            }
        }
    })
    .await;
    read.unwrap_or_else(|_| panic!("{method} {path}: no answer"))
}

/// `path` with its parameters filled in: numbers for ids of alarms and
/// commands, names elsewhere.
fn concrete(path: &str) -> String {
    let numeric = path.starts_with("/alarms") || path.starts_with("/commands");
    path.split('/')
        .map(|part| match part {
            "{id}" if numeric => "999".to_owned(),
            "{action}" => "confirm".to_owned(),
            p if p.starts_with('{') => "nothing".to_owned(),
            p => p.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn is_no_route(status: u16, body: &str) -> bool {
    status == 404 && body.contains("no route")
}

/// The schema `schema` names (through a `$ref`), in `doc`.
fn resolve<'d>(doc: &'d Value, schema: &'d Value) -> &'d Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let name = reference.trim_start_matches("#/components/schemas/");
            &doc["components"]["schemas"][name]
        }
        None => schema,
    }
}

/// The properties an object schema allows and requires (following `allOf`).
fn properties(doc: &Value, schema: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
    let schema = resolve(doc, schema);
    let mut allowed = BTreeSet::new();
    let mut required = BTreeSet::new();
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        for part in parts {
            let (a, r) = properties(doc, part);
            allowed.extend(a);
            required.extend(r);
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        allowed.extend(props.keys().cloned());
    }
    if let Some(names) = schema.get("required").and_then(Value::as_array) {
        required.extend(names.iter().filter_map(Value::as_str).map(str::to_owned));
    }
    (allowed, required)
}

/// The JSON schema of the 200 answer of `method path`.
fn answer_schema<'d>(doc: &'d Value, path: &str, method: &str) -> &'d Value {
    &doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
}

/// `body` has every property the schema requires and none it does not describe.
fn matches(doc: &Value, schema: &Value, body: &Map<String, Value>, what: &str) {
    let (allowed, required) = properties(doc, schema);
    let present: BTreeSet<String> = body.keys().cloned().collect();
    let missing: Vec<_> = required.difference(&present).collect();
    let undescribed: Vec<_> = present.difference(&allowed).collect();
    assert!(
        missing.is_empty() && undescribed.is_empty(),
        "{what}: missing {missing:?}, not described {undescribed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_describes_exactly_the_routes_served() {
    let http = free_port();
    let dir = scratch_dir("openapi");
    let _engine = Engine::start(&dir, &config(http, free_port(), free_port()));
    let (status, doc) = Engine::request(http, "GET", "/openapi.json", None, None).await;
    assert_eq!(status, 200, "{doc}");
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "{}",
        doc["openapi"]
    );
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.len() >= 25, "{} paths", paths.len());

    // Every reference names a schema the document has.
    let text = doc.to_string();
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    for reference in text.split("#/components/schemas/").skip(1) {
        let name: String = reference
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        assert!(schemas.contains_key(&name), "no schema `{name}`");
    }

    for (path, operations) in paths {
        let operations = operations.as_object().expect("operations");
        let url = concrete(path);
        for method in METHODS {
            let (status, body) = probe(http, &method.to_uppercase(), &url).await;
            if operations.contains_key(method) {
                assert!(
                    status != 405 && !is_no_route(status, &body),
                    "{method} {path} is described but not served: {status} {body}"
                );
                let operation = &operations[method];
                assert!(
                    operation["responses"]
                        .as_object()
                        .is_some_and(|r| !r.is_empty()),
                    "{method} {path} describes no answer"
                );
            } else {
                assert_eq!(
                    status, 405,
                    "{method} {path} is served but not described: {body}"
                );
            }
        }
    }
    let (status, body) = probe(http, "GET", "/not-a-route").await;
    assert!(is_no_route(status, &body), "{status} {body}");

    // The answers of the read endpoints have the properties their schemas name.
    for path in [
        "/health",
        "/devices",
        "/devices/{id}",
        "/alarms",
        "/alarms/stats",
        "/commands",
        "/components",
        "/states",
    ] {
        let url = path.replace("{id}", "meter");
        let (status, body) = Engine::request(http, "GET", &url, Some(ADMIN), None).await;
        assert_eq!(status, 200, "GET {url}: {body}");
        let schema = answer_schema(&doc, path, "get");
        matches(&doc, schema, body.as_object().expect("an object"), &url);
        // One level down: the items of the first list of objects.
        let (allowed, _) = properties(&doc, schema);
        for field in allowed {
            let inner = &resolve(&doc, schema)["properties"][&field];
            if let (Some(items), Some(first)) = (
                inner.get("items"),
                body[&field].as_array().and_then(|a| a.first()),
            ) && let Some(first) = first.as_object()
            {
                matches(&doc, items, first, &format!("{url} {field}[0]"));
            }
        }
    }
}
