//! A drawing surface in the scene's own orientation: y grows upwards, as in
//! the classic-control envs' physics, and the frame comes out top row first.

use super::Frame;
use tiny_skia::{FillRule, Paint, PathBuilder, Pixmap, Stroke, Transform};

/// An RGB canvas whose origin is its bottom-left corner.
pub struct Canvas {
    pixmap: Pixmap,
}

fn paint(rgb: [u8; 3]) -> Paint<'static> {
    let mut p = Paint::default();
    p.set_color_rgba8(rgb[0], rgb[1], rgb[2], 255);
    p.anti_alias = true;
    p
}

impl Canvas {
    /// A `width` x `height` canvas filled with `background`. Panics only on
    /// a zero or absurd size, which no env asks for.
    pub fn new(width: u32, height: u32, background: [u8; 3]) -> Self {
        let mut pixmap = Pixmap::new(width, height).expect("a canvas of a drawable size");
        let [r, g, b] = background;
        pixmap.fill(tiny_skia::Color::from_rgba8(r, g, b, 255));
        Self { pixmap }
    }

    fn flip(&self, y: f32) -> f32 {
        self.pixmap.height() as f32 - y
    }

    /// A path through `points` (y up), closed or not.
    fn path(&self, points: &[(f32, f32)], closed: bool) -> Option<tiny_skia::Path> {
        let mut pb = PathBuilder::new();
        for (i, &(x, y)) in points.iter().enumerate() {
            let y = self.flip(y);
            if i == 0 {
                pb.move_to(x, y)
            } else {
                pb.line_to(x, y)
            }
        }
        if closed {
            pb.close();
        }
        pb.finish()
    }

    fn fill(&mut self, path: Option<tiny_skia::Path>, rgb: [u8; 3]) {
        if let Some(path) = path {
            let (rule, at) = (FillRule::Winding, Transform::identity());
            self.pixmap.fill_path(&path, &paint(rgb), rule, at, None);
        }
    }

    /// A filled polygon through `points` (y up).
    pub fn polygon(&mut self, points: &[(f32, f32)], rgb: [u8; 3]) {
        let path = self.path(points, true);
        self.fill(path, rgb);
    }

    /// A filled disc.
    pub fn circle(&mut self, centre: (f32, f32), radius: f32, rgb: [u8; 3]) {
        let path = PathBuilder::from_circle(centre.0, self.flip(centre.1), radius);
        self.fill(path, rgb);
    }

    /// A polyline `width` pixels wide.
    pub fn line(&mut self, points: &[(f32, f32)], width: f32, rgb: [u8; 3]) {
        let stroke = Stroke {
            width,
            ..Stroke::default()
        };
        if let Some(path) = self.path(points, false) {
            let at = Transform::identity();
            self.pixmap
                .stroke_path(&path, &paint(rgb), &stroke, at, None);
        }
    }

    /// A rectangle `length` long and `width` wide from `from` along `angle`
    /// (radians from the x axis): a link, a rod, a pole.
    pub fn bar(&mut self, from: (f32, f32), angle: f32, length: f32, width: f32, rgb: [u8; 3]) {
        let (s, c) = angle.sin_cos();
        let (hx, hy) = (-s * width / 2.0, c * width / 2.0);
        let to = (from.0 + c * length, from.1 + s * length);
        let corners = [
            (from.0 + hx, from.1 + hy),
            (to.0 + hx, to.1 + hy),
            (to.0 - hx, to.1 - hy),
            (from.0 - hx, from.1 - hy),
        ];
        self.polygon(&corners, rgb);
    }

    /// The picture, top row first. Every pixel is opaque, so tiny-skia's
    /// premultiplied RGBA is the colour itself.
    pub fn frame(&self) -> Frame {
        let data = self.pixmap.data();
        let mut rgb = Vec::with_capacity(data.len() / 4 * 3);
        for p in data.chunks_exact(4) {
            rgb.extend_from_slice(&p[..3]);
        }
        Frame {
            width: self.pixmap.width(),
            height: self.pixmap.height(),
            rgb,
        }
    }
}
