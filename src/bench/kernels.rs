//! `sebulba bench kernels`: the fused engine's matrix products at the
//! shapes its presets run, timed on every kernel path this CPU has beside
//! matrixmultiply (the portable path's product, and what every path fell
//! back to before it had blocks of its own; for a recurrent step, the
//! portable path's loop), each as GFLOP/s on one core
//! and as a fraction of the path's peak there. How each choice of kernel
//! was measured against the alternatives.

use anyhow::ensure;
use sebulba_fused::kernels::few_rows::{FEW_ROWS, rows_by_on};
use sebulba_fused::kernels::peak::{self, Peak};
use sebulba_fused::kernels::{Isa, View, gemm_on};
use serde::Serialize;
use std::time::{Duration, Instant};

/// One product of an update: `[m, k] x [k, n]`, either operand possibly
/// transposed (a backward pass's input and weight gradients). A forward
/// product of at most `FEW_ROWS` rows (a recurrent step's) goes through
/// `few_rows`, as the engine's do.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Shape {
    pub name: &'static str,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub a_transposed: bool,
    pub b_transposed: bool,
}

const fn shape(name: &'static str, (m, k, n): (usize, usize, usize), t: (bool, bool)) -> Shape {
    Shape {
        name,
        m,
        k,
        n,
        a_transposed: t.0,
        b_transposed: t.1,
    }
}

const FWD: (bool, bool) = (false, false);
const DX: (bool, bool) = (false, true);
const DW: (bool, bool) = (true, false);

/// The presets' products: CartPole's minibatch through 64-wide layers,
/// Big Two's 256-wide torso, an LSTM step's few rows, the MinAtar
/// network's windows and dense layer, and the Nature CNN's windows (a
/// chunk of 8 samples) and dense layer, each forward and back.
pub const SHAPES: [Shape; 15] = [
    shape("mlp64 forward", (128, 64, 64), FWD),
    shape("mlp64 input grad", (128, 64, 64), DX),
    shape("mlp64 weight grad", (64, 128, 64), DW),
    shape("mlp256 forward", (512, 256, 256), FWD),
    shape("mlp256 weight grad", (256, 512, 256), DW),
    shape("lstm128 step", (8, 128, 512), FWD),
    shape("minatar conv forward", (6400, 36, 16), FWD),
    shape("minatar dense forward", (1024, 1024, 128), FWD),
    shape("minatar dense weight grad", (1024, 1024, 128), DW),
    shape("nature conv1 forward", (3200, 256, 32), FWD),
    shape("nature conv2 forward", (648, 512, 64), FWD),
    shape("nature conv2 input grad", (648, 64, 512), DX),
    shape("nature conv2 weight grad", (512, 648, 64), DW),
    shape("nature dense forward", (256, 3136, 512), FWD),
    shape("nature dense weight grad", (3136, 256, 512), DW),
];

#[derive(Clone, Debug, Serialize)]
pub struct KernelsBench {
    /// Each path's peak on one core.
    pub peaks: Vec<Peak>,
    pub products: Vec<ProductBench>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProductBench {
    pub shape: Shape,
    /// One entry per path, `scalar` (matrixmultiply) first.
    pub paths: Vec<PathFigure>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PathFigure {
    pub kernels: &'static str,
    pub gflops: f64,
    /// Over matrixmultiply's in the same run.
    pub speedup: f64,
    /// Over the path's peak on one core.
    pub fraction_of_peak: Option<f64>,
}

/// Times every product of [`SHAPES`] (those named with `only`) on every
/// path for about `seconds` each.
pub fn bench_kernels(seconds: f64, only: Option<&str>) -> anyhow::Result<KernelsBench> {
    ensure!(
        seconds.is_finite() && seconds > 0.0,
        "--seconds must be positive, got {seconds}"
    );
    let time = Duration::from_secs_f64(seconds);
    let paths: Vec<Isa> = Isa::ALL.into_iter().filter(|i| i.supported()).collect();
    let peaks: Vec<Peak> = paths
        .iter()
        .filter_map(|&isa| peak::measure(isa, 1, time))
        .collect();
    let mut products = Vec::new();
    for s in SHAPES
        .into_iter()
        .filter(|s| only.is_none_or(|o| s.name.contains(o)))
    {
        let base = gflops(Isa::Scalar, &s, time);
        let figures = paths
            .iter()
            .map(|&isa| {
                let g = if isa == Isa::Scalar {
                    base
                } else {
                    gflops(isa, &s, time)
                };
                let peak = peaks.iter().find(|p| p.kernels == isa.name());
                PathFigure {
                    kernels: isa.name(),
                    gflops: g,
                    speedup: g / base,
                    fraction_of_peak: peak.map(|p| g / p.gflops),
                }
            })
            .collect();
        products.push(ProductBench {
            shape: s,
            paths: figures,
        });
    }
    Ok(KernelsBench { peaks, products })
}

/// The product's GFLOP/s on `isa` over about `time`, `beta` 1 as a
/// gradient's accumulation and a forward pass's bias both need.
fn gflops(isa: Isa, s: &Shape, time: Duration) -> f64 {
    let value = |i: usize| ((i * 7919) % 113) as f32 / 97.0 - 0.5;
    let a: Vec<f32> = (0..s.m * s.k).map(value).collect();
    let b: Vec<f32> = (0..s.k * s.n).map(|i| value(i + 5)).collect();
    let mut c = vec![0.0f32; s.m * s.n];
    let av = match s.a_transposed {
        true => View::transposed(&a, s.m),
        false => View::rows(&a, s.k),
    };
    let bv = match s.b_transposed {
        true => View::transposed(&b, s.k),
        false => View::rows(&b, s.n),
    };
    let few = s.m <= FEW_ROWS && !s.a_transposed && !s.b_transposed;
    let mut run = |calls: usize| {
        let t0 = Instant::now();
        for _ in 0..calls {
            match few {
                true => rows_by_on(isa, (s.m, s.k, s.n), &a, &b, 1.0, &mut c),
                false => gemm_on(isa, s.m, s.k, s.n, av, bv, 1.0, &mut c),
            }
        }
        t0.elapsed()
    };
    run(1);
    let mut calls = 1;
    loop {
        let took = run(calls);
        if took >= time || calls >= 1 << 30 {
            let flops = 2.0 * (s.m * s.k * s.n) as f64 * calls as f64;
            return flops / took.as_secs_f64().max(1e-9) / 1e9;
        }
        calls *= 2;
    }
}

/// One line per path's peak, then one per product and path.
pub fn print(r: &KernelsBench) {
    for p in &r.peaks {
        println!(
            "peak {}: {:.1} GFLOP/s a core ({} lanes x {} FMA units x 2 x {:.2} GHz; an FMA loop reached {:.1})",
            p.kernels, p.gflops, p.lanes, p.fma_units, p.ghz, p.fma_loop_gflops
        );
    }
    for prod in &r.products {
        let s = &prod.shape;
        for f in &prod.paths {
            let of_peak = f
                .fraction_of_peak
                .map_or(String::new(), |x| format!(", {:.0}% of peak", 100.0 * x));
            println!(
                "{:<26} [{}, {}] x [{}, {}]{}{} {:>6}: {:>6.1} GFLOP/s, {:.2}x matrixmultiply{}",
                s.name,
                s.m,
                s.k,
                s.k,
                s.n,
                if s.a_transposed { " aT" } else { "" },
                if s.b_transposed { " bT" } else { "" },
                f.kernels,
                f.gflops,
                f.speedup,
                of_peak
            );
        }
    }
}
