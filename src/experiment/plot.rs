//! SVG plots of a run directory or a sweep directory, drawn from their CSV
//! outputs only (plotters, SVG backend).
//!
//! - A run directory: `jct_cdf.svg` and `queue_delay_cdf.svg` (from
//!   `jobs.csv`), `gpu_utilization.svg` and `queue_length.svg` (from
//!   `timeline.csv`).
//! - A sweep directory: for each of `jct_mean_s`, `queue_delay_mean_s`,
//!   `makespan_s` and `gpu_utilization`, a line chart of the metric against
//!   the first numeric swept key other than `seed`, one line per combination
//!   of the other swept keys, with error bars of ± one standard deviation
//!   over seeds (also, when some run shared GPUs, `gpu_allocation_mean`,
//!   `gpu_utilization_effective_mean`, `gpu_memory_utilization_mean`,
//!   `fragmentation_mean` and `completion_rate`; when some run preempted a
//!   job, `jct_p99_s`, `finish_time_fairness_mean`,
//!   `finish_time_fairness_max`, `jain_fairness_index`, `preemptions` and
//!   `checkpoint_gpu_hours`); and `jct_cdf.svg`, the JCT CDF of each such line's runs
//!   pooled (the per-policy CDFs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

type Series = Vec<(String, Vec<(f64, f64)>)>;

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

fn column(header: &[String], name: &str, path: &Path) -> Result<usize, String> {
    header.iter().position(|h| h == name).ok_or_else(|| format!("{}: no column `{name}`", path.display()))
}

/// Empirical CDF points (value, fraction ≤ value) of `values`.
pub fn cdf(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    values.sort_by(f64::total_cmp);
    let n = values.len() as f64;
    values.iter().enumerate().map(|(i, &v)| (v, (i + 1) as f64 / n)).collect()
}

fn colour(i: usize) -> RGBColor {
    // matplotlib's tab10 then the light half of tab20: 16 distinguishable series.
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

fn range(series: &Series, log_x: bool) -> ((f64, f64), (f64, f64)) {
    let pts = series.iter().flat_map(|s| s.1.iter()).filter(|p| !log_x || p.0 > 0.0);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        return ((0.0, 1.0), (0.0, 1.0));
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    ((x0, x1), (y0.min(0.0), y1 * 1.05))
}

/// Draws line series (with optional ± error bars) into an SVG file.
fn line_chart(
    file: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &Series,
    errors: Option<&BTreeMap<String, Vec<f64>>>,
    log_x: bool,
) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| format!("{}: {e}", file.display());
    let root = SVGBackend::new(file, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let ((x0, x1), (mut y0, mut y1)) = range(series, log_x);
    // Keep the error bars inside the plot.
    if let Some(errs) = errors {
        for (name, pts) in series {
            for (&(_, y), &s) in pts.iter().zip(errs.get(name).into_iter().flatten()) {
                y0 = y0.min(y - s);
                y1 = y1.max((y + s) * 1.02);
            }
        }
    }
    let mut builder = ChartBuilder::on(&root);
    builder.caption(title, ("sans-serif", 20)).margin(15).x_label_area_size(45).y_label_area_size(70);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(|x| e(&x))?;
            for (i, (name, pts)) in series.iter().enumerate() {
                let c = colour(i);
                let pts: Vec<(f64, f64)> = pts.iter().copied().filter(|p| !log_x || p.0 > 0.0).collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                    .map_err(|x| e(&x))?
                    .label(name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
                if let Some(sd) = errors.and_then(|m| m.get(name)) {
                    for (&(x, y), &s) in pts.iter().zip(sd) {
                        chart
                            .draw_series(std::iter::once(PathElement::new(
                                vec![(x, y - s), (x, y + s)],
                                c.stroke_width(1),
                            )))
                            .map_err(|x| e(&x))?;
                    }
                }
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|x| e(&x))?;
        }};
    }
    if log_x {
        draw!(builder.build_cartesian_2d((x0.max(1e-3)..x1).log_scale(), y0..y1).map_err(|x| e(&x))?);
    } else {
        draw!(builder.build_cartesian_2d(x0..x1, y0..y1).map_err(|x| e(&x))?);
    }
    root.present().map_err(|x| e(&x))
}

/// Plots a run directory; returns the files written (named in
/// [`crate::experiment::PLOT_FILES`]).
///
/// # Errors
/// A message naming a missing file or column, or a directory that is not a
/// complete run ([`crate::experiment::check_run_dir`]).
pub fn plot_run(dir: &Path) -> Result<Vec<PathBuf>, String> {
    crate::experiment::check_run_dir(dir)?;
    let jobs = dir.join("jobs.csv");
    let (h, rows) = read_csv(&jobs)?;
    let (jct, q, status) =
        (column(&h, "jct_s", &jobs)?, column(&h, "queue_delay_s", &jobs)?, column(&h, "status", &jobs)?);
    let done: Vec<&Vec<String>> = rows.iter().filter(|r| r[status] == "completed").collect();
    let vals = |c: usize| done.iter().filter_map(|r| r[c].parse::<f64>().ok()).collect::<Vec<_>>();
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut written = Vec::new();
    for (file, col, what) in [("jct_cdf.svg", jct, "JCT (s)"), ("queue_delay_cdf.svg", q, "queueing delay (s)")] {
        let path = dir.join(file);
        line_chart(
            &path,
            &format!("{what} CDF, {name}"),
            what,
            "fraction of jobs",
            &vec![(name.clone(), cdf(vals(col)))],
            None,
            true,
        )?;
        written.push(path);
    }
    let timeline = dir.join("timeline.csv");
    if timeline.exists() {
        let (h, rows) = read_csv(&timeline)?;
        let t = column(&h, "time_s", &timeline)?;
        for (file, col, what) in [
            ("gpu_utilization.svg", "gpu_utilization", "GPU utilisation"),
            ("queue_length.svg", "jobs_pending", "pending jobs"),
        ] {
            let c = column(&h, col, &timeline)?;
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|r| Some((r[t].parse::<f64>().ok()? / 3600.0, r[c].parse::<f64>().ok()?)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let path = dir.join(file);
            line_chart(
                &path,
                &format!("{what} over time, {name}"),
                "time (h)",
                what,
                &vec![(name.clone(), pts)],
                None,
                false,
            )?;
            written.push(path);
        }
    }
    let curve = dir.join("learning_curve.csv");
    if curve.exists() {
        written.push(plot_learning_curve(&curve, &dir.join("learning_curve.svg"), &name)?);
    }
    Ok(written)
}

/// Decisions averaged per point of the learning curve.
pub const CURVE_WINDOW: usize = 50;

/// Plots a RIFLING `learning_curve.csv` (reward, cluster-normalised
/// throughput and epsilon against decisions; reward and throughput as means
/// over consecutive windows of [`CURVE_WINDOW`] decisions) into `out`; or
/// an LDWP one (no `normalized_throughput` column: its `throughput` and
/// `loss` columns instead, `src/policy/ldwp.rs`).
///
/// # Errors
/// A message naming a missing file or column.
pub fn plot_learning_curve(curve: &Path, out: &Path, name: &str) -> Result<PathBuf, String> {
    let (h, rows) = read_csv(curve)?;
    let ldwp = !h.iter().any(|c| c == "normalized_throughput") && h.iter().any(|c| c == "loss");
    let (d, r, t, e) = (
        column(&h, "decision", curve)?,
        column(&h, "reward", curve)?,
        column(&h, if ldwp { "throughput" } else { "normalized_throughput" }, curve)?,
        column(&h, "epsilon", curve)?,
    );
    let mut cols = vec![("reward", r), ("cluster-normalised throughput", t), ("epsilon", e)];
    if ldwp {
        cols.push(("loss", column(&h, "loss", curve)?));
    }
    let mut series: Series = Vec::new();
    for (label, c) in cols {
        let pts: Vec<(f64, f64)> = rows
            .chunks(CURVE_WINDOW)
            .filter_map(|w| {
                let v: Vec<f64> = w.iter().filter_map(|row| row[c].parse::<f64>().ok()).collect();
                let x = w.last()?[d].parse::<f64>().ok()?;
                (!v.is_empty()).then(|| (x, v.iter().sum::<f64>() / v.len() as f64))
            })
            .collect();
        series.push((format!("{label} ({CURVE_WINDOW}-decision mean)"), pts));
    }
    let who = if ldwp { "LDWP" } else { "RIFLING" };
    line_chart(out, &format!("{who} learning curve, {name}"), "decision", "value", &series, None, false)?;
    Ok(out.to_path_buf())
}

/// Metrics a sweep charts against its x key, `<metric>_vs_<key>.svg`: always.
const SWEEP_METRICS_ALWAYS: [&str; 4] = ["jct_mean_s", "queue_delay_mean_s", "makespan_s", "gpu_utilization"];
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

/// Removes the charts an earlier sweep into `dir` drew (`jct_cdf.svg` and
/// every `<metric>_vs_<key>.svg` a sweep can write, with their `.tmp`), so
/// that a chart of a key no longer swept is not left beside the new ones.
/// Other files stay.
fn remove_sweep_charts(dir: &Path) -> Result<(), String> {
    let metrics = SWEEP_METRICS_ALWAYS
        .iter()
        .chain(&SWEEP_METRICS_QOS)
        .chain(&SWEEP_METRICS_SHARING)
        .chain(&SWEEP_METRICS_PREEMPTION)
        .chain(&SWEEP_METRICS_DISPATCH);
    let prefixes: Vec<String> = metrics.clone().map(|m| format!("{m}_vs_{}", super::raw::POLICY_OPT)).collect();
    let names = std::iter::once("jct_cdf.svg".to_string())
        .chain(metrics.flat_map(|m| super::raw::KEYS.iter().map(move |(k, _)| format!("{m}_vs_{k}.svg"))));
    // Charts against a swept policy option (`<metric>_vs_policy_opt.NAME.svg`).
    let mut opt_charts: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| prefixes.iter().any(|p| n.starts_with(p.as_str())) && n.ends_with(".svg"))
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

/// Plots a sweep directory (with `summary.csv` and `sweep.json`); returns the files written.
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
    let group_of = |r: &Vec<String>| -> Result<String, String> {
        let parts: Vec<String> =
            group_keys.iter().map(|k| Ok(format!("{k}={}", r[col(k)?]))).collect::<Result<_, String>>()?;
        Ok(if parts.is_empty() { "all".into() } else { parts.join(", ") })
    };
    remove_sweep_charts(dir)?;
    let mut written = Vec::new();
    if let Some(x) = &x_key {
        let xc = col(x)?;
        // QoS metrics only where every run has them (GENIE workloads).
        // Sharing metrics only where some run shared a GPU.
        let any_nonzero = |k: &str| col(k).is_ok_and(|c| rows.iter().any(|r| r[c] != "0"));
        let metrics = SWEEP_METRICS_ALWAYS
            .into_iter()
            .chain(
                SWEEP_METRICS_QOS
                    .into_iter()
                    .filter(|m| numeric(m) && (*m != "interference_slowdown_mean" || any_nonzero("colocated_jobs"))),
            )
            .chain(SWEEP_METRICS_SHARING.into_iter().filter(|m| numeric(m) && any_nonzero("shared_launches")))
            .chain(SWEEP_METRICS_PREEMPTION.into_iter().filter(|m| numeric(m) && any_nonzero("preemptions")))
            .chain(SWEEP_METRICS_DISPATCH.into_iter().filter(|m| numeric(m)));
        for metric in metrics {
            let mc = col(metric)?;
            // group -> x -> values over seeds
            let mut acc: BTreeMap<String, BTreeMap<i64, (f64, Vec<f64>)>> = BTreeMap::new();
            for r in &rows {
                let xv: f64 = r[xc].parse().map_err(|_| format!("{}: `{x}` is not numeric", summary.display()))?;
                let v: f64 = r[mc].parse().map_err(|_| format!("{}: `{metric}` is not numeric", summary.display()))?;
                acc.entry(group_of(r)?)
                    .or_default()
                    .entry((xv * 1e6).round() as i64)
                    .or_insert((xv, Vec::new()))
                    .1
                    .push(v);
            }
            let mut series: Series = Vec::new();
            let mut errors: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for (g, by_x) in acc {
                let mut pts = Vec::new();
                let mut sds = Vec::new();
                for (_, (xv, vals)) in by_x {
                    let n = vals.len() as f64;
                    let mean = vals.iter().sum::<f64>() / n;
                    let sd = if vals.len() > 1 {
                        (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
                    } else {
                        0.0
                    };
                    pts.push((xv, mean));
                    sds.push(sd);
                }
                errors.insert(g.clone(), sds);
                series.push((g, pts));
            }
            let path = dir.join(format!("{metric}_vs_{x}.svg"));
            line_chart(
                &path,
                &format!("{metric} vs {x} (mean ± sd over seeds)"),
                x,
                metric,
                &series,
                Some(&errors),
                false,
            )?;
            written.push(path);
        }
    }
    // Per-group JCT CDFs, pooled over the group's runs.
    let idc = col("run_id")?;
    let mut pooled: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &rows {
        let run_dir = dir.join("runs").join(&r[idc]);
        crate::experiment::check_run_dir(&run_dir)?;
        let jobs = run_dir.join("jobs.csv");
        let (jh, jrows) = read_csv(&jobs)?;
        let (jc, sc) = (column(&jh, "jct_s", &jobs)?, column(&jh, "status", &jobs)?);
        pooled
            .entry(group_of(r)?)
            .or_default()
            .extend(jrows.iter().filter(|j| j[sc] == "completed").filter_map(|j| j[jc].parse::<f64>().ok()));
    }
    let series: Series = pooled.into_iter().map(|(g, v)| (g, cdf(v))).collect();
    let path = dir.join("jct_cdf.svg");
    line_chart(&path, "JCT CDF per configuration (runs pooled)", "JCT (s)", "fraction of jobs", &series, None, true)?;
    written.push(path);
    Ok(written)
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
        assert!(svg.contains("LDWP learning curve") && svg.contains("loss"), "{}", &svg[..svg.len().min(400)]);
    }

    #[test]
    fn cdf_by_hand() {
        assert_eq!(cdf(vec![3.0, 1.0, 2.0, 2.0]), vec![(1.0, 0.25), (2.0, 0.5), (2.0, 0.75), (3.0, 1.0)]);
    }
}
