//! `petrel bench` end to end against `petrel serve`: a run produces the three report files, the
//! JSON holds every percentile up to P99.99, and every sent message is consumed.

mod common;

use std::process::Command;

use common::Petrel;

#[test]
fn bench_e2e_against_petrel_writes_the_three_reports() {
    let petrel = Petrel::start(&[]);
    let out = petrel.data().join("reports");
    let output = Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(["bench", "e2e", "--namesrv", &format!("127.0.0.1:{}", petrel.ns_port)])
        .args([
            "--topic",
            "BenchE2E",
            "--queues",
            "4",
            "--producers",
            "2",
            "--mode",
            "async",
            "--in-flight",
            "8",
        ])
        .args([
            "--rate",
            "2000",
            "--warmup",
            "0.5",
            "--duration",
            "2",
            "--no-progress",
            "--label",
            "e2e-test",
        ])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("| send |") && stdout.contains("P99.99"), "{stdout}");
    for ext in ["json", "md", "svg"] {
        assert!(out.join(format!("e2e-test.{ext}")).exists(), "missing e2e-test.{ext}");
    }
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("e2e-test.json")).unwrap()).unwrap();
    let messages = report["messages"].as_u64().unwrap();
    // Open loop at 2,000 msg/s for 2 s.
    assert!((3_000..=5_000).contains(&messages), "{messages} messages");
    // The measured window ends on its own timer, not on the next 1 s display tick.
    let measured_s = report["measured_s"].as_f64().unwrap();
    assert!((2.0..2.5).contains(&measured_s), "measured {measured_s} s");
    assert_eq!(report["consumed"].as_u64(), Some(messages), "every measured message was consumed");
    assert_eq!(report["errors"].as_object().unwrap().len(), 0);
    for key in ["p50", "p90", "p99", "p999", "p9999", "max"] {
        let send = report["send_us"][key].as_u64().unwrap();
        let e2e = report["born_to_consume_us"][key].as_u64().unwrap();
        assert!(send > 0 && e2e > 0, "{key}: send {send}, e2e {e2e}");
    }
    assert!(report["send_us"]["p9999"].as_u64() <= report["send_us"]["max"].as_u64());
    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(!report["timeline"].as_array().unwrap().is_empty());
}
