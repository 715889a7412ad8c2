//! The PNG: return against env steps (left, with the legend) and against wall
//! time (right). Text uses DejaVu Sans from the `dejavu` crate, so drawing
//! needs no system fonts (a scratch container has none).

use super::Setting;
use super::curves::Band;
use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (1500, 600);
/// Distinct colours for up to ten settings, then round again.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of setting `i` (tests look for its pixels).
pub fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

pub fn png(out: &Path, title: &str, settings: &[Setting]) -> anyhow::Result<()> {
    plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| anyhow!("the bundled DejaVu Sans font did not load"))?;
    let root = BitMapBackend::new(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, (FONT, 26))?;
    let (left, right) = root.split_horizontally(SIZE.0 / 2);
    panel(&left, "env steps", settings, |s| &s.steps, true)?;
    panel(&right, "wall time (s)", settings, |s| &s.wall, false)?;
    root.present()
        .map_err(|e| anyhow!("writing {}: {e}", out.display()))?;
    Ok(())
}

fn panel(
    area: &Area,
    x_desc: &str,
    settings: &[Setting],
    pick: impl Fn(&Setting) -> &Band,
    legend: bool,
) -> anyhow::Result<()> {
    let bands: Vec<&Band> = settings.iter().map(&pick).collect();
    let x_max = bands
        .iter()
        .flat_map(|b| b.xs.iter().copied())
        .fold(0.0, f64::max)
        .max(1e-9);
    let (lo, hi) = bands
        .iter()
        .flat_map(|b| b.lo.iter().chain(&b.hi).copied())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), y| {
            (l.min(y), h.max(y))
        });
    let pad = ((hi - lo) * 0.05).max(1.0);
    let mut chart = ChartBuilder::on(area)
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max * 1.02, (lo - pad)..(hi + pad))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("return")
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 18))
        .x_label_formatter(&|x| short(*x))
        .y_label_formatter(&|y| short(*y))
        .light_line_style(WHITE)
        .draw()?;
    for (i, band) in bands.iter().enumerate() {
        let c = color(i);
        if band.lo != band.hi {
            let upper = band.xs.iter().zip(&band.hi).map(|(x, y)| (*x, *y));
            let lower = band.xs.iter().zip(&band.lo).rev().map(|(x, y)| (*x, *y));
            let outline: Vec<(f64, f64)> = upper.chain(lower).collect();
            chart.draw_series(std::iter::once(Polygon::new(outline, c.mix(0.2).filled())))?;
        }
        let line: Vec<(f64, f64)> = band
            .xs
            .iter()
            .zip(&band.mean)
            .map(|(x, y)| (*x, *y))
            .collect();
        // Segment by segment: a thick polyline's joins are mitred, and a
        // noisy curve's sharp turns then shoot spikes across the chart.
        let segments = line
            .windows(2)
            .map(|w| PathElement::new(vec![w[0], w[1]], c.stroke_width(3)));
        let drawn = chart.draw_series(segments)?;
        if legend {
            drawn.label(&settings[i].label).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3))
            });
        }
    }
    if legend {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT, 15))
            .draw()?;
    }
    Ok(())
}

/// 150000 → "150k", 2500000 → "2.5M": axis labels that fit.
fn short(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        format!("{}M", trim(x / 1e6))
    } else if a >= 1e3 {
        format!("{}k", trim(x / 1e3))
    } else {
        trim(x)
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.1}");
    s.strip_suffix(".0").map_or(s.clone(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::short;

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(short(150_000.0), "150k");
        assert_eq!(short(2_500_000.0), "2.5M");
        assert_eq!(short(12.0), "12");
        assert_eq!(short(0.5), "0.5");
    }
}
