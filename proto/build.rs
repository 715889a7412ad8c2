//! Generates the gRPC code with a vendored protoc, so no system protoc is needed.
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let grpc = std::env::var_os("CARGO_FEATURE_GRPC").is_some();
    tonic_prost_build::configure()
        .build_client(grpc)
        .build_server(grpc)
        .protoc_arg("--experimental_allow_proto3_optional")
        .file_descriptor_set_path(out.join("sebulba_descriptor.bin"))
        .bytes(".")
        .compile_with_config(
            {
                let mut c = tonic_prost_build::Config::new();
                c.protoc_executable(protoc);
                c
            },
            &["sebulba.proto"],
            &["."],
        )?;
    println!("cargo:rerun-if-changed=sebulba.proto");
    Ok(())
}
