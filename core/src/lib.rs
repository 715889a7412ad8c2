//! What every sebulba role shares about the policy: the network (burn, and its
//! fused forward pass on flat buffers) and its action distributions, the run
//! configuration, weight (de)serialisation, inference, and memory and device
//! helpers. Environments are `sebulba-envs`; run-directory files
//! `sebulba-runfiles`. No networking: that is `sebulba-transport`.

pub mod config;
pub mod cpu;
pub mod device_choice;
pub mod devices;
pub mod distribution;
pub mod memory;
pub mod model;
pub mod policy;
pub mod weights;

/// The CPU inference backend (actors, evaluator).
pub type CpuBackend = burn::backend::NdArray<f32>;
/// The CPU training backend (learner).
pub type CpuAutodiff = burn::backend::Autodiff<CpuBackend>;
/// The CUDA backend (learner replicas and inference on `cuda:N`).
#[cfg(feature = "cuda")]
pub type CudaBackend = burn_cuda::Cuda<f32, i32>;
