//! Curves of return against an x axis (env steps or wall seconds), and seeds
//! aggregated onto one grid: mean, and the band between the lowest and the
//! highest seed (with a handful of seeds a standard deviation says little).

/// One run's points, in increasing x.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub xs: Vec<f64>,
    pub ys: Vec<f64>,
}

impl Curve {
    /// From `(x, y)` pairs in any order; non-finite pairs are left out and of
    /// equal xs the last one given stays (a re-evaluated version).
    pub fn new(mut points: Vec<(f64, f64)>) -> Self {
        points.retain(|(x, y)| x.is_finite() && y.is_finite());
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut xs: Vec<f64> = Vec::with_capacity(points.len());
        let mut ys: Vec<f64> = Vec::with_capacity(points.len());
        for (x, y) in points {
            if xs.last() == Some(&x) {
                if let Some(last) = ys.last_mut() {
                    *last = y;
                }
            } else {
                xs.push(x);
                ys.push(y);
            }
        }
        Self { xs, ys }
    }

    /// Linear interpolation at `x`; none outside the curve's own x range.
    pub fn at(&self, x: f64) -> Option<f64> {
        let (first, last) = (*self.xs.first()?, *self.xs.last()?);
        if x < first || x > last {
            return None;
        }
        let i = self.xs.partition_point(|&v| v < x);
        if self.xs[i] == x {
            return Some(self.ys[i]);
        }
        let (x0, x1, y0, y1) = (self.xs[i - 1], self.xs[i], self.ys[i - 1], self.ys[i]);
        Some(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
    }
}

/// Several seeds on one grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub xs: Vec<f64>,
    pub mean: Vec<f64>,
    pub lo: Vec<f64>,
    pub hi: Vec<f64>,
}

/// Seeds aggregated over the x range every one of them covers (from the
/// latest first point to the earliest last point), on `points` evenly spaced
/// xs. A single curve is returned as it is (its own points, no band). None
/// when the curves share no x range.
pub fn aggregate(curves: &[Curve], points: usize) -> Option<Band> {
    if let [only] = curves {
        return (!only.xs.is_empty()).then(|| Band {
            xs: only.xs.clone(),
            mean: only.ys.clone(),
            lo: only.ys.clone(),
            hi: only.ys.clone(),
        });
    }
    let start = curves
        .iter()
        .map(|c| c.xs.first().copied())
        .try_fold(f64::NEG_INFINITY, |m, x| x.map(|x| m.max(x)))?;
    let end = curves
        .iter()
        .map(|c| c.xs.last().copied())
        .try_fold(f64::INFINITY, |m, x| x.map(|x| m.min(x)))?;
    if curves.is_empty() || end < start {
        return None;
    }
    let n = if end > start { points.max(2) } else { 1 };
    let mut band = Band {
        xs: Vec::with_capacity(n),
        mean: Vec::with_capacity(n),
        lo: Vec::with_capacity(n),
        hi: Vec::with_capacity(n),
    };
    for i in 0..n {
        let x = if n == 1 {
            start
        } else {
            start + (end - start) * i as f64 / (n - 1) as f64
        };
        let ys: Vec<f64> = curves.iter().filter_map(|c| c.at(x)).collect();
        band.xs.push(x);
        band.mean.push(ys.iter().sum::<f64>() / ys.len() as f64);
        band.lo
            .push(ys.iter().copied().fold(f64::INFINITY, f64::min));
        band.hi
            .push(ys.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    }
    Some(band)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curve_sorts_dedups_and_drops_non_finite() {
        let c = Curve::new(vec![(20.0, 2.0), (10.0, 1.0), (20.0, 3.0), (f64::NAN, 9.0)]);
        assert_eq!(c.xs, [10.0, 20.0]);
        assert_eq!(c.ys, [1.0, 3.0]);
    }

    #[test]
    fn interpolation_is_linear_inside_and_none_outside() {
        let c = Curve::new(vec![(0.0, 0.0), (10.0, 100.0), (20.0, 50.0)]);
        assert_eq!(c.at(5.0), Some(50.0));
        assert_eq!(c.at(10.0), Some(100.0));
        assert_eq!(c.at(15.0), Some(75.0));
        assert_eq!(c.at(20.0), Some(50.0));
        assert_eq!(c.at(-1.0), None);
        assert_eq!(c.at(21.0), None);
    }

    #[test]
    fn seeds_aggregate_over_their_shared_range() {
        // Seed a: y = x on [0, 100]; seed b: y = 2x on [20, 80] (hand values).
        let a = Curve::new(vec![(0.0, 0.0), (100.0, 100.0)]);
        let b = Curve::new(vec![(20.0, 40.0), (80.0, 160.0)]);
        let band = aggregate(&[a, b], 4).unwrap();
        assert_eq!(band.xs, [20.0, 40.0, 60.0, 80.0]);
        assert_eq!(band.mean, [30.0, 60.0, 90.0, 120.0]);
        assert_eq!(band.lo, [20.0, 40.0, 60.0, 80.0]);
        assert_eq!(band.hi, [40.0, 80.0, 120.0, 160.0]);
    }

    #[test]
    fn one_seed_is_drawn_as_is_and_disjoint_seeds_give_none() {
        let a = Curve::new(vec![(0.0, 1.0), (10.0, 2.0)]);
        let band = aggregate(std::slice::from_ref(&a), 50).unwrap();
        assert_eq!((band.xs, band.mean), (a.xs.clone(), a.ys.clone()));
        let b = Curve::new(vec![(11.0, 1.0), (20.0, 2.0)]);
        assert_eq!(aggregate(&[a, b], 10), None);
        assert_eq!(aggregate(&[Curve::new(vec![])], 10), None);
        assert_eq!(aggregate(&[], 10), None);
    }
}
