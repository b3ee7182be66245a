//! Generates the gRPC messages and service from the .proto files under `proto/`, compiled by
//! protox (pure Rust), so a build needs no `protoc` on the machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/apache/rocketmq/v2/service.proto"];
    let descriptors = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Bodies stay `Bytes` from the socket to the store, without a copy.
        .bytes(".")
        .compile_fds(descriptors)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
