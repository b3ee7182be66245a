//! Writes every frame, frame body and stored-message record of the captures in `tests/vectors` into
//! two directories, one file each: the seed corpora of the fuzz targets.
//!
//! Usage: `cargo run -p petrel-protocol --example extract_vectors -- FRAME_DIR MESSAGE_DIR`

#[path = "../tests/support/mod.rs"]
mod support;

use petrel_protocol::message::MessageExt;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, frame_dir, message_dir] = args.as_slice() else {
        eprintln!("usage: extract_vectors FRAME_DIR MESSAGE_DIR");
        std::process::exit(2);
    };
    std::fs::create_dir_all(frame_dir).expect("create frame dir");
    std::fs::create_dir_all(message_dir).expect("create message dir");
    let (mut frames, mut records) = (0, 0);
    for name in support::vectors::vector_names() {
        for (i, cap) in support::vectors::load_captured(&name).iter().enumerate() {
            std::fs::write(format!("{frame_dir}/{name}-{i:03}"), &cap.bytes).expect("write frame");
            frames += 1;
            if !cap.command.body.is_empty() {
                // JSON bodies seed the fastjson parser, which the message target also runs.
                std::fs::write(format!("{message_dir}/{name}-{i:03}-body"), &cap.command.body).expect("write body");
            }
            let mut body: &[u8] = &cap.command.body;
            while let Ok((_, used)) = MessageExt::decode(body) {
                std::fs::write(format!("{message_dir}/{name}-{i:03}-{records}"), &body[..used]).expect("write record");
                records += 1;
                body = &body[used..];
            }
        }
    }
    println!("seeded {frames} frames and {records} stored messages");
}
