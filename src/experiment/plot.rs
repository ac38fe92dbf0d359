//! Plots of a run directory or a sweep directory, drawn from their CSV
//! outputs only, each written twice: `NAME.svg` and its twin `NAME.png`
//! (same layout, same pixel size).
//!
//! - A run directory: `jct_cdf` and `queue_delay_cdf` (empirical CDFs of the
//!   completed jobs, drawn as steps, y from 0 to 1; a run with no completed job
//!   gets empty axes with a "no completed jobs" note), `gpu_utilization` and
//!   `queue_length` (from `timeline.csv`; the queue length as a step function:
//!   it holds between samples), and `learning_curve` (RIFLING or LDWP,
//!   `learning_curve.csv`; a frozen run, greedy on a fixed table or network,
//!   is titled "frozen (no learning)" and drops its constant epsilon); for a
//!   run of several VCs (`--vcs`), `vc_jct_cdf` (the JCT CDF of each VC) and
//!   `vc_gpu_utilization` (each VC's busy GPUs over its own, one panel per VC;
//!   `plot_vcs`).
//! - A sweep directory: for each metric (below), when some swept key other
//!   than `seed` is numeric, `<metric>_vs_<key>`: the metric against the first
//!   such key, one line per combination of the other swept keys; when none is
//!   (a categorical sweep, e.g. `policy` × `backfill`), `<metric>_by_config`:
//!   one dot per configuration on a horizontal layout (names on the y axis).
//!   Both show the mean over seeds with ± one sample standard deviation as error
//!   bars and say "mean ± sd over N seeds" when every point has N ≥ 2 seeds;
//!   with one seed they say "one seed" and draw no bars. Plus `jct_cdf`, the
//!   JCT CDF of each line's (configuration's) runs pooled.
//!   The metrics: [`SWEEP_METRICS_ALWAYS`]; the QoS ones where every run has
//!   them; the sharing ones where some run shared a GPU; the preemption ones
//!   where some run preempted; the node-dispatch ones where every row has them.
//!
//! Layout, for a figure a paper can use: every figure is [`PLOT_WIDTH`] px
//! wide, and its text sizes ([`TITLE_SIZE`], [`LABEL_SIZE`], [`TICK_SIZE`],
//! [`LEGEND_SIZE`]) are at least 7 pt when it is shrunk to one column of a
//! two-column paper ([`COLUMN_WIDTH_IN`], [`text_pt`]); the legend sits in a
//! box below the plot, in columns, never over data; titles and axis labels
//! come from [`HUMAN_NAMES`] (and [`KEY_NAMES`] for swept keys) with units;
//! times are shown in s, min or h, whichever keeps the largest value under 120
//! of the unit ([`time_unit`]); tick labels print integers without `.0` and
//! large values as `1k`, `2.5M` ([`tick_label`]); the y label area is sized
//! from the widest tick label. Each series has a colour and a marker shape;
//! a line has a marker at each of its data points when it has at most
//! [`MARKED_POINTS`] of them, and none when it has more (a marker there would
//! stand for no one point): several such dense lines (CDFs, timelines) are
//! also told apart by dash pattern (solid, dashed, dotted). A figure of more
//! than [`MAX_SERIES`] lines (16 colours) is drawn as facets (`facets`),
//! with one legend, under the last, when every facet's would be the same.
//!
//! # Fonts and the PNG twin
//! Text is measured and drawn with one embedded font, Ubuntu Light, from the
//! `epaint_default_fonts` crate (the egui project's font bundle; Ubuntu Font
//! Licence 1.0), registered with plotters' `ab_glyph` feature under the
//! family `sans-serif`. No system font is read, so the SVG and the PNG are
//! the same bytes on every machine. The SVG's text is the font's outlines
//! ([`SvgBackend`]: each glyph defined once, placed where the PNG draws it),
//! so that every SVG viewer shows the PNG's letters, each text a group
//! labelled with it (`aria-label`). The PNG
//! is plotters' bitmap backend (RGB, 8 bits) encoded by the `png` crate with
//! fixed settings. Chosen over rendering the SVG with `resvg` because it adds
//! only small crates to a build that already has plotters (`ab_glyph` with
//! `ttf-parser`, `plotters-bitmap`, `png` with its deflate crates, and the
//! font crate), where `resvg` would bring its own text-shaping stack. Both
//! files are written atomically ([`crate::metrics::export::write_atomic`]).
//!
//! The PNG's text is drawn by [`PngBackend`], plotters' bitmap backend with
//! its own `draw_text`: plotters 0.3.7's `ab_glyph` renderer places each
//! glyph's bitmap at the pen position without the glyph's left side bearing
//! (`px_bounds().min.x`) and truncates the pen to whole pixels, so letters
//! bunched and spaces vanished ("Jobsper GPU"). `PngBackend` places every
//! glyph at its bounds on the (fractional) pen, which advances by the
//! font's advance widths and kerning, as plotters measures the text.
//!
//! # Axes
//! - x ticks ([`x_ticks`]): at exactly the distinct x values when there are
//!   at most 8 of them; else only on integers when every x is an integer;
//!   else plotters' round numbers.
//! - y axis ([`log_y`]): logarithmic (the label says "log scale") when every
//!   value is positive and the largest is over 30 times the smallest and
//!   over 1 (fractions, and utilisations in per cent, stay linear); a
//!   linear one starts at 0 unless every value is positive and they span less
//!   than a quarter of the largest ([`y_range`]): then it is padded around them.
//! - A dot chart's metric axis always starts at 0 (or below, for a negative
//!   value), so that the dots' distances compare.
//! - Utilisations (GPU, effective, memory) are shown in per cent.
//! - A CDF on a log x axis cannot show values of 0: its title says which
//!   share of the values are 0.
//! - Error bars of a sweep's metric (all non-negative: times, rates,
//!   fractions, counts) are clipped at 0 ([`error_bar`]); on a log axis, at
//!   the bottom of the axis; a clipped bar has no cap at its cut end, and the
//!   title says "bars cut at 0" (or "at the axis' bottom").
//! - Configurations (legend entries, dot-chart rows) are sorted by the swept
//!   keys' values in the order the keys are swept, numbers numerically.
#![cfg(feature = "plot")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::ranged1d::Ranged;
use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{self, HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord};

/// The font family every text uses (registered from the embedded font).
const FONT: &str = "sans-serif";

/// Width of every figure, px (its legend, if any, goes below the plot).
pub const PLOT_WIDTH: u32 = 720;
/// Height of a line chart, px.
pub const PLOT_HEIGHT: u32 = 480;

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // A valid TTF shipped by the crate; were it refused, the first text
        // drawn reports "no such font" as an error of that plot.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT);
    });
}

/// Human names of summary columns: (column, title, unit). A unit `s` means a
/// time in seconds, shown converted by [`time_unit`]; `%` a fraction from 0
/// to 1, shown in per cent; an empty unit means a dimensionless number
/// (fractions, ratios, counts).
pub const HUMAN_NAMES: [(&str, &str, &str); 29] = [
    ("jct_s", "JCT", "s"),
    ("queue_delay_s", "Queueing delay", "s"),
    ("jct_mean_s", "Mean JCT", "s"),
    ("queue_delay_mean_s", "Mean queueing delay", "s"),
    ("makespan_s", "Makespan", "s"),
    ("gpu_utilization", "GPU utilisation", "%"),
    ("qos_guarantee_rate", "QoS guarantee rate", ""),
    ("normalized_latency_mean", "Mean normalised latency", ""),
    ("normalized_throughput_mean", "Mean normalised throughput", ""),
    ("interference_slowdown_mean", "Co-located speed (achieved / isolated)", ""),
    ("qos_guarantee_rate_meetable", "QoS guarantee rate (meetable tasks)", ""),
    ("normalized_latency_with_wait_mean", "Mean normalised latency with wait", ""),
    ("normalized_rate_cluster", "Cluster-normalised rate", ""),
    ("gpu_allocation_mean", "Mean GPU allocation", ""),
    ("gpu_utilization_effective_mean", "Mean effective GPU utilisation", "%"),
    ("gpu_memory_utilization_mean", "Mean GPU memory utilisation", "%"),
    ("fragmentation_mean", "Mean fragmentation", ""),
    ("completion_rate", "Completion rate", ""),
    ("jct_p99_s", "99th-percentile JCT", "s"),
    ("finish_time_fairness_mean", "Mean finish-time fairness", ""),
    ("finish_time_fairness_max", "Worst finish-time fairness", ""),
    ("jain_fairness_index", "Jain's fairness index", ""),
    ("preemptions", "Preemptions", ""),
    ("checkpoint_gpu_hours", "Checkpoint overhead", "GPU·h"),
    ("throughput_jobs_per_hour", "Throughput", "jobs/h"),
    ("throughput_steady_jobs_per_hour", "Steady-state throughput", "jobs/h"),
    ("gpu_utilization_steady", "Steady-state GPU utilisation", "%"),
    ("load_balance_degree", "Load-balance degree", ""),
    ("load_balance_degree_gpu", "Load-balance degree (GPUs)", ""),
];

/// Human names of swept keys ([`super::raw::KEYS`]) for axis labels and
/// titles: (key, name, unit). Keys not listed show as written.
pub const KEY_NAMES: [(&str, &str, &str); 14] = [
    ("load", "Offered load", ""),
    ("jobs_per_hour", "Arrival rate", "jobs/h"),
    ("jobs_per_hour_per_gpu", "Arrival rate per GPU", "jobs/h/GPU"),
    ("jobs", "Jobs", ""),
    ("tasks", "Tasks", ""),
    ("hours", "Arrival window", "h"),
    ("nodes", "Nodes", ""),
    ("gpus_per_node", "GPUs per node", ""),
    ("theta", "GENIE θ", ""),
    ("max_tenants", "Jobs per GPU (max)", ""),
    ("mem_headroom", "Memory headroom", ""),
    ("vc_scale", "VC scale", ""),
    ("theta_mem", "θ_mem (IAWP memory threshold)", ""),
    ("share.max_tenants", "Jobs per GPU (max)", ""),
];

/// A swept key without its `policy_opt.` / `params.` prefix
/// (`policy_opt.theta_mem` → `theta_mem`).
pub fn short_key(key: &str) -> &str {
    let k = key.strip_prefix(super::raw::POLICY_OPT).map_or(key, |k| k.strip_prefix('.').unwrap_or(k));
    k.strip_prefix("params.").unwrap_or(k)
}

/// A name for use inside a sentence: lower-cased first letter unless the
/// name starts with an acronym ("VC scale", "GPUs per node" stay).
fn in_sentence(name: &str) -> String {
    let mut cs = name.chars();
    match (cs.next(), cs.next()) {
        (Some(a), Some(b)) if !b.is_uppercase() => a.to_lowercase().chain(name.chars().skip(1)).collect(),
        _ => name.to_string(),
    }
}

fn human(column: &str) -> (String, &'static str) {
    let short = short_key(column);
    HUMAN_NAMES
        .iter()
        .chain(&KEY_NAMES)
        .find(|(c, _, _)| *c == column || *c == short)
        .map_or_else(|| (short.to_string(), ""), |&(_, n, u)| (n.to_string(), u))
}

/// A time unit chosen for values up to `max_s` seconds: (divisor to apply to
/// seconds, unit name): h when the largest value is at least 2 h, min when at
/// least 2 min, else s.
pub fn time_unit(max_s: f64) -> (f64, &'static str) {
    if max_s >= 7200.0 {
        (3600.0, "h")
    } else if max_s >= 120.0 {
        (60.0, "min")
    } else {
        (1.0, "s")
    }
}

/// Label and value divisor of a column whose largest value is `max`:
/// `Mean JCT (h)` and 3600 for `jct_mean_s` over hours.
fn label_and_scale(column: &str, max: f64) -> (String, f64) {
    let (name, unit) = human(column);
    match unit {
        "s" => {
            let (div, u) = time_unit(max);
            (format!("{name} ({u})"), div)
        }
        "" => (name, 1.0),
        // A fraction, shown in per cent: divided by 0.01.
        "%" => (format!("{name} (%)"), 0.01),
        u => (format!("{name} ({u})"), 1.0),
    }
}

/// A tick label: integers without a decimal point, thousands as `k` and
/// millions as `M` (`1000000` → `1M`, `2500` → `2.5k`), other values with
/// at most four decimals, trailing zeros dropped (`0.30000000000000004` →
/// `0.3`).
pub fn tick_label(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let mut s = format!("{scaled:.4}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if s == "-0" {
        s = "0".into();
    }
    s + suffix
}

/// Empirical CDF points (value, fraction ≤ value) of `values`.
pub fn cdf(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    values.sort_by(f64::total_cmp);
    let n = values.len() as f64;
    values.iter().enumerate().map(|(i, &v)| (v, (i + 1) as f64 / n)).collect()
}

/// The path of a step function through `pts` (sorted by x): each value holds
/// until the next point's x, then jumps.
pub fn steps(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(pts.len() * 2);
    for (i, &(x, y)) in pts.iter().enumerate() {
        if i > 0 {
            out.push((x, pts[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

/// The path of an empirical CDF (from [`cdf`]) as steps, starting at 0.
fn cdf_steps(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let Some(&(x0, _)) = pts.first() else { return Vec::new() };
    let mut out = vec![(x0, 0.0)];
    for (i, &(x, y)) in pts.iter().enumerate() {
        if i > 0 {
            out.push((x, pts[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

fn colour(i: usize) -> RGBColor {
    // matplotlib's tab10 then the dark/light half of tab20: 16 distinguishable series.
    const C: [RGBColor; 16] = [
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
        RGBColor(0, 0, 128),
        RGBColor(255, 187, 120),
        RGBColor(152, 223, 138),
        RGBColor(255, 152, 150),
        RGBColor(197, 176, 213),
        RGBColor(0, 0, 0),
    ];
    C[i % C.len()]
}

/// Marker shapes, cycled per series (7 is coprime with the 16 colours, so
/// colour and shape pairs repeat only after 112 series).
const SHAPES: usize = 7;

fn draw_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    shape: usize,
    c: RGBColor,
) -> Result<(), String> {
    let r = MARKER_R;
    let filled = c.filled();
    let open = c.stroke_width(2);
    let res = match shape % SHAPES {
        0 => area.draw(&Circle::new((x, y), r, filled)),
        1 => area.draw(&Rectangle::new([(x - r, y - r), (x + r, y + r)], filled)),
        2 => area.draw(&Polygon::new(vec![(x, y - r - 1), (x - r - 1, y + r), (x + r + 1, y + r)], filled)),
        3 => area.draw(&Polygon::new(vec![(x, y - r - 1), (x + r + 1, y), (x, y + r + 1), (x - r - 1, y)], filled)),
        4 => area.draw(&Circle::new((x, y), r, open)),
        5 => area.draw(&Rectangle::new([(x - r, y - r), (x + r, y + r)], open)),
        _ => area
            .draw(&PathElement::new(vec![(x - r, y - r), (x + r, y + r)], open))
            .and_then(|()| area.draw(&PathElement::new(vec![(x - r, y + r), (x + r, y - r)], open))),
    };
    res.map_err(|e| e.to_string())
}

/// plotters' bitmap backend with a text renderer that keeps the font's
/// spacing (see the module docs, "Fonts and the PNG twin"); every other
/// drawing call is the bitmap backend's own.
pub struct PngBackend<'a> {
    inner: BitMapBackend<'a>,
    font: ab_glyph::FontRef<'static>,
}

impl<'a> PngBackend<'a> {
    /// A backend drawing into `buf` (RGB, 3 bytes a pixel, `w` × `h` px).
    ///
    /// # Errors
    /// The embedded font is refused by `ab_glyph` (not expected: it is a
    /// valid TTF shipped by `epaint_default_fonts`).
    pub fn with_buffer(buf: &'a mut [u8], (w, h): (u32, u32)) -> Result<Self, String> {
        let font = ab_glyph::FontRef::try_from_slice(epaint_default_fonts::UBUNTU_LIGHT)
            .map_err(|e| format!("the embedded font: {e}"))?;
        Ok(Self { inner: BitMapBackend::with_buffer(buf, (w, h)), font })
    }
}

type PngError<'a> = plotters_backend::DrawingErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>;

impl<'a> DrawingBackend for PngBackend<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), PngError<'a>> {
        self.inner.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), PngError<'a>> {
        self.inner.present()
    }
    fn draw_pixel(&mut self, p: BackendCoord, c: BackendColor) -> Result<(), PngError<'a>> {
        self.inner.draw_pixel(p, c)
    }
    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        a: BackendCoord,
        b: BackendCoord,
        s: &S,
    ) -> Result<(), PngError<'a>> {
        self.inner.draw_line(a, b, s)
    }
    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        a: BackendCoord,
        b: BackendCoord,
        s: &S,
        fill: bool,
    ) -> Result<(), PngError<'a>> {
        self.inner.draw_rect(a, b, s, fill)
    }
    fn draw_path<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        s: &S,
    ) -> Result<(), PngError<'a>> {
        // Segment by segment: the bitmap backend's own wide path breaks into
        // fragments where a dense line turns back on itself (a timeline of
        // thousands of samples).
        if s.stroke_width() <= 1 {
            return self.inner.draw_path(path, s);
        }
        let mut it = path.into_iter();
        let Some(mut a) = it.next() else { return Ok(()) };
        let mut lone = true;
        for b in it {
            self.inner.draw_line(a, b, s)?;
            a = b;
            lone = false;
        }
        if lone {
            self.inner.draw_line(a, a, s)?;
        }
        Ok(())
    }
    fn draw_circle<S: plotters_backend::BackendStyle>(
        &mut self,
        c: BackendCoord,
        r: u32,
        s: &S,
        fill: bool,
    ) -> Result<(), PngError<'a>> {
        self.inner.draw_circle(c, r, s, fill)
    }
    fn fill_polygon<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        s: &S,
    ) -> Result<(), PngError<'a>> {
        self.inner.fill_polygon(vert, s)
    }
    fn blit_bitmap(&mut self, pos: BackendCoord, (w, h): (u32, u32), src: &[u8]) -> Result<(), PngError<'a>> {
        self.inner.blit_bitmap(pos, (w, h), src)
    }

    /// plotters' default text drawing (anchor from the measured box, then the
    /// style's rotation), with each glyph placed at its own bounds on a
    /// fractional pen; the baseline sits `size / 2` below the box top, as
    /// plotters places it.
    fn draw_text<S: plotters_backend::BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), PngError<'a>> {
        use ab_glyph::{Font, ScaleFont};
        use plotters_backend::DrawingErrorKind;
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let (ox, oy) = anchor_offset(text, style).map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let trans = style.transform();
        let (w, h) = self.get_size();
        let size = style.size() as f32;
        let font = self.font.as_scaled(size);
        let mut pen = 0f32;
        let mut prev = None;
        let mut px = Vec::new();
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                pen += font.kern(p, id);
            }
            prev = Some(id);
            let glyph = id.with_scale_and_position(font.scale(), ab_glyph::point(pen, size / 2.0));
            if let Some(q) = font.outline_glyph(glyph) {
                let b = q.px_bounds();
                q.draw(|x, y, a| px.push((b.min.x as i32 + x as i32, b.min.y as i32 + y as i32, a)));
            }
            pen += font.h_advance(id);
        }
        for (x, y, a) in px {
            let (x, y) = trans.transform(x + ox, y + oy);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                self.inner.draw_pixel((x, y), BackendColor { alpha: color.alpha * f64::from(a), rgb: color.rgb })?;
            }
        }
        Ok(())
    }
}

/// The first and last character of the stand-in text [`SvgBackend`] has
/// plotters write for each text (Unicode private use: no label has them).
const MARK_OPEN: char = '\u{E000}';
const MARK_CLOSE: char = '\u{E001}';

/// What [`SvgBackend`] collects while a figure is drawn: each text's
/// outlines, and the embedded font's glyphs they use.
#[derive(Default)]
pub struct SvgText {
    /// The markup of each text, in the order drawn (`<g aria-label=...>`).
    texts: Vec<String>,
    /// Each glyph used: its outline in font units, y up (the `d` of a path).
    glyphs: BTreeMap<u16, String>,
}

impl SvgText {
    /// `svg` (what [`SvgBackend`] wrote) with each stand-in `<text>` element
    /// replaced by its outlines, and the glyphs defined once after the root tag.
    pub fn finish(&self, svg: &str) -> String {
        let mut out = String::with_capacity(svg.len() + 64 * self.glyphs.len());
        let root_end = svg.find("<svg").and_then(|a| svg[a..].find('>').map(|b| a + b + 1)).unwrap_or(0);
        // The root tag, with the xlink namespace `<use>` needs in SVG 1.1.
        out.push_str(&svg[..root_end].replacen(" xmlns=", " xmlns:xlink=\"http://www.w3.org/1999/xlink\" xmlns=", 1));
        out.push_str("\n<defs>\n");
        for (id, d) in &self.glyphs {
            out.push_str(&format!("<path id=\"g{id}\" d=\"{d}\"/>\n"));
        }
        out.push_str("</defs>");
        let mut rest = &svg[root_end..];
        while let Some(m) = rest.find(MARK_OPEN) {
            let (Some(start), Some(close)) = (rest[..m].rfind("<text"), rest[m..].find("</text>")) else { break };
            let n: usize = rest[m + MARK_OPEN.len_utf8()..]
                .split(MARK_CLOSE)
                .next()
                .and_then(|t| t.parse().ok())
                .unwrap_or(usize::MAX);
            out.push_str(&rest[..start]);
            out.push_str(self.texts.get(n).map_or("", String::as_str));
            rest = &rest[m + close + "</text>".len()..];
        }
        out.push_str(rest);
        out
    }
}

/// plotters' SVG backend with its text drawn as the embedded font's
/// outlines (each glyph defined once, `<use>`d at each place), laid out as
/// [`PngBackend`] lays out the PNG's, so that the SVG's text is the PNG's on
/// every viewer (no font is looked up). Each text is a group labelled with
/// the text (`<g aria-label="Mean JCT (h)">`), so that it can be found and
/// read by a screen reader. Every other drawing call is the SVG backend's.
pub struct SvgBackend<'a> {
    inner: SVGBackend<'a>,
    font: ab_glyph::FontRef<'static>,
    out: &'a mut SvgText,
}

impl<'a> SvgBackend<'a> {
    /// A backend writing into `svg` (`w` × `h` px), its texts into `out`;
    /// [`SvgText::finish`] then puts them in place.
    ///
    /// # Errors
    /// The embedded font is refused by `ab_glyph` (not expected).
    pub fn with_string(svg: &'a mut String, out: &'a mut SvgText, (w, h): (u32, u32)) -> Result<Self, String> {
        let font = ab_glyph::FontRef::try_from_slice(epaint_default_fonts::UBUNTU_LIGHT)
            .map_err(|e| format!("the embedded font: {e}"))?;
        Ok(Self { inner: SVGBackend::with_string(svg, (w, h)), font, out })
    }
}

/// Where a point of a text's frame lands in the image's (before the text's
/// position is added), by its rotation.
type Place = fn(f32, f32) -> (f32, f32);

type SvgError<'a> = plotters_backend::DrawingErrorKind<<SVGBackend<'a> as DrawingBackend>::ErrorType>;

/// A number of an SVG path or transform: at most two decimals, no trailing zeros.
fn svg_num(v: f32) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.to_string() }
}

impl<'a> DrawingBackend for SvgBackend<'a> {
    type ErrorType = <SVGBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), SvgError<'a>> {
        self.inner.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), SvgError<'a>> {
        self.inner.present()
    }
    fn draw_pixel(&mut self, p: BackendCoord, c: BackendColor) -> Result<(), SvgError<'a>> {
        self.inner.draw_pixel(p, c)
    }
    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        a: BackendCoord,
        b: BackendCoord,
        s: &S,
    ) -> Result<(), SvgError<'a>> {
        self.inner.draw_line(a, b, s)
    }
    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        a: BackendCoord,
        b: BackendCoord,
        s: &S,
        fill: bool,
    ) -> Result<(), SvgError<'a>> {
        self.inner.draw_rect(a, b, s, fill)
    }
    fn draw_path<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        s: &S,
    ) -> Result<(), SvgError<'a>> {
        self.inner.draw_path(path, s)
    }
    fn draw_circle<S: plotters_backend::BackendStyle>(
        &mut self,
        c: BackendCoord,
        r: u32,
        s: &S,
        fill: bool,
    ) -> Result<(), SvgError<'a>> {
        self.inner.draw_circle(c, r, s, fill)
    }
    fn fill_polygon<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        s: &S,
    ) -> Result<(), SvgError<'a>> {
        self.inner.fill_polygon(vert, s)
    }
    fn blit_bitmap(&mut self, pos: BackendCoord, (w, h): (u32, u32), src: &[u8]) -> Result<(), SvgError<'a>> {
        self.inner.blit_bitmap(pos, (w, h), src)
    }

    /// The text's glyphs placed as [`PngBackend::draw_text`] places them
    /// (the PNG's pixel `(x, y)` covers `x..x+1`, `y..y+1`; a rotated
    /// text's pixels are moved as whole pixels, so its outline is shifted by
    /// one pixel where the rotation turns a pixel's corner).
    fn draw_text<S: plotters_backend::BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), SvgError<'a>> {
        use ab_glyph::{Font, OutlineCurve, ScaleFont};
        use plotters_backend::{DrawingErrorKind, FontTransform};
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let (ox, oy) = anchor_offset(text, style).map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let (ox, oy) = (ox as f32, oy as f32);
        let (px, py) = (pos.0 as f32, pos.1 as f32);
        let trans = style.transform();
        let (rotate, place): (&str, Place) = match trans {
            FontTransform::None => ("", |x, y| (x, y)),
            FontTransform::Rotate90 => (" rotate(90)", |x, y| (1.0 - y, x)),
            FontTransform::Rotate180 => (" rotate(180)", |x, y| (1.0 - x, 1.0 - y)),
            FontTransform::Rotate270 => (" rotate(270)", |x, y| (y, 1.0 - x)),
        };
        let size = style.size() as f32;
        let font = self.font.as_scaled(size);
        // The scale (px per font unit, about 0.02) to six decimals: two
        // would shrink the glyphs by a tenth.
        let k = format!("{:.6}", font.h_scale_factor());
        let k = k.trim_end_matches('0');
        let mut uses = String::new();
        let mut pen = 0f32;
        let mut prev = None;
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                pen += font.kern(p, id);
            }
            prev = Some(id);
            if let Some(outline) = self.font.outline(id) {
                self.out.glyphs.entry(id.0).or_insert_with(|| {
                    let pt = |p: ab_glyph::Point| format!("{} {}", svg_num(p.x), svg_num(-p.y));
                    let mut d = String::new();
                    let mut at: Option<ab_glyph::Point> = None;
                    for curve in &outline.curves {
                        let (from, seg) = match *curve {
                            OutlineCurve::Line(a, b) => (a, format!("L{}", pt(b))),
                            OutlineCurve::Quad(a, b, c) => (a, format!("Q{} {}", pt(b), pt(c))),
                            OutlineCurve::Cubic(a, b, c, e) => (a, format!("C{} {} {}", pt(b), pt(c), pt(e))),
                        };
                        if at != Some(from) {
                            if at.is_some() {
                                d.push('Z');
                            }
                            d.push_str(&format!("M{}", pt(from)));
                        }
                        d.push_str(&seg);
                        at = Some(match *curve {
                            OutlineCurve::Line(_, b) => b,
                            OutlineCurve::Quad(_, _, c) => c,
                            OutlineCurve::Cubic(_, _, _, e) => e,
                        });
                    }
                    if at.is_some() {
                        d.push('Z');
                    }
                    d
                });
                let (x, y) = place(pen + ox, size / 2.0 + oy);
                uses.push_str(&format!(
                    "<use xlink:href=\"#g{}\" transform=\"translate({} {}){rotate} scale({k})\"/>",
                    id.0,
                    svg_num(px + x),
                    svg_num(py + y)
                ));
            }
            pen += font.h_advance(id);
        }
        let label = text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
        let (r, g, b) = color.rgb;
        let opacity =
            if color.alpha < 1.0 { format!(" opacity=\"{}\"", svg_num(color.alpha as f32)) } else { String::new() };
        let n = self.out.texts.len();
        self.out.texts.push(format!("<g aria-label=\"{label}\" fill=\"#{r:02X}{g:02X}{b:02X}\"{opacity}>{uses}</g>"));
        self.inner.draw_text(&format!("{MARK_OPEN}{n}{MARK_CLOSE}"), style, pos)
    }
}

fn text_width(text: &str, size: f64) -> u32 {
    register_font();
    FontDesc::new(FontFamily::Name(FONT), size, FontStyle::Normal).box_size(text).map_or(0, |(w, _)| w)
}

/// The width of one column of a two-column paper, in (IEEE and ACM
/// templates: 3.3–3.5 in): every figure is [`PLOT_WIDTH`] px wide, and is
/// read shrunk to this width.
pub const COLUMN_WIDTH_IN: f64 = 3.3;

/// The size, pt, that `px` px of text has in a figure `width` px wide shown
/// [`COLUMN_WIDTH_IN`] wide (72 pt an inch).
pub fn text_pt(px: f64, width: u32) -> f64 {
    px / f64::from(width) * COLUMN_WIDTH_IN * 72.0
}

/// Sizes of the text of every figure, px: at [`PLOT_WIDTH`] px shrunk to
/// [`COLUMN_WIDTH_IN`], 8.6 pt (title), 7.9 pt (axis labels) and 7.3 pt
/// (tick labels, legend), at least the 7 pt a journal asks of a figure's
/// smallest text.
pub const TITLE_SIZE: f64 = 26.0;
/// Axis labels, px (see [`TITLE_SIZE`]).
pub const LABEL_SIZE: f64 = 24.0;
/// Tick labels, px (see [`TITLE_SIZE`]).
pub const TICK_SIZE: f64 = 22.0;
/// Legend entries, px (see [`TITLE_SIZE`]).
pub const LEGEND_SIZE: f64 = 22.0;
/// Height of one legend entry, px.
const LEGEND_ROW: i32 = 30;
/// Width of a legend entry's line sample, px.
const LEGEND_SAMPLE: i32 = 44;
/// Stroke width of a series' line, px (1 pt at one column's width).
const LINE_WIDTH: u32 = 3;
/// Radius of a marker, px.
const MARKER_R: i32 = 6;
/// A line gets a marker at each of its data points when it has at most this
/// many; a denser line (a CDF of thousands of jobs, a timeline) gets none,
/// and several dense lines are told apart by colour and dash pattern.
pub const MARKED_POINTS: usize = 30;
/// The most series one plot shows; a sweep with more configurations is drawn
/// as facets (panels), each with at most this many (`facets`).
pub const MAX_SERIES: usize = 16;

/// One series of a line chart, in display units.
struct Line {
    name: String,
    pts: Vec<(f64, f64)>,
    /// ± error per point (same length as `pts`), drawn as bars.
    sd: Option<Vec<f64>>,
}

/// A line chart.
struct LineFig {
    title: String,
    x_label: String,
    y_label: String,
    lines: Vec<Line>,
    log_x: bool,
    /// Draw each line as a step function (the marker points stay at the samples).
    step: bool,
    /// The path is already the CDF's step path (markers at every other point).
    cdf: bool,
    /// A fixed y range (CDFs: 0 to 1).
    y_fixed: Option<(f64, f64)>,
    /// A logarithmic y axis (see [`log_y`]; every y must be positive).
    log_y: bool,
    /// Tick the x axis at the points' x values when there are few ([`x_ticks`]).
    x_at_points: bool,
    /// The values cannot be negative: error bars stop at 0 ([`error_bar`]).
    nonneg: bool,
    /// Text written in the middle of an empty plot.
    empty_note: String,
    /// Height of the figure without its legend, px.
    height: u32,
    /// A fixed x range (facets of one figure share their axes).
    x_fixed: Option<(f64, f64)>,
    /// Whether the legend is drawn below the plot (facets whose legends
    /// would be the same show it once, under the last).
    legend: bool,
}

/// How a series is drawn: its colour, its marker shape (drawn only when
/// `marked`) and its dash pattern (solid, dashed or dotted: several dense
/// lines, which carry no markers, are told apart by it as well as by colour).
#[derive(Clone, Copy, PartialEq)]
struct SeriesStyle {
    index: usize,
    marked: bool,
    dash: usize,
}

/// Draws a line through `px` (pixels) in the style of series `s`.
fn draw_series_line<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    px: Vec<(i32, i32)>,
    s: SeriesStyle,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let style = colour(s.index).stroke_width(LINE_WIDTH);
    match s.dash % 3 {
        0 => area.draw(&PathElement::new(px, style)).map_err(e),
        1 => area.draw(&DashedPathElement::new(px, 14, 7, style)).map_err(e),
        _ => area.draw(&DashedPathElement::new(px, 3, 6, style)).map_err(e),
    }
}

/// The legend's layout for `names` in a figure `width` px wide: (columns,
/// rows, column width px); entries fill the columns top to bottom.
fn legend_grid(names: &[String], width: u32) -> (usize, usize, i32) {
    let widest = names.iter().map(|n| text_width(n, LEGEND_SIZE)).max().unwrap_or(0) as i32;
    let col_w = LEGEND_SAMPLE + 12 + widest + 24;
    let cols = ((width as i32 - 24) / col_w.max(1)).clamp(1, names.len().max(1) as i32) as usize;
    let rows = names.len().div_ceil(cols);
    (cols, rows, col_w)
}

/// Height of the legend below a plot, px (0 with one series: its name is in
/// the title).
fn legend_height(names: &[String], width: u32) -> u32 {
    if names.len() < 2 {
        return 0;
    }
    let (_, rows, _) = legend_grid(names, width);
    LEGEND_ROW as u32 * rows as u32 + 16
}

/// `name` cut in the middle (`…`) to at most `width` px at the legend's size.
fn fit_name(name: &str, width: u32) -> String {
    if text_width(name, LEGEND_SIZE) <= width {
        return name.to_string();
    }
    let cs: Vec<char> = name.chars().collect();
    let mut keep = cs.len();
    while keep > 2 {
        keep -= 1;
        let (a, b) = (keep.div_ceil(2), keep / 2);
        let cut: String = cs[..a].iter().chain(['…'].iter()).chain(&cs[cs.len() - b..]).collect();
        if text_width(&cut, LEGEND_SIZE) <= width {
            return cut;
        }
    }
    name.to_string()
}

/// Draws the legend of `names` (styles `styles`) in a box across `area`,
/// under the plot, from `top` px: in columns when the names are short.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    top: i32,
    names: &[String],
    styles: &[SeriesStyle],
) -> Result<(), String> {
    if names.len() < 2 {
        return Ok(());
    }
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (w, _) = area.dim_in_pixel();
    let (_, rows, col_w) = legend_grid(names, w);
    let h = legend_height(names, w) as i32 - 6;
    area.draw(&Rectangle::new([(8, top), (w as i32 - 8, top + h)], BLACK.stroke_width(1))).map_err(e)?;
    let style = TextStyle::from((FONT, LEGEND_SIZE)).pos(text_anchor::Pos::new(HPos::Left, VPos::Center));
    for (i, (name, s)) in names.iter().zip(styles).enumerate() {
        let x = 16 + col_w * (i / rows) as i32;
        let y = top + 5 + LEGEND_ROW * (i % rows) as i32 + LEGEND_ROW / 2;
        draw_series_line(area, vec![(x, y), (x + LEGEND_SAMPLE, y)], *s)?;
        if s.marked {
            draw_marker(area, (x + LEGEND_SAMPLE / 2, y), s.index, colour(s.index))?;
        }
        area.draw(&Text::new(name.clone(), (x + LEGEND_SAMPLE + 12, y), style.clone())).map_err(e)?;
    }
    Ok(())
}

/// The y label area's width: the widest tick label of `y0..y1` (with
/// `n` labels) plus room for the axis label.
fn y_area(y0: f64, y1: f64, n: usize) -> u32 {
    let r: RangedCoordf64 = (y0..y1).into();
    let widest = r.key_points(n).into_iter().map(|v| text_width(&tick_label(v), TICK_SIZE)).max().unwrap_or(0);
    widest + 12 + LABEL_SIZE as u32 + 12
}

const Y_LABELS: usize = 8;
/// Height of the x axis' area (tick labels and axis label), px.
const X_AREA: u32 = 68;
const X_LABELS: usize = 8;
/// Height of the caption (title) band, px.
const TITLE_BAND: i32 = 48;
/// Height of one title line, px.
const TITLE_LINE: i32 = 32;

/// `title` broken at spaces into lines no wider than `width` px (a word
/// wider than that stays whole on its own line).
pub fn wrap_title(title: &str, width: u32) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in title.split(' ') {
        match lines.last_mut() {
            Some(l) if text_width(&format!("{l} {word}"), TITLE_SIZE) <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// Draws `title` at the top of `area`: centred over the first `over` px when
/// it fits there (the plot, beside a legend), else centred over the whole
/// area, broken into lines when wider than that. Returns the height of the
/// band it took, px (at least [`TITLE_BAND`]).
fn draw_title<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, over: u32) -> Result<i32, String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (w, _) = area.dim_in_pixel();
    let (lines, centre) = if text_width(title, TITLE_SIZE) + 24 <= over.min(w) {
        (vec![title.to_string()], over.min(w) / 2)
    } else {
        (wrap_title(title, w.saturating_sub(24)), w / 2)
    };
    let style = TextStyle::from((FONT, TITLE_SIZE)).pos(text_anchor::Pos::new(HPos::Center, VPos::Top));
    for (i, l) in lines.iter().enumerate() {
        area.draw(&Text::new(l.clone(), (centre as i32, 10 + TITLE_LINE * i as i32), style.clone())).map_err(e)?;
    }
    Ok(TITLE_BAND.max(16 + TITLE_LINE * lines.len() as i32))
}

impl LineFig {
    fn size(&self) -> (u32, u32) {
        let legend = if self.legend { legend_height(&self.legend_names(), PLOT_WIDTH) } else { 0 };
        (PLOT_WIDTH, self.height + legend)
    }

    /// The legend's entries: the series' names, each cut to fit the figure.
    fn legend_names(&self) -> Vec<String> {
        let room = PLOT_WIDTH - 48 - LEGEND_SAMPLE as u32 - 12;
        self.lines.iter().map(|l| fit_name(&l.name, room)).collect()
    }

    /// How each series is drawn: markers on a line of at most
    /// [`MARKED_POINTS`] data points; dense lines of a figure with several
    /// series cycle through the dash patterns.
    fn styles(&self) -> Vec<SeriesStyle> {
        let several = self.lines.len() > 1;
        self.lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let n = l.pts.iter().filter(|p| self.visible(p)).count();
                let points = if self.cdf { n / 2 } else { n };
                let marked = points <= MARKED_POINTS;
                SeriesStyle { index: i, marked, dash: if marked || !several { 0 } else { i } }
            })
            .collect()
    }

    fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let pts = self.lines.iter().flat_map(|l| {
            let sd = l.sd.as_deref();
            l.pts.iter().enumerate().map(move |(i, &(x, y))| (x, y, sd.map_or(0.0, |s| s[i])))
        });
        let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
        for (x, y, s) in pts.filter(|p| self.visible(&(p.0, p.1))) {
            x0 = x0.min(x);
            x1 = x1.max(x);
            // On a log axis a bar reaching 0 or below is cut at the axis
            // bottom, which the means (and the bars above 0) set.
            let low = if self.log_y && y - s <= 0.0 { y } else { error_bar(y, s, self.nonneg).0 };
            y0 = y0.min(low);
            y1 = y1.max(y + s);
        }
        if let (Some(x), Some(y)) = (self.x_fixed, self.y_fixed) {
            return (x, y);
        }
        if !x0.is_finite() {
            return ((if self.log_x { 1.0 } else { 0.0 }, 10.0), self.y_fixed.unwrap_or((0.0, 1.0)));
        }
        if x1 <= x0 {
            // One x value: centre it.
            if self.log_x {
                (x0, x1) = (x0 / 2.0, x0 * 2.0);
            } else if x0 == 0.0 {
                (x0, x1) = (-1.0, 1.0);
            } else {
                (x0, x1) = (x0 - x0.abs() / 2.0, x0 + x0.abs() / 2.0);
            }
        } else if self.log_x {
            (x0, x1) = (x0 / 1.1, x1 * 1.1);
        } else {
            let pad = (x1 - x0) * 0.03;
            (x0, x1) = (x0 - pad, x1 + pad);
        }
        let y = self.y_fixed.unwrap_or_else(|| if self.log_y { (y0 / 1.3, y1 * 1.3) } else { y_range(y0, y1) });
        ((x0, x1), y)
    }

    /// Whether a point can be drawn on these axes.
    fn visible(&self, p: &(f64, f64)) -> bool {
        p.0.is_finite() && p.1.is_finite() && (!self.log_x || p.0 > 0.0) && (!self.log_y || p.1 > 0.0)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let band = draw_title(root, &self.title, PLOT_WIDTH)?;
        // The chart gives backend (whole-image) pixels; `root` may be one
        // panel of a larger figure, and draws in its own.
        let base = root.get_base_pixel();
        macro_rules! bc {
            ($chart:expr, $p:expr) => {{
                let (x, y) = $chart.backend_coord($p);
                (x - base.0, y - base.1)
            }};
        }
        let (left, legend) = root.split_vertically(self.height);
        let ((x0, x1), (y0, y1)) = self.ranges();
        let styles = self.styles();
        // About one y label per 45 px of plot height (8 on a full plot, 5
        // on a panel: plotters' round steps then give 3 to 5), so that
        // 22 px labels never touch.
        let y_labels = ((self.height as i32 - band - X_AREA as i32 - 12) / 45).clamp(5, Y_LABELS as i32) as usize;
        let mut builder = ChartBuilder::on(&left);
        builder
            .margin(12)
            .margin_top(band)
            .margin_right(24)
            .x_label_area_size(X_AREA)
            .y_label_area_size(y_area(y0, y1, y_labels));
        let tick = |v: &f64| tick_label(*v);
        let xs: Vec<f64> = self.lines.iter().flat_map(|l| l.pts.iter().map(|p| p.0)).collect();
        let ticks = x_ticks(&xs, x0, x1, self.x_at_points);
        macro_rules! body {
            ($chart:expr) => {{
                let mut chart = $chart;
                let mut mesh = chart.configure_mesh();
                mesh.x_desc(&self.x_label)
                    .y_desc(&self.y_label)
                    .x_labels(if self.log_x { 6 } else { 0 })
                    .y_labels(y_labels)
                    .x_label_formatter(&tick)
                    .y_label_formatter(&tick)
                    .label_style((FONT, TICK_SIZE))
                    .axis_desc_style((FONT, LABEL_SIZE))
                    .light_line_style(RGBColor(235, 235, 235));
                if !self.log_x {
                    mesh.disable_x_mesh();
                }
                mesh.draw().map_err(e)?;
                if !self.log_x {
                    // The linear x axis' ticks ([`x_ticks`]), drawn here:
                    // grid line, tick mark and label at each.
                    let style = TextStyle::from((FONT, TICK_SIZE)).pos(text_anchor::Pos::new(HPos::Center, VPos::Top));
                    for t in &ticks {
                        let (px, bottom) = bc!(chart, &(*t, y0));
                        let (_, top) = bc!(chart, &(*t, y1));
                        root.draw(&PathElement::new(vec![(px, top), (px, bottom)], RGBColor(205, 205, 205)))
                            .map_err(e)?;
                        root.draw(&PathElement::new(vec![(px, bottom), (px, bottom + 6)], BLACK)).map_err(e)?;
                        root.draw(&Text::new(tick_label(*t), (px, bottom + 9), style.clone())).map_err(e)?;
                    }
                }
                let visible = |p: &(f64, f64)| self.visible(p);
                let with_bars = self.lines.iter().filter(|l| l.sd.is_some()).count();
                for (i, l) in self.lines.iter().enumerate() {
                    let c = colour(i);
                    let pts: Vec<(f64, f64)> = l.pts.iter().copied().filter(visible).collect();
                    let path = if self.step { steps(&pts) } else { pts.clone() };
                    // Drawn in pixels, at most four points per pixel column
                    // ([`decimate`]): a wide stroke over thousands of
                    // sub-pixel segments breaks into fragments in the bitmap
                    // backend.
                    let px: Vec<(i32, i32)> = path.iter().map(|p| bc!(chart, p)).collect();
                    draw_series_line(root, decimate(&px), styles[i])?;
                    // A marker at every data point (a CDF path's corner at
                    // each value), on a line with few of them.
                    if styles[i].marked {
                        let marks: Vec<(f64, f64)> =
                            if self.cdf { pts.iter().skip(1).step_by(2).copied().collect() } else { pts.clone() };
                        for p in &marks {
                            draw_marker(root, bc!(chart, p), i, c)?;
                        }
                    }
                    if let Some(sd) = &l.sd {
                        // Bars of different lines at one x sit side by side
                        // (at most 40 px apart in all), not on top of each other.
                        let dodge = if with_bars > 1 {
                            let step = (40 / (with_bars as i32 - 1)).min(6);
                            let k = self.lines[..i].iter().filter(|l| l.sd.is_some()).count() as i32;
                            step * k - step * (with_bars as i32 - 1) / 2
                        } else {
                            0
                        };
                        for (&(x, y), &s) in l.pts.iter().zip(sd).filter(|(p, s)| visible(p) && **s > 0.0) {
                            let (low, high) = error_bar(y, s, self.nonneg);
                            // A bar cut (at 0, or at a log axis' bottom) has no cap there.
                            let (low, cut) = if self.log_y && low < y0 { (y0, true) } else { (low, low > y - s) };
                            let (px, lo) = bc!(chart, &(x, low));
                            let (_, hi) = bc!(chart, &(x, high));
                            let px = px + dodge;
                            let mut segs = vec![vec![(px, lo), (px, hi)], vec![(px - 5, hi), (px + 5, hi)]];
                            if !cut {
                                segs.push(vec![(px - 5, lo), (px + 5, lo)]);
                            }
                            for seg in segs {
                                root.draw(&PathElement::new(seg, c.stroke_width(2))).map_err(e)?;
                            }
                        }
                    }
                }
                if self.lines.iter().all(|l| !l.pts.iter().any(visible)) {
                    let (cx, _) = bc!(chart, &((x0 + x1) / 2.0, y0));
                    let cx = if self.log_x { bc!(chart, &((x0 * x1).sqrt(), y0)).0 } else { cx };
                    let cy = bc!(chart, &(x0, (y0 + y1) / 2.0)).1;
                    let style =
                        TextStyle::from((FONT, LABEL_SIZE)).pos(text_anchor::Pos::new(HPos::Center, VPos::Center));
                    root.draw(&Text::new(self.empty_note.clone(), (cx, cy), style)).map_err(e)?;
                }
            }};
        }
        match (self.log_x, self.log_y) {
            (true, true) => body!(builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale()).map_err(e)?),
            (true, false) => body!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1).map_err(e)?),
            (false, true) => body!(builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale()).map_err(e)?),
            (false, false) => body!(builder.build_cartesian_2d(x0..x1, y0..y1).map_err(e)?),
        }
        if self.legend {
            draw_legend(&legend, 0, &self.legend_names(), &styles)?;
        }
        Ok(())
    }
}

/// A polyline in pixels reduced to what can be seen: for each run of
/// consecutive points in one pixel column, its first point, its lowest and
/// highest (in the order they come) and its last, without repeats (the M4
/// reduction of Jugel et al., VLDB 2014: the drawn line is the same).
pub fn decimate(px: &[(i32, i32)]) -> Vec<(i32, i32)> {
    let mut out: Vec<(i32, i32)> = Vec::with_capacity(px.len().min(4096));
    let mut i = 0;
    while i < px.len() {
        let x = px[i].0;
        let mut j = i;
        let (mut lo, mut hi) = (i, i);
        while j < px.len() && px[j].0 == x {
            if px[j].1 < px[lo].1 {
                lo = j;
            }
            if px[j].1 > px[hi].1 {
                hi = j;
            }
            j += 1;
        }
        let mut keep = vec![i, lo, hi, j - 1];
        keep.sort_unstable();
        keep.dedup();
        for k in keep {
            if out.last() != Some(&px[k]) {
                out.push(px[k]);
            }
        }
        i = j;
    }
    out
}

/// Tick positions of a linear x axis over `lo..hi` that shows points at
/// `xs`: with `at_points` (a sweep's chart), the distinct values of `xs`
/// when there are at most 8 of them; else
/// plotters' round numbers for 8 labels, only the integers among them when
/// every value of `xs` is an integer (so `max_tenants` 1..10 never shows 2.5).
pub fn x_ticks(xs: &[f64], lo: f64, hi: f64, at_points: bool) -> Vec<f64> {
    let mut d: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    d.sort_by(f64::total_cmp);
    d.dedup();
    if at_points && !d.is_empty() && d.len() <= X_LABELS {
        return d;
    }
    let r: RangedCoordf64 = (lo..hi).into();
    let pts = r.key_points(X_LABELS);
    if !d.is_empty() && d.iter().all(|x| x.fract() == 0.0) {
        // plotters' steps (0.2, 0.5, ...) may land an ulp off an integer.
        let ints: Vec<f64> =
            pts.iter().map(|v| v.round()).zip(&pts).filter(|(r, v)| (*r - *v).abs() < 1e-9).map(|p| p.0).collect();
        if ints.is_empty() {
            // A span under one unit: its integers, or the values themselves.
            let whole: Vec<f64> = (lo.ceil() as i64..=hi.floor() as i64).map(|v| v as f64).collect();
            return if whole.is_empty() { d } else { whole };
        }
        return ints;
    }
    pts
}

/// Whether values `ys` get a logarithmic axis: every one finite and positive,
/// the largest over 30 times the smallest (a linear axis would flatten all
/// but the top lines), and over 1 (fractions such as a completion rate or a
/// utilisation stay on a linear 0..1 axis, where a reader expects them).
pub fn log_y(ys: &[f64]) -> bool {
    let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    !ys.is_empty() && ys.iter().all(|y| y.is_finite() && *y > 0.0) && hi / lo > 30.0 && hi > 1.0
}

/// The ends (low, high) of the error bar of `mean` ± `sd`; for a quantity
/// that cannot be negative (`nonneg`), the low end is clipped at 0.
pub fn error_bar(mean: f64, sd: f64, nonneg: bool) -> (f64, f64) {
    let low = mean - sd;
    (if nonneg { low.max(0.0) } else { low }, mean + sd)
}

/// A linear y range for data from `lo` to `hi`: from 0 (or, when `lo` is
/// negative, 5 % of the span below it, so that its points do not sit on the
/// axis) to 5 % above `hi`; but when every value is positive and they
/// span less than a quarter of `hi` (completion rates of 0.9-0.98), padded
/// by a tenth of the span around them (5 % of the value for a single value),
/// so the lines are not flat at the top of an axis from 0.
pub fn y_range(lo: f64, hi: f64) -> (f64, f64) {
    if lo > 0.0 && hi - lo < 0.25 * hi {
        // Values equal but for rounding (a mean of equal values) count as one.
        let pad = if hi - lo > 1e-9 * hi { (hi - lo) * 0.1 } else { hi * 0.05 };
        return (lo - pad, hi + pad);
    }
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let pad = (hi - lo) * 0.05;
    if hi <= lo {
        (lo, lo + 1.0)
    } else if lo < 0.0 {
        (lo - pad, hi + pad)
    } else {
        (lo, hi + pad)
    }
}

/// A categorical dot chart: one dot (mean) with ± sd bars per configuration,
/// names on the y axis, the metric on the x axis.
struct DotFig {
    title: String,
    x_label: String,
    names: Vec<String>,
    means: Vec<f64>,
    sd: Option<Vec<f64>>,
}

/// Height of one configuration's row in a dot chart, px.
const DOT_ROW: u32 = 40;
/// The most of a dot chart's width its configuration names take (longer
/// names are cut in the middle).
const DOT_NAMES: f64 = 0.45;

impl DotFig {
    /// The configurations' names as the y axis shows them: each cut to
    /// [`DOT_NAMES`] of the figure's width.
    fn shown_names(&self) -> Vec<String> {
        let room = (f64::from(PLOT_WIDTH) * DOT_NAMES) as u32;
        self.names.iter().map(|n| fit_name(n, room)).collect()
    }

    fn name_width(&self) -> u32 {
        self.shown_names().iter().map(|n| text_width(n, TICK_SIZE)).max().unwrap_or(0) + 16
    }

    fn size(&self) -> (u32, u32) {
        (PLOT_WIDTH, (180 + DOT_ROW * self.names.len() as u32).max(300))
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let n = self.names.len();
        let sd = |i: usize| self.sd.as_ref().map_or(0.0, |s| s[i]);
        let lo = (0..n).map(|i| error_bar(self.means[i], sd(i), true).0).fold(f64::INFINITY, f64::min);
        let hi = (0..n).map(|i| self.means[i] + sd(i)).fold(f64::NEG_INFINITY, f64::max);
        // From zero, so that the dots' distances from the axis compare
        // (a 2 % gap must not look tenfold); 5 % beyond the data's ends.
        let (lo, hi) = (lo.min(0.0), hi.max(0.0));
        let (x0, x1) = if !lo.is_finite() || !hi.is_finite() || hi <= lo {
            (0.0, 1.0)
        } else {
            let pad = (hi - lo) * 0.05;
            (if lo < 0.0 { lo - pad } else { 0.0 }, hi + pad)
        };
        let band = draw_title(root, &self.title, u32::MAX)?;
        let mut builder = ChartBuilder::on(root);
        builder
            .margin(12)
            .margin_top(band)
            .margin_right(24)
            .x_label_area_size(X_AREA)
            .y_label_area_size(self.name_width());
        let names = self.shown_names();
        let mut chart = builder.build_cartesian_2d(x0..x1, -0.5..(n as f64 - 0.5)).map_err(e)?;
        let tick = |v: &f64| tick_label(*v);
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .x_labels(X_LABELS)
            .y_labels(0)
            .disable_y_mesh()
            .x_label_formatter(&tick)
            .label_style((FONT, TICK_SIZE))
            .axis_desc_style((FONT, LABEL_SIZE))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(e)?;
        let name_style = TextStyle::from((FONT, TICK_SIZE)).pos(text_anchor::Pos::new(HPos::Right, VPos::Center));
        for (i, name) in names.iter().enumerate() {
            // The first configuration on top.
            let y = (n - 1 - i) as f64;
            let c = colour(i);
            let (ax, py) = chart.backend_coord(&(x0, y));
            let (ex, _) = chart.backend_coord(&(x1, y));
            root.draw(&PathElement::new(vec![(ax, py), (ex, py)], RGBColor(225, 225, 225).stroke_width(1)))
                .map_err(e)?;
            root.draw(&Text::new(name.clone(), (ax - 8, py), name_style.clone())).map_err(e)?;
            if sd(i) > 0.0 {
                let (low, high) = error_bar(self.means[i], sd(i), true);
                let (l, _) = chart.backend_coord(&(low, y));
                let (h, _) = chart.backend_coord(&(high, y));
                let mut segs = vec![vec![(l, py), (h, py)], vec![(h, py - 6), (h, py + 6)]];
                // A bar clipped at 0 has no cap there.
                if low <= self.means[i] - sd(i) {
                    segs.push(vec![(l, py - 6), (l, py + 6)]);
                }
                for seg in segs {
                    root.draw(&PathElement::new(seg, c.stroke_width(2))).map_err(e)?;
                }
            }
            draw_marker(root, chart.backend_coord(&(self.means[i], y)), i, c)?;
        }
        Ok(())
    }
}

/// A figure ready to render into either backend.
enum Fig {
    Line(LineFig),
    Dot(DotFig),
    Panels(PanelFig),
}

/// Line charts stacked one above the other under one title, each with its
/// own y axis (series of different scales: a learning curve's reward,
/// throughput, epsilon and loss).
struct PanelFig {
    title: String,
    panels: Vec<LineFig>,
}

/// Height of one panel of a [`PanelFig`], px.
const PANEL_HEIGHT: u32 = 320;
/// Height of one VC's panel of `vc_gpu_utilization`, px.
const VC_PANEL_HEIGHT: u32 = 280;

impl PanelFig {
    /// Height of the title band, px (as [`draw_title`] takes it).
    fn band(&self) -> u32 {
        let lines = if text_width(&self.title, TITLE_SIZE) + 24 <= PLOT_WIDTH {
            1
        } else {
            wrap_title(&self.title, PLOT_WIDTH - 24).len() as u32
        };
        (16 + TITLE_LINE as u32 * lines).max(TITLE_BAND as u32)
    }

    fn size(&self) -> (u32, u32) {
        (PLOT_WIDTH, self.band() + self.panels.iter().map(|p| p.size().1).sum::<u32>())
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        draw_title(root, &self.title, PLOT_WIDTH)?;
        let (_, mut rest) = root.split_vertically(self.band());
        for panel in &self.panels {
            let (area, below) = rest.split_vertically(panel.size().1);
            panel.draw(&area)?;
            rest = below;
        }
        Ok(())
    }
}

impl Fig {
    fn size(&self) -> (u32, u32) {
        match self {
            Fig::Line(f) => f.size(),
            Fig::Dot(f) => f.size(),
            Fig::Panels(f) => f.size(),
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        match self {
            Fig::Line(f) => f.draw(root),
            Fig::Dot(f) => f.draw(root),
            Fig::Panels(f) => f.draw(root),
        }
    }
}

/// Renders `fig` into `dir/NAME.svg` and `dir/NAME.png` (atomically);
/// returns both paths.
fn write_fig(dir: &Path, name: &str, fig: &Fig) -> Result<Vec<PathBuf>, String> {
    register_font();
    let (svg_path, png_path) = (dir.join(format!("{name}.svg")), dir.join(format!("{name}.png")));
    let (w, h) = fig.size();
    let mut svg = String::new();
    let mut texts = SvgText::default();
    {
        let root = SvgBackend::with_string(&mut svg, &mut texts, (w, h))
            .map_err(|m| format!("{}: {m}", svg_path.display()))?
            .into_drawing_area();
        fig.draw(&root).map_err(|m| format!("{}: {m}", svg_path.display()))?;
        root.present().map_err(|m| format!("{}: {m}", svg_path.display()))?;
    }
    let svg = texts.finish(&svg);
    let mut rgb = vec![255u8; w as usize * h as usize * 3];
    {
        let root = PngBackend::with_buffer(&mut rgb, (w, h))
            .map_err(|m| format!("{}: {m}", png_path.display()))?
            .into_drawing_area();
        fig.draw(&root).map_err(|m| format!("{}: {m}", png_path.display()))?;
        root.present().map_err(|m| format!("{}: {m}", png_path.display()))?;
    }
    let mut png_bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut png_bytes, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(|m| format!("{}: {m}", png_path.display()))?;
        wr.write_image_data(&rgb).map_err(|m| format!("{}: {m}", png_path.display()))?;
        wr.finish().map_err(|m| format!("{}: {m}", png_path.display()))?;
    }
    crate::metrics::export::write_atomic(&svg_path, svg.as_bytes()).map_err(|m| m.to_string())?;
    crate::metrics::export::write_atomic(&png_path, &png_bytes).map_err(|m| m.to_string())?;
    Ok(vec![svg_path, png_path])
}

fn read_csv(path: &Path) -> Result<(Vec<String>, Vec<Vec<String>>), String> {
    let bytes = crate::io::read_csv(path).map_err(|e| e.to_string())?;
    let mut rdr = csv::Reader::from_reader(&bytes[..]);
    let header = rdr.headers().map_err(|e| format!("{}: {e}", path.display()))?.iter().map(str::to_string).collect();
    let rows = rdr
        .records()
        .map(|r| r.map(|r| r.iter().map(str::to_string).collect()).map_err(|e| format!("{}: {e}", path.display())))
        .collect::<Result<_, _>>()?;
    Ok((header, rows))
}

/// The number of completed jobs of a run's `jobs.csv` (`status` =
/// `completed`) and the values of their numeric columns `cols` (a value
/// that does not parse is left out), one vector per column, read row by
/// row: a plot of millions of jobs keeps only these numbers, not the file's
/// every field.
fn completed_values(path: &Path, cols: &[&str]) -> Result<(usize, Vec<Vec<f64>>), String> {
    let bytes = crate::io::read_csv(path).map_err(|e| e.to_string())?;
    let mut rdr = csv::Reader::from_reader(&bytes[..]);
    let header: Vec<String> =
        rdr.headers().map_err(|e| format!("{}: {e}", path.display()))?.iter().map(str::to_string).collect();
    let status = column(&header, "status", path)?;
    let at = cols.iter().map(|c| column(&header, c, path)).collect::<Result<Vec<_>, _>>()?;
    let mut out = vec![Vec::new(); cols.len()];
    let mut n = 0;
    let mut rec = csv::StringRecord::new();
    while rdr.read_record(&mut rec).map_err(|e| format!("{}: {e}", path.display()))? {
        if rec.get(status) != Some("completed") {
            continue;
        }
        n += 1;
        for (v, &c) in out.iter_mut().zip(&at) {
            if let Some(x) = rec.get(c).and_then(|s| s.parse::<f64>().ok()) {
                v.push(x);
            }
        }
    }
    Ok((n, out))
}

fn column(header: &[String], name: &str, path: &Path) -> Result<usize, String> {
    header.iter().position(|h| h == name).ok_or_else(|| format!("{}: no column `{name}`", path.display()))
}

/// A CDF figure of the values (in seconds) of `column`, one line per named set.
fn cdf_fig(title: String, column: &str, sets: Vec<(String, Vec<f64>)>) -> LineFig {
    let max = sets.iter().flat_map(|s| s.1.iter()).copied().fold(0.0, f64::max);
    let min_pos = sets.iter().flat_map(|s| s.1.iter()).copied().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    let (x_label, div) = label_and_scale(column, max);
    let log_x = min_pos.is_finite() && max / min_pos >= 100.0;
    // A log axis has no 0: say how many values it cannot show.
    let (n, zeros) =
        sets.iter().flat_map(|s| s.1.iter()).fold((0usize, 0usize), |(n, z), &v| (n + 1, z + usize::from(v <= 0.0)));
    let title = if log_x && zeros > 0 {
        format!("{title}; {:.1} % are 0, not shown on the log axis", 100.0 * zeros as f64 / n as f64)
    } else {
        title
    };
    let lines = sets
        .into_iter()
        .map(|(name, v)| Line { name, pts: cdf_steps(&cdf(v.into_iter().map(|x| x / div).collect())), sd: None })
        .collect();
    LineFig {
        title,
        x_label: if log_x { format!("{x_label}, log scale") } else { x_label },
        y_label: "Fraction of jobs".into(),
        lines,
        log_x,
        step: false,
        cdf: true,
        y_fixed: Some((0.0, 1.0)),
        log_y: false,
        x_at_points: false,
        nonneg: false,
        empty_note: "no completed jobs".into(),
        height: PLOT_HEIGHT,
        x_fixed: None,
        legend: true,
    }
}

/// Plots a run directory; returns the files written (named in
/// [`crate::experiment::PLOT_FILES`]).
///
/// # Errors
/// A message naming a missing file or column, or a directory that is not a
/// complete run ([`crate::experiment::check_run_dir`]).
pub fn plot_run(dir: &Path) -> Result<Vec<PathBuf>, String> {
    crate::experiment::check_run_dir(dir)?;
    crate::experiment::check_csv_tables(dir)?;
    let jobs = dir.join("jobs.csv");
    let (n, values) = completed_values(&jobs, &["jct_s", "queue_delay_s"])?;
    let mut values = values.into_iter();
    let (jct, q) = (values.next().unwrap_or_default(), values.next().unwrap_or_default());
    let name = run_name(dir);
    let mut written = Vec::new();
    for (file, col, vals) in [("jct_cdf", "jct_s", jct), ("queue_delay_cdf", "queue_delay_s", q)] {
        let jobs = if n == 1 { "1 completed job".to_string() } else { format!("{n} completed jobs") };
        let fig = Fig::Line(cdf_fig(format!("{} CDF, {name} ({jobs})", human(col).0), col, vec![(name.clone(), vals)]));
        written.extend(write_fig(dir, file, &fig)?);
    }
    let timeline = dir.join("timeline.csv");
    if timeline.exists() {
        let (h, rows) = read_csv(&timeline)?;
        let t = column(&h, "time_s", &timeline)?;
        for (file, col, what, step) in [
            ("gpu_utilization", "gpu_utilization", "GPU utilisation", true),
            ("queue_length", "jobs_pending", "Pending jobs", true),
        ] {
            let c = column(&h, col, &timeline)?;
            let pts: Vec<(f64, f64)> =
                rows.iter().filter_map(|r| Some((r[t].parse::<f64>().ok()?, r[c].parse::<f64>().ok()?))).collect();
            if pts.is_empty() {
                continue;
            }
            let (unit_div, unit) = time_unit(pts.iter().map(|p| p.0).fold(0.0, f64::max));
            // A count axis reaches at least 5, so that its ticks are whole numbers.
            let y_max = pts.iter().map(|p| p.1).fold(0.0, f64::max);
            // Utilisation is a fraction, shown in per cent: 0 to 100.
            let pct = col == "gpu_utilization";
            let y_div = if pct { 0.01 } else { 1.0 };
            let y_fixed = Some(if pct { (0.0, 105.0) } else { (0.0, (y_max * 1.05).max(5.0)) });
            let fig = Fig::Line(LineFig {
                title: format!("{what} over time, {name}"),
                x_label: format!("Time ({unit})"),
                y_label: if pct { format!("{what} (%)") } else { what.into() },
                lines: vec![Line {
                    name: name.clone(),
                    pts: pts.iter().map(|&(x, y)| (x / unit_div, y / y_div)).collect(),
                    sd: None,
                }],
                log_x: false,
                step,
                cdf: false,
                y_fixed,
                log_y: false,
                x_at_points: false,
                nonneg: false,
                empty_note: String::new(),
                height: PLOT_HEIGHT,
                x_fixed: None,
                legend: true,
            });
            written.extend(write_fig(dir, file, &fig)?);
        }
    }
    written.extend(plot_vcs(dir, &name)?);
    let curve = dir.join("learning_curve.csv");
    if curve.exists() {
        written.extend(plot_learning_curve(&curve, &dir.join("learning_curve.svg"), &name)?);
    }
    Ok(written)
}

/// The per-VC charts of a run of several virtual clusters (`--vcs`: two or
/// more rows in `vc_summary.csv`): `vc_jct_cdf`, the JCT CDF of each VC's
/// completed jobs (`jobs.csv`'s `vc`), and `vc_gpu_utilization`, each VC's
/// busy GPUs over its own GPUs in per cent over time (`vc_timeline.csv`;
/// above 100 % when a VC runs jobs on GPUs it borrows). VCs in
/// `vc_summary.csv`'s order; more than [`MAX_SERIES`] VCs are drawn as facets.
fn plot_vcs(dir: &Path, name: &str) -> Result<Vec<PathBuf>, String> {
    let summary = dir.join("vc_summary.csv");
    if !summary.exists() {
        return Ok(Vec::new());
    }
    let (h, rows) = read_csv(&summary)?;
    if rows.len() < 2 {
        return Ok(Vec::new());
    }
    let (vc, gpus) = (column(&h, "vc", &summary)?, column(&h, "gpus", &summary)?);
    let vcs: Vec<(String, f64)> = rows
        .iter()
        .map(|r| {
            let g = r[gpus]
                .parse::<f64>()
                .map_err(|_| format!("{}: `gpus` of VC {} is not a number", summary.display(), r[vc]))?;
            Ok((r[vc].clone(), g))
        })
        .collect::<Result<_, String>>()?;
    let mut written = Vec::new();
    let jobs = dir.join("jobs.csv");
    let mut by_vc = completed_by(&jobs, "vc", "jct_s")?;
    let sets = vcs.iter().map(|(v, _)| (v.clone(), by_vc.remove(v).unwrap_or_default())).collect();
    let fig = facets(cdf_fig(format!("JCT CDF per VC, {name}"), "jct_s", sets), &BTreeMap::new());
    written.extend(write_fig(dir, "vc_jct_cdf", &fig)?);
    let timeline = dir.join("vc_timeline.csv");
    if timeline.exists() {
        let (h, rows) = read_csv(&timeline)?;
        let (t, v, busy) =
            (column(&h, "time_s", &timeline)?, column(&h, "vc", &timeline)?, column(&h, "gpus_busy", &timeline)?);
        let mut pts: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for r in &rows {
            if let (Ok(x), Ok(y)) = (r[t].parse::<f64>(), r[busy].parse::<f64>()) {
                pts.entry(r[v].as_str()).or_default().push((x, y));
            }
        }
        let t_max = pts.values().flatten().map(|p| p.0).fold(0.0, f64::max);
        let (unit_div, unit) = time_unit(t_max);
        let lines: Vec<Line> = vcs
            .iter()
            .map(|(v, g)| Line {
                name: v.clone(),
                pts: pts
                    .get(v.as_str())
                    .map(|p| {
                        p.iter().map(|&(x, y)| (x / unit_div, if *g > 0.0 { 100.0 * y / g } else { 0.0 })).collect()
                    })
                    .unwrap_or_default(),
                sd: None,
            })
            .collect();
        // One panel per VC (small multiples: overlaid, the VCs' busy
        // timelines hide one another), sharing both axes.
        let y_max = lines.iter().flat_map(|l| l.pts.iter().map(|p| p.1)).fold(100.0, f64::max);
        let x_max = lines.iter().flat_map(|l| l.pts.iter().map(|p| p.0)).fold(0.0, f64::max);
        let panels = lines
            .into_iter()
            .zip(&vcs)
            .map(|(l, (v, g))| LineFig {
                title: format!("VC {v} ({} GPUs)", tick_label(*g)),
                x_label: format!("Time ({unit})"),
                y_label: "Busy (%)".into(),
                lines: vec![l],
                log_x: false,
                step: true,
                cdf: false,
                y_fixed: Some((0.0, y_max * 1.05)),
                log_y: false,
                x_at_points: false,
                nonneg: false,
                empty_note: "no samples".into(),
                height: VC_PANEL_HEIGHT,
                x_fixed: Some((-x_max * 0.03, x_max * 1.03)),
                legend: true,
            })
            .collect();
        let fig = Fig::Panels(PanelFig { title: format!("GPU utilisation per VC over time, {name}"), panels });
        written.extend(write_fig(dir, "vc_gpu_utilization", &fig)?);
    }
    Ok(written)
}

/// The values of numeric column `col` of the completed jobs of `jobs.csv`,
/// by the value of column `key` (a job's VC).
fn completed_by(path: &Path, key: &str, col: &str) -> Result<BTreeMap<String, Vec<f64>>, String> {
    let bytes = crate::io::read_csv(path).map_err(|e| e.to_string())?;
    let mut rdr = csv::Reader::from_reader(&bytes[..]);
    let header: Vec<String> =
        rdr.headers().map_err(|e| format!("{}: {e}", path.display()))?.iter().map(str::to_string).collect();
    let (status, k, c) = (column(&header, "status", path)?, column(&header, key, path)?, column(&header, col, path)?);
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut rec = csv::StringRecord::new();
    while rdr.read_record(&mut rec).map_err(|e| format!("{}: {e}", path.display()))? {
        if rec.get(status) != Some("completed") {
            continue;
        }
        if let (Some(kv), Some(x)) = (rec.get(k), rec.get(c).and_then(|s| s.parse::<f64>().ok())) {
            out.entry(kv.to_string()).or_default().push(x);
        }
    }
    Ok(out)
}

/// Decisions averaged per point of the learning curve (fewer when the run
/// has under 20 windows of them: about 20 points then).
pub const CURVE_WINDOW: usize = 50;

/// Plots a RIFLING `learning_curve.csv` (reward, cluster-normalised
/// throughput and epsilon against decisions; reward and throughput as means
/// over consecutive complete windows of [`CURVE_WINDOW`] decisions) into `out` (an
/// `.svg` path; its `.png` twin beside it); or an LDWP one (no
/// `normalized_throughput` column: its `throughput` and `loss` columns
/// instead, `src/policy/ldwp.rs`). A frozen run (the `summary.json` beside
/// the curve names a `*-frozen` policy, or every LDWP row is in phase
/// `frozen`, or every RIFLING epsilon is 0: a fixed table or network) is
/// titled as such, without the epsilon (and loss) lines: it is not learning.
/// Each series gets its own panel and y axis (their scales differ by orders
/// of magnitude: an LDWP loss near 0.01 beside a throughput near 0.5).
///
/// # Errors
/// A message naming a missing file or column.
pub fn plot_learning_curve(curve: &Path, out: &Path, name: &str) -> Result<Vec<PathBuf>, String> {
    let (h, rows) = read_csv(curve)?;
    let ldwp = !h.iter().any(|c| c == "normalized_throughput") && h.iter().any(|c| c == "loss");
    let (d, r, t, e) = (
        column(&h, "decision", curve)?,
        column(&h, "reward", curve)?,
        column(&h, if ldwp { "throughput" } else { "normalized_throughput" }, curve)?,
        column(&h, "epsilon", curve)?,
    );
    // The policy of the run, from the summary beside the curve (a frozen
    // RIFLING run explores with its final epsilon but never updates its table).
    let policy = curve
        .parent()
        .map(|d| d.join("summary.json"))
        .filter(|p| p.exists())
        .and_then(|p| crate::io::read_text(&p).ok())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["policy"].as_str().map(str::to_string));
    let frozen = policy.as_deref().is_some_and(|p| p.ends_with("-frozen"))
        || !rows.is_empty()
            && if ldwp {
                let p = column(&h, "phase", curve)?;
                rows.iter().all(|row| row[p] == "frozen")
            } else {
                rows.iter().all(|row| row[e].parse::<f64>().is_ok_and(|v| v == 0.0))
            };
    let mut cols = vec![("Reward", r), (if ldwp { "Throughput" } else { "Cluster-normalised throughput" }, t)];
    // Each panel's y label: the label's first word, or "Throughput".
    let y_label = |label: &str| {
        if label.contains("hroughput") {
            "Throughput".to_string()
        } else {
            label.split([' ', ',']).next().unwrap_or(label).to_string()
        }
    };
    if !frozen {
        cols.push(("Epsilon (exploration rate)", e));
        if ldwp {
            cols.push(("Loss", column(&h, "loss", curve)?));
        }
    }
    // Windows of CURVE_WINDOW decisions, fewer for a short run (about 20 points).
    let window = CURVE_WINDOW.min((rows.len() / 20).max(1));
    let mut panels = Vec::new();
    for (label, c) in cols {
        // Complete windows only: a short last one is a mean of a few
        // decisions, a spike that is not the policy's (unless the run is
        // shorter than one window).
        let pts: Vec<(f64, f64)> = rows
            .chunks(window)
            .filter(|w| w.len() == window || rows.len() < window)
            .filter_map(|w| {
                let v: Vec<f64> = w.iter().filter_map(|row| row[c].parse::<f64>().ok()).collect();
                let x = w.last()?[d].parse::<f64>().ok()?;
                (!v.is_empty()).then(|| (x, v.iter().sum::<f64>() / v.len() as f64))
            })
            .collect();
        let title = if window == 1 { label.to_string() } else { format!("{label}, mean of {window} decisions") };
        let short = y_label(label);
        panels.push(LineFig {
            title,
            x_label: "Decision".into(),
            y_label: short.clone(),
            lines: vec![Line { name: short, pts, sd: None }],
            log_x: false,
            step: false,
            cdf: false,
            y_fixed: None,
            log_y: false,
            x_at_points: false,
            nonneg: false,
            empty_note: "no decisions".into(),
            height: PANEL_HEIGHT,
            x_fixed: None,
            legend: true,
        });
    }
    let who = if ldwp { "LDWP" } else { "RIFLING" };
    let title = if frozen {
        format!("{who} frozen (no learning): reward and throughput per decision, {name}")
    } else {
        format!("{who} learning curve, {name}")
    };
    let fig = Fig::Panels(PanelFig { title, panels });
    let dir = out.parent().unwrap_or(Path::new("."));
    let stem = out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "learning_curve".into());
    write_fig(dir, &stem, &fig)
}

/// A run's name for titles and legends: its directory's name; for a run of
/// a sweep (`SWEEP/runs/ID`, with `SWEEP/sweep.json` and `SWEEP/summary.csv`
/// listing it), its swept values instead (`policy=rifling, seed=1`), since
/// its directory is named by a hash. Falls back to the directory's name when
/// the sweep's files cannot be read.
pub fn run_name(dir: &Path) -> String {
    let id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let swept_values = || -> Option<String> {
        let runs = dir.parent()?;
        let sweep = runs.parent().filter(|_| runs.file_name().is_some_and(|n| n == "runs"))?;
        let meta: serde_json::Value =
            serde_json::from_str(&crate::io::read_text(&sweep.join("sweep.json")).ok()?).ok()?;
        let swept: Vec<&str> = meta["swept"].as_array()?.iter().filter_map(|v| v.as_str()).collect();
        let (h, rows) = read_csv(&sweep.join("summary.csv")).ok()?;
        let at = |k: &str| h.iter().position(|c| c == k);
        let run_id = at("run_id")?;
        let row = rows.iter().find(|r| r[run_id] == id)?;
        let parts: Vec<String> = swept.iter().filter_map(|k| Some(format!("{k}={}", row[at(k)?]))).collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    };
    swept_values().unwrap_or(id)
}

/// Metrics a sweep charts: always.
pub const SWEEP_METRICS_ALWAYS: [&str; 4] = ["jct_mean_s", "queue_delay_mean_s", "makespan_s", "gpu_utilization"];
/// ... where every run has them (GENIE workloads; the slowdown where some
/// job shared a GPU).
const SWEEP_METRICS_QOS: [&str; 7] = [
    "qos_guarantee_rate",
    "normalized_latency_mean",
    "normalized_throughput_mean",
    "interference_slowdown_mean",
    "qos_guarantee_rate_meetable",
    "normalized_latency_with_wait_mean",
    "normalized_rate_cluster",
];
/// ... where some run shared a GPU.
const SWEEP_METRICS_SHARING: [&str; 5] = [
    "gpu_allocation_mean",
    "gpu_utilization_effective_mean",
    "gpu_memory_utilization_mean",
    "fragmentation_mean",
    "completion_rate",
];

/// ... where some run preempted a job (a sweep comparing preemptive
/// policies): the tail, fairness and checkpoint figures.
const SWEEP_METRICS_PREEMPTION: [&str; 6] = [
    "jct_p99_s",
    "finish_time_fairness_mean",
    "finish_time_fairness_max",
    "jain_fairness_index",
    "preemptions",
    "checkpoint_gpu_hours",
];

/// ... where every run's `policy_metrics` has them (node-dispatch policies,
/// `src/policy/nodesel.rs`): `summary.csv` has them as bare columns, empty
/// for a run without them, so they chart where every row is numeric.
const SWEEP_METRICS_DISPATCH: [&str; 5] = [
    "throughput_jobs_per_hour",
    "throughput_steady_jobs_per_hour",
    "gpu_utilization_steady",
    "load_balance_degree",
    "load_balance_degree_gpu",
];

/// Removes the charts an earlier sweep into `dir` drew (`jct_cdf`, every
/// `<metric>_vs_<key>` and `<metric>_by_config` a sweep can write, `.svg`
/// and `.png`, with their `.tmp`), so that a chart of a key no longer swept
/// is not left beside the new ones. Other files stay.
fn remove_sweep_charts(dir: &Path) -> Result<(), String> {
    let metrics = SWEEP_METRICS_ALWAYS
        .iter()
        .chain(&SWEEP_METRICS_QOS)
        .chain(&SWEEP_METRICS_SHARING)
        .chain(&SWEEP_METRICS_PREEMPTION)
        .chain(&SWEEP_METRICS_DISPATCH);
    let prefixes: Vec<String> = metrics.clone().map(|m| format!("{m}_vs_{}", super::raw::POLICY_OPT)).collect();
    let stems = std::iter::once("jct_cdf".to_string())
        .chain(metrics.clone().map(|m| format!("{m}_by_config")))
        .chain(metrics.flat_map(|m| super::raw::KEYS.iter().map(move |(k, _)| format!("{m}_vs_{k}"))));
    let names = stems.flat_map(|s| [format!("{s}.svg"), format!("{s}.png")]);
    // Charts against a swept policy option (`<metric>_vs_policy_opt.NAME.svg`).
    let mut opt_charts: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| {
                prefixes.iter().any(|p| n.starts_with(p.as_str())) && (n.ends_with(".svg") || n.ends_with(".png"))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    opt_charts.sort();
    for name in names.chain(opt_charts) {
        for p in [dir.join(&name), dir.join(format!("{name}.tmp"))] {
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(format!("removing the earlier sweep's chart {}: {e}", p.display()));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Length, bytes, of the longest common prefix of `a` and `b` (whole characters).
fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices().zip(b.chars()).find(|((_, x), y)| x != y).map_or(a.len().min(b.len()), |((i, _), _)| i)
}

/// `fig` as it is drawn: one plot when it has at most [`MAX_SERIES`] lines;
/// else facets, panels stacked under its title sharing its axes, with at
/// most [`MAX_SERIES`] lines each. A facet holds the configurations that
/// share the values of the first swept keys (the fewest keys that keep every
/// facet within [`MAX_SERIES`]; `parts` gives each line's `key=value`
/// parts), titled by them, its lines named by the other keys; when no such
/// keys exist, consecutive runs of [`MAX_SERIES`] lines, titled
/// "configurations 1–16 of 40".
fn facets(fig: LineFig, parts: &BTreeMap<String, Vec<String>>) -> Fig {
    let n = fig.lines.len();
    if n <= MAX_SERIES {
        return Fig::Line(fig);
    }
    let ((x0, x1), (y0, y1)) = fig.ranges();
    let depth = fig.lines.iter().map(|l| parts.get(&l.name).map_or(0, Vec::len)).min().unwrap_or(0);
    // (facet title, the indices of its lines, parts its lines' names skip)
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    let mut skip = 0;
    for j in 1..depth {
        let mut g: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, l) in fig.lines.iter().enumerate() {
            let f = parts[&l.name][..j].join(", ");
            match g.last_mut() {
                Some(last) if last.0 == f => last.1.push(i),
                _ => g.push((f, vec![i])),
            }
        }
        if g.iter().all(|x| x.1.len() <= MAX_SERIES) {
            (groups, skip) = (g, j);
            break;
        }
    }
    if groups.is_empty() {
        groups = (0..n)
            .step_by(MAX_SERIES)
            .map(|a| {
                let b = (a + MAX_SERIES).min(n);
                (format!("configurations {}–{b} of {n}", a + 1), (a..b).collect())
            })
            .collect();
    }
    let mut lines: Vec<Option<Line>> = fig.lines.into_iter().map(Some).collect();
    let panels = groups
        .into_iter()
        .map(|(title, at)| LineFig {
            title,
            x_label: fig.x_label.clone(),
            y_label: fig.y_label.clone(),
            lines: at
                .into_iter()
                .filter_map(|i| {
                    let mut l = lines[i].take()?;
                    if skip > 0 {
                        l.name = parts[&l.name][skip..].join(", ");
                    }
                    Some(l)
                })
                .collect(),
            log_x: fig.log_x,
            step: fig.step,
            cdf: fig.cdf,
            y_fixed: Some((y0, y1)),
            log_y: fig.log_y,
            x_at_points: fig.x_at_points,
            nonneg: fig.nonneg,
            empty_note: fig.empty_note.clone(),
            height: PLOT_HEIGHT,
            x_fixed: Some((x0, x1)),
            legend: true,
        })
        .collect::<Vec<_>>();
    // One legend, under the last facet, when every facet's would be the
    // same (the same names, drawn alike).
    let key = |p: &LineFig| (p.legend_names(), p.styles());
    let mut panels = panels;
    if panels.windows(2).all(|w| key(&w[0]) == key(&w[1])) {
        let last = panels.len() - 1;
        for p in &mut panels[..last] {
            p.legend = false;
        }
    }
    Fig::Panels(PanelFig { title: fig.title, panels })
}

/// A policy's name for a title: `ldwp-frozen` → "frozen LDWP", `rifling` →
/// "RIFLING" (the learning policies are acronyms); others as written.
fn policy_name(p: &str) -> String {
    let (base, frozen) = p.strip_suffix("-frozen").map_or((p, false), |b| (b, true));
    let base = if matches!(base, "ldwp" | "rifling" | "iawp") { base.to_uppercase() } else { base.to_string() };
    if frozen { format!("frozen {base}") } else { base }
}

/// Mean and sample standard deviation (0 for one value).
fn mean_sd(vals: &[f64]) -> (f64, f64) {
    let n = vals.len() as f64;
    let mean = vals.iter().sum::<f64>() / n;
    let sd =
        if vals.len() > 1 { (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() } else { 0.0 };
    (mean, sd)
}

/// "mean ± sd over N seeds" when every point has N ≥ 2 seeds ("over 2–5
/// seeds" when N varies), "one seed" when every point has one; `None` for the
/// bars when some point has a single seed.
fn seeds_note(counts: &[usize]) -> (String, bool) {
    let (lo, hi) = (counts.iter().copied().min().unwrap_or(1), counts.iter().copied().max().unwrap_or(1));
    match (lo, hi) {
        (_, 1) => ("one seed".into(), false),
        (1, _) => (format!("mean of 1–{hi} seeds, no error bars"), false),
        (a, b) if a == b => (format!("mean ± sd over {a} seeds"), true),
        (a, b) => (format!("mean ± sd over {a}–{b} seeds"), true),
    }
}

/// Plots a sweep directory (with `summary.csv` and `sweep.json`); returns the
/// files written (see the module docs for which).
///
/// # Errors
/// A message naming a missing file or column, a run directory that is not
/// complete ([`crate::experiment::check_run_dir`]), or a sweep with nothing to
/// plot against.
pub fn plot_sweep(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let summary = dir.join("summary.csv");
    let (h, rows) = read_csv(&summary)?;
    let meta: serde_json::Value =
        serde_json::from_str(&crate::io::read_text(&dir.join("sweep.json")).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let swept: Vec<String> = meta["swept"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let col = |k: &str| column(&h, k, &summary);
    let numeric = |k: &str| col(k).is_ok_and(|c| rows.iter().all(|r| r[c].parse::<f64>().is_ok()));
    let x_key = swept.iter().find(|k| k.as_str() != "seed" && numeric(k)).cloned();
    let group_keys: Vec<&String> =
        swept.iter().filter(|k| k.as_str() != "seed" && Some(*k) != x_key.as_ref()).collect();
    // A configuration's name: the value alone for one key, `key=value, ...`
    // for several (the key without its `policy_opt.` prefix and dotted path:
    // `policy_opt.share.max_tenants` → `max_tenants`).
    // A key whose values are paths (a trace per configuration) shows what
    // they do not share: `…/workload-1.csv`.
    let mut strip: BTreeMap<&str, usize> = BTreeMap::new();
    for k in &group_keys {
        let c = col(k)?;
        let first = rows.first().map_or("", |r| r[c].as_str());
        if rows.iter().all(|r| r[c].contains('/')) && rows.iter().any(|r| r[c] != first) {
            let shared = rows.iter().map(|r| common_prefix(first, &r[c])).min().unwrap_or(0);
            if let Some(cut) = first[..shared].rfind('/') {
                strip.insert(k.as_str(), cut);
            }
        }
    }
    let shown = |k: &str, v: &str| match strip.get(k) {
        Some(&cut) => format!("…{}", &v[cut..]),
        None => v.to_string(),
    };
    // The parts of a configuration's name: the value alone for one key,
    // `key=value` for each of several.
    let parts_of = |r: &Vec<String>| -> Result<Vec<String>, String> {
        if let [k] = group_keys[..] {
            return Ok(vec![shown(k, &r[col(k)?])]);
        }
        group_keys
            .iter()
            .map(|k| Ok(format!("{}={}", short_key(k).rsplit('.').next().unwrap_or(k), shown(k, &r[col(k)?]))))
            .collect()
    };
    let group_of = |r: &Vec<String>| -> Result<String, String> {
        let parts = parts_of(r)?;
        Ok(if parts.is_empty() { "all runs".into() } else { parts.join(", ") })
    };
    // The order of configurations: by the swept keys' values, in the order
    // the keys are swept, numbers numerically, other values as text.
    let sort_key = |r: &Vec<String>| -> Result<Vec<(f64, String)>, String> {
        group_keys
            .iter()
            .map(|k| {
                let v = &r[col(k)?];
                Ok(v.parse::<f64>().map_or((f64::INFINITY, v.clone()), |x| (x, String::new())))
            })
            .collect()
    };
    let mut config_order: Vec<(Vec<(f64, String)>, String)> = Vec::new();
    let mut parts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &rows {
        let g = group_of(r)?;
        if !config_order.iter().any(|c| c.1 == g) {
            config_order.push((sort_key(r)?, g.clone()));
            parts.insert(g, parts_of(r)?);
        }
    }
    config_order.sort_by(|a, b| {
        a.0.iter()
            .zip(&b.0)
            .map(|(x, y)| x.0.total_cmp(&y.0).then_with(|| x.1.cmp(&y.1)))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let rank = |g: &str| config_order.iter().position(|c| c.1 == g).unwrap_or(usize::MAX);
    // The workload and policy every run shares, from the runs' manifests: a
    // GENIE workload's arrivals are tasks; a single policy not swept is named
    // in the titles.
    let idc = col("run_id")?;
    let mut workloads = std::collections::BTreeSet::new();
    let mut policies = std::collections::BTreeSet::new();
    for r in &rows {
        let run_dir = dir.join("runs").join(&r[idc]);
        crate::experiment::check_run_dir(&run_dir)?;
        let m: serde_json::Value =
            serde_json::from_str(&crate::io::read_text(&run_dir.join("manifest.json")).map_err(|e| e.to_string())?)
                .map_err(|e| format!("{}: {e}", run_dir.join("manifest.json").display()))?;
        workloads.insert(m["spec"]["workload"]["kind"].as_str().unwrap_or("").to_string());
        policies.insert(m["policy"].as_str().unwrap_or("").to_string());
    }
    let genie = workloads.len() == 1 && workloads.contains("genie");
    let setting = match (swept.iter().any(|k| k == "policy"), policies.iter().next()) {
        (false, Some(p)) if policies.len() == 1 && !p.is_empty() => format!(", {}", policy_name(p)),
        _ => String::new(),
    };
    remove_sweep_charts(dir)?;
    let mut written = Vec::new();
    // QoS metrics only where every run has them (GENIE workloads).
    // Sharing metrics only where some run shared a GPU.
    let any_nonzero = |k: &str| col(k).is_ok_and(|c| rows.iter().any(|r| r[c] != "0"));
    let metrics: Vec<&str> = SWEEP_METRICS_ALWAYS
        .into_iter()
        .chain(
            SWEEP_METRICS_QOS
                .into_iter()
                .filter(|m| numeric(m) && (*m != "interference_slowdown_mean" || any_nonzero("colocated_jobs"))),
        )
        .chain(SWEEP_METRICS_SHARING.into_iter().filter(|m| numeric(m) && any_nonzero("shared_launches")))
        .chain(SWEEP_METRICS_PREEMPTION.into_iter().filter(|m| numeric(m) && any_nonzero("preemptions")))
        .chain(SWEEP_METRICS_DISPATCH.into_iter().filter(|m| numeric(m)))
        .collect();
    for metric in metrics {
        let mc = col(metric)?;
        let value = |r: &Vec<String>| -> Result<f64, String> {
            r[mc].parse().map_err(|_| format!("{}: `{metric}` is not numeric", summary.display()))
        };
        let max = rows.iter().filter_map(|r| value(r).ok()).fold(0.0, f64::max);
        let (m_label, div) = label_and_scale(metric, max);
        if let Some(x) = &x_key {
            let xc = col(x)?;
            // group -> x -> values over seeds
            let mut acc: BTreeMap<String, BTreeMap<i64, (f64, Vec<f64>)>> = BTreeMap::new();
            for r in &rows {
                let xv: f64 = r[xc].parse().map_err(|_| format!("{}: `{x}` is not numeric", summary.display()))?;
                acc.entry(group_of(r)?)
                    .or_default()
                    .entry((xv * 1e6).round() as i64)
                    .or_insert((xv, Vec::new()))
                    .1
                    .push(value(r)? / div);
            }
            let counts: Vec<usize> = acc.values().flat_map(|b| b.values().map(|v| v.1.len())).collect();
            let (note, bars) = seeds_note(&counts);
            let lines: Vec<Line> = acc
                .into_iter()
                .map(|(g, by_x)| {
                    let (pts, sds): (Vec<_>, Vec<_>) = by_x
                        .into_values()
                        .map(|(xv, vals)| {
                            let (m, s) = mean_sd(&vals);
                            ((xv, m), s)
                        })
                        .unzip();
                    Line { name: g, pts, sd: bars.then_some(sds) }
                })
                .collect();
            let mut lines = lines;
            lines.sort_by_key(|l| rank(&l.name));
            let (x_name, mut x_unit) = human(x);
            if genie && x_unit == "jobs/h" {
                x_unit = "tasks/h";
            }
            let ys: Vec<f64> = lines.iter().flat_map(|l| l.pts.iter().map(|p| p.1)).collect();
            // A share in per cent stays on a linear axis, as a fraction does.
            let log = human(metric).1 != "%" && log_y(&ys);
            // A bar reaching below 0 is cut: at 0, or on a log axis at its bottom.
            let cut = lines.iter().any(|l| {
                l.sd.as_ref().is_some_and(|sd| {
                    l.pts.iter().zip(sd).any(|(p, s)| *s > 0.0 && p.1 - s < 0.0 || log && p.1 - s <= 0.0)
                })
            });
            let note = match (cut, log) {
                (false, _) => note,
                (true, false) => format!("{note}; bars cut at 0"),
                (true, true) => format!("{note}; bars cut at the axis' bottom"),
            };
            let fig = facets(
                LineFig {
                    title: format!("{} vs {}{setting} ({note})", human(metric).0, in_sentence(&x_name)),
                    x_label: if x_unit.is_empty() { x_name } else { format!("{x_name} ({x_unit})") },
                    y_label: if log { format!("{m_label}, log scale") } else { m_label },
                    lines,
                    log_x: false,
                    step: false,
                    cdf: false,
                    y_fixed: None,
                    log_y: log,
                    x_at_points: true,
                    nonneg: true,
                    empty_note: "no runs".into(),
                    height: PLOT_HEIGHT,
                    x_fixed: None,
                    legend: true,
                },
                &parts,
            );
            written.extend(write_fig(dir, &format!("{metric}_vs_{x}"), &fig)?);
        } else {
            // A categorical sweep: one dot per configuration, sorted by the keys' values.
            let order: Vec<String> = config_order.iter().map(|c| c.1.clone()).collect();
            let mut acc: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for r in &rows {
                acc.entry(group_of(r)?).or_default().push(value(r)? / div);
            }
            let counts: Vec<usize> = acc.values().map(Vec::len).collect();
            let (note, bars) = seeds_note(&counts);
            let stats: Vec<(f64, f64)> = order.iter().map(|g| mean_sd(&acc[g])).collect();
            let note = if bars && stats.iter().any(|(m, s)| *s > 0.0 && m - s < 0.0) {
                format!("{note}; bars cut at 0")
            } else {
                note
            };
            let fig = Fig::Dot(DotFig {
                title: format!("{} per configuration{setting} ({note})", human(metric).0),
                x_label: m_label,
                names: order,
                means: stats.iter().map(|s| s.0).collect(),
                sd: bars.then(|| stats.iter().map(|s| s.1).collect()),
            });
            written.extend(write_fig(dir, &format!("{metric}_by_config"), &fig)?);
        }
    }
    // Per-group JCT CDFs, pooled over the group's runs.
    let mut pooled: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &rows {
        let run_dir = dir.join("runs").join(&r[idc]);
        crate::experiment::check_run_dir(&run_dir)?;
        crate::experiment::check_csv_tables(&run_dir)?;
        let jobs = run_dir.join("jobs.csv");
        let jct = completed_values(&jobs, &["jct_s"])?.1.pop().unwrap_or_default();
        pooled.entry(group_of(r)?).or_default().extend(jct);
    }
    let mut pooled: Vec<(String, Vec<f64>)> = pooled.into_iter().collect();
    pooled.sort_by_key(|p| rank(&p.0));
    let fig = facets(cdf_fig(format!("JCT CDF per configuration{setting} (runs pooled)"), "jct_s", pooled), &parts);
    written.extend(write_fig(dir, "jct_cdf", &fig)?);
    Ok(written)
}

/// A series of [`write_line_chart`]: name, points, and an optional ± error per point.
pub type ChartSeries = (String, Vec<(f64, f64)>, Option<Vec<f64>>);

/// Draws `series` as one line chart in the layout of every chart here
/// (legend below, markers only on lines of few points) into `dir/NAME.svg` and
/// `dir/NAME.png`; `y_fixed` fixes the y range. Returns both paths. For
/// outputs that are not a run or a sweep (the fill experiment's figure,
/// [`super::fill`]).
pub fn write_line_chart(
    dir: &Path,
    name: &str,
    title: &str,
    (x_label, y_label): (&str, &str),
    series: Vec<ChartSeries>,
    y_fixed: Option<(f64, f64)>,
) -> Result<Vec<PathBuf>, String> {
    let fig = Fig::Line(LineFig {
        title: title.into(),
        x_label: x_label.into(),
        y_label: y_label.into(),
        lines: series.into_iter().map(|(name, pts, sd)| Line { name, pts, sd }).collect(),
        log_x: false,
        step: false,
        cdf: false,
        y_fixed,
        log_y: false,
        x_at_points: false,
        nonneg: true,
        empty_note: "no points".into(),
        height: PLOT_HEIGHT,
        x_fixed: None,
        legend: true,
    });
    write_fig(dir, name, &fig)
}

/// The offset (px) from a text's anchor point to the origin of its glyph
/// layout, as plotters places a text: its measured box
/// (`layout_box`) moved by the anchor (left/centre/right,
/// top/centre/bottom). Shared by the PNG and SVG backends so that both
/// place every text alike.
fn anchor_offset<S: plotters_backend::BackendTextStyle>(text: &str, style: &S) -> Result<(i32, i32), S::FontError> {
    let ((min_x, min_y), (max_x, max_y)) = style.layout_box(text)?;
    let (width, height) = (max_x - min_x, max_y - min_y);
    let dx = match style.anchor().h_pos {
        HPos::Left => 0,
        HPos::Right => -width,
        HPos::Center => -width / 2,
    };
    let dy = match style.anchor().v_pos {
        VPos::Top => 0,
        VPos::Center => -height / 2,
        VPos::Bottom => -height,
    };
    Ok((dx - min_x, dy - min_y))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ldwp_learning_curve_plots() {
        // LDWP's columns (src/policy/ldwp.rs): no normalized_throughput; the
        // RIFLING-only reader refused this file.
        let d = tempfile::tempdir().unwrap();
        let curve = d.path().join("learning_curve.csv");
        std::fs::write(
            &curve,
            "decision,time_s,phase,node,reward,throughput,epsilon,loss\n1,5.0,pretrain,0,,0.0,0.0,0.5\n2,6.0,learn,1,0.025,0.025,0.3,0.2\n",
        )
        .unwrap();
        let out = d.path().join("lc.svg");
        plot_learning_curve(&curve, &out, "x").unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        assert!(
            svg.contains("LDWP learning curve") && svg.to_lowercase().contains("loss"),
            "{}",
            &svg[..svg.len().min(400)]
        );
    }

    #[test]
    fn a_learning_curve_has_one_panel_per_series() {
        // Four series (reward, throughput, epsilon, loss): four panel titles
        // under the figure's title, and the image is four panels tall.
        let d = tempfile::tempdir().unwrap();
        let curve = d.path().join("learning_curve.csv");
        std::fs::write(
            &curve,
            "decision,time_s,phase,node,reward,throughput,epsilon,loss\n1,5.0,learn,0,0.01,0.5,0.3,0.02\n2,6.0,learn,1,0.02,0.4,0.29,0.01\n",
        )
        .unwrap();
        plot_learning_curve(&curve, &d.path().join("lc.svg"), "run").unwrap();
        let svg = std::fs::read_to_string(d.path().join("lc.svg")).unwrap();
        // Each text is a group of glyph outlines labelled with it.
        for t in ["LDWP learning curve, run", "Reward", "Throughput", "Epsilon (exploration rate)", "Loss"] {
            assert!(svg.contains(&format!("<g aria-label=\"{t}\"")), "no {t}");
        }
        assert!(!svg.contains("<text"), "text left to the viewer's font");
        // One title line (a 48 px band) over four panels of 320 px.
        assert!(svg.starts_with(&format!("<svg width=\"720\" height=\"{}\"", 48 + 4 * 320)), "{}", &svg[..80]);
    }

    #[test]
    fn a_long_title_breaks_at_spaces_and_every_line_fits() {
        let title = "Co-located speed (achieved / isolated) vs θ_mem (IAWP memory threshold), fifo+backfill (mean ± sd over 5 seeds)";
        let lines = wrap_title(title, 600);
        assert!(lines.len() >= 2, "{lines:?}");
        assert_eq!(lines.join(" "), title);
        assert!(lines.iter().all(|l| text_width(l, TITLE_SIZE) <= 600), "{lines:?}");
        // A title that fits stays one line; a word wider than the width stays whole.
        assert_eq!(wrap_title("Mean JCT", 600), vec!["Mean JCT"]);
        assert_eq!(wrap_title("abcdefghijklmnop q", 10), vec!["abcdefghijklmnop", "q"]);
    }

    #[test]
    fn decimation_by_hand() {
        // Column 0: (0,5) (0,1) (0,9) (0,4): first, lowest, highest, last, in
        // order: (0,5) (0,1) (0,9) (0,4). Column 1: one point. Column 2: two
        // equal points, one kept; column 3: (3,2) (3,2) (3,7): (3,2) (3,7).
        let px = [(0, 5), (0, 1), (0, 3), (0, 9), (0, 4), (1, 6), (2, 2), (2, 2), (3, 2), (3, 2), (3, 7)];
        assert_eq!(decimate(&px), vec![(0, 5), (0, 1), (0, 9), (0, 4), (1, 6), (2, 2), (3, 2), (3, 7)]);
        assert!(decimate(&[]).is_empty());
        // 100,000 points over 700 columns: at most 4 a column.
        let many: Vec<(i32, i32)> = (0..100_000).map(|i| (i / 143, (i * 7919) % 400)).collect();
        assert!(decimate(&many).len() <= 4 * 700);
    }

    #[test]
    fn cdf_by_hand() {
        assert_eq!(cdf(vec![3.0, 1.0, 2.0, 2.0]), vec![(1.0, 0.25), (2.0, 0.5), (2.0, 0.75), (3.0, 1.0)]);
    }
}
