//! TLS material as the engine reads it (rustls with ring, no OpenSSL; SEC-9 of
//! `docs/security.md`): PEM certificates and private keys read from files,
//! the crypto provider, and a server certificate that follows its files
//! (HTTPS for the API and the console: a renewed certificate is served from
//! the next handshake).

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::sync::lock;

/// ring, not aws-lc-rs: no C library to build for the gateway targets. rustls
/// marks it deprecated because it offers no post-quantum key exchange, which
/// MQTT brokers and browsers on a plant network do not need.
pub fn provider() -> Arc<CryptoProvider> {
    #[allow(deprecated)]
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(file: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(file).map_err(|e| format!("TLS {what} {}: {e}", file.display()))
}

/// The PEM certificates of `file`.
///
/// # Errors
/// A file that cannot be read or holds no certificate, in words naming it.
pub fn certificates(file: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read(file, "certificate file")?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut BufReader::new(bytes.as_slice()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("TLS certificate file {}: {e}", file.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "TLS certificate file {}: no PEM certificate in it",
            file.display()
        ));
    }
    Ok(certs)
}

/// The PEM private key of `file` (PKCS#8, RSA or EC).
///
/// # Errors
/// A file that cannot be read or holds no key, in words naming it.
pub fn private_key(file: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let bytes = read(file, "key file")?;
    rustls_pemfile::private_key(&mut BufReader::new(bytes.as_slice()))
        .map_err(|e| format!("TLS key file {}: {e}", file.display()))?
        .ok_or_else(|| {
            format!(
                "TLS key file {}: no PEM private key (PKCS#8, RSA or EC) in it",
                file.display()
            )
        })
}

/// How often a served certificate's files are looked at for a change.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// A server certificate read from `cert` and `key`, read again when either
/// file changes (looked at no more than once a second, at a handshake); a
/// change that cannot be read keeps the certificate in use and is logged.
#[derive(Debug)]
pub struct ReloadingCertificate {
    cert: PathBuf,
    key: PathBuf,
    served: Mutex<Served>,
}

#[derive(Debug)]
struct Served {
    key: Arc<CertifiedKey>,
    /// The files' modification times when read.
    stamps: (Option<SystemTime>, Option<SystemTime>),
    looked: Instant,
}

impl ReloadingCertificate {
    /// Reads the files now.
    ///
    /// # Errors
    /// A file that cannot be read, or a key that does not fit the certificate.
    pub fn new(cert: &Path, key: &Path) -> Result<Self, String> {
        let stamps = stamps(cert, key);
        let served = Served {
            key: certified(cert, key)?,
            stamps,
            looked: Instant::now(),
        };
        Ok(Self {
            cert: cert.to_owned(),
            key: key.to_owned(),
            served: Mutex::new(served),
        })
    }

    /// A server configuration serving this certificate.
    ///
    /// # Errors
    /// The provider refuses the protocol versions (a broken build).
    pub fn server_config(self: Arc<Self>) -> Result<rustls::ServerConfig, String> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(self);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }

    fn current(&self) -> Arc<CertifiedKey> {
        let mut served = lock(&self.served);
        if served.looked.elapsed() >= LOOK_EVERY {
            served.looked = Instant::now();
            let now = stamps(&self.cert, &self.key);
            if now != served.stamps {
                match certified(&self.cert, &self.key) {
                    Ok(key) => {
                        tracing::info!(cert = %self.cert.display(), "HTTPS certificate read again");
                        served.key = key;
                        served.stamps = now;
                    }
                    // Half-written files, say: tried again at the next look.
                    Err(problem) => {
                        tracing::warn!(%problem, "the HTTPS certificate stays as it was")
                    }
                }
            }
        }
        Arc::clone(&served.key)
    }
}

impl ResolvesServerCert for ReloadingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn stamps(cert: &Path, key: &Path) -> (Option<SystemTime>, Option<SystemTime>) {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    (modified(cert), modified(key))
}

fn certified(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, String> {
    let chain = certificates(cert)?;
    let key = private_key(key)?;
    CertifiedKey::from_der(chain, key, &provider())
        .map(Arc::new)
        .map_err(|e| format!("TLS certificate {}: {e}", cert.display()))
}
