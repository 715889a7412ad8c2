//! The sebulba wire protocol: generated gRPC code plus packed-tensor codecs.

pub mod follow;
pub mod grpc;
pub mod security;
pub mod tensor;
pub mod trace;

#[allow(clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("sebulba.v1");
}

pub use pb::*;
pub use tensor::{
    TensorError, decode_f32, decode_i32, decode_u8, encode_f32, encode_i32, encode_u8,
};

/// Version of the wire protocol; `Learner.Join` refuses a peer with another.
pub const PROTOCOL_VERSION: u32 = 2;

/// Encoded `FileDescriptorSet` of sebulba.proto, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("sebulba_descriptor");
