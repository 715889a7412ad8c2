//! Pictures of an env's state, for videos of the agent (`eval.video_every`,
//! `sebulba watch --out`): a [`Frame`] of RGB pixels, drawn natively from
//! the state the env already holds, never from the observation the policy
//! reads (Atari's 84x84 gray input is not what a person wants to watch).
//!
//! `canvas` draws shapes (through tiny-skia), `classic` the classic-control
//! scenes, `grid` MinAtar's grids a colour per channel.

mod canvas;
pub mod classic;
pub mod grid;

pub use canvas::Canvas;

/// One picture: `height` rows of `width` RGB pixels, top row first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

impl Frame {
    /// The pixel at column `x`, row `y` (0 the top row).
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = 3 * (y as usize * self.width as usize + x as usize);
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }
}
