//! Signed downlink messages. MQTT 3.1.1 has no headers, so the signature
//! travels in the payload, as its last member:
//!
//! ```text
//! body    = a JSON object with "requestId" and "ts" (ms since the Unix epoch)
//! sig     = hex(HMAC-SHA256(key, topic + "\n" + body))
//! payload = body without its closing "}" + ",\"sig\":\"" + sig + "\"}"
//! ```
//!
//! Signing appends to the bytes the signer has, and checking takes them off
//! again: no canonical JSON is needed, any language can make one, and `sluice
//! sign` does. The topic is covered, so a message cannot be moved to another
//! device; `ts` bounds its life, and `requestId` makes a repeat recognisable
//! (see `docs/security.md`).

use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value as Json;
use sha2::Sha256;

/// What ends a signed payload, before the 64 hex digits and `"}`.
const SIG_MEMBER: &[u8] = b",\"sig\":\"";
/// Hex digits of an HMAC-SHA256.
const SIG_HEX: usize = 64;

/// A payload taken apart: the body that was signed, and the signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The payload without its `sig` member: exactly what was signed.
    pub body: Vec<u8>,
    pub signature: [u8; 32],
}

/// Why a payload's signature cannot be checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error(
        "a `sig` member must be the payload's last one, written as ,\"sig\":\"<64 hex digits>\"}}"
    )]
    Misplaced,
    #[error("`sig` must be 64 hex digits (an HMAC-SHA256)")]
    NotHex,
}

/// Takes a payload apart: `Ok(None)` when it carries no `sig` member at all.
///
/// # Errors
/// A `sig` member that is not the last one, or not 64 hex digits.
pub fn split(payload: &[u8]) -> Result<Option<Signed>, SignatureError> {
    let trimmed = payload.trim_ascii_end();
    let Some(start) = find_last(trimmed, SIG_MEMBER) else {
        // A `sig` anywhere else is a mistake worth naming.
        return if find_last(trimmed, b"\"sig\"").is_some() {
            Err(SignatureError::Misplaced)
        } else {
            Ok(None)
        };
    };
    let rest = &trimmed[start + SIG_MEMBER.len()..];
    let Some(hex) = rest.strip_suffix(b"\"}") else {
        return Err(SignatureError::Misplaced);
    };
    if hex.len() != SIG_HEX {
        return Err(SignatureError::NotHex);
    }
    let mut signature = [0u8; 32];
    for (byte, pair) in signature.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    let mut body = trimmed[..start].to_vec();
    body.push(b'}');
    Ok(Some(Signed { body, signature }))
}

fn digit(c: u8) -> Result<u8, SignatureError> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(SignatureError::NotHex),
    }
}

fn find_last(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

fn mac(key: &[u8], topic: &str, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(topic.as_bytes());
    mac.update(b"\n");
    mac.update(body);
    mac
}

/// Whether `signed` was signed with `key` for `topic` (compared in constant time).
pub fn verify(key: &[u8], topic: &str, signed: &Signed) -> bool {
    mac(key, topic, &signed.body)
        .verify_slice(&signed.signature)
        .is_ok()
}

/// `body` (a JSON object's text) signed with `key` for `topic`: the payload to
/// publish.
///
/// # Errors
/// `body` is not a JSON object's text.
pub fn sign(key: &[u8], topic: &str, body: &str) -> Result<String, String> {
    let body = body.trim();
    match serde_json::from_str::<Json>(body) {
        Ok(Json::Object(_)) if body.ends_with('}') => {}
        Ok(_) => return Err("a downlink payload is a JSON object".to_owned()),
        Err(error) => return Err(format!("the payload is not JSON: {error}")),
    }
    let tag = mac(key, topic, body.as_bytes()).finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    let open = &body[..body.len() - 1];
    let separator = if open.trim_end().ends_with('{') {
        ""
    } else {
        ","
    };
    Ok(format!("{open}{separator}\"sig\":\"{hex}\"}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
    const TOPIC: &str = "site/P/D1/property/set";

    #[test]
    fn a_signed_payload_verifies_for_its_topic_and_key_only() {
        let body = r#"{"requestId":"r1","ts":1700000000000,"key":"sp","value":42}"#;
        let payload = sign(KEY, TOPIC, body).expect("signs");
        assert!(payload.starts_with(&body[..body.len() - 1]));
        let parsed: Json = serde_json::from_str(&payload).expect("still JSON");
        assert_eq!(parsed["value"], 42);
        let signed = split(payload.as_bytes()).expect("splits").expect("signed");
        assert_eq!(signed.body, body.as_bytes());
        assert!(verify(KEY, TOPIC, &signed));
        assert!(!verify(KEY, "site/P/D2/property/set", &signed));
        assert!(!verify(b"another key, just as long as it", TOPIC, &signed));
        // One byte changed anywhere in the body breaks it.
        let tampered = payload.replace("42", "43");
        let signed = split(tampered.as_bytes()).expect("splits").expect("signed");
        assert!(!verify(KEY, TOPIC, &signed));
    }

    #[test]
    fn an_unsigned_payload_and_a_misplaced_or_broken_sig_are_told_apart() {
        assert_eq!(split(br#"{"requestId":"r1"}"#), Ok(None));
        assert_eq!(
            split(br#"{"sig":"00","requestId":"r1"}"#),
            Err(SignatureError::Misplaced)
        );
        let short = format!(r#"{{"requestId":"r1","sig":"{}"}}"#, "0".repeat(63));
        assert_eq!(split(short.as_bytes()), Err(SignatureError::NotHex));
        let bad = format!(r#"{{"requestId":"r1","sig":"{}"}}"#, "g".repeat(64));
        assert_eq!(split(bad.as_bytes()), Err(SignatureError::NotHex));
        let spaced = format!(r#"{{"requestId":"r1", "sig": "{}"}}"#, "0".repeat(64));
        assert_eq!(split(spaced.as_bytes()), Err(SignatureError::Misplaced));
        // Trailing white space is forgiven.
        let body = r#"{"requestId":"r1"}"#;
        let payload = format!("{}\n", sign(KEY, TOPIC, body).expect("signs"));
        let signed = split(payload.as_bytes()).expect("splits").expect("signed");
        assert!(verify(KEY, TOPIC, &signed));
        assert!(sign(KEY, TOPIC, "[1]").is_err());
        assert!(sign(KEY, TOPIC, "{").is_err());
        assert_eq!(
            sign(KEY, TOPIC, "{}").expect("an empty object").len(),
            r#"{"sig":""}"#.len() + 64
        );
    }
}
