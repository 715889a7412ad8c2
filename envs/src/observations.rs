//! Observations kept in the env's own element type: an image of bytes stays
//! bytes (a quarter of the memory and of the wire) from the actor's rollout
//! buffers to the learner's minibatches, and is widened to `f32` only where a
//! network reads it.

use std::ops::Range;

/// The element type of an env's observations (`EnvSpec::obs_dtype`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObsDtype {
    /// Real vectors (classic control, MuJoCo, games' features).
    #[default]
    F32,
    /// Bytes: grids and frames (MinAtar, Atari), every value an integer in
    /// `0..=255`.
    U8,
}

impl ObsDtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            ObsDtype::F32 => 4,
            ObsDtype::U8 => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ObsDtype::F32 => "f32",
            ObsDtype::U8 => "u8",
        }
    }
}

/// Observation rows, flat, in their dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum Observations {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

impl Default for Observations {
    fn default() -> Self {
        Observations::F32(Vec::new())
    }
}

impl From<Vec<f32>> for Observations {
    fn from(v: Vec<f32>) -> Self {
        Observations::F32(v)
    }
}

impl From<Vec<u8>> for Observations {
    fn from(v: Vec<u8>) -> Self {
        Observations::U8(v)
    }
}

/// The same body for both element types.
macro_rules! each {
    ($obs:expr, $v:ident => $body:expr) => {
        match $obs {
            Observations::F32($v) => $body,
            Observations::U8($v) => $body,
        }
    };
}

/// One element stored: an `f32` as is, a byte env's value (an integer in
/// `0..=255` by [`ObsDtype::U8`]'s contract) as its byte.
trait Element: Copy {
    fn store(v: f32) -> Self;
    fn widen(self) -> f32;
}

impl Element for f32 {
    fn store(v: f32) -> Self {
        v
    }
    fn widen(self) -> f32 {
        self
    }
}

impl Element for u8 {
    fn store(v: f32) -> Self {
        debug_assert!(
            v.fract() == 0.0 && (0.0..=255.0).contains(&v),
            "{v} is not a byte"
        );
        v as u8
    }
    fn widen(self) -> f32 {
        f32::from(self)
    }
}

fn widen_into<T: Element>(from: &[T], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(from) {
        *o = v.widen();
    }
}

impl Observations {
    /// `len` zeros of `dtype`.
    pub fn zeros(dtype: ObsDtype, len: usize) -> Self {
        match dtype {
            ObsDtype::F32 => Observations::F32(vec![0.0; len]),
            ObsDtype::U8 => Observations::U8(vec![0; len]),
        }
    }

    /// Empty, with room for `capacity` elements.
    pub fn with_capacity(dtype: ObsDtype, capacity: usize) -> Self {
        match dtype {
            ObsDtype::F32 => Observations::F32(Vec::with_capacity(capacity)),
            ObsDtype::U8 => Observations::U8(Vec::with_capacity(capacity)),
        }
    }

    pub fn dtype(&self) -> ObsDtype {
        match self {
            Observations::F32(_) => ObsDtype::F32,
            Observations::U8(_) => ObsDtype::U8,
        }
    }

    /// Elements (not rows).
    pub fn len(&self) -> usize {
        each!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.len() * self.dtype().size()
    }

    /// Elements `at..at + out.len()` widened to `f32` into `out`.
    pub fn read(&self, at: usize, out: &mut [f32]) {
        let range = at..at + out.len();
        each!(self, v => widen_into(&v[range], out))
    }

    /// Elements `range` widened to `f32`.
    pub fn to_f32(&self, range: Range<usize>) -> Vec<f32> {
        let mut out = vec![0.0; range.len()];
        self.read(range.start, &mut out);
        out
    }

    /// Elements `range` widened and appended to `out`.
    pub fn extend_f32(&self, range: Range<usize>, out: &mut Vec<f32>) {
        let from = out.len();
        out.resize(from + range.len(), 0.0);
        self.read(range.start, &mut out[from..]);
    }

    /// Stores `values` at `at..` (a byte env's values as bytes).
    pub fn write(&mut self, at: usize, values: &[f32]) {
        fn store<T: Element>(to: &mut [T], values: &[f32]) {
            for (o, &v) in to.iter_mut().zip(values) {
                *o = T::store(v);
            }
        }
        let range = at..at + values.len();
        each!(self, v => store(&mut v[range], values))
    }

    /// Appends `values` (a byte env's values as bytes).
    pub fn push_f32(&mut self, values: &[f32]) {
        let at = self.len();
        each!(self, v => v.resize(at + values.len(), Element::store(0.0)));
        self.write(at, values);
    }

    /// Appends elements `range` of `other`, of the same dtype.
    ///
    /// # Panics
    /// When the dtypes differ: a run's observations have one dtype.
    pub fn extend_from(&mut self, other: &Observations, range: Range<usize>) {
        match (self, other) {
            (Observations::F32(a), Observations::F32(b)) => a.extend_from_slice(&b[range]),
            (Observations::U8(a), Observations::U8(b)) => a.extend_from_slice(&b[range]),
            (a, b) => panic!("observations of {:?} and {:?} mixed", a.dtype(), b.dtype()),
        }
    }

    /// Overwrites elements `at..` with elements `range` of `other`, of the
    /// same dtype.
    ///
    /// # Panics
    /// When the dtypes differ.
    pub fn copy_from(&mut self, at: usize, other: &Observations, range: Range<usize>) {
        let to = at..at + range.len();
        match (self, other) {
            (Observations::F32(a), Observations::F32(b)) => a[to].copy_from_slice(&b[range]),
            (Observations::U8(a), Observations::U8(b)) => a[to].copy_from_slice(&b[range]),
            (a, b) => panic!("observations of {:?} and {:?} mixed", a.dtype(), b.dtype()),
        }
    }

    /// Moves elements `from..` to the front (the rest is left as it was).
    pub fn copy_within(&mut self, from: usize) {
        each!(self, v => v.copy_within(from.., 0))
    }

    /// Elements `at..` split off into a new value of the same dtype.
    pub fn split_off(&mut self, at: usize) -> Observations {
        match self {
            Observations::F32(v) => Observations::F32(v.split_off(at)),
            Observations::U8(v) => Observations::U8(v.split_off(at)),
        }
    }

    pub fn clear(&mut self) {
        each!(self, v => v.clear())
    }

    /// The elements as `f32` when they are `f32`.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            Observations::F32(v) => Some(v),
            Observations::U8(_) => None,
        }
    }
}

/// The concatenation of `parts` (all of one dtype) widened to `f32`: what a
/// network's forward pass reads.
pub fn concat_f32(parts: &[&Observations]) -> Vec<f32> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        p.extend_f32(0..p.len(), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_widen_to_their_values() {
        let o = Observations::U8(vec![0, 1, 7, 255]);
        assert_eq!(o.to_f32(1..4), [1.0, 7.0, 255.0]);
        assert_eq!(o.bytes(), 4);
        let mut out = vec![9.0];
        o.extend_f32(3..4, &mut out);
        assert_eq!(out, [9.0, 255.0]);
        assert_eq!(Observations::F32(vec![0.5; 3]).bytes(), 12);
    }

    #[test]
    fn writes_store_a_byte_envs_values_as_bytes() {
        let mut o = Observations::zeros(ObsDtype::U8, 4);
        o.write(1, &[1.0, 255.0]);
        assert_eq!(o, Observations::U8(vec![0, 1, 255, 0]));
        o.push_f32(&[3.0]);
        assert_eq!(o, Observations::U8(vec![0, 1, 255, 0, 3]));
        let mut f = Observations::zeros(ObsDtype::F32, 2);
        f.write(0, &[0.25, -1.5]);
        assert_eq!(f.as_f32(), Some(&[0.25, -1.5][..]));
    }

    #[test]
    fn rows_move_split_and_concatenate_in_their_dtype() {
        let mut o = Observations::U8(vec![1, 2, 3, 4, 5, 6]);
        o.copy_within(4);
        assert_eq!(o, Observations::U8(vec![5, 6, 3, 4, 5, 6]));
        let tail = o.split_off(4);
        assert_eq!(tail, Observations::U8(vec![5, 6]));
        let mut all = Observations::with_capacity(ObsDtype::U8, 8);
        all.extend_from(&o, 1..3);
        assert_eq!(all, Observations::U8(vec![6, 3]));
        assert_eq!(concat_f32(&[&all, &tail]), [6.0, 3.0, 5.0, 6.0]);
        all.copy_from(1, &tail, 0..1);
        assert_eq!(all, Observations::U8(vec![6, 5]));
        all.copy_from(0, &tail, 1..2);
        assert_eq!(all, Observations::U8(vec![6, 5]));
        all.clear();
        assert!(all.is_empty());
    }

    #[test]
    #[should_panic(expected = "mixed")]
    fn dtypes_never_mix() {
        let mut a = Observations::zeros(ObsDtype::U8, 1);
        a.extend_from(&Observations::F32(vec![1.0]), 0..1);
    }

    #[test]
    fn dtypes_are_named_in_configs_and_files_as_in_numpy() {
        assert_eq!(serde_json::to_string(&ObsDtype::U8).unwrap(), "\"u8\"");
        assert_eq!(ObsDtype::default(), ObsDtype::F32);
    }
}
