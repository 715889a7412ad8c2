//! The actors that joined this learner: their ids, the stream each one sends
//! on, and the sequence number of each one's newest batch. An id is a random
//! capability (`name#n.<64-bit tag>`), handed out by Join and unguessable, and
//! only one live stream may send under it: another client cannot take an
//! actor's batches or lock it out by sending first.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
struct Slot {
    /// The stream sending under this id, while one is open.
    stream: Option<u64>,
    /// The newest sequence number taken.
    last_sequence: Option<u64>,
    /// Its lane in a deterministic run (`crate::deterministic`).
    lane: Option<usize>,
}

/// Why a batch's actor id cannot be used on a stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not an id this learner handed out (it restarted, or it never was).
    Unknown,
    /// Another open stream sends under this id.
    Taken,
    /// The sequence number is not after the actor's newest (the newest given).
    Sequence(u64),
}

#[derive(Default)]
pub struct Actors {
    slots: Mutex<BTreeMap<String, Slot>>,
    joined: AtomicU64,
    streams: AtomicU64,
}

impl Actors {
    fn slots(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Slot>> {
        // A panic elsewhere while holding the lock must not stop ingest.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a joining actor named `name` (in `lane` of a deterministic
    /// run): its id, and its index in join order.
    pub fn register(&self, name: &str, lane: Option<usize>) -> (String, u64) {
        let n = self.joined.fetch_add(1, Ordering::Relaxed);
        let clean: String = name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(48)
            .collect();
        let base = if clean.is_empty() { "actor" } else { &clean };
        let tag: u64 = rand::random();
        let id = format!("{base}#{n}.{tag:016x}");
        let slot = Slot {
            lane,
            ..Slot::default()
        };
        self.slots().insert(id.clone(), slot);
        (id, n)
    }

    /// The lane of actor `id` in a deterministic run.
    pub fn lane_of(&self, id: &str) -> Option<usize> {
        self.slots().get(id).and_then(|s| s.lane)
    }

    pub fn is_known(&self, id: &str) -> bool {
        self.slots().contains_key(id)
    }

    /// A number for a new trajectory stream.
    pub fn new_stream(&self) -> u64 {
        self.streams.fetch_add(1, Ordering::Relaxed)
    }

    /// Binds `id` to `stream` if no other open stream holds it.
    pub fn claim(&self, id: &str, stream: u64) -> Result<(), Refusal> {
        let mut slots = self.slots();
        let slot = slots.get_mut(id).ok_or(Refusal::Unknown)?;
        match slot.stream {
            Some(s) if s != stream => Err(Refusal::Taken),
            _ => {
                slot.stream = Some(stream);
                Ok(())
            }
        }
    }

    /// The stream has ended: `id` may be sent under on another one.
    pub fn release(&self, id: &str, stream: u64) {
        if let Some(slot) = self.slots().get_mut(id)
            && slot.stream == Some(stream)
        {
            slot.stream = None;
        }
    }

    /// Takes `sequence` as `id`'s newest batch if it is after every one before.
    pub fn advance(&self, id: &str, sequence: u64) -> Result<(), Refusal> {
        let mut slots = self.slots();
        let slot = slots.get_mut(id).ok_or(Refusal::Unknown)?;
        match slot.last_sequence {
            Some(last) if last >= sequence => Err(Refusal::Sequence(last)),
            _ => {
                slot.last_sequence = Some(sequence);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unguessable_and_bound_to_one_open_stream() {
        let a = Actors::default();
        let (id, n) = a.register("w/ei rd", None);
        let (other, m) = a.register("", Some(3));
        assert_eq!((a.lane_of(&id), a.lane_of(&other)), (None, Some(3)));
        assert_eq!((n, m), (0, 1));
        assert!(
            id.starts_with("weird#0.") && id.len() == "weird#0.".len() + 16,
            "{id}"
        );
        assert!(other.starts_with("actor#1."));
        assert_ne!(a.register("x", None).0, a.register("x", None).0);
        let (s1, s2) = (a.new_stream(), a.new_stream());
        assert_eq!(a.claim("nobody", s1), Err(Refusal::Unknown));
        assert_eq!(a.claim(&id, s1), Ok(()));
        assert_eq!(a.claim(&id, s1), Ok(()), "its own stream, again");
        assert_eq!(a.claim(&id, s2), Err(Refusal::Taken));
        a.release(&id, s2);
        assert_eq!(
            a.claim(&id, s2),
            Err(Refusal::Taken),
            "only the holder releases"
        );
        a.release(&id, s1);
        assert_eq!(a.claim(&id, s2), Ok(()));
        assert_eq!(a.advance(&id, 3), Ok(()));
        assert_eq!(a.advance(&id, 3), Err(Refusal::Sequence(3)));
        assert_eq!(a.advance(&id, 2), Err(Refusal::Sequence(3)));
        assert_eq!(a.advance(&id, 4), Ok(()));
    }
}
