//! Message ids: the broker's offset id (store host + commit-log offset) and the client UNIQ_KEY.
//!
//! Owns: creating and decoding both forms. Must never: assume a UNIQ_KEY's length; 32- and
//! 56-character forms both occur in the wild, and peers treat it as opaque.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::MessageError;

/// Upper-case hex, two characters a byte. By table rather than `write!`: every stored message
/// gets an id, and the formatter was a visible share of a send's CPU.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0F)]));
    }
}

/// `ip ‖ port(i32) ‖ offset(i64)` in upper-case hex: 32 characters for IPv4, 56 for IPv6.
pub fn create_offset_msg_id(store_host: SocketAddr, commit_log_offset: i64) -> String {
    let mut out = String::with_capacity(56);
    match store_host.ip() {
        IpAddr::V4(ip) => push_hex(&mut out, &ip.octets()),
        IpAddr::V6(ip) => push_hex(&mut out, &ip.octets()),
    }
    push_hex(&mut out, &(store_host.port() as i32).to_be_bytes());
    push_hex(&mut out, &commit_log_offset.to_be_bytes());
    out
}

/// Decodes an offset id into the broker address and the commit-log offset.
pub fn decode_offset_msg_id(id: &str) -> Result<(SocketAddr, i64), MessageError> {
    let invalid = || MessageError::InvalidMessageId(id.to_owned());
    if !(id.len() == 32 || id.len() == 56) || !id.is_ascii() {
        return Err(invalid());
    }
    let mut bytes = Vec::with_capacity(id.len() / 2);
    for pair in id.as_bytes().chunks(2) {
        let s = std::str::from_utf8(pair).map_err(|_| invalid())?;
        bytes.push(u8::from_str_radix(s, 16).map_err(|_| invalid())?);
    }
    let ip_len = if id.len() == 32 { 4 } else { 16 };
    let ip = if ip_len == 4 {
        IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(&bytes[..4]).expect("4 bytes")))
    } else {
        IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&bytes[..16]).expect("16 bytes")))
    };
    let port = i32::from_be_bytes(bytes[ip_len..ip_len + 4].try_into().expect("4 bytes"));
    let offset = i64::from_be_bytes(bytes[ip_len + 4..ip_len + 12].try_into().expect("8 bytes"));
    let port = u16::try_from(port).map_err(|_| invalid())?;
    Ok((SocketAddr::new(ip, port), offset))
}

/// Generates UNIQ_KEYs in the Java client's layout: `ip ‖ pid(i16) ‖ seed(i32)` then
/// `ms since the start of the month (i32) ‖ counter (i16)`, upper-case hex.
#[derive(Debug)]
pub struct UniqKeyGenerator {
    prefix: String,
    counter: AtomicU32,
}

impl UniqKeyGenerator {
    /// A generator for the process at `ip` with id `pid`; `seed` tells apart generators of
    /// the same process (the Java client uses its class loader's hash).
    pub fn new(ip: IpAddr, pid: u32, seed: i32) -> UniqKeyGenerator {
        let mut prefix = String::with_capacity(44);
        match ip {
            IpAddr::V4(v4) => push_hex(&mut prefix, &v4.octets()),
            IpAddr::V6(v6) => push_hex(&mut prefix, &v6.octets()),
        }
        #[expect(
            clippy::cast_possible_truncation,
            reason = "the layout keeps the pid's low 16 bits, as Java's (short) cast does"
        )]
        let pid_low = pid as u16;
        push_hex(&mut prefix, &pid_low.to_be_bytes());
        push_hex(&mut prefix, &seed.to_be_bytes());
        UniqKeyGenerator {
            prefix,
            counter: AtomicU32::new(0),
        }
    }

    /// The next id, stamped with `now_ms` (epoch milliseconds).
    pub fn next_at(&self, now_ms: i64) -> String {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "the layout has 32 bits for it; past 24.8 days into a month it wraps, as Java's (int) cast does"
        )]
        let since_month = (now_ms - month_start_ms(now_ms)) as i32;
        #[expect(
            clippy::cast_possible_truncation,
            reason = "the layout has a 16-bit counter, which wraps as the Java client's does"
        )]
        let count = self.counter.fetch_add(1, Ordering::Relaxed) as u16;
        let mut out = String::with_capacity(self.prefix.len() + 12);
        out.push_str(&self.prefix);
        push_hex(&mut out, &since_month.to_be_bytes());
        push_hex(&mut out, &count.to_be_bytes());
        out
    }

    /// The next id, stamped with the current time.
    pub fn next(&self) -> String {
        let now_ms = petrel_kit::clock::now_ms();
        self.next_at(now_ms)
    }
}

/// Epoch ms of 00:00 UTC on the first day of the month containing `ms`.
fn month_start_ms(ms: i64) -> i64 {
    const DAY_MS: i64 = 86_400_000;
    let days = ms.div_euclid(DAY_MS);
    let (y, m, _) = civil_from_days(days);
    days_from_civil(y, m, 1) * DAY_MS
}

// Howard Hinnant's civil-calendar conversions (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    #[expect(clippy::cast_possible_truncation, reason = "a day of the month, 1..=31")]
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    #[expect(clippy::cast_possible_truncation, reason = "a month, 1..=12")]
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_ids_round_trip() {
        let addr: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let id = create_offset_msg_id(addr, 568);
        assert_eq!(id, "7F00000100002A9F0000000000000238");
        assert_eq!(decode_offset_msg_id(&id).unwrap(), (addr, 568));
        let v6: SocketAddr = "[fd00::2]:10911".parse().unwrap();
        let id6 = create_offset_msg_id(v6, 1 << 40);
        assert_eq!(id6.len(), 56);
        assert_eq!(decode_offset_msg_id(&id6).unwrap(), (v6, 1 << 40));
        for bad in ["", "XYZ", "7F00000100002A9F000000000000023", "7F00000100002A9F00000000000002ZZ"] {
            assert!(decode_offset_msg_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn uniq_keys_have_java_layout() {
        let g = UniqKeyGenerator::new("192.0.2.2".parse().unwrap(), 17058, 0x3094_6E09);
        // 2026-11-22T00:00:00.000Z + 5 ms; the month started 2026-11-01.
        let now = days_from_civil(2026, 11, 22) * 86_400_000 + 5;
        let a = g.next_at(now);
        let b = g.next_at(now);
        assert_eq!(a.len(), 32);
        assert!(a.starts_with("C000020242A230946E09"));
        assert_eq!(&a[20..28], format!("{:08X}", 21 * 86_400_000 + 5));
        assert_eq!(&a[28..], "0000");
        assert_eq!(&b[28..], "0001");
        let g6 = UniqKeyGenerator::new("fd00::2".parse().unwrap(), 1, 2);
        assert_eq!(g6.next_at(now).len(), 56);
    }

    #[test]
    fn calendar_conversions_agree() {
        for days in [-1_000_000i64, -1, 0, 59, 60, 365, 11_016, 20_779, 2_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
    }
}
