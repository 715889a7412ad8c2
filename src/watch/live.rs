//! `sebulba watch --live`: the first episode drawn in the terminal as it is
//! played, each character two pixels stacked (`▀` in the upper one's
//! colour over the lower one's), in 24-bit colour, at most 80 columns wide:
//! a MinAtar grid cell is a block of characters, a classic-control scene a
//! coarse picture.

use sebulba_envs::render::Frame;
use sebulba_evaluator::video::Film;
use std::fmt::Write as _;
use std::io::Write;
use std::time::{Duration, Instant};

/// The widest picture drawn, in characters.
const COLUMNS: u32 = 80;

pub struct Live<W: Write> {
    out: W,
    /// Time each frame stays up.
    pace: Duration,
    shown: Option<Instant>,
    frames: u32,
    ended: Option<(f64, u32)>,
    done: bool,
}

impl<W: Write> Live<W> {
    pub fn new(out: W, fps: u32) -> Self {
        Self {
            out,
            pace: Duration::from_secs_f64(1.0 / f64::from(fps.max(1))),
            shown: None,
            frames: 0,
            ended: None,
            done: false,
        }
    }

    /// The frames drawn and how the episode ended, if it did.
    pub fn summary(&self) -> (u32, Option<(f64, u32)>) {
        (self.frames, self.ended)
    }
}

/// `frame` as terminal text: from the top-left corner, one line per two
/// pixel rows, each pixel a block of `step` x `step` picture pixels read
/// at its top-left corner.
pub fn draw(frame: &Frame) -> String {
    let step = frame.width.div_ceil(COLUMNS).max(1);
    let (cols, rows) = (frame.width / step, frame.height / step);
    let mut text = String::from("\x1b[H");
    for row in (0..rows).step_by(2) {
        for col in 0..cols {
            let [r, g, b] = frame.pixel(col * step, row * step);
            let below = (row + 1 < rows).then(|| frame.pixel(col * step, (row + 1) * step));
            let [br, bg, bb] = below.unwrap_or([0, 0, 0]);
            let _ = write!(text, "\x1b[38;2;{r};{g};{b}m\x1b[48;2;{br};{bg};{bb}m▀");
        }
        text.push_str("\x1b[0m\n");
    }
    text
}

impl<W: Write> Film for Live<W> {
    fn filming(&self) -> bool {
        !self.done
    }

    fn frame(&mut self, frame: Option<Frame>) {
        let Some(f) = frame else {
            self.done = true;
            return;
        };
        if let Some(t) = self.shown {
            std::thread::sleep(self.pace.saturating_sub(t.elapsed()));
        } else {
            let _ = write!(self.out, "\x1b[2J");
        }
        let _ = self.out.write_all(draw(&f).as_bytes());
        let _ = self.out.flush();
        self.shown = Some(Instant::now());
        self.frames += 1;
    }

    fn ended(&mut self, episode_return: f64, length: u32) {
        self.ended = Some((episode_return, length));
    }

    fn stop(&mut self, _broken: Option<&str>) {
        self.done = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_pixel_rows_make_one_line_of_half_blocks() {
        // 2 x 3: red, green / blue, white / black, red.
        let rgb = vec![
            255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 255, 0, 0,
        ];
        let f = Frame {
            width: 2,
            height: 3,
            rgb,
        };
        let text = draw(&f);
        let lines: Vec<&str> = text.trim_start_matches("\x1b[H").lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            "\x1b[38;2;255;0;0m\x1b[48;2;0;0;255m▀\x1b[38;2;0;255;0m\x1b[48;2;255;255;255m▀\x1b[0m"
        );
        // The odd last row over black.
        assert!(
            lines[1].starts_with("\x1b[38;2;0;0;0m\x1b[48;2;0;0;0m▀"),
            "{:?}",
            lines[1]
        );
    }

    #[test]
    fn a_wide_picture_is_read_a_block_at_a_time_to_80_columns() {
        let f = Frame {
            width: 600,
            height: 400,
            rgb: vec![9; 600 * 400 * 3],
        };
        let text = draw(&f);
        let first = text
            .trim_start_matches("\x1b[H")
            .lines()
            .next()
            .unwrap_or("");
        assert_eq!(first.matches('▀').count(), 75);
        assert_eq!(text.lines().count(), 25);
    }
}
