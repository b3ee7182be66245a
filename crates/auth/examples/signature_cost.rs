//! What checking one send's signature costs: HMAC-SHA1 over the ext fields the Java client's
//! SEND_MESSAGE_V2 carries and a 1 KiB body, in a loop (docs/benchmarks.md, docs/security.md).
//!
//! `cargo run --release -p petrel-auth --example signature_cost`

fn main() {
    let mut fields = petrel_protocol::ExtFields::default();
    for (k, v) in [
        ("a", "benchmark_producer"),
        ("b", "BenchOfficial"),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", "2"),
        ("f", "0"),
        ("g", "1764000000000"),
        ("h", "0"),
        ("i", "KEYS\u{1}abc\u{2}UNIQ_KEY\u{1}7F0000010001\u{2}WAIT\u{1}true\u{2}"),
        ("j", "0"),
        ("k", "false"),
        ("m", "false"),
        ("n", "broker-a"),
        ("AccessKey", "rocketmq"),
    ] {
        fields.insert(k.to_owned(), v.to_owned());
    }
    let body = vec![b'x'; 1024];
    let rounds = 200_000u32;
    let started = std::time::Instant::now();
    let mut bytes = 0usize;
    for _ in 0..rounds {
        bytes += petrel_auth::signature(&fields, &body, "12345678", 513).len();
    }
    let per_us = started.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);
    println!("{per_us:.2} µs per signature over 1 KiB and 14 fields ({bytes} bytes of signatures)");
}
