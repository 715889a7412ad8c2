//! The sebulba wire format: the code generated from `sebulba.proto` (messages;
//! with the `grpc` feature also clients and service traits) and the
//! packed-tensor codecs. How the bytes
//! travel (channels, TLS, tokens, trace propagation) is `sebulba-transport`.

pub mod tensor;

#[allow(clippy::all, clippy::pedantic)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/sebulba.v1.rs"));
}

pub use pb::*;
pub use tensor::{
    TensorError, decode_f32, decode_i32, decode_u8, encode_f32, encode_i32, encode_u8,
};

impl DeterministicLane {
    /// The version the actor of this lane acts its `k`-th batch with (see
    /// `DeterministicLane` in sebulba.proto): batch `g = k * lanes + lane` of the run,
    /// taken by update `g / batches_per_update` after `first_version`, and
    /// acted `lag` versions before that update's (never before the first).
    pub fn version_for(&self, k: u64) -> u64 {
        let lanes = u64::from(self.lanes.max(1));
        let per_update = u64::from(self.batches_per_update.max(1));
        let g = k.saturating_mul(lanes).saturating_add(u64::from(self.lane));
        let update = (g / per_update).saturating_sub(u64::from(self.lag));
        self.first_version.saturating_add(update)
    }
}

/// Version of the wire protocol; `Learner.Join` refuses a peer with another.
pub const PROTOCOL_VERSION: u32 = 14;

/// Encoded `FileDescriptorSet` of sebulba.proto, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/sebulba_descriptor.bin"));

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(lane: u32, lanes: u32, per_update: u32, first: u64) -> DeterministicLane {
        DeterministicLane {
            lane,
            lanes,
            batches_per_update: per_update,
            first_version: first,
            lag: 0,
        }
    }

    /// Two lanes, two batches per update: update u takes batch u-1 of each
    /// lane, acted with version u-1. One lane, two per update: batches 2u-2
    /// and 2u-1. Eight lanes, two per update: lane 5's batches are the run's
    /// 5, 13, 21 (updates 3, 7, 11), acted with versions 2, 6, 10.
    #[test]
    fn deterministic_lanes_follow_the_batch_order() {
        let v = |w: DeterministicLane, ks: &[u64]| {
            ks.iter().map(|&k| w.version_for(k)).collect::<Vec<_>>()
        };
        assert_eq!(v(lane(0, 2, 2, 0), &[0, 1, 2]), [0, 1, 2]);
        assert_eq!(v(lane(1, 2, 2, 0), &[0, 1, 2]), [0, 1, 2]);
        assert_eq!(v(lane(0, 1, 2, 0), &[0, 1, 2, 3]), [0, 0, 1, 1]);
        assert_eq!(v(lane(5, 8, 2, 0), &[0, 1, 2]), [2, 6, 10]);
        assert_eq!(v(lane(1, 2, 2, 40), &[0, 1]), [40, 41]);
        // Nonsense from a peer cannot overflow or divide by zero.
        assert_eq!(lane(7, 0, 0, u64::MAX).version_for(u64::MAX), u64::MAX);
    }

    /// A forced lag of 2 (one lane, one batch per update): batches 0-2 are
    /// acted with the first version, then each trails its update by 2. With
    /// eight lanes and two per update, lane 5's batches (updates 2, 6, 10)
    /// take versions 0, 4, 8.
    #[test]
    fn a_forced_lag_moves_each_version_back_and_stops_at_the_first() {
        let lagged = |mut w: DeterministicLane, lag: u32| {
            w.lag = lag;
            w
        };
        let v = |w: DeterministicLane, ks: &[u64]| {
            ks.iter().map(|&k| w.version_for(k)).collect::<Vec<_>>()
        };
        assert_eq!(
            v(lagged(lane(0, 1, 1, 10), 2), &[0, 1, 2, 3, 4]),
            [10, 10, 10, 11, 12]
        );
        assert_eq!(v(lagged(lane(5, 8, 2, 0), 2), &[0, 1, 2]), [0, 4, 8]);
        assert_eq!(lagged(lane(0, 1, 1, 0), u32::MAX).version_for(5), 0);
    }
}
