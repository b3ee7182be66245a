//! What reaches a controller: any request (decoded from the fuzzer's frame) under each code a
//! controller serves, read as serving it would — a header, a Raft message's JSON, a SyncStateSet,
//! a Raft log entry's command — is read or refused, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petrel_protocol::codes::request_code as rc;
use petrel_protocol::decode_frame;

fuzz_target!(|data: &[u8]| {
    let Ok(Some((mut request, _))) = decode_frame(data, 1 << 20) else { return };
    let codes = petrel_controller::served_codes().into_iter().chain([
        rc::PETREL_RAFT_APPEND_ENTRIES,
        rc::PETREL_RAFT_VOTE,
        rc::PETREL_RAFT_INSTALL_SNAPSHOT,
        -1,
    ]);
    for code in codes {
        request.code = code;
        let _ = petrel_controller::decode_request_for_fuzzing(&request);
    }
});
