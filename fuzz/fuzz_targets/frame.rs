//! Frame + command decoder: any bytes either decode or fail with a typed error, and whatever
//! decodes re-encodes to a frame that decodes to the same command.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use petrel_protocol::{decode_frame, split_frame};

const MAX_FRAME_BYTES: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    // The streaming path, as a connection feeds it.
    let mut buf = BytesMut::from(data);
    while let Ok(Some(raw)) = split_frame(&mut buf, MAX_FRAME_BYTES) {
        let _ = raw.into_command();
    }
    // The slice path, with the round-trip oracle.
    let mut rest = data;
    while let Ok(Some((cmd, used))) = decode_frame(rest, MAX_FRAME_BYTES) {
        let frame = cmd.to_frame().expect("a decoded command re-encodes");
        let (again, again_used) = decode_frame(&frame, usize::MAX >> 1).expect("re-encoded frame decodes").expect("whole frame");
        assert_eq!(again_used, frame.len());
        assert_eq!(again, cmd);
        rest = &rest[used..];
    }
});
