//! The sebulba wire format: the code generated from `sebulba.proto` (messages,
//! clients and service traits) and the packed-tensor codecs. How the bytes
//! travel (channels, TLS, tokens, trace propagation) is `sebulba-transport`.

pub mod tensor;

#[allow(clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("sebulba.v1");
}

pub use pb::*;
pub use tensor::{
    TensorError, decode_f32, decode_i32, decode_u8, encode_f32, encode_i32, encode_u8,
};

/// Version of the wire protocol; `Learner.Join` refuses a peer with another.
pub const PROTOCOL_VERSION: u32 = 5;

/// Encoded `FileDescriptorSet` of sebulba.proto, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("sebulba_descriptor");
