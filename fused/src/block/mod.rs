//! The seam a block type plugs into. [`BlockAt`] is one block of a torso
//! placed (its shapes and its parameters' offsets), and [`Pass`] what every
//! block does for the fused engine: its shapes, its parameter tensors' names
//! and orders, its forward and its backward pass. The layout, both passes
//! and the published file's tensors go through [`BlockAt::pass`] alone, so
//! a new block type is its [`Block`] in `arch`, its variant and placing
//! here, a file of its own implementing [`Pass`], and its burn module
//! (`sebulba_core::model::torso`).

mod activate;
mod conv;
mod dense;
mod max_pool;
mod recurrent;
mod residual;

pub use activate::Activate;
pub use conv::ConvBlock;
pub use dense::DenseBlock;
pub(crate) use dense::{bias_grad, dense_backward, dense_forward};
pub use recurrent::RecurrentBlock;
pub use residual::Residual;

use crate::arch::{Activation, Arch, Block, BlockError, Shape};
use crate::conv::Scratch;
use crate::param_tensor::ParamTensor;
use crate::places::Places;
use crate::pool::Pool;
use crate::sparse_input::SparseRows;

/// One block placed: its parameters' offsets and its shapes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BlockAt {
    Conv(ConvBlock),
    MaxPool(Pool),
    Residual(Residual),
    Activate(Activate),
    Dense(DenseBlock),
    Recurrent(RecurrentBlock),
}

impl BlockAt {
    /// What the block does: the one dispatch over block types.
    pub(crate) fn pass(&self) -> &dyn Pass {
        match self {
            BlockAt::Conv(b) => b,
            BlockAt::MaxPool(b) => b,
            BlockAt::Residual(b) => b,
            BlockAt::Activate(b) => b,
            BlockAt::Dense(b) => b,
            BlockAt::Recurrent(b) => b,
        }
    }

    /// What it reads per sample.
    pub fn input(&self) -> Shape {
        self.pass().input()
    }

    /// Multiply-adds of its forward pass per sample.
    pub fn macs(&self) -> usize {
        self.pass().macs()
    }

    /// What it writes per sample.
    pub fn output(&self) -> Shape {
        self.pass().output()
    }

    /// Floats per sample it reads.
    pub fn in_len(&self) -> usize {
        self.input().len()
    }

    /// Floats per sample it writes.
    pub fn out_len(&self) -> usize {
        self.output().len()
    }

    /// Floats per sample it keeps besides its output for the way back.
    pub fn inner_len(&self) -> usize {
        self.pass().inner_len()
    }

    /// Floats per env it carries from step to step.
    pub fn state_width(&self) -> usize {
        self.pass().state_width()
    }
}

/// `b` reading `input`, its parameters placed next and its state (when it
/// keeps one) at `state` floats into each env's; refused when it does not
/// fit its input.
fn place(b: &Block, input: Shape, places: &mut Places, state: usize) -> Result<BlockAt, String> {
    Ok(match *b {
        Block::Conv { layer, activate } => {
            BlockAt::Conv(ConvBlock::place(layer, activate, input, places)?)
        }
        Block::MaxPool {
            kernel,
            stride,
            padding,
        } => BlockAt::MaxPool(max_pool::place(kernel, stride, padding, input)?),
        Block::Residual => BlockAt::Residual(Residual::place(input, places)?),
        Block::Activate => BlockAt::Activate(Activate(input)),
        Block::Dense { width } => BlockAt::Dense(DenseBlock::place(width, input, places)?),
        Block::Recurrent(core) => {
            BlockAt::Recurrent(RecurrentBlock::place(core, input, places, state)?)
        }
    })
}

/// What an image block reads, or why a flat input will not do.
fn image(input: Shape) -> Result<[usize; 3], String> {
    input.image().ok_or_else(|| {
        format!(
            "needs an image observation (H, W, C); its input is a flat vector of {}",
            input.len()
        )
    })
}

/// A torso: its blocks in order, and the shape it hands the heads.
#[derive(Clone, Debug, PartialEq)]
pub struct Torso {
    pub blocks: Vec<BlockAt>,
    pub output: Shape,
}

impl Torso {
    /// `arch`'s torso placed from `places` on, input side first, its
    /// blocks' states from `state` floats into each env's on (moved past
    /// them); refused when an image block has no image to read, or a block
    /// does not fit its input.
    pub(crate) fn place(
        arch: &Arch,
        places: &mut Places,
        state: &mut usize,
    ) -> Result<Self, BlockError> {
        if let Some([h, w, c]) = arch.image
            && h * w * c != arch.obs_dim
        {
            return Err(BlockError {
                block: 0,
                reason: format!(
                    "the image {h}x{w}x{c} does not hold the {} observation values",
                    arch.obs_dim
                ),
            });
        }
        let mut output = arch.input();
        let mut blocks = Vec::with_capacity(arch.torso.len());
        for (i, b) in arch.torso.iter().enumerate() {
            let placed = place(b, output, places, *state).map_err(|e| BlockError {
                block: i,
                reason: format!("block {i} ({}): {e}", b.name()),
            })?;
            *state += placed.state_width();
            output = placed.output();
            blocks.push(placed);
        }
        Ok(Self { blocks, output })
    }

    /// Floats per sample of its output (the heads' input).
    pub fn width(&self) -> usize {
        self.output.len()
    }

    /// Floats per env its blocks carry from step to step.
    pub fn state_width(&self) -> usize {
        self.blocks.iter().map(BlockAt::state_width).sum()
    }

    /// Multiply-adds of its forward pass per sample.
    pub fn macs(&self) -> usize {
        self.blocks.iter().map(BlockAt::macs).sum()
    }

    /// Whether its first block is a dense layer reading the observations
    /// (which may then be read as their nonzero entries).
    pub fn reads_flat_input(&self) -> bool {
        matches!(self.blocks.first(), Some(BlockAt::Dense(_)))
    }
}

/// What a block reads: rows of floats, or (a first dense layer only) the
/// nonzero entries of each.
#[derive(Clone, Copy)]
pub(crate) enum Input<'a> {
    Dense(&'a [f32]),
    Sparse(&'a SparseRows),
}

impl<'a> Input<'a> {
    /// The rows; only a first dense layer is handed nonzero entries.
    pub(crate) fn rows(self) -> &'a [f32] {
        match self {
            Input::Dense(x) => x,
            Input::Sparse(_) => unreachable!("only a first dense layer reads sparse rows"),
        }
    }
}

/// The rows of a pass as env sequences: `m / envs` steps of `envs` envs,
/// time-major (row `t * envs + e`), each row reading and moving on one
/// lane's state: its env's, or in a game its mover's ([`crate::Seats`]).
/// What a block with memory reads besides its input; the others ignore it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seq<'a> {
    pub envs: usize,
    /// `[m]`: nonzero where an env's episode starts at that row (its state
    /// zeroed first); empty: none does.
    pub starts: &'a [u8],
    /// `[lanes * width]`: each lane's state before the first row.
    pub state: &'a [f32],
    /// Floats of each lane's state (every block's, both torsos').
    pub width: usize,
    /// `[m]`: each row's lane and what it reads, for a game's sequence;
    /// empty: row `t * envs + e` is lane `e`'s, after row `(t - 1) * envs + e`.
    pub lanes: &'a [u32],
    pub before: &'a [Before],
}

/// The state a row's step reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Before {
    /// Zero: its episode (its game) started since its lane's last row.
    Zero,
    /// Its lane's state before the first row (lane `l` of the sequence's).
    State(usize),
    /// The state its lane's previous row left (that row's output).
    Row(usize),
}

impl Seq<'_> {
    /// Whether an episode starts at row `row`.
    pub fn starts_at(&self, row: usize) -> bool {
        self.starts.get(row).is_some_and(|&s| s != 0)
    }

    /// What row `row` reads.
    pub fn before(&self, row: usize) -> Before {
        match self.before.get(row) {
            Some(&b) => b,
            None if self.starts_at(row) => Before::Zero,
            None if row < self.envs => Before::State(row),
            None => Before::Row(row - self.envs),
        }
    }

    /// The lane row `row` moves on.
    pub fn lane(&self, row: usize) -> usize {
        self.lanes
            .get(row)
            .map_or(row % self.envs.max(1), |&l| l as usize)
    }

    /// How many lanes the rows move on.
    pub fn lanes(&self) -> usize {
        match self.lanes.is_empty() {
            true => self.envs,
            false => self.state.len() / self.width.max(1),
        }
    }
}

/// Each row's lane and what it reads (`lanes`, `before`, both `[steps *
/// envs]`), for a game's rows `movers` of `players` seats: a row reads its
/// lane's previous row's output, or its lane's state before the first row,
/// or zero once a start (`starts`) since then began a new game for every
/// seat of its env.
pub(crate) fn seat_lanes(
    envs: usize,
    (players, movers): (usize, &[u8]),
    starts: &[u8],
    (lanes, before): (&mut Vec<u32>, &mut Vec<Before>),
) {
    let mut last: Vec<Before> = (0..envs * players).map(Before::State).collect();
    lanes.clear();
    before.clear();
    for (row, &seat) in movers.iter().enumerate() {
        let (e, seat) = (row % envs, seat as usize);
        if starts.get(row).is_some_and(|&s| s != 0) {
            last[e * players..(e + 1) * players].fill(Before::Zero);
        }
        assert!(seat < players, "row {row}: seat {seat} of {players}");
        let lane = e * players + seat;
        lanes.push(lane as u32);
        before.push(last[lane]);
        last[lane] = Before::Row(row);
    }
}

/// Where a block's forward pass writes, for `m` rows.
pub(crate) struct Forward<'a> {
    pub m: usize,
    pub act: Activation,
    pub seq: Seq<'a>,
    /// `[m, out_len]` its output.
    pub out: &'a mut [f32],
    /// `[m, inner_len]` what it keeps besides for the way back.
    pub inner: &'a mut [f32],
    /// The convolutions' windows, a chunk at a time.
    pub scratch: &'a mut Scratch,
}

/// What a block's backward pass reads, for `m` rows.
pub(crate) struct Backward<'a> {
    pub m: usize,
    pub act: Activation,
    pub seq: Seq<'a>,
    /// Its input in the forward pass.
    pub input: Input<'a>,
    /// Its output in the forward pass.
    pub y: &'a [f32],
    /// What it kept besides ([`Forward::inner`]).
    pub inner: &'a [f32],
    /// Whether its input's gradient is wanted (not for the observations).
    pub wanted: bool,
}

/// The buffers the way back through a torso turns over, each at least the
/// widest activation's `m` rows.
pub(crate) struct Bufs<'a> {
    /// The gradient at the block's output; on return, when wanted, the
    /// gradient at its input.
    pub dh: &'a mut Vec<f32>,
    pub spare: &'a mut Vec<f32>,
    /// A second scratch, of the largest [`Pass::scratch_len`].
    pub extra: &'a mut Vec<f32>,
    pub conv: &'a mut Scratch,
}

/// What every block type does for the fused engine.
pub(crate) trait Pass {
    /// What it reads per sample.
    fn input(&self) -> Shape;
    /// What it writes per sample.
    fn output(&self) -> Shape;
    /// Multiply-adds of its forward pass per sample (its matrix products;
    /// the element-wise work is not counted).
    fn macs(&self) -> usize {
        0
    }
    /// Floats per sample it keeps besides its output for the way back.
    fn inner_len(&self) -> usize {
        0
    }
    /// Floats per sample its backward pass turns over in [`Bufs::extra`].
    fn scratch_len(&self) -> usize {
        0
    }
    /// Floats per env it carries from step to step.
    fn state_width(&self) -> usize {
        0
    }
    /// Writes the state after each of `rows` (of the `m` rows of a forward
    /// pass, whose output is `y` and inner activations `inner`) into `out`
    /// (`[rows.len() * width]`, its own floats only).
    fn state_after(
        &self,
        _pass: (usize, &[f32], &[f32]),
        _rows: &[usize],
        _width: usize,
        _out: &mut [f32],
    ) {
    }
    /// The group its tensors are counted in by burn's module and the file
    /// (`conv`, `res`, `layers`, `core`); `None`: it has no parameters.
    fn group(&self) -> Option<&'static str> {
        None
    }
    /// Its parameter tensors, named under `name` (`actor.conv.0`), in
    /// layout order.
    fn tensors(&self, _name: &str, _out: &mut Vec<ParamTensor>) {}
    /// Its output for `x` into `f.out` (and `f.inner`).
    fn forward(&self, p: &[f32], x: Input<'_>, f: Forward<'_>);
    /// Its parameters' gradients into `g` (written) from the gradient at its
    /// output in `bufs.dh`, which becomes its input's when `b.wanted`.
    fn backward(&self, p: &[f32], g: &mut [f32], b: Backward<'_>, bufs: &mut Bufs<'_>);
}
