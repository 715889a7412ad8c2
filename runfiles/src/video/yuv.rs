//! RGB frames as the planar YUV 4:2:0 H.264 encodes (BT.601, limited
//! range, as ffmpeg's own conversion makes by default): converted here, on
//! the thread that feeds ffmpeg, because ffmpeg's conversion of an RGB
//! frame cost as much as its encoding (0.73 s of 1.75 s for 500 frames of
//! 600 x 400, measured 2026-12-07). Odd sides are padded to even by
//! repeating the last column or row.

/// The sides a frame of `width` x `height` is encoded at: even.
pub fn padded(width: u32, height: u32) -> (u32, u32) {
    (width + width % 2, height + height % 2)
}

/// Luma from RGB in [0, 255]: 16 + (65.738 R + 129.057 G + 25.064 B) / 256.
fn luma(r: i32, g: i32, b: i32) -> u8 {
    ((16 * 256 + 128 + 16829 * r / 256 + 33039 * g / 256 + 6416 * b / 256) / 256) as u8
}

/// Blue and red difference from RGB sums of 4 pixels (a 2 x 2 block).
fn chroma(r4: i32, g4: i32, b4: i32) -> (u8, u8) {
    // 128 + (-37.945 R - 74.494 G + 112.439 B) / 256, and
    // 128 + (112.439 R - 94.154 G - 18.285 B) / 256, over the block's mean.
    let cb = 128 * 1024 + 512 + (-9714 * r4 - 19070 * g4 + 28784 * b4) / 256;
    let cr = 128 * 1024 + 512 + (28784 * r4 - 24103 * g4 - 4681 * b4) / 256;
    (
        (cb / 1024).clamp(0, 255) as u8,
        (cr / 1024).clamp(0, 255) as u8,
    )
}

/// `rgb` (`height` rows of `width` pixels) into `out` as the Y plane, then
/// U, then V, at the padded size.
pub fn convert(rgb: &[u8], width: u32, height: u32, out: &mut Vec<u8>) {
    let (w, h) = (width as usize, height as usize);
    let (pw, ph) = padded(width, height);
    let (pw, ph) = (pw as usize, ph as usize);
    let px = |x: usize, y: usize| {
        let i = 3 * (y.min(h - 1) * w + x.min(w - 1));
        (
            i32::from(rgb[i]),
            i32::from(rgb[i + 1]),
            i32::from(rgb[i + 2]),
        )
    };
    out.clear();
    out.reserve(pw * ph * 3 / 2);
    for y in 0..ph {
        for x in 0..pw {
            let (r, g, b) = px(x, y);
            out.push(luma(r, g, b));
        }
    }
    let mut v = Vec::with_capacity(pw * ph / 4);
    for y in (0..ph).step_by(2) {
        for x in (0..pw).step_by(2) {
            let mut sum = (0, 0, 0);
            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                let (r, g, b) = px(x + dx, y + dy);
                sum = (sum.0 + r, sum.1 + g, sum.2 + b);
            }
            let (cb, cr) = chroma(sum.0, sum.1, sum.2);
            out.push(cb);
            v.push(cr);
        }
    }
    out.extend_from_slice(&v);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BT.601 limited range's values for the primaries, black and white
    /// (ITU-R BT.601 tables: red 82/90/240, green 145/54/34, blue
    /// 41/240/110, white 235/128/128, black 16/128/128), within 1.
    #[test]
    fn the_primaries_take_bt601s_values() {
        let cases = [
            ([255, 0, 0], [82, 90, 240]),
            ([0, 255, 0], [145, 54, 34]),
            ([0, 0, 255], [41, 240, 110]),
            ([255, 255, 255], [235, 128, 128]),
            ([0, 0, 0], [16, 128, 128]),
        ];
        for (rgb, yuv) in cases {
            let frame: Vec<u8> = rgb.repeat(4);
            let mut out = Vec::new();
            convert(&frame, 2, 2, &mut out);
            assert_eq!(out.len(), 6);
            let got = [out[0], out[4], out[5]];
            let close = got.iter().zip(yuv).all(|(a, b)| a.abs_diff(b) <= 1);
            assert!(close, "{rgb:?}: {got:?}, BT.601 says {yuv:?}");
            assert!(out[..4].iter().all(|&y| y == out[0]));
        }
    }

    #[test]
    fn odd_sides_are_padded_with_the_edge_and_chroma_is_a_blocks_mean() {
        // 3 x 1: white, black, white; padded to 4 x 2.
        let frame = [255, 255, 255, 0, 0, 0, 255, 255, 255];
        let mut out = Vec::new();
        convert(&frame, 3, 1, &mut out);
        assert_eq!(padded(3, 1), (4, 2));
        assert_eq!(out.len(), 4 * 2 + 2 + 2);
        assert_eq!(&out[..8], &[235, 16, 235, 235, 235, 16, 235, 235]);
        // Gray blocks: no colour.
        assert_eq!(&out[8..], &[128, 128, 128, 128]);
    }
}
