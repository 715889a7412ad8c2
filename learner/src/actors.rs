//! The actors that joined this learner: their ids, the stream each one sends
//! on, and the sequence number of each one's newest batch. An id is a random
//! capability (`name#n.<64-bit tag>`), handed out by Join and unguessable, and
//! only one live stream may send under it: another client cannot take an
//! actor's batches or lock it out by sending first.
//!
//! The table is bounded: an actor whose stream ended is kept (it may come
//! back on a new stream) until more than `learner.departed_actors_kept` have
//! left after it, and a joined actor that never opened a stream until
//! [`MAX_UNCLAIMED`] have joined after it; then it is forgotten (a return gets
//! NOT_FOUND, the cue to join again) and its batch counts fold
//! ([`crate::accounting`]).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Joined actors that have not opened a stream, at most (a flood of Joins
/// forgets the earliest).
pub const MAX_UNCLAIMED: usize = 4096;

#[derive(Default)]
struct Slot {
    /// The stream sending under this id, while one is open.
    stream: Option<u64>,
    /// The newest sequence number taken.
    last_sequence: Option<u64>,
    /// Its lane in a deterministic run (`crate::deterministic`).
    lane: Option<usize>,
    /// Without a stream: since when, in the order of [`Table::next`].
    idle: Option<Idle>,
}

#[derive(Clone, Copy)]
enum Idle {
    /// Joined, no stream yet.
    Unclaimed(u64),
    /// Its stream ended.
    Departed(u64),
}

/// The slots, and the idle ones in the order they became idle.
#[derive(Default)]
struct Table {
    slots: BTreeMap<String, Slot>,
    unclaimed: BTreeMap<u64, String>,
    departed: BTreeMap<u64, String>,
    next: u64,
}

impl Table {
    fn tick(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// The slot is no longer idle.
    fn busy(&mut self, id: &str) {
        let Some(slot) = self.slots.get_mut(id) else {
            return;
        };
        match slot.idle.take() {
            Some(Idle::Unclaimed(t)) => self.unclaimed.remove(&t),
            Some(Idle::Departed(t)) => self.departed.remove(&t),
            None => None,
        };
    }

    /// Forgets the earliest idle slots of `order` past `keep`; returns them.
    fn forget_past(
        order: &mut BTreeMap<u64, String>,
        slots: &mut BTreeMap<String, Slot>,
        keep: usize,
    ) -> Vec<String> {
        let mut gone = Vec::new();
        while order.len() > keep {
            let Some((_, id)) = order.pop_first() else {
                break;
            };
            slots.remove(&id);
            gone.push(id);
        }
        gone
    }
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

pub struct Actors {
    table: Mutex<Table>,
    /// Departed actors kept (`learner.departed_actors_kept`).
    kept: usize,
    joined: AtomicU64,
    streams: AtomicU64,
}

impl Actors {
    pub fn new(kept: usize) -> Self {
        Self {
            table: Mutex::default(),
            kept,
            joined: AtomicU64::new(0),
            streams: AtomicU64::new(0),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic elsewhere while holding the lock must not stop ingest.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Actors in the table (joined and not forgotten).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.table().slots.len()
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
        let mut t = self.table();
        let at = t.tick();
        let slot = Slot {
            lane,
            idle: Some(Idle::Unclaimed(at)),
            ..Slot::default()
        };
        t.slots.insert(id.clone(), slot);
        t.unclaimed.insert(at, id.clone());
        let Table {
            unclaimed, slots, ..
        } = &mut *t;
        Table::forget_past(unclaimed, slots, MAX_UNCLAIMED);
        (id, n)
    }

    /// The lane of actor `id` in a deterministic run.
    pub fn lane_of(&self, id: &str) -> Option<usize> {
        self.table().slots.get(id).and_then(|s| s.lane)
    }

    pub fn is_known(&self, id: &str) -> bool {
        self.table().slots.contains_key(id)
    }

    /// A number for a new trajectory stream.
    pub fn new_stream(&self) -> u64 {
        self.streams.fetch_add(1, Ordering::Relaxed)
    }

    /// Binds `id` to `stream` if no other open stream holds it.
    pub fn claim(&self, id: &str, stream: u64) -> Result<(), Refusal> {
        let mut t = self.table();
        let slot = t.slots.get_mut(id).ok_or(Refusal::Unknown)?;
        match slot.stream {
            Some(s) if s != stream => Err(Refusal::Taken),
            _ => {
                slot.stream = Some(stream);
                t.busy(id);
                Ok(())
            }
        }
    }

    /// The stream has ended: `id` may be sent under on another one, until
    /// more than `kept` actors have departed after it. Returns the actors
    /// forgotten now (their counts fold).
    pub fn release(&self, id: &str, stream: u64) -> Vec<String> {
        let mut t = self.table();
        let at = t.tick();
        let Some(slot) = t.slots.get_mut(id) else {
            return Vec::new();
        };
        if slot.stream != Some(stream) {
            return Vec::new();
        }
        slot.stream = None;
        slot.idle = Some(Idle::Departed(at));
        t.departed.insert(at, id.to_string());
        let Table {
            departed, slots, ..
        } = &mut *t;
        Table::forget_past(departed, slots, self.kept)
    }

    /// Takes `sequence` as `id`'s newest batch if it is after every one before.
    pub fn advance(&self, id: &str, sequence: u64) -> Result<(), Refusal> {
        let mut t = self.table();
        let slot = t.slots.get_mut(id).ok_or(Refusal::Unknown)?;
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
        let a = Actors::new(8);
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

    #[test]
    fn departed_actors_are_kept_up_to_the_bound_then_forgotten_earliest_first() {
        let a = Actors::new(2);
        let ids: Vec<String> = (0..4)
            .map(|i| a.register(&format!("a{i}"), None).0)
            .collect();
        let streams: Vec<u64> = ids
            .iter()
            .map(|id| {
                let s = a.new_stream();
                a.claim(id, s).expect("claims");
                s
            })
            .collect();
        assert!(a.release(&ids[0], streams[1]).is_empty(), "not its stream");
        assert!(a.release(&ids[0], streams[0]).is_empty());
        assert!(a.release(&ids[1], streams[1]).is_empty());
        // Back on a new stream: no longer departed.
        let again = a.new_stream();
        assert_eq!(a.claim(&ids[0], again), Ok(()));
        assert!(a.release(&ids[2], streams[2]).is_empty());
        assert_eq!(a.release(&ids[3], streams[3]), [ids[1].clone()]);
        assert!(!a.is_known(&ids[1]) && a.is_known(&ids[0]));
        assert_eq!(a.claim(&ids[1], a.new_stream()), Err(Refusal::Unknown));
        assert_eq!(a.release(&ids[0], again), [ids[2].clone()]);
        assert_eq!(a.len(), 2);
    }

    #[test]
    fn a_flood_of_joins_that_never_stream_forgets_the_earliest() {
        let a = Actors::new(0);
        let first = a.register("first", None).0;
        let streaming = a.register("streams", None).0;
        a.claim(&streaming, a.new_stream()).expect("claims");
        for i in 0..MAX_UNCLAIMED {
            a.register(&format!("j{i}"), None);
        }
        assert!(!a.is_known(&first), "the earliest unclaimed is forgotten");
        assert!(a.is_known(&streaming), "an actor with a stream is not");
        assert_eq!(a.len(), MAX_UNCLAIMED + 1);
    }
}
