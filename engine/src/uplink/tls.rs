//! MQTT over TLS (rustls with ring, no OpenSSL; SEC-9 of `docs/security.md`):
//! the client configuration made from `collector.mqtt.tls` at every connect,
//! so a rotated certificate or CA is used from the next reconnect, and a
//! failed handshake said in words. The broker's certificate is always checked.

use std::path::Path;
use std::sync::Arc;

use rumqttc::{ConnectionError, TlsConfiguration, Transport};
use rustls::{AlertDescription, CertificateError, ClientConfig, RootCertStore};

use super::certificate::not_after_ms;
use crate::config::TlsConfig;
use crate::tls::{certificates, private_key};

/// The transport of one connect: the files read now; with the end of the
/// client certificate's validity (ms since the epoch), when there is one.
///
/// # Errors
/// A file that cannot be read or holds no certificate (key), in words
/// naming the file.
pub fn transport(tls: &TlsConfig) -> Result<(Transport, Option<i64>), String> {
    let builder = ClientConfig::builder_with_provider(crate::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots(tls.ca_file.as_deref())?);
    let (mut config, expires) = match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert)?;
            let expires = chain.first().and_then(|c| not_after_ms(c));
            let config = builder
                .with_client_auth_cert(chain, private_key(key)?)
                .map_err(|e| format!("TLS client certificate {}: {e}", cert.display()))?;
            (config, expires)
        }
        _ => (builder.with_no_client_auth(), None),
    };
    config.alpn_protocols = tls.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    let transport = Transport::tls_with_config(TlsConfiguration::Rustls(Arc::new(config)));
    Ok((transport, expires))
}

/// Reads `tls`'s files as a connect would (`sluice check`).
///
/// # Errors
/// As [`transport`]; and a client certificate past its validity at
/// `now_ms` (ms since the epoch).
pub fn check_files(tls: &TlsConfig, now_ms: i64) -> Result<(), String> {
    let (_, expires) = transport(tls)?;
    match (expires, &tls.cert_file) {
        (Some(end), Some(cert)) if end <= now_ms => Err(format!(
            "TLS client certificate {}: expired {} day(s) ago; the broker will refuse it",
            cert.display(),
            (now_ms - end) / 86_400_000
        )),
        _ => Ok(()),
    }
}

/// The roots the broker's certificate must chain to: `ca_file`'s, else the
/// system's.
fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(file) => {
            let (added, _) = roots.add_parsable_certificates(certificates(file)?);
            if added == 0 {
                return Err(format!(
                    "TLS caFile {}: no usable CA certificate",
                    file.display()
                ));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(
                    "TLS: the system has no CA certificates; name one with `tls.caFile`".into(),
                );
            }
        }
    }
    Ok(roots)
}

/// Why a connection failed, in words: a TLS handshake's cause named (unknown
/// issuer, expired, name mismatch, certificate required, the client's
/// certificate refused), anything else as the client says it.
pub fn cause(error: &ConnectionError) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return format!("TLS handshake failed: {}", tls_cause(tls));
        }
        // An I/O error's `source` skips the error it wraps (rustls's).
        source = match current.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => current.source(),
        };
    }
    error.to_string()
}

fn tls_cause(error: &rustls::Error) -> String {
    use rustls::Error::{AlertReceived, InvalidCertificate};
    match error {
        InvalidCertificate(CertificateError::UnknownIssuer) => {
            "unknown issuer: the broker's certificate is not signed by a trusted CA (`tls.caFile`)"
                .into()
        }
        InvalidCertificate(CertificateError::Expired | CertificateError::ExpiredContext { .. }) => {
            "expired: the broker's certificate is past its validity".into()
        }
        InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => "name mismatch: the broker's certificate is not for the host of `brokerUrl`".into(),
        AlertReceived(AlertDescription::CertificateRequired) => {
            "certificate required: the broker wants a client certificate (`tls.certFile`, `tls.keyFile`)"
                .into()
        }
        AlertReceived(
            AlertDescription::UnknownCA
            | AlertDescription::BadCertificate
            | AlertDescription::CertificateUnknown,
        ) => "the broker refused the client certificate (not signed by a CA it trusts)".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handshake failure as tokio-rustls hands it to the client: rustls's
    /// error inside an I/O error.
    fn failed(error: rustls::Error) -> ConnectionError {
        ConnectionError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, error))
    }

    #[test]
    fn a_handshake_failure_is_named() {
        use rustls::Error::{AlertReceived, InvalidCertificate};
        for (error, words) in [
            (InvalidCertificate(CertificateError::Expired), "expired"),
            (
                InvalidCertificate(CertificateError::UnknownIssuer),
                "unknown issuer",
            ),
            (
                InvalidCertificate(CertificateError::NotValidForName),
                "name mismatch",
            ),
            (
                AlertReceived(AlertDescription::CertificateRequired),
                "certificate required",
            ),
            (
                AlertReceived(AlertDescription::UnknownCA),
                "refused the client certificate",
            ),
        ] {
            let said = cause(&failed(error));
            assert!(
                said.starts_with("TLS handshake failed: ") && said.contains(words),
                "{words}: {said}"
            );
        }
        let refused =
            ConnectionError::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(cause(&refused), refused.to_string());
    }
}
