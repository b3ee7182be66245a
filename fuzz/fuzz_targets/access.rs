//! The broker's access map: any request (decoded from the fuzzer's frame) under any code the
//! broker serves gets its rule's checks or a refusal, never a panic and never more checks than
//! the bound; a code with no rule is refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petrel_protocol::decode_frame;

fuzz_target!(|data: &[u8]| {
    let Ok(Some((mut request, _))) = decode_frame(data, 1 << 20) else { return };
    for code in petrel_broker::served_codes() {
        request.code = code;
        if let Ok(checks) = petrel_broker::access::checks_for_fuzzing(&request, "DefaultCluster") {
            assert!(checks.len() <= 4096, "code {code}: {} checks", checks.len());
        }
    }
    request.code = 987_654;
    assert!(petrel_broker::access::checks_for_fuzzing(&request, "c").is_err(), "a code with no rule is refused");
});
