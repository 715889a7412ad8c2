//! A torso: burn's modules for the blocks of the fused layout's torso
//! (convolutions, max-pools, residual blocks, the activation, dense layers
//! with optional LayerNorm placed before or after their activation).
//! Observations arrive as rows `[N, H * W * C]` (channels last, as envs
//! give them); image blocks run on burn's NCHW tensors and an image is
//! flattened channels first, as PyTorch's CNNs do, so its tensors have
//! PyTorch's shapes and order (the fused layout converts at
//! [`crate::model::flat`] and in the file).

use super::recurrent::{Recurrent, Sequence};
use crate::config::{Activation, Init, LayerNormPlacement};
use burn::module::{Initializer, Module, ModuleMapper, ModuleVisitor, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, PaddingConfig2d};
use burn::tensor::activation;
use burn::tensor::module::max_pool2d;
use burn::tensor::{Tensor, TensorData, backend::Backend};
use sebulba_fused::conv::Conv;
use sebulba_fused::net::BlockAt;

/// A linear layer with weights from `init` (orthogonal with `gain`, or LeCun
/// uniform `U(+-sqrt(3 / fan_in))`) and the given bias (zeros when `None`).
pub fn linear<B: Backend>(
    d_in: usize,
    d_out: usize,
    init: Init,
    gain: f64,
    bias: Option<Vec<f32>>,
    device: &B::Device,
) -> Linear<B> {
    let weight = match init {
        Init::Orthogonal => super::orthogonal::orthogonal([d_in, d_out], gain, device),
        // Kaiming-uniform with gain 1 is sqrt(3) / sqrt(fan_in): LeCun uniform.
        Init::LecunUniform => Initializer::KaimingUniform {
            gain: 1.0,
            fan_out_only: false,
        }
        .init_with([d_in, d_out], Some(d_in), Some(d_out), device),
    };
    let bias = bias.unwrap_or_else(|| vec![0.0; d_out]);
    Linear {
        weight,
        bias: Some(Param::from_tensor(Tensor::from_data(
            TensorData::new(bias, [d_out]),
            device,
        ))),
    }
}

/// A convolution layer of `c`'s shape with weights from `init` (orthogonal
/// with gain sqrt(2) over each filter's `c_in * kh * kw` taps, as PyTorch's
/// `orthogonal_`, or LeCun uniform over that fan-in) and a zero bias.
fn conv<B: Backend>(c: &Conv, init: Init, device: &B::Device) -> Conv2d<B> {
    let p = c.pad;
    let initializer = match init {
        // Replaced below before it is drawn (burn draws on first use).
        Init::Orthogonal => Initializer::Zeros,
        Init::LecunUniform => Initializer::KaimingUniform {
            gain: 1.0,
            fan_out_only: false,
        },
    };
    let mut layer = Conv2dConfig::new([c.c_in, c.c_out], [c.kh, c.kw])
        .with_stride([c.stride, c.stride])
        .with_padding(PaddingConfig2d::Explicit(p, p, p, p))
        .with_initializer(initializer)
        .init(device);
    if init == Init::Orthogonal {
        let shape = [c.c_out, c.c_in, c.kh, c.kw];
        layer.weight = super::orthogonal::orthogonal(shape, std::f64::consts::SQRT_2, device);
    }
    layer.bias = Some(Param::from_tensor(Tensor::zeros([c.c_out], device)));
    layer
}

/// The IMPALA ResNet's residual block: `x + conv1(act(conv0(act(x))))`
/// (`sebulba_fused::block::Residual`).
#[derive(Module, Debug)]
pub struct Residual<B: Backend> {
    pub conv0: Conv2d<B>,
    pub conv1: Conv2d<B>,
}

/// Where a block's parameters are in a [`Torso`]'s fields: its group's
/// list and its index there (burn's record names, `actor.conv.0`, which the
/// published file keeps), or none.
#[derive(Clone, Copy, Debug)]
enum Part {
    Conv(usize),
    Res(usize),
    Dense(usize),
    Core(usize),
    Fixed,
}

/// Each block's [`Part`], counting each group's blocks in order.
fn parts(blocks: &[BlockAt]) -> Vec<Part> {
    let (mut conv, mut res, mut dense, mut core) = (0, 0, 0, 0);
    let next = |n: &mut usize| {
        *n += 1;
        *n - 1
    };
    blocks
        .iter()
        .map(|b| match b {
            BlockAt::Conv(_) => Part::Conv(next(&mut conv)),
            BlockAt::Residual(_) => Part::Res(next(&mut res)),
            BlockAt::Dense(_) => Part::Dense(next(&mut dense)),
            BlockAt::Recurrent(_) => Part::Core(next(&mut core)),
            BlockAt::MaxPool(_) | BlockAt::Activate(_) => Part::Fixed,
        })
        .collect()
}

/// What flows between blocks: rows, or NCHW images.
enum Flow<B: Backend> {
    Rows(Tensor<B, 2>),
    Image(Tensor<B, 4>),
}

impl<B: Backend> Flow<B> {
    /// Rows `[N, C * H * W]`: an image flattened channels first, as PyTorch's
    /// CNNs do.
    fn rows(self) -> Tensor<B, 2> {
        match self {
            Flow::Rows(x) => x,
            Flow::Image(y) => {
                let [n, c, h, w] = y.dims();
                y.reshape([n, c * h * w])
            }
        }
    }

    fn image(self) -> Tensor<B, 4> {
        match self {
            Flow::Image(y) => y,
            Flow::Rows(_) => unreachable!("the layout gives an image block an image"),
        }
    }
}

/// A torso: the blocks of the fused layout's torso (`sebulba_fused::net::
/// Torso`), each dense layer with the activation and optional LayerNorm
/// placed before or after it.
#[derive(Module, Debug)]
pub struct Torso<B: Backend> {
    /// The convolutions, in order.
    pub conv: Vec<Conv2d<B>>,
    /// The residual blocks, in order.
    pub res: Vec<Residual<B>>,
    /// The dense layers, in order.
    pub layers: Vec<Linear<B>>,
    /// The recurrent core, when there is one.
    pub core: Vec<Recurrent<B>>,
    /// One per dense layer when LayerNorm is on, else empty.
    pub norms: Vec<LayerNorm<B>>,
    #[module(skip)]
    pub activation: Activation,
    #[module(skip)]
    pub placement: LayerNormPlacement,
    /// The blocks, in order (their parameters are the fields above).
    #[module(skip)]
    pub blocks: Vec<BlockAt>,
    /// Where each block's parameters are.
    #[module(skip)]
    parts: Vec<Part>,
}

impl<B: Backend> Torso<B> {
    /// The modules of `layout`'s blocks, freshly initialised in block order.
    pub fn new(
        layout: &sebulba_fused::net::Torso,
        activation: Activation,
        placement: LayerNormPlacement,
        init: Init,
        device: &B::Device,
    ) -> Self {
        let gain = std::f64::consts::SQRT_2;
        let (mut convs, mut res, mut layers, mut norms, mut core) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for b in &layout.blocks {
            match b {
                BlockAt::Conv(c) => convs.push(conv(&c.at.conv, init, device)),
                BlockAt::Residual(r) => res.push(Residual {
                    conv0: conv(&r.conv0.conv, init, device),
                    conv1: conv(&r.conv1.conv, init, device),
                }),
                BlockAt::Dense(d) => {
                    let (d_in, d_out) = (d.at.d_in, d.at.d_out);
                    layers.push(linear(d_in, d_out, init, gain, None, device));
                    if placement != LayerNormPlacement::None {
                        norms.push(LayerNormConfig::new(d_out).init(device));
                    }
                }
                BlockAt::Recurrent(r) => core.push(Recurrent::new(r, init, device)),
                BlockAt::MaxPool(_) | BlockAt::Activate(_) => {}
            }
        }
        Self {
            conv: convs,
            res,
            layers,
            core,
            norms,
            activation,
            placement,
            blocks: layout.blocks.clone(),
            parts: parts(&layout.blocks),
        }
    }

    /// Visits the blocks' parameters in block order, which is the flat
    /// layout's (the LayerNorms' are not among them).
    pub fn visit_blocks<V: ModuleVisitor<B>>(&self, v: &mut V) {
        for part in &self.parts {
            match *part {
                Part::Conv(k) => self.conv[k].visit(v),
                Part::Res(k) => self.res[k].visit(v),
                Part::Dense(k) => self.layers[k].visit(v),
                Part::Core(k) => self.core[k].visit(v),
                Part::Fixed => {}
            }
        }
    }

    /// Maps the blocks' parameters in [`Self::visit_blocks`]'s order.
    pub fn map_blocks<M: ModuleMapper<B>>(&mut self, f: &mut M) {
        for part in self.parts.clone() {
            match part {
                Part::Conv(k) => self.conv[k] = self.conv[k].clone().map(f),
                Part::Res(k) => self.res[k] = self.res[k].clone().map(f),
                Part::Dense(k) => self.layers[k] = self.layers[k].clone().map(f),
                Part::Core(k) => self.core[k] = self.core[k].clone().map(f),
                Part::Fixed => {}
            }
        }
    }

    fn act<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        match self.activation {
            Activation::Tanh => x.tanh(),
            Activation::Relu => activation::relu(x),
        }
    }

    /// A dense layer (the `k`-th), its LayerNorm and the activation.
    fn dense(&self, k: usize, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let x = self.layers[k].forward(x);
        match (self.placement, self.norms.get(k)) {
            (LayerNormPlacement::Pre, Some(n)) => self.act(n.forward(x)),
            (LayerNormPlacement::Post, Some(n)) => n.forward(self.act(x)),
            _ => self.act(x),
        }
    }

    /// One block (its parameters at `part`) on `flow`, the rows of `seq`.
    fn block(&self, b: &BlockAt, part: Part, flow: Flow<B>, seq: Option<&Sequence<B>>) -> Flow<B> {
        match (b, part) {
            (BlockAt::Conv(c), Part::Conv(k)) => {
                let y = self.conv[k].forward(flow.image());
                Flow::Image(if c.activate { self.act(y) } else { y })
            }
            (BlockAt::MaxPool(p), _) => Flow::Image(max_pool2d(
                flow.image(),
                [p.k, p.k],
                [p.stride, p.stride],
                [p.pad, p.pad],
                [1, 1],
                false,
            )),
            (BlockAt::Residual(_), Part::Res(k)) => {
                let (r, x) = (&self.res[k], flow.image());
                let h = r.conv0.forward(self.act(x.clone()));
                Flow::Image(x + r.conv1.forward(self.act(h)))
            }
            (BlockAt::Activate(_), _) => match flow {
                Flow::Rows(x) => Flow::Rows(self.act(x)),
                Flow::Image(y) => Flow::Image(self.act(y)),
            },
            (BlockAt::Dense(_), Part::Dense(k)) => Flow::Rows(self.dense(k, flow.rows())),
            (BlockAt::Recurrent(r), Part::Core(k)) => {
                Flow::Rows(self.core[k].forward(r, flow.rows(), seq))
            }
            _ => unreachable!("a torso's parts are counted from its blocks"),
        }
    }

    /// What the first block reads of rows `[N, obs_dim]`: NCHW images when
    /// it reads an image (the rows are channels last, as envs give them).
    fn entry(&self, x: Tensor<B, 2>) -> Flow<B> {
        let first = self.blocks.first().map(BlockAt::input);
        match first.and_then(|s| s.image()) {
            Some([h, w, c]) => {
                let n = x.dims()[0];
                Flow::Image(x.reshape([n, h, w, c]).permute([0, 3, 1, 2]))
            }
            None => Flow::Rows(x),
        }
    }

    /// Rows `[N, obs_dim]` (an image channels last, as envs give them)
    /// through every block: `[N, width]`, an image at the end flattened
    /// channels first. A recurrent core reads them as `seq`'s env
    /// sequences, or each as an episode's first step without one.
    pub fn forward(&self, x: Tensor<B, 2>, seq: Option<&Sequence<B>>) -> Tensor<B, 2> {
        let mut flow = self.entry(x);
        for (b, &part) in self.blocks.iter().zip(&self.parts) {
            flow = self.block(b, part, flow, seq);
        }
        flow.rows()
    }

    /// [`Self::forward`] of rows its blocks read as rows up to a recurrent
    /// core (a core needs a dense layer before it), keeping each core's
    /// state after every row: `(offset in each env's state, [N, width])`.
    pub fn forward_keeping(
        &self,
        x: Tensor<B, 2>,
        seq: Option<&Sequence<B>>,
    ) -> (Tensor<B, 2>, Vec<(usize, Tensor<B, 2>)>) {
        let mut flow = self.entry(x);
        let mut states = Vec::new();
        for (b, &part) in self.blocks.iter().zip(&self.parts) {
            flow = match (b, part) {
                (BlockAt::Recurrent(r), Part::Core(k)) => {
                    let (h, s) = self.core[k].forward_keeping(r, flow.rows(), seq);
                    states.push((r.state_at, s));
                    Flow::Rows(h)
                }
                _ => self.block(b, part, flow, seq),
            };
        }
        (flow.rows(), states)
    }
}
