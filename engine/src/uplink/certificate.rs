//! When an X.509 certificate stops being valid: `notAfter` read from its DER,
//! for the days left on the engine's client certificate (`/health`,
//! `/metrics`). Only the path to that field is walked; the certificate itself
//! is checked by the TLS handshake.

/// `notAfter` of the DER certificate `der`, in ms since the Unix epoch;
/// `None` when the bytes are not a certificate this walk understands.
pub(super) fn not_after_ms(der: &[u8]) -> Option<i64> {
    let (certificate, _) = element(der, SEQUENCE)?;
    let (tbs, _) = element(certificate, SEQUENCE)?;
    let mut rest = tbs;
    // [0] version, when present.
    if rest.first() == Some(&0xA0) {
        rest = element(rest, 0xA0)?.1;
    }
    for tag in [INTEGER, SEQUENCE, SEQUENCE] {
        rest = element(rest, tag)?.1; // serial number, signature algorithm, issuer
    }
    let (validity, _) = element(rest, SEQUENCE)?;
    let (_, after_before) = time(validity)?;
    time(after_before).map(|(ms, _)| ms)
}

const INTEGER: u8 = 0x02;
const SEQUENCE: u8 = 0x30;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// The content of the element of tag `tag` at the start of `bytes`, and what follows it.
fn element(bytes: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&found, rest) = bytes.split_first()?;
    if found != tag {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        0..=0x7F => (usize::from(first), rest),
        0x81..=0x84 => {
            let count = usize::from(first & 0x7F);
            let (digits, rest) = rest.split_at_checked(count)?;
            let len = digits
                .iter()
                .fold(0usize, |n, b| (n << 8) | usize::from(*b));
            (len, rest)
        }
        _ => return None,
    };
    rest.split_at_checked(len)
}

/// A UTCTime or GeneralizedTime at the start of `bytes`, in ms since the
/// epoch, and what follows it.
fn time(bytes: &[u8]) -> Option<(i64, &[u8])> {
    let (text, rest, year) = match *bytes.first()? {
        UTC_TIME => {
            let (text, rest) = element(bytes, UTC_TIME)?;
            let yy = digits(text.get(..2)?)?;
            // RFC 5280: 50-99 are 19xx, 00-49 are 20xx.
            (
                text.get(2..)?,
                rest,
                if yy >= 50 { 1900 + yy } else { 2000 + yy },
            )
        }
        GENERALIZED_TIME => {
            let (text, rest) = element(bytes, GENERALIZED_TIME)?;
            (text.get(4..)?, rest, digits(text.get(..4)?)?)
        }
        _ => return None,
    };
    // MMDDHHMMSSZ
    if text.len() != 11 || text[10] != b'Z' {
        return None;
    }
    let part = |i: usize| digits(&text[i..i + 2]);
    let (month, day, hour, minute, second) = (part(0)?, part(2)?, part(4)?, part(6)?, part(8)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second;
    Some((seconds * 1_000, rest))
}

fn digits(text: &[u8]) -> Option<i64> {
    text.iter().try_fold(0i64, |n, b| {
        b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0'))
    })
}

/// Days from 1970-01-01 to the date (proleptic Gregorian calendar).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate's outer layers with `validity` inside, as DER.
    fn certificate(validity: &[u8]) -> Vec<u8> {
        let wrap = |tag: u8, content: &[u8]| {
            let mut out = vec![tag];
            if content.len() < 0x80 {
                out.push(content.len() as u8);
            } else {
                out.push(0x82);
                out.extend_from_slice(&(content.len() as u16).to_be_bytes());
            }
            out.extend_from_slice(content);
            out
        };
        let mut tbs = wrap(0xA0, &wrap(INTEGER, &[2]));
        tbs.extend(wrap(INTEGER, &[0x12, 0x34]));
        tbs.extend(wrap(SEQUENCE, &[0x06, 0x01, 0x2A]));
        tbs.extend(wrap(SEQUENCE, &[0u8; 200]));
        tbs.extend(wrap(SEQUENCE, validity));
        tbs.extend(wrap(SEQUENCE, &[]));
        let mut body = wrap(SEQUENCE, &tbs);
        body.extend(wrap(SEQUENCE, &[0x06, 0x01, 0x2A]));
        wrap(SEQUENCE, &body)
    }

    fn validity(before: (u8, &str), after: (u8, &str)) -> Vec<u8> {
        let mut out = vec![before.0, before.1.len() as u8];
        out.extend_from_slice(before.1.as_bytes());
        out.extend([after.0, after.1.len() as u8]);
        out.extend_from_slice(after.1.as_bytes());
        out
    }

    #[test]
    fn not_after_in_either_time_form() {
        let der = certificate(&validity(
            (UTC_TIME, "261206000000Z"),
            (UTC_TIME, "270101120000Z"),
        ));
        // 2027-01-01T12:00:00Z
        assert_eq!(not_after_ms(&der), Some(1_798_804_800_000));
        let der = certificate(&validity(
            (UTC_TIME, "991231235959Z"),
            (GENERALIZED_TIME, "20500101000000Z"),
        ));
        assert_eq!(not_after_ms(&der), Some(2_524_608_000_000));
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn what_is_not_a_certificate_has_no_date() {
        assert_eq!(not_after_ms(&[]), None);
        assert_eq!(not_after_ms(&[0x30, 0x85, 0, 0, 0, 0, 1]), None);
        let der = certificate(&validity(
            (UTC_TIME, "261206000000Z"),
            (UTC_TIME, "271301120000Z"),
        ));
        assert_eq!(not_after_ms(&der), None, "month 13");
        let mut der = certificate(&validity(
            (UTC_TIME, "261206000000Z"),
            (UTC_TIME, "270101120000Z"),
        ));
        der.truncate(der.len() - 10);
        assert_eq!(not_after_ms(&der), None, "cut short");
    }
}
