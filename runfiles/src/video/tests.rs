use super::*;

/// Frame k of a 5 x 3 video: a red column moving right over gray.
fn frame(k: usize) -> Vec<u8> {
    let mut rgb = vec![128u8; 5 * 3 * 3];
    for y in 0..3 {
        let i = 3 * (y * 5 + k % 5);
        rgb[i..i + 3].copy_from_slice(&[255, 0, 0]);
    }
    rgb
}

/// Each frame of a GIF as it is shown (RGBA): every frame drawn over the
/// picture before it at its place, by the `gif` crate's decoder.
fn decode(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut d = options.read_info(bytes).expect("a GIF");
    let (w, h) = (usize::from(d.width()), usize::from(d.height()));
    assert_eq!((w, h), (5, 3));
    let mut shown = vec![0u8; w * h * 4];
    let mut frames = Vec::new();
    while let Some(f) = d.read_next_frame().expect("a frame") {
        assert_eq!(f.dispose, gif::DisposalMethod::Keep);
        let (left, top, fw) = (
            usize::from(f.left),
            usize::from(f.top),
            usize::from(f.width),
        );
        for (k, row) in f.buffer.chunks_exact(4 * fw).enumerate() {
            let start = ((top + k) * w + left) * 4;
            shown[start..start + 4 * fw].copy_from_slice(row);
        }
        frames.push(shown.clone());
    }
    frames
}

#[test]
fn a_gif_holds_every_frame_with_its_exact_colours() {
    let mut g = Gif::new(Vec::new(), 5, 3, Path::new("mem.gif")).unwrap();
    for k in 0..7 {
        g.push(&frame(k)).unwrap();
    }
    let bytes = g.finish().unwrap();
    let frames = decode(&bytes);
    assert_eq!(frames.len(), 7);
    for (k, rgba) in frames.iter().enumerate() {
        let rgb: Vec<u8> = rgba
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect();
        assert_eq!(rgb, frame(k), "frame {k}");
    }
}

#[test]
fn a_frame_is_the_rectangle_that_changed() {
    let mut before = vec![9u8; 6 * 4 * 3];
    let after = {
        let mut a = before.clone();
        a[3 * (6 + 2)] = 1; // (x 2, y 1)
        a[3 * (2 * 6 + 4) + 2] = 1; // (x 4, y 2)
        a
    };
    assert_eq!(changed(&before, &after, 6, 4), Some((2, 1, 3, 2)));
    assert_eq!(changed(&before, &before, 6, 4), None);
    assert_eq!(crop(&after, 6, (2, 1, 3, 2)).len(), 3 * 2 * 3);
    before[0] = 0;
    assert_eq!(changed(&before, &after, 6, 4), Some((0, 0, 5, 3)));
}

#[test]
fn a_frame_of_many_colours_is_quantised_not_refused() {
    // 300 distinct colours: more than a GIF palette holds.
    let rgb: Vec<u8> = (0..300u32)
        .flat_map(|i| [(i % 256) as u8, (i / 256 * 100) as u8, 7])
        .collect();
    let mut g = Gif::new(Vec::new(), 20, 15, Path::new("mem.gif")).unwrap();
    g.push(&rgb).unwrap();
    let bytes = g.finish().unwrap();
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut d = options.read_info(&bytes[..]).unwrap();
    let f = d.read_next_frame().unwrap().unwrap();
    // Quantised (NeuQuant): close on average, though not every colour is.
    let errors: Vec<u32> = f
        .buffer
        .chunks_exact(4)
        .zip(rgb.chunks_exact(3))
        .flat_map(|(a, b)| (0..3).map(move |c| u32::from(a[c].abs_diff(b[c]))))
        .collect();
    let mean = f64::from(errors.iter().sum::<u32>()) / errors.len() as f64;
    assert!(mean < 8.0, "mean component error {mean}");
}

#[test]
fn a_frame_of_the_wrong_size_is_refused_naming_its_index() {
    let dir = std::env::temp_dir().join(format!("sebulba-video-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut w = VideoWriter::create(&dir.join("v.gif"), 5, 3).unwrap();
    w.push(&frame(0)).unwrap();
    let e = w.push(&[0; 10]).unwrap_err().to_string();
    assert!(e.contains("frame 1: 10 bytes"), "{e}");
    let v = w.finish().unwrap();
    assert_eq!((v.frames, v.format), (1, Format::Gif));
    assert_eq!(decode(&std::fs::read(&v.path).unwrap()).len(), 1);
    let e = VideoWriter::create(&dir.join("v.avi"), 5, 3).err().unwrap();
    assert!(e.to_string().contains("as .mp4 or .gif"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
