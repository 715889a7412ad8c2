//! MinAtar's grids as the `minatar` package's display shows them: each cell
//! the colour of its highest set channel in a cubehelix palette of one
//! colour per channel (seaborn's `color_palette("cubehelix", n)`), black
//! where no channel is set; a cell is `CELL` pixels square.

use super::Frame;

/// Pixels per grid cell: a 10 x 10 grid becomes 160 x 160.
pub const CELL: u32 = 16;

/// Green's cubehelix at `x` in [0, 1] with matplotlib's parameters (start
/// 0.5, rotations -1.5, hue 1, gamma 1), as `[0, 1]` RGB.
fn cubehelix(x: f64) -> [f64; 3] {
    let (start, rotations, hue) = (0.5, -1.5, 1.0);
    let phi = 2.0 * std::f64::consts::PI * (start / 3.0 + rotations * x);
    let amp = hue * x * (1.0 - x) / 2.0;
    let (s, c) = phi.sin_cos();
    [
        x + amp * (-0.14861 * c + 1.78277 * s),
        x + amp * (-0.29227 * c - 0.90649 * s),
        x + amp * (1.97294 * c),
    ]
    .map(|v| v.clamp(0.0, 1.0))
}

/// The display's palette for `channels` channels: black, then channel k's
/// colour. seaborn samples the colormap at `n` points strictly inside
/// [0, 1], and matplotlib's colormap is a 256-entry table, so each sample
/// is the table's entry at `floor(256 x)`.
pub fn palette(channels: usize) -> Vec<[u8; 3]> {
    let mut colours = vec![[0, 0, 0]];
    for k in 0..channels {
        let x = (k + 1) as f64 / (channels + 1) as f64;
        let entry = ((256.0 * x) as usize).min(255);
        let rgb = cubehelix(entry as f64 / 255.0);
        colours.push(rgb.map(|v| (v * 255.0).round() as u8));
    }
    colours
}

/// The picture of one observation: `size` x `size` cells of `channels`
/// values each (channels last, nonzero where set).
pub fn draw(obs: &[f32], size: usize, channels: usize) -> Frame {
    let colours = palette(channels);
    let side = size as u32 * CELL;
    let mut rgb = Vec::with_capacity((side * side * 3) as usize);
    for y in 0..size {
        let row: Vec<[u8; 3]> = (0..size)
            .map(|x| {
                let cell = &obs[(y * size + x) * channels..][..channels];
                let top = cell.iter().rposition(|&v| v != 0.0).map_or(0, |c| c + 1);
                colours[top]
            })
            .collect();
        for _ in 0..CELL {
            for colour in &row {
                for _ in 0..CELL {
                    rgb.extend_from_slice(colour);
                }
            }
        }
    }
    Frame {
        width: side,
        height: side,
        rgb,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// seaborn 0.13's `color_palette("cubehelix", n)` on matplotlib 3.10,
    /// each component times 255 rounded (computed there, not here).
    #[test]
    fn the_palette_is_seaborns_cubehelix_after_black() {
        let seaborn: [(usize, &[[u8; 3]]); 3] = [
            (
                4,
                &[
                    [22, 61, 78],
                    [84, 121, 47],
                    [208, 126, 147],
                    [193, 202, 243],
                ],
            ),
            (
                7,
                &[
                    [27, 30, 59],
                    [22, 83, 76],
                    [68, 119, 49],
                    [161, 121, 74],
                    [212, 132, 169],
                    [198, 180, 238],
                    [203, 232, 240],
                ],
            ),
            (
                10,
                &[
                    [25, 18, 43],
                    [23, 52, 76],
                    [24, 91, 72],
                    [60, 118, 50],
                    [126, 122, 54],
                    [188, 121, 103],
                    [212, 134, 175],
                    [202, 169, 231],
                    [194, 210, 243],
                    [214, 240, 239],
                ],
            ),
        ];
        for (n, expected) in seaborn {
            let p = palette(n);
            assert_eq!(p[0], [0, 0, 0]);
            for (k, (got, want)) in p[1..].iter().zip(expected).enumerate() {
                let close = got.iter().zip(want).all(|(a, b)| a.abs_diff(*b) <= 1);
                assert!(
                    close,
                    "{n} channels, channel {k}: {got:?} vs seaborn's {want:?}"
                );
            }
        }
    }

    #[test]
    fn a_cell_shows_its_highest_set_channel_and_empty_cells_are_black() {
        let (size, channels) = (2, 3);
        let mut obs = vec![0.0; size * size * channels];
        obs[channels] = 1.0; // (0, 1): channel 0
        obs[2 * channels + 1] = 1.0; // (1, 0): channels 1 and 2
        obs[2 * channels + 2] = 1.0;
        let f = draw(&obs, size, channels);
        let p = palette(channels);
        assert_eq!((f.width, f.height), (2 * CELL, 2 * CELL));
        assert_eq!(f.pixel(0, 0), [0, 0, 0]);
        assert_eq!(f.pixel(CELL + 3, CELL - 1), p[1]);
        assert_eq!(f.pixel(CELL - 1, CELL), p[3]);
        assert_eq!(f.pixel(2 * CELL - 1, 2 * CELL - 1), [0, 0, 0]);
    }
}
