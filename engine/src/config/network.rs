//! The collector's network endpoints: the MQTT broker samples are published to
//! (`collector.mqtt`) and the local HTTP API (`collector.http`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::read::{
    Unique, at_least, list, ranged, read_at, required_name, required_text, text, text_at,
};
use super::secret_text::{from_file, secret_at, secret_of};
use super::sparkplug::{UplinkPayload, read_payload};
use crate::yaml::{Diagnostics, Fields, Kind, Node, Pos};

/// `collector.mqtt`: the broker samples are published to.
#[derive(Debug, Clone, PartialEq)]
pub struct MqttConfig {
    /// Host part of `brokerUrl` (`tcp://HOST:PORT` or `mqtt://HOST:PORT`, over
    /// TLS `mqtts://HOST:PORT` or `ssl://HOST:PORT`; default
    /// `tcp://127.0.0.1:1883`). An IPv6 address is written in brackets and kept without.
    pub broker_host: String,
    /// Port part of `brokerUrl` (default 1883, 8883 over TLS).
    pub broker_port: u16,
    /// Over TLS (`mqtts://`, `ssl://`): how (`tls`).
    pub tls: Option<TlsConfig>,
    /// `clientId`: the MQTT client identifier. Without one, the engine makes one
    /// up the first time it runs on a data directory and keeps it there, so it
    /// stays the same across restarts (the broker keeps its session by it).
    pub client_id: Option<String>,
    /// `username`, if the broker wants one.
    pub username: Option<String>,
    /// `password`, if the broker wants one.
    pub password: Option<String>,
    /// `qos`: 0 (at most once) or 1 (at least once, the default); 2 is not supported.
    pub qos: u8,
    /// `keepAliveSec`: MQTT keep-alive interval (at least 1; default 60).
    pub keep_alive_sec: u16,
    /// `topicPrefix`: put in front of every topic (default empty; no `+` or `#`).
    pub topic_prefix: String,
    /// `payload`: `json` (the default) or `sparkplug-b` (with `sparkplug`).
    pub payload: UplinkPayload,
    /// `maxPacketKb`: the largest packet the broker takes, in KiB (1 to 262144;
    /// default 1024). A message that would be bigger is never sent: it is set
    /// aside as a dead letter.
    pub max_packet_kb: u32,
}

impl MqttConfig {
    /// `maxPacketKb` in bytes.
    pub fn max_packet_bytes(&self) -> usize {
        self.max_packet_kb as usize * 1024
    }
}

impl Default for MqttConfig {
    fn default() -> Self {
        Self {
            broker_host: "127.0.0.1".to_owned(),
            broker_port: DEFAULT_MQTT_PORT,
            tls: None,
            client_id: None,
            username: None,
            password: None,
            qos: 1,
            keep_alive_sec: 60,
            topic_prefix: String::new(),
            payload: UplinkPayload::Json,
            max_packet_kb: 1024,
        }
    }
}

/// The MQTT port when `brokerUrl` names none.
const DEFAULT_MQTT_PORT: u16 = 1883;
/// The MQTT port over TLS when `brokerUrl` names none.
const DEFAULT_MQTTS_PORT: u16 = 8883;

/// `collector.mqtt.tls`: how the broker is checked and how the engine proves
/// who it is. The files are read at every connect, so a rotated certificate
/// is used from the next reconnect; relative paths are from the
/// configuration file's directory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsConfig {
    /// `caFile`: PEM certificates the broker's must chain to; the system's
    /// roots without it.
    pub ca_file: Option<PathBuf>,
    /// `certFile`: the engine's certificate chain (PEM), for mutual TLS.
    pub cert_file: Option<PathBuf>,
    /// `keyFile`: its private key (PEM: PKCS#8, RSA or EC).
    pub key_file: Option<PathBuf>,
    /// `alpn`: protocol names offered in the handshake (`x-amzn-mqtt-ca` for
    /// AWS IoT on port 443).
    pub alpn: Vec<String>,
    /// Where `tls` is written (the broker URL's position without it).
    pub pos: Pos,
}

impl TlsConfig {
    /// The paths made relative to `base`, the configuration file's directory.
    pub(super) fn resolve(&mut self, base: &Path) {
        for path in [&mut self.ca_file, &mut self.cert_file, &mut self.key_file]
            .into_iter()
            .flatten()
        {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
    }
}

/// `collector.http`: the local HTTP API.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// `listen`: the `IP:PORT` to listen on (default `127.0.0.1:8080`).
    pub listen: SocketAddr,
    /// `adminToken`: bearer token with access to everything. Without one the
    /// engine makes one at its first start and keeps it in the data directory
    /// (`admin-token`, readable by its own user only).
    pub admin_token: Option<String>,
    /// Where `adminToken` is written.
    pub admin_token_pos: Pos,
    /// `nodeTokens`: the nodes that claim commands and report their receipts
    /// (`POST /commands/claim`, `POST /commands/{id}/receipt`), each with its
    /// bearer token: a token acts for its node only.
    pub node_tokens: Vec<NodeToken>,
    /// `metricsToken`: when set, `/metrics` needs it (or the admin token).
    pub metrics_token: Option<String>,
    /// Where `metricsToken` is written.
    pub metrics_token_pos: Pos,
    /// `allowedHosts`: host names the API answers to besides any IP address
    /// and `localhost` (a `Host` it does not know is refused: DNS rebinding).
    pub allowed_hosts: Vec<String>,
    /// `tls`: HTTPS with this certificate (`certFile`, `keyFile`, PEM), read
    /// again when the files change.
    pub tls: Option<HttpTls>,
    /// `maxConnections`: connections served at once; more are closed at once
    /// (1 to 65536, default 256).
    pub max_connections: u32,
    /// `headerTimeoutMs`: time a client has to send a request's headers
    /// (100 to 600000, default 10000).
    pub header_timeout_ms: u64,
    /// `idleTimeoutMs`: a connection that moves no byte either way this long is
    /// closed, a half-sent body included (1000 to 3600000, default 30000).
    pub idle_timeout_ms: u64,
}

/// Both say the same, wherever in the file they stand.
impl PartialEq for HttpConfig {
    fn eq(&self, other: &Self) -> bool {
        let limits = |h: &HttpConfig| (h.max_connections, h.header_timeout_ms, h.idle_timeout_ms);
        (
            self.listen,
            &self.admin_token,
            &self.node_tokens,
            &self.metrics_token,
        ) == (
            other.listen,
            &other.admin_token,
            &other.node_tokens,
            &other.metrics_token,
        ) && self.allowed_hosts == other.allowed_hosts
            && limits(self) == limits(other)
    }
}

/// `collector.http.tls`: the API's certificate and key (PEM files; relative
/// paths from the configuration file's directory).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpTls {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// Where `tls` is written.
    pub pos: Pos,
}

/// One entry of `nodeTokens`: `{ nodeId, token }`.
#[derive(Debug, Clone)]
pub struct NodeToken {
    pub node_id: String,
    pub token: String,
    /// Where the entry is written.
    pub pos: Pos,
}

/// Both say the same, wherever in the file they stand.
impl PartialEq for NodeToken {
    fn eq(&self, other: &Self) -> bool {
        (&self.node_id, &self.token) == (&other.node_id, &other.token)
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admin_token: None,
            admin_token_pos: Pos::default(),
            node_tokens: Vec::new(),
            metrics_token: None,
            metrics_token_pos: Pos::default(),
            allowed_hosts: Vec::new(),
            tls: None,
            max_connections: 256,
            header_timeout_ms: 10_000,
            idle_timeout_ms: 30_000,
        }
    }
}

/// Reads `collector.mqtt`.
pub(super) fn read_mqtt(node: &Node, base: &Path, errors: &mut Diagnostics) -> MqttConfig {
    let d = MqttConfig::default();
    let Some(mut f) = Fields::of(node, "collector.mqtt", errors) else {
        return d;
    };
    let (broker_host, broker_port, secure) = f
        .optional_with("brokerUrl", errors, |node| match &node.kind {
            Kind::Str(url) => parse_broker_url(url),
            other => Err(format!("expected a URL, found {}", other.describe())),
        })
        .unwrap_or((d.broker_host, d.broker_port, false));
    let url_pos = f.node("brokerUrl").map_or(node.pos, |url| url.pos);
    let tls = read_tls(&mut f, secure, url_pos, errors);
    let client_id = text(&mut f, "clientId", errors);
    let username = text_at(&mut f, "username", errors).map(|(v, _)| v);
    let password = secret_at(&mut f, "password", base, errors).map(|(v, _)| v);
    // `passwordFile: PATH`, the same as `password: { file: PATH }`.
    let password = match (password, text_at(&mut f, "passwordFile", errors)) {
        (Some(_), Some((_, pos))) => {
            errors.push(pos, "`passwordFile`: `password` is given too; keep one");
            None
        }
        (password, None) => password,
        (None, Some((path, pos))) => match from_file(&base.join(&path)) {
            Ok(secret) if !secret.is_empty() => Some(secret),
            Ok(_) => {
                errors.push(pos, format!("`passwordFile`: {path} is empty"));
                None
            }
            Err(problem) => {
                errors.push(pos, format!("`passwordFile`: {problem}"));
                None
            }
        },
    };
    let qos = match read_at::<u8>(&mut f, "qos", errors) {
        Some((qos @ (0 | 1), _)) => qos,
        Some((2, pos)) => {
            errors.push(
                pos,
                "`qos`: QoS 2 (exactly once) is not supported; use 0 (at most once) or 1 (at least once)",
            );
            d.qos
        }
        Some((other, pos)) => {
            errors.push(
                pos,
                format!("`qos`: {other} is not an MQTT QoS level; use 0 or 1"),
            );
            d.qos
        }
        None => d.qos,
    };
    let keep_alive_sec = at_least(&mut f, "keepAliveSec", 1, d.keep_alive_sec, errors);
    let topic_prefix = match text_at(&mut f, "topicPrefix", errors) {
        Some((prefix, pos)) if prefix.contains(['+', '#']) => {
            errors.push(
                pos,
                "`topicPrefix`: must not contain the MQTT wildcards `+` or `#`",
            );
            d.topic_prefix
        }
        Some((prefix, _)) => prefix,
        None => d.topic_prefix,
    };
    let payload = read_payload(&mut f, errors);
    let max_packet_kb = ranged(&mut f, "maxPacketKb", 1..=262_144, d.max_packet_kb, errors);
    f.finish(errors);
    MqttConfig {
        broker_host,
        broker_port,
        tls,
        client_id,
        username,
        password,
        qos,
        keep_alive_sec,
        topic_prefix,
        payload,
        max_packet_kb,
    }
}

/// `tls` of a broker over TLS (`secure`); refused beside a plain one.
fn read_tls(
    f: &mut Fields<'_>,
    secure: bool,
    url_pos: Pos,
    errors: &mut Diagnostics,
) -> Option<TlsConfig> {
    let node = f.node("tls");
    if !secure {
        if let Some(node) = node {
            errors.push(
                node.pos,
                "`tls`: the broker URL is plain MQTT; write mqtts://HOST:PORT (or ssl://) to use TLS",
            );
        }
        return None;
    }
    let Some(node) = node else {
        return Some(TlsConfig {
            pos: url_pos,
            ..TlsConfig::default()
        });
    };
    let mut t = Fields::of(node, "collector.mqtt.tls", errors)?;
    let path = |t: &mut Fields<'_>, key: &'static str, errors: &mut Diagnostics| {
        text_at(t, key, errors).map(|(path, _)| PathBuf::from(path))
    };
    let ca_file = path(&mut t, "caFile", errors);
    let cert_file = path(&mut t, "certFile", errors);
    let key_file = path(&mut t, "keyFile", errors);
    let alpn = t
        .node("alpn")
        .map(|n| list(n, "alpn", errors))
        .unwrap_or_default()
        .iter()
        .filter_map(|item| match &item.kind {
            Kind::Str(name) if !name.is_empty() && name.len() <= 255 => Some(name.clone()),
            other => {
                errors.push(
                    item.pos,
                    format!(
                        "`alpn`: expected a protocol name, found {}",
                        other.describe()
                    ),
                );
                None
            }
        })
        .collect();
    if cert_file.is_some() != key_file.is_some() {
        errors.push(
            node.pos,
            "`tls`: mutual TLS needs both `certFile` and `keyFile`",
        );
    }
    t.finish(errors);
    Some(TlsConfig {
        ca_file,
        cert_file,
        key_file,
        alpn,
        pos: node.pos,
    })
}

/// Splits `tcp://HOST[:PORT]`, `mqtt://HOST[:PORT]`, `mqtts://HOST[:PORT]` or
/// `ssl://HOST[:PORT]` into host, port and whether it is over TLS.
pub(super) fn parse_broker_url(url: &str) -> Result<(String, u16, bool), String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "`{url}` is not a broker URL: expected tcp://HOST:PORT, mqtt://HOST:PORT, mqtts://HOST:PORT or ssl://HOST:PORT"
        ));
    };
    let secure = match scheme {
        "tcp" | "mqtt" => false,
        "mqtts" | "ssl" => true,
        _ => {
            return Err(format!(
                "scheme `{scheme}://` is not supported: expected tcp://, mqtt://, mqtts:// or ssl://"
            ));
        }
    };
    if rest.contains('@') {
        return Err(
            "put the user name and password under `username` and `password`, not in the URL"
                .to_owned(),
        );
    }
    if rest.contains(['/', '?', '#']) {
        return Err(format!(
            "`{url}` has a path; a broker URL is only tcp://HOST:PORT"
        ));
    }
    let (host, port) = if let Some(bracketed) = rest.strip_prefix('[') {
        // IPv6: tcp://[::1]:1883
        let Some((host, tail)) = bracketed.split_once(']') else {
            return Err(format!("`{url}`: missing `]` after the IPv6 address"));
        };
        let port = match tail {
            "" => None,
            _ => match tail.strip_prefix(':') {
                Some(port) => Some(port),
                None => return Err(format!("`{url}`: expected `:PORT` after `]`")),
            },
        };
        (host, port)
    } else {
        match rest.split_once(':') {
            Some((_, port)) if port.contains(':') => {
                return Err(format!(
                    "`{url}`: write an IPv6 address in brackets, e.g. tcp://[::1]:1883"
                ));
            }
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        }
    };
    if host.is_empty() {
        return Err(format!("`{url}` names no host"));
    }
    let port = match port {
        None if secure => DEFAULT_MQTTS_PORT,
        None => DEFAULT_MQTT_PORT,
        Some(port) => match port.parse::<u16>() {
            Ok(port) if port != 0 => port,
            _ => return Err(format!("`{port}` is not a port number (1 to 65535)")),
        },
    };
    Ok((host.to_owned(), port, secure))
}

/// Reads `collector.http`.
pub(super) fn read_http(node: &Node, base: &Path, errors: &mut Diagnostics) -> HttpConfig {
    let d = HttpConfig::default();
    let Some(mut f) = Fields::of(node, "collector.http", errors) else {
        return d;
    };
    let listen = f
        .optional_with("listen", errors, |node| match &node.kind {
            Kind::Str(addr) => addr.parse::<SocketAddr>().map_err(|_| {
                format!("`{addr}` is not a socket address: expected IP:PORT, e.g. 127.0.0.1:8080")
            }),
            other => Err(format!("expected IP:PORT, found {}", other.describe())),
        })
        .unwrap_or(d.listen);
    let admin_token = secret_at(&mut f, "adminToken", base, errors);
    let node_tokens = f
        .node("nodeTokens")
        .map(|n| read_node_tokens(n, base, errors))
        .unwrap_or_default();
    let metrics_token = secret_at(&mut f, "metricsToken", base, errors);
    let allowed_hosts = f
        .node("allowedHosts")
        .map(|n| read_hosts(n, errors))
        .unwrap_or_default();
    let tls = f.node("tls").and_then(|node| {
        let mut t = Fields::of(node, "collector.http.tls", errors)?;
        let cert = required_text(&mut t, "certFile", errors);
        let key = required_text(&mut t, "keyFile", errors);
        t.finish(errors);
        Some(HttpTls {
            cert_file: base.join(cert?.0),
            key_file: base.join(key?.0),
            pos: node.pos,
        })
    });
    let max_connections = ranged(
        &mut f,
        "maxConnections",
        1..=65_536,
        d.max_connections,
        errors,
    );
    let header_timeout_ms = ranged(
        &mut f,
        "headerTimeoutMs",
        100..=600_000,
        d.header_timeout_ms,
        errors,
    );
    let idle_timeout_ms = ranged(
        &mut f,
        "idleTimeoutMs",
        1000..=3_600_000,
        d.idle_timeout_ms,
        errors,
    );
    f.finish(errors);
    HttpConfig {
        listen,
        admin_token_pos: admin_token
            .as_ref()
            .map_or_else(Pos::default, |(_, pos)| *pos),
        admin_token: admin_token.map(|(token, _)| token),
        node_tokens,
        metrics_token_pos: metrics_token
            .as_ref()
            .map_or_else(Pos::default, |(_, pos)| *pos),
        metrics_token: metrics_token.map(|(token, _)| token),
        allowed_hosts,
        tls,
        max_connections,
        header_timeout_ms,
        idle_timeout_ms,
    }
}

/// `allowedHosts`: host names (no port, no wildcard).
fn read_hosts(node: &Node, errors: &mut Diagnostics) -> Vec<String> {
    let mut hosts = Vec::new();
    for item in list(node, "allowedHosts", errors) {
        match &item.kind {
            Kind::Str(name)
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') =>
            {
                hosts.push(name.clone());
            }
            _ => errors.push(
                item.pos,
                "`allowedHosts`: a host name (letters, digits, `-` and `.`; no port)",
            ),
        }
    }
    hosts
}

/// `nodeTokens`: a list of `{ nodeId, token }`, node ids and tokens unique.
fn read_node_tokens(node: &Node, base: &Path, errors: &mut Diagnostics) -> Vec<NodeToken> {
    let (mut nodes, mut tokens) = (Unique::default(), Unique::default());
    let mut read = Vec::new();
    for item in list(node, "nodeTokens", errors) {
        if matches!(item.kind, Kind::Str(_)) {
            errors.push(
                item.pos,
                "`nodeTokens`: a node token names its node, so that it acts for that node \
                 only: write `{ nodeId: NODE, token: TOKEN }`",
            );
            continue;
        }
        let Some(mut f) = Fields::of(item, "node token", errors) else {
            continue;
        };
        let node_id = required_name(&mut f, "nodeId", errors);
        let token = match f.node("token") {
            Some(node) => secret_of(node, "token", base, errors).map(|token| (token, node.pos)),
            None => required_text(&mut f, "token", errors),
        };
        f.finish(errors);
        let (Some((node_id, node_pos)), Some((token, token_pos))) = (node_id, token) else {
            continue;
        };
        if let Some(first) = nodes.first(&node_id, node_pos) {
            errors.push(
                node_pos,
                format!("node `{node_id}` already has a token (at {first})"),
            );
        }
        if token.trim().is_empty() {
            errors.push(token_pos, "`token`: must not be empty");
        } else if let Some(first) = tokens.first(&token, token_pos) {
            errors.push(
                token_pos,
                format!("`token`: this token is already given at {first}"),
            );
        }
        read.push(NodeToken {
            node_id,
            token,
            pos: item.pos,
        });
    }
    read
}

#[cfg(test)]
mod tests {
    use super::super::tests::errors_of;
    use super::super::tests::load_ok;
    use super::*;

    #[test]
    fn empty_http_block_listens_on_the_default() {
        let c = load_ok("collector:\n  http: {}\n").collector;
        assert_eq!(c.http, Some(HttpConfig::default()));
    }

    #[test]
    fn broker_urls() {
        let ok = |url: &str| parse_broker_url(url).expect(url);
        let plain = |host: &str, port| (host.to_owned(), port, false);
        assert_eq!(ok("tcp://127.0.0.1:1883"), plain("127.0.0.1", 1883));
        assert_eq!(ok("mqtt://broker:8883"), plain("broker", 8883));
        assert_eq!(ok("tcp://broker"), plain("broker", 1883));
        assert_eq!(ok("tcp://[::1]:1884"), plain("::1", 1884));
        assert_eq!(ok("tcp://[fe80::1]"), plain("fe80::1", 1883));
        assert_eq!(ok("mqtts://broker"), ("broker".to_owned(), 8883, true));
        assert_eq!(ok("ssl://broker:443"), ("broker".to_owned(), 443, true));

        let err = |url: &str| parse_broker_url(url).expect_err(url);
        assert!(err("127.0.0.1:1883").contains("is not a broker URL"));
        assert!(err("wss://broker:8883").contains("scheme `wss://` is not supported"));
        assert!(err("tcp://:1883").contains("names no host"));
        assert!(err("tcp://broker:http").contains("`http` is not a port number"));
        assert!(err("tcp://broker:0").contains("`0` is not a port number"));
        assert!(err("tcp://broker:70000").contains("is not a port number"));
        assert!(err("tcp://broker:1883/x").contains("has a path"));
        assert!(err("tcp://u:p@broker").contains("`username`"));
        assert!(err("tcp://::1:1883").contains("brackets"));
        assert!(err("tcp://[::1").contains("missing `]`"));
    }

    #[test]
    fn broker_url_error_is_at_the_value() {
        let errors = errors_of("collector:\n  mqtt:\n    brokerUrl: ws://broker:8883\n");
        assert_eq!(
            errors.to_string(),
            "gw.yaml:3:16: `brokerUrl`: scheme `ws://` is not supported: expected tcp://, mqtt://, mqtts:// or ssl://"
        );
    }

    #[test]
    fn tls_settings_go_with_a_tls_url_and_paths_are_from_the_file() {
        let config = load_ok(
            "collector:\n  mqtt:\n    brokerUrl: mqtts://broker\n    tls: { caFile: ca.pem, certFile: /etc/gw.pem, keyFile: gw.key, alpn: [x-amzn-mqtt-ca] }\n",
        );
        let tls = config.collector.mqtt.tls.expect("tls");
        assert_eq!(config.collector.mqtt.broker_port, 8883);
        assert_eq!(tls.ca_file, Some(PathBuf::from("ca.pem")));
        assert_eq!(tls.cert_file, Some(PathBuf::from("/etc/gw.pem")));
        assert_eq!(tls.alpn, ["x-amzn-mqtt-ca"]);
        let text = errors_of(
            "collector:\n  mqtt:\n    brokerUrl: tcp://broker\n    tls: { caFile: ca.pem }\n",
        )
        .to_string();
        assert!(
            text.contains("gw.yaml:4:10: `tls`: the broker URL is plain MQTT"),
            "{text}"
        );
        let text = errors_of(
            "collector:\n  mqtt:\n    brokerUrl: ssl://broker\n    tls: { certFile: gw.pem }\n",
        )
        .to_string();
        assert!(
            text.contains("needs both `certFile` and `keyFile`"),
            "{text}"
        );
    }

    #[test]
    fn qos_2_is_refused_with_a_reason() {
        let errors = errors_of("collector:\n  mqtt: {qos: 2}\n");
        assert_eq!(
            errors.to_string(),
            "gw.yaml:2:15: `qos`: QoS 2 (exactly once) is not supported; use 0 (at most once) \
             or 1 (at least once)"
        );
        let errors = errors_of("collector:\n  mqtt: {qos: 7}\n");
        assert!(
            errors.to_string().contains("7 is not an MQTT QoS level"),
            "{errors}"
        );
    }
}
