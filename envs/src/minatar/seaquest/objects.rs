//! The package's objects and the Python lists that hold them.

use super::LAST;

/// Anything that crosses the grid: a bullet (`timer`, `shot` unused), a fish
/// or a diver (`shot` unused), an enemy submarine. `timer` counts down to
/// the next move, `shot` to the next shot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Thing {
    pub(super) x: i32,
    pub(super) y: i32,
    pub(super) rightwards: bool,
    pub(super) timer: i32,
    pub(super) shot: i32,
}

impl Thing {
    pub(super) fn at(&self, x: i32, y: i32) -> bool {
        self.x == x && self.y == y
    }

    pub(super) fn meets(&self, other: &Thing) -> bool {
        self.at(other.x, other.y)
    }

    pub(super) fn advance(&mut self) {
        self.x += if self.rightwards { 1 } else { -1 };
    }

    pub(super) fn outside(&self) -> bool {
        !(0..=LAST).contains(&self.x)
    }
}

/// A Python list of objects: each has an identity, equality is by value.
#[derive(Clone, Debug, Default)]
pub(super) struct Objects {
    pub(super) items: Vec<(u64, Thing)>,
    pub(super) next_id: u64,
}

impl Objects {
    pub(super) fn push(&mut self, t: Thing) {
        self.items.push((self.next_id, t));
        self.next_id += 1;
    }

    pub(super) fn position(&self, id: u64) -> Option<usize> {
        self.items.iter().position(|(i, _)| *i == id)
    }

    /// Writes `t` into object `id`, when it is still in the list.
    pub(super) fn update(&mut self, id: u64, t: Thing) {
        if let Some(p) = self.position(id) {
            self.items[p].1 = t;
        }
    }

    /// `list.remove(value)`: the first object equal to `t`.
    pub(super) fn remove_value(&mut self, t: &Thing) {
        if let Some(p) = self.items.iter().position(|(_, v)| v == t) {
            self.items.remove(p);
        }
    }

    /// The first object at `t`'s cell.
    pub(super) fn first_meeting(&self, t: &Thing) -> Option<Thing> {
        self.items.iter().map(|(_, v)| *v).find(|v| v.meets(t))
    }

    pub(super) fn things(&self) -> impl Iterator<Item = &Thing> {
        self.items.iter().map(|(_, t)| t)
    }

    /// `for x in reversed(list)` while the body changes the list: CPython's
    /// iterator keeps an index, stepping down, and stops once the index is
    /// past the list's end. Yields identities.
    pub(super) fn walk_back(&self, index: &mut isize) -> Option<(u64, Thing)> {
        let i = usize::try_from(*index)
            .ok()
            .filter(|&i| i < self.items.len())?;
        *index -= 1;
        Some(self.items[i])
    }

    pub(super) fn start(&self) -> isize {
        self.items.len() as isize - 1
    }
}
