//! PNG figures: line plots with shaded error bands (learning curves, loss curves) and
//! heatmaps of a scalar over a 2-D grid with masked cells and overlaid paths (a value
//! function over a maze).
//!
//! Text is drawn with a font compiled into the binary (DejaVu Sans), so figures render
//! the same on a machine without any system fonts. Images are rendered into memory and
//! encoded here; [`save`] writes them atomically.

use anyhow::{anyhow, bail, Result};
use plotters::backend::RGBPixel;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;

/// Where a line plot's legend goes.
pub use plotters::chart::SeriesLabelPosition;
use std::path::Path;
use std::sync::OnceLock;

/// The family name under which the embedded font is registered; plotters' default
/// text style asks for it.
const FAMILY: &str = "sans-serif";

/// Distinct series colours (matplotlib's "tab10" order).
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Colour of masked heatmap cells (walls).
const MASK: RGBColor = RGBColor(90, 90, 90);

const MIN_SIZE: (u32, u32) = (200, 150);
const MAX_SIDE: u32 = 8000;

/// The colour of series `i` in line plots.
pub fn series_color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn register_fonts() -> Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let fonts = [
            (FontStyle::Normal, dejavu::sans::regular()),
            (FontStyle::Bold, dejavu::sans::bold()),
        ];
        for (style, bytes) in fonts {
            plotters::style::register_font(FAMILY, style, bytes)
                .map_err(|_| "the embedded font could not be parsed".to_string())?;
        }
        Ok(())
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

fn check_size((w, h): (u32, u32)) -> Result<()> {
    if w < MIN_SIZE.0 || h < MIN_SIZE.1 || w > MAX_SIDE || h > MAX_SIDE {
        bail!(
            "image size {w}x{h} is outside {}x{} .. {MAX_SIDE}x{MAX_SIDE}",
            MIN_SIZE.0,
            MIN_SIZE.1
        );
    }
    Ok(())
}

/// Renders with `draw` onto a white `size` canvas and returns the PNG bytes.
fn render(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_, RGBPixel>, Shift>) -> Result<()>,
) -> Result<Vec<u8>> {
    check_size(size)?;
    register_fonts()?;
    let mut rgb = vec![255u8; size.0 as usize * size.1 as usize * 3];
    {
        let backend = BitMapBackend::<RGBPixel>::with_buffer_and_format(&mut rgb, size)
            .map_err(|e| anyhow!("bitmap backend: {e}"))?;
        let root = backend.into_drawing_area();
        draw(&root)?;
        root.present().map_err(|e| anyhow!("drawing failed: {e}"))?;
    }
    encode_png(&rgb, size)
}

/// Encodes 8-bit RGB pixels as PNG.
pub fn encode_png(rgb: &[u8], (w, h): (u32, u32)) -> Result<Vec<u8>> {
    if rgb.len() != w as usize * h as usize * 3 {
        bail!("{} bytes are not a {w}x{h} RGB image", rgb.len());
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header()?;
        writer.write_image_data(rgb)?;
        writer.finish()?;
    }
    Ok(out)
}

/// Writes PNG bytes (or any file) atomically.
pub fn save(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::util::io::write_atomic(path, bytes)
}

/// A tick label with as many decimals as an axis spanning `span` needs (about ten
/// ticks): "20000" rather than "20000.0", "0.25" rather than "0.2".
fn tick(v: f64, span: f64) -> String {
    let step = (span.abs() / 10.0).max(f64::MIN_POSITIVE);
    let decimals = (-step.log10().floor()).clamp(0.0, 6.0) as usize;
    format!("{v:.decimals$}")
}

/// Converts a plotters error (generic over the backend) into a message.
fn de<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e}")
}

/// One curve: `y` against `x`, with an optional symmetric band `y ± err`.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub label: String,
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub err: Option<Vec<f64>>,
}

impl Series {
    pub fn new(label: impl Into<String>, x: Vec<f64>, y: Vec<f64>) -> Self {
        Series {
            label: label.into(),
            x,
            y,
            err: None,
        }
    }

    pub fn with_err(mut self, err: Vec<f64>) -> Self {
        self.err = Some(err);
        self
    }

    fn check(&self) -> Result<()> {
        if self.x.is_empty() || self.x.len() != self.y.len() {
            bail!(
                "series `{}` has {} x and {} y values",
                self.label,
                self.x.len(),
                self.y.len()
            );
        }
        if let Some(e) = &self.err {
            if e.len() != self.y.len() {
                bail!("series `{}` has {} error values", self.label, e.len());
            }
            if e.iter().any(|v| !v.is_finite() || *v < 0.0) {
                bail!("series `{}` has a negative or non-finite error", self.label);
            }
        }
        if self.x.iter().chain(&self.y).any(|v| !v.is_finite()) {
            bail!("series `{}` has a non-finite value", self.label);
        }
        Ok(())
    }

    fn bounds(&self) -> (f64, f64) {
        let e = |i: usize| self.err.as_ref().map(|e| e[i]).unwrap_or(0.0);
        let lo = (0..self.y.len())
            .map(|i| self.y[i] - e(i))
            .fold(f64::INFINITY, f64::min);
        let hi = (0..self.y.len())
            .map(|i| self.y[i] + e(i))
            .fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    }
}

/// A line plot of one or more series.
#[derive(Clone, Debug)]
pub struct LinePlot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Fixed vertical range; `None`: the data's range with a margin.
    pub y_range: Option<(f64, f64)>,
    /// Logarithmic vertical axis (all values and bands must be positive).
    pub log_y: bool,
    /// Corner of the legend.
    pub legend: SeriesLabelPosition,
    /// Image size in pixels.
    pub size: (u32, u32),
}

impl LinePlot {
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        LinePlot {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: vec![],
            y_range: None,
            log_y: false,
            legend: SeriesLabelPosition::UpperRight,
            size: (800, 500),
        }
    }

    pub fn series(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }

    /// The PNG bytes.
    pub fn to_png(&self) -> Result<Vec<u8>> {
        if self.series.is_empty() {
            bail!("a line plot needs at least one series");
        }
        for s in &self.series {
            s.check()?;
        }
        let (mut xlo, mut xhi) = (f64::INFINITY, f64::NEG_INFINITY);
        let (mut ylo, mut yhi) = (f64::INFINITY, f64::NEG_INFINITY);
        for s in &self.series {
            for &x in &s.x {
                xlo = xlo.min(x);
                xhi = xhi.max(x);
            }
            let (lo, hi) = s.bounds();
            ylo = ylo.min(lo);
            yhi = yhi.max(hi);
        }
        if xhi <= xlo {
            xhi = xlo + 1.0;
        }
        let (ylo, yhi) = match self.y_range {
            Some((lo, hi)) if lo.is_finite() && hi.is_finite() && hi > lo => (lo, hi),
            Some(r) => bail!("invalid vertical range {r:?}"),
            None if self.log_y => {
                if ylo <= 0.0 {
                    bail!("a logarithmic axis needs positive values (and bands)");
                }
                (ylo / 1.2, yhi * 1.2)
            }
            None => {
                let pad = if yhi > ylo { 0.05 * (yhi - ylo) } else { 0.5 };
                (ylo - pad, yhi + pad)
            }
        };
        if self.log_y && ylo <= 0.0 {
            bail!("a logarithmic axis needs a positive range");
        }
        render(self.size, |root| {
            root.fill(&WHITE).map_err(de)?;
            let mut builder = ChartBuilder::on(root);
            builder
                .caption(&self.title, (FAMILY, 24))
                .margin(15)
                .x_label_area_size(45)
                .y_label_area_size(65);
            if self.log_y {
                let mut chart = builder
                    .build_cartesian_2d(xlo..xhi, (ylo..yhi).log_scale())
                    .map_err(de)?;
                chart
                    .configure_mesh()
                    .x_desc(&self.x_label)
                    .y_desc(&self.y_label)
                    .x_label_formatter(&|v| tick(*v, xhi - xlo))
                    .label_style((FAMILY, 14))
                    .axis_desc_style((FAMILY, 16))
                    .draw()
                    .map_err(de)?;
                draw_series(&mut chart, &self.series, self.legend.clone())
            } else {
                let mut chart = builder.build_cartesian_2d(xlo..xhi, ylo..yhi).map_err(de)?;
                chart
                    .configure_mesh()
                    .x_desc(&self.x_label)
                    .y_desc(&self.y_label)
                    .x_label_formatter(&|v| tick(*v, xhi - xlo))
                    .y_label_formatter(&|v| tick(*v, yhi - ylo))
                    .label_style((FAMILY, 14))
                    .axis_desc_style((FAMILY, 16))
                    .draw()
                    .map_err(de)?;
                draw_series(&mut chart, &self.series, self.legend.clone())
            }
        })
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        save(path, &self.to_png()?)
    }
}

fn draw_series<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &[Series],
    legend: SeriesLabelPosition,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    // Bands first, so that no band covers another series' line.
    for (i, s) in series.iter().enumerate() {
        if let Some(err) = &s.err {
            let upper = s.x.iter().zip(&s.y).zip(err).map(|((x, y), e)| (*x, y + e));
            let lower = s.x.iter().zip(&s.y).zip(err).map(|((x, y), e)| (*x, y - e));
            let mut poly: Vec<(f64, f64)> = upper.collect();
            poly.extend(lower.rev());
            chart
                .draw_series(std::iter::once(Polygon::new(
                    poly,
                    series_color(i).mix(0.2).filled(),
                )))
                .map_err(de)?;
        }
    }
    for (i, s) in series.iter().enumerate() {
        let color = series_color(i);
        chart
            .draw_series(LineSeries::new(
                s.x.iter().copied().zip(s.y.iter().copied()),
                color.stroke_width(2),
            ))
            .map_err(de)?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(legend)
        .draw()
        .map_err(de)?;
    Ok(())
}

/// A scalar over a regular 2-D grid, with masked cells and overlaid paths.
///
/// Cell `(i, j)` is `values[i * cols + j]`: column `j` spans the horizontal range from
/// left to right, row `i` the vertical range from `y_range.0` to `y_range.1`, drawn
/// upwards, or downwards (row 0 at the top, as in a matrix or a maze layout) with
/// `y_down`.
#[derive(Clone, Debug)]
pub struct Heatmap {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub colorbar_label: String,
    pub rows: usize,
    pub cols: usize,
    /// Row-major values; `None` is a masked cell (drawn grey).
    pub values: Vec<Option<f64>>,
    pub x_range: (f64, f64),
    pub y_range: (f64, f64),
    pub y_down: bool,
    /// Polylines in data coordinates `(horizontal, vertical)`, drawn over the map.
    pub paths: Vec<Vec<(f64, f64)>>,
    /// Points drawn as labelled markers (e.g. a target).
    pub markers: Vec<((f64, f64), String)>,
    pub size: (u32, u32),
}

impl Heatmap {
    pub fn new(rows: usize, cols: usize, values: Vec<Option<f64>>) -> Self {
        Heatmap {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            colorbar_label: String::new(),
            rows,
            cols,
            values,
            x_range: (0.0, cols as f64),
            y_range: (0.0, rows as f64),
            y_down: false,
            paths: vec![],
            markers: vec![],
            size: (700, 600),
        }
    }

    /// The PNG bytes.
    pub fn to_png(&self) -> Result<Vec<u8>> {
        if self.rows == 0 || self.cols == 0 || self.values.len() != self.rows * self.cols {
            bail!(
                "a {}x{} heatmap needs {} values, got {}",
                self.rows,
                self.cols,
                self.rows * self.cols,
                self.values.len()
            );
        }
        let (x0, x1) = self.x_range;
        let (y0, y1) = self.y_range;
        if !(x0.is_finite() && x1.is_finite() && y0.is_finite() && y1.is_finite())
            || x1 <= x0
            || y1 <= y0
        {
            bail!("heatmap ranges must be finite and increasing");
        }
        if self
            .paths
            .iter()
            .flatten()
            .chain(self.markers.iter().map(|(p, _)| p))
            .any(|(a, b)| !a.is_finite() || !b.is_finite())
        {
            bail!("a heatmap path or marker has a non-finite point");
        }
        let finite = self.values.iter().flatten().filter(|v| v.is_finite());
        let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
        if !lo.is_finite() {
            bail!("a heatmap needs at least one finite value");
        }
        let hi = if hi > lo { hi } else { lo + 1.0 };
        // With `y_down`, a data value v is drawn at y0 + y1 - v and the axis labels undo
        // the flip, so the chart itself always has an increasing range.
        let flip = |v: f64| if self.y_down { y0 + y1 - v } else { v };
        let (dx, dy) = ((x1 - x0) / self.cols as f64, (y1 - y0) / self.rows as f64);
        render(self.size, |root| {
            root.fill(&WHITE).map_err(de)?;
            let (main, bar) = root.split_horizontally(self.size.0.saturating_sub(110));
            let mut chart = ChartBuilder::on(&main)
                .caption(&self.title, (FAMILY, 22))
                .margin(15)
                .x_label_area_size(45)
                .y_label_area_size(55)
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(de)?;
            chart
                .configure_mesh()
                .disable_mesh()
                .x_desc(&self.x_label)
                .y_desc(&self.y_label)
                .y_label_formatter(&|v| tick(flip(*v), y1 - y0))
                .x_label_formatter(&|v| tick(*v, x1 - x0))
                .label_style((FAMILY, 14))
                .axis_desc_style((FAMILY, 16))
                .draw()
                .map_err(de)?;
            let cells = (0..self.rows).flat_map(|i| (0..self.cols).map(move |j| (i, j)));
            chart
                .draw_series(cells.map(|(i, j)| {
                    let color = match self.values[i * self.cols + j] {
                        Some(v) if v.is_finite() => ViridisRGB.get_color_normalized(v, lo, hi),
                        _ => MASK,
                    };
                    let (ya, yb) = (flip(y0 + i as f64 * dy), flip(y0 + (i + 1) as f64 * dy));
                    let (xa, xb) = (x0 + j as f64 * dx, x0 + (j + 1) as f64 * dx);
                    Rectangle::new([(xa, ya), (xb, yb)], color.filled())
                }))
                .map_err(de)?;
            for (k, path) in self.paths.iter().enumerate() {
                let pts: Vec<(f64, f64)> = path.iter().map(|&(a, b)| (a, flip(b))).collect();
                let color = series_color(k + 3);
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        pts.clone(),
                        WHITE.stroke_width(4),
                    )))
                    .map_err(de)?;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        pts.clone(),
                        color.stroke_width(2),
                    )))
                    .map_err(de)?;
                if let Some(&start) = pts.first() {
                    chart
                        .draw_series(std::iter::once(Circle::new(start, 4, color.filled())))
                        .map_err(de)?;
                }
            }
            for ((a, b), label) in &self.markers {
                let p = (*a, flip(*b));
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at(p)
                            + Cross::new((0, 0), 7, RED.stroke_width(3))
                            + Text::new(label.clone(), (8, -18), (FAMILY, 16).into_font()),
                    ))
                    .map_err(de)?;
            }
            draw_colorbar(&bar, lo, hi, &self.colorbar_label)
        })
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        save(path, &self.to_png()?)
    }
}

fn draw_colorbar<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lo: f64,
    hi: f64,
    label: &str,
) -> Result<()> {
    let mut chart = ChartBuilder::on(area)
        .margin_top(50)
        .margin_bottom(60)
        .margin_right(10)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..1.0, lo..hi)
        .map_err(de)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_desc(label)
        .y_label_formatter(&|v| tick(*v, hi - lo))
        .label_style((FAMILY, 12))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(de)?;
    let steps = 100;
    let h = (hi - lo) / steps as f64;
    chart
        .draw_series((0..steps).map(|k| {
            let v = lo + (k as f64 + 0.5) * h;
            Rectangle::new(
                [(0.0, lo + k as f64 * h), (1.0, lo + (k + 1) as f64 * h)],
                ViridisRGB.get_color_normalized(v, lo, hi).filled(),
            )
        }))
        .map_err(de)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Width and height from a PNG's IHDR chunk, after checking the signature.
    fn png_size(bytes: &[u8]) -> (u32, u32) {
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&bytes[12..16], b"IHDR");
        let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
        (be(16), be(20))
    }

    /// Decoded RGB pixels.
    fn decode(bytes: &[u8]) -> (png::OutputInfo, Vec<u8>) {
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
            .read_info()
            .unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (info, buf)
    }

    fn count_color(rgb: &[u8], c: RGBColor) -> usize {
        rgb.chunks_exact(3)
            .filter(|p| (p[0], p[1], p[2]) == (c.0, c.1, c.2))
            .count()
    }

    #[test]
    fn line_plot_is_a_png_with_bands_lines_and_text() {
        let x: Vec<f64> = (0..20).map(|i| i as f64 * 100.0).collect();
        let a: Vec<f64> = x.iter().map(|v| (v / 2000.0).min(1.0)).collect();
        let b: Vec<f64> = x.iter().map(|v| (v / 4000.0).min(1.0)).collect();
        let mut plot = LinePlot::new("Success", "environment steps", "success rate")
            .series(Series::new("shaped", x.clone(), a).with_err(vec![0.05; 20]))
            .series(Series::new("sparse", x.clone(), b).with_err(vec![0.1; 20]));
        plot.size = (640, 400);
        plot.y_range = Some((0.0, 1.05));
        let bytes = plot.to_png().unwrap();
        assert_eq!(png_size(&bytes), (640, 400));
        let (info, rgb) = decode(&bytes);
        assert_eq!((info.width, info.height), (640, 400));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        // Both lines are drawn in their colours.
        assert!(count_color(&rgb, series_color(0)) > 200);
        assert!(count_color(&rgb, series_color(1)) > 200);
        // Text (title, labels) leaves dark anti-aliased pixels that are not pure black
        // lines: a missing font would leave none in the title strip.
        let title_rows = &rgb[..640 * 3 * 40];
        let dark = title_rows.chunks_exact(3).filter(|p| p[0] < 128).count();
        assert!(dark > 50, "no text in the title strip ({dark} dark pixels)");

        // Bad input is an error, not a panic.
        assert!(LinePlot::new("t", "x", "y").to_png().is_err());
        let bad = LinePlot::new("t", "x", "y").series(Series::new("a", vec![1.0], vec![]));
        assert!(bad.to_png().is_err());
        let nan = LinePlot::new("t", "x", "y").series(Series::new("a", vec![1.0], vec![f64::NAN]));
        assert!(nan.to_png().is_err());
        let mut tiny = plot.clone();
        tiny.size = (10, 10);
        assert!(tiny.to_png().is_err());
        let mut log = LinePlot::new("loss", "step", "loss").series(Series::new(
            "a",
            vec![0.0, 1.0, 2.0],
            vec![1.0, 0.1, 0.01],
        ));
        log.log_y = true;
        assert_eq!(png_size(&log.to_png().unwrap()), (800, 500));
        log.series[0].y[2] = 0.0;
        assert!(log.to_png().is_err());
    }

    #[test]
    fn heatmap_masks_cells_and_draws_paths() {
        let (rows, cols) = (5, 5);
        let values: Vec<Option<f64>> = (0..rows * cols)
            .map(|k| (k % 2 == 0).then_some(k as f64))
            .collect();
        let mut h = Heatmap::new(rows, cols, values);
        h.title = "V".into();
        h.y_down = true;
        h.paths = vec![vec![(0.5, 0.5), (2.5, 4.5)]];
        h.markers = vec![((1.5, 1.5), "target".into())];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("v.png");
        h.save(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(png_size(&bytes), (700, 600));
        let (_, rgb) = decode(&bytes);
        assert!(count_color(&rgb, MASK) > 1000);
        assert!(count_color(&rgb, series_color(3)) > 50);
        // The lowest and highest values map to the ends of the colour map.
        let (first, last) = (ViridisRGB.get_color(0.0f64), ViridisRGB.get_color(1.0f64));
        assert!(count_color(&rgb, first) > 100 && count_color(&rgb, last) > 100);

        h.values.pop();
        assert!(h.to_png().is_err());
        let masked = Heatmap::new(1, 2, vec![None, None]);
        assert!(masked.to_png().is_err());
    }
}
