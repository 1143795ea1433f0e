//! A sweep's picture (`bench --plot FILE` with `--parameter-list` or `--parameter-scan`): each
//! configuration a point, its exact peak across and its throughput up, labelled with its
//! values; the Pareto front (no other configuration faster and smaller) filled and joined, a
//! configuration over a budget drawn red.

use crate::bench::sweep::SweepReport;
use crate::render::plot::{
    draw_axes, legend, write_picture, DrawResult, ImageFormat, Picture, PlotError, SizeUnit, FONT,
};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

const FRONT: RGBColor = RGBColor(31, 119, 180);
const OTHER: RGBColor = RGBColor(150, 150, 150);
const OVER: RGBColor = RGBColor(214, 39, 40);

/// Draws the sweep into `out` (SVG or PNG by its extension, checked by the caller).
pub fn draw_sweep(
    sweep: &SweepReport,
    out: &Path,
    format: ImageFormat,
    force: bool,
) -> Result<(), PlotError> {
    write_picture(&Sweep(sweep), (1000, 600), out, format, force)
}

struct Sweep<'a>(&'a SweepReport);

/// A configuration as drawn: its peak in the axis's unit, its throughput, label and kind.
struct Point {
    peak: f64,
    throughput: f64,
    label: String,
    front: bool,
    over: bool,
}

impl Picture for Sweep<'_> {
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        _vector: bool,
    ) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let s = self.0;
        let max_peak = s
            .configurations
            .iter()
            .filter_map(|c| c.row.as_ref().map(|r| r.peak.bytes))
            .max()
            .unwrap_or(1 << 20);
        let unit = SizeUnit::for_max(max_peak);
        let points: Vec<Point> = s
            .configurations
            .iter()
            .filter_map(|c| {
                let r = c.row.as_ref()?;
                Some(Point {
                    peak: r.peak.bytes as f64 / unit.bytes,
                    throughput: r.throughput_per_hour,
                    label: crate::outside::shown(&c.label).into_owned(),
                    front: c.on_front,
                    over: !c.over_budget.is_empty(),
                })
            })
            .collect();
        let x_max = points.iter().map(|p| p.peak).fold(0.0, f64::max) * 1.15 + 1e-9;
        let y_max = points.iter().map(|p| p.throughput).fold(0.0, f64::max) * 1.15 + 1e-9;
        let title = format!(
            "Throughput and peak of {} ({})",
            if s.parameters.is_empty() {
                "the configurations".to_string()
            } else {
                s.parameters.join(" and ")
            },
            if s.concurrency > 1 {
                format!("{} in flight", s.concurrency)
            } else {
                "one run at a time".into()
            }
        );
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 18))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        draw_axes(
            &mut chart,
            &format!("Peak ({})", unit.label),
            "Throughput (runs per hour)",
        )?;
        // The front, joined from the smallest peak to the largest.
        let mut front: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.front)
            .map(|p| (p.peak, p.throughput))
            .collect();
        front.sort_by(|a, b| a.0.total_cmp(&b.0));
        if front.len() > 1 {
            chart
                .draw_series(LineSeries::new(front, FRONT.stroke_width(2)))?
                .label("Pareto front: no other configuration faster and smaller")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], FRONT.stroke_width(2)));
        }
        // Labels placed in pixels, each moved down past those already placed that it would
        // cover (configurations of about the same peak and throughput).
        let mut placed: Vec<(i32, i32)> = Vec::new();
        for p in &points {
            let (px, py) = chart.backend_coord(&(p.peak, p.throughput));
            let width = 8 * p.label.chars().count() as i32;
            let mut dy = -16;
            while placed
                .iter()
                .any(|&(x, y)| (px - x).abs() < width && (py + dy - y).abs() < 15)
            {
                dy += 15;
            }
            placed.push((px, py + dy));
            let color = if p.over {
                OVER
            } else if p.front {
                FRONT
            } else {
                OTHER
            };
            let style = if p.front {
                color.filled()
            } else {
                color.stroke_width(2)
            };
            // The point, its label a little above and right of it (in pixels).
            let mark = EmptyElement::at((p.peak, p.throughput))
                + Circle::new((0, 0), 6, style)
                + Text::new(p.label.clone(), (9, dy), (FONT, 13).into_font());
            chart.draw_series(std::iter::once(mark))?;
        }
        if points.iter().any(|p| p.over) {
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
                .label("over a budget (--max-peak, --max-cgroup, --max-gpu)")
                .legend(|(x, y)| Circle::new((x + 9, y), 5, OVER.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    }
}
