//! Gradient clipping by the global norm over every parameter together.

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{ElementConversion, Tensor};
use burn_optim::GradientsParams;

/// Scales all gradients together so their global L2 norm is at most `max_norm`
/// (per-parameter clipping would distort the direction). Returns the norm before.
pub fn clip_global_norm<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    grads: &mut GradientsParams,
    max_norm: f64,
) -> f64 {
    struct SumSq<'a, B: AutodiffBackend> {
        grads: &'a GradientsParams,
        total: Option<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for SumSq<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
                let s = g.powi_scalar(2).sum();
                self.total = Some(match self.total.take() {
                    Some(t) => t + s,
                    None => s,
                });
            }
        }
    }
    struct Scale<'a> {
        grads: &'a mut GradientsParams,
        factor: f64,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Scale<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
                self.grads
                    .register::<B::InnerBackend, D>(param.id, g * self.factor);
            }
        }
    }
    let mut sum = SumSq::<B> { grads, total: None };
    model.visit(&mut sum);
    let norm = sum
        .total
        .map(|t| t.into_scalar().elem::<f64>().sqrt())
        .unwrap_or(0.0);
    if norm > max_norm && norm.is_finite() {
        let factor = max_norm / (norm + 1e-6);
        model.visit(&mut Scale { grads, factor });
    }
    norm
}
