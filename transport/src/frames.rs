//! gRPC's length-prefixed messages read off a request body, each into an
//! allocation of its own, and written onto a response body.
//!
//! tonic's `Streaming` reads every message of a stream into one buffer that
//! grows to the largest message and never shrinks, so one 60 MiB batch holds
//! 60 MiB for as long as its stream lives. [`MessageReader`] gives each
//! message a buffer of exactly its length (its `bytes` fields decode as
//! slices of it), freed when the message is; between messages it holds only
//! the bytes of the chunk it is in.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::Stream;
use http_body::{Body, Frame};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tonic::Status;

/// The compressed-flag byte and the big-endian length before each message.
const HEADER: usize = 5;
/// A carry-over buffer grown past this (a burst of small messages in one
/// chunk) is let go once emptied.
const CARRY_KEPT: usize = 1 << 20;

/// The messages of a gRPC request body, each as its own `Bytes`.
pub struct MessageReader<B> {
    body: B,
    /// Bytes received after the last whole message or header.
    carry: BytesMut,
    /// The message being read: its length and the bytes so far.
    pending: Option<(usize, BytesMut)>,
    /// The largest message taken (the run's limit, checked on the length
    /// prefix before a byte of the message is kept).
    limit: usize,
    /// The body has ended.
    ended: bool,
    /// The stream has given its last item.
    done: bool,
}

impl<B> MessageReader<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    pub fn new(body: B, limit: usize) -> Self {
        Self {
            body,
            carry: BytesMut::new(),
            pending: None,
            limit,
            ended: false,
            done: false,
        }
    }

    /// A whole message from what has arrived, if there is one.
    fn take(&mut self) -> Result<Option<Bytes>, Status> {
        if self.pending.is_none() {
            if self.carry.len() < HEADER {
                return Ok(None);
            }
            let flag = self.carry[0];
            let len =
                u32::from_be_bytes([self.carry[1], self.carry[2], self.carry[3], self.carry[4]])
                    as usize;
            if flag != 0 {
                return Err(Status::unimplemented(format!(
                    "compressed-flag {flag}: this server takes uncompressed messages only"
                )));
            }
            if len > self.limit {
                return Err(Status::out_of_range(format!(
                    "Error, decoded message length too large: found {len} bytes, the limit is: {} bytes",
                    self.limit
                )));
            }
            self.carry.advance(HEADER);
            self.pending = Some((len, BytesMut::with_capacity(len)));
        }
        let Some((len, message)) = self.pending.as_mut() else {
            return Ok(None);
        };
        let take = (*len - message.len()).min(self.carry.len());
        message.put_slice(&self.carry[..take]);
        self.carry.advance(take);
        if self.carry.is_empty() && self.carry.capacity() > CARRY_KEPT {
            self.carry = BytesMut::new();
        }
        if message.len() < *len {
            return Ok(None);
        }
        Ok(self.pending.take().map(|(_, m)| m.freeze()))
    }

    /// Ends the stream, with `status` as its last item if there is one; what
    /// is held is let go.
    fn finish(&mut self, status: Option<Status>) -> Option<Result<Bytes, Status>> {
        self.done = true;
        self.pending = None;
        self.carry = BytesMut::new();
        status.map(Err)
    }

    /// Files a chunk: straight into the message being read where it
    /// continues one, the rest in `carry`.
    fn file(&mut self, mut data: Bytes) {
        if let Some((len, message)) = self.pending.as_mut()
            && self.carry.is_empty()
        {
            let take = (*len - message.len()).min(data.len());
            message.put_slice(&data[..take]);
            data.advance(take);
        }
        if !data.is_empty() {
            self.carry.put_slice(&data);
        }
    }
}

impl<B> Stream for MessageReader<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Item = Result<Bytes, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        while !this.done {
            match this.take() {
                Ok(Some(message)) => return Poll::Ready(Some(Ok(message))),
                Ok(None) => {}
                Err(status) => return Poll::Ready(this.finish(Some(status))),
            }
            if this.ended {
                let partial = this.pending.is_some() || !this.carry.is_empty();
                let cut = partial.then(|| Status::internal("Unexpected EOF decoding stream."));
                return Poll::Ready(this.finish(cut));
            }
            match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        this.file(data);
                    }
                }
                Some(Err(e)) => {
                    let status = Status::from_error(e.into());
                    // The client hung up: the stream ends (as tonic's does).
                    let cancelled = status.code() == tonic::Code::Cancelled;
                    return Poll::Ready(this.finish((!cancelled).then_some(status)));
                }
                None => this.ended = true,
            }
        }
        Poll::Ready(None)
    }
}

/// `message` as one length-prefixed, uncompressed frame.
pub fn frame(message: &impl prost::Message) -> Frame<Bytes> {
    let len = message.encoded_len();
    let mut out = BytesMut::with_capacity(HEADER + len);
    out.put_u8(0);
    out.put_u32(len as u32);
    // Cannot fail: `out` has room for the whole message.
    let _ = message.encode(&mut out);
    Frame::data(out.freeze())
}

/// The trailers that end a response with `status` (`grpc-status` 0 for OK).
pub fn trailers(status: &Status) -> Frame<Bytes> {
    let mut headers = tonic::codegen::http::HeaderMap::new();
    if status.add_header(&mut headers).is_err() {
        headers.insert("grpc-status", (tonic::Code::Internal as i32).into());
    }
    Frame::trailers(headers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use http_body_util::StreamBody;
    use std::convert::Infallible;

    /// A body delivering `chunks` as they are.
    fn body(
        chunks: Vec<Vec<u8>>,
    ) -> StreamBody<impl Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin> {
        StreamBody::new(futures::stream::iter(
            chunks.into_iter().map(|c| Ok(Frame::data(Bytes::from(c)))),
        ))
    }

    fn framed(messages: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for m in messages {
            out.push(0);
            out.extend_from_slice(&(m.len() as u32).to_be_bytes());
            out.extend_from_slice(m);
        }
        out
    }

    fn read(chunks: Vec<Vec<u8>>, limit: usize) -> Vec<Result<Bytes, Status>> {
        let reader = MessageReader::new(body(chunks), limit);
        futures::executor::block_on(reader.collect())
    }

    #[test]
    fn messages_come_whole_however_the_chunks_cut_them() {
        let big = vec![7u8; 3000];
        let messages: [&[u8]; 4] = [b"one", b"", &big, b"last"];
        let wire = framed(&messages);
        for cut in [1, 2, 5, 7, 64, 1000, wire.len()] {
            let chunks: Vec<Vec<u8>> = wire.chunks(cut).map(<[u8]>::to_vec).collect();
            let got: Vec<Bytes> = read(chunks, 4096)
                .into_iter()
                .map(|r| r.expect("whole"))
                .collect();
            assert_eq!(got.len(), 4, "cut {cut}");
            for (g, m) in got.iter().zip(messages) {
                assert_eq!(&g[..], m, "cut {cut}");
            }
            // Each message has an allocation of its own, of its length.
            assert_eq!(got[2].len(), 3000);
        }
    }

    #[test]
    fn the_limit_compression_and_a_cut_message_end_the_stream_with_a_status() {
        let wire = framed(&[b"12345678"]);
        let got = read(vec![wire.clone()], 7);
        assert_eq!(got.len(), 1);
        let e = got[0].as_ref().unwrap_err();
        assert_eq!(e.code(), tonic::Code::OutOfRange);
        assert!(
            e.message().contains("found 8 bytes, the limit is: 7 bytes"),
            "{e}"
        );
        let mut compressed = wire.clone();
        compressed[0] = 1;
        let e = read(vec![compressed], 64).remove(0).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unimplemented, "{e}");
        let e = read(vec![wire[..9].to_vec()], 64).remove(0).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Internal);
        assert!(read(vec![], 64).is_empty(), "an empty body is no message");
    }

    #[test]
    fn a_frame_reads_back_and_trailers_carry_the_status() {
        let message = sebulba_proto::Ack {
            sequence: 9,
            ..Default::default()
        };
        let data = frame(&message).into_data().expect("data");
        let got = read(vec![data.to_vec()], 64).remove(0).expect("message");
        let back = <sebulba_proto::Ack as prost::Message>::decode(got).expect("decodes");
        assert_eq!(back.sequence, 9);
        let t = trailers(&Status::resource_exhausted("too big"))
            .into_trailers()
            .expect("trailers");
        assert_eq!(t["grpc-status"], "8");
        assert_eq!(
            t["grpc-message"], "too%20big",
            "percent-encoded, as gRPC asks"
        );
        let ok = trailers(&Status::ok("")).into_trailers().expect("trailers");
        assert_eq!(ok["grpc-status"], "0");
    }
}
