//! Figures that read wrong, options that were silently ignored, inputs that
//! got past the bounds (issue 13, points 7 and 9).

use crate::common::dlsched;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn clean_error(o: &Output, needles: &[&str]) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error:") && !err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`: {err}");
    }
}

fn run_to(dir: &Path, args: &[&str]) -> PathBuf {
    let out = dir.join("run");
    let mut a = args.to_vec();
    a.extend(["--out", out.to_str().unwrap(), "--sample-interval", "0"]);
    let o = dlsched(&a);
    assert!(o.status.success(), "{}", text(&o.stderr));
    out
}

fn summary(run: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap()
}

/// `jobs.csv` rows as (job_id, column) for one column.
fn column(run: &Path, name: &str) -> Vec<(String, String)> {
    let mut rdr = csv::Reader::from_path(run.join("jobs.csv")).unwrap();
    let col = rdr.headers().unwrap().iter().position(|h| h == name).unwrap();
    rdr.records().map(|r| r.unwrap()).map(|r| (r[0].to_string(), r[col].to_string())).collect()
}

#[test]
fn offered_load_of_jobs_arriving_at_one_instant_is_not_zero() {
    let d = tempfile::tempdir().unwrap();
    // Three 16-GPU jobs at t = 0 on lab16 (16 GPUs), 100, 200 and 300 s:
    // demand 16 × 600 = 9,600 GPU-s; the arrival span is 0, so the window is
    // the mean duration, 200 s: 9,600 / (16 × 200) = 3.
    let t = write(d.path(), "t.csv", "job_id,submit_time,duration,gpu_num\na,0,100,16\nb,0,200,16\nc,0,300,16\n");
    let run = run_to(d.path(), &["simulate", "--trace", t.to_str().unwrap()]);
    assert_eq!(summary(&run)["offered_load"], 3.0);
    // Spread arrivals keep the arrival span: 1 GPU × 10 s + 2 × 30 s = 70
    // GPU-s over 1,000 s (longer than the 20 s mean) on 16 GPUs = 0.004375.
    let t = write(d.path(), "u.csv", "job_id,submit_time,duration,gpu_num\na,0,10,1\nb,1000,30,2\n");
    let run = run_to(d.path(), &["simulate", "--trace", t.to_str().unwrap()]);
    assert_eq!(summary(&run)["offered_load"], 0.004375);
}

#[test]
fn a_job_larger_than_its_vc_but_not_the_cluster_exceeds_the_vc() {
    let d = tempfile::tempdir().unwrap();
    // Two VCs of one 8-GPU node: 16 GPUs in all. 12 GPUs fit the cluster but
    // not VC a; 20 fit neither.
    let vcs = write(d.path(), "vcs.csv", "vc,nodes,gpus_per_node\na,1,8\nb,1,8\n");
    let t = write(
        d.path(),
        "t.csv",
        "job_id,submit_time,duration,gpu_num,vc\nsmall,0,10,8,b\nwide,0,10,12,a\nhuge,0,10,20,a\n",
    );
    let run = run_to(d.path(), &["simulate", "--trace", t.to_str().unwrap(), "--vcs", vcs.to_str().unwrap()]);
    let s = summary(&run);
    assert_eq!(s["jobs_skipped_by_reason"], serde_json::json!({"exceeds_cluster": 1, "exceeds_vc": 1}));
    assert_eq!(s["jobs_completed"], 1);
    let skipped = std::fs::read_to_string(run.join("skipped.csv")).unwrap();
    assert!(skipped.contains("wide") && skipped.contains("exceeds_vc"), "{skipped}");
}

#[test]
fn trace_speed_ends_exactly_at_the_longest_durations() {
    let d = tempfile::tempdir().unwrap();
    // 10^9, 10^10 and 10^11 s (the accepted maximum) from t = 0, and
    // 10^11 - 1 s from t = 7 s: ends 10^9, 10^10, 10^11 and 10^11 + 6 s.
    let t = write(
        d.path(),
        "t.csv",
        "job_id,submit_time,duration,gpu_num\n\
         a,0,1000000000,1\nb,0,10000000000,1\nc,0,100000000000,1\nd,7,99999999999,1\n",
    );
    let run = run_to(d.path(), &["simulate", "--trace", t.to_str().unwrap()]);
    let ends = column(&run, "end_s");
    let want = [("a", "1000000000"), ("b", "10000000000"), ("c", "100000000000"), ("d", "100000000006")];
    assert_eq!(ends, want.map(|(a, b)| (a.to_string(), b.to_string())).to_vec());
}

#[test]
fn wall_clock_submissions_are_held_to_the_time_limit() {
    let d = tempfile::tempdir().unwrap();
    let helios = |last: &str| {
        format!(
            "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n\
             1,u,v,1,1,1,COMPLETED,2020-01-01 00:00:00,,,60,0\n\
             2,u,v,1,1,1,COMPLETED,{last},,,60,0\n"
        )
    };
    let h = write(d.path(), "h.csv", &helios("9999-12-31 23:59:59"));
    // 9999-12-31 is about 2.5e11 s after 2020-01-01: over the 1e11 s limit.
    clean_error(&dlsched(&["simulate", "--trace", h.to_str().unwrap()]), &["h.csv:3", "`submit_time`", "1e11"]);
    let p = write(
        d.path(),
        "p.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n2020-01-01 00:00:00,60,1,60,c\n9999-12-31 23:59:59,60,1,60,c\n",
    );
    clean_error(&dlsched(&["simulate", "--trace", p.to_str().unwrap()]), &["p.csv:3", "`timestamp`", "1e11"]);
    // 2999-12-31 is about 3.1e10 s later: accepted.
    let ok = write(d.path(), "ok.csv", &helios("2999-12-31 00:00:00"));
    let o = dlsched(&["simulate", "--trace", ok.to_str().unwrap(), "--sample-interval", "0"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn genie_profile_takes_the_clusters_simulate_takes() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("v100.json");
    let cluster = ["--nodes", "2", "--gpus-per-node", "4", "--gpu-type", "v100"];
    let mut args = vec!["genie-profile", "--out", m.to_str().unwrap()];
    args.extend(cluster);
    let o = dlsched(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&m).unwrap()).unwrap();
    assert_eq!(saved["models"]["gpu_type"], "v100");
    let mut args = vec!["simulate", "--workload", "genie", "--policy", "genie", "--hours", "1"];
    args.extend(cluster);
    args.extend(["--genie-models", m.to_str().unwrap()]);
    let o = dlsched(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn backfill_is_said_to_change_nothing_where_it_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out = d.path().join(name);
        let mut a = vec!["simulate", "--workload", "genie", "--jobs-per-hour", "40", "--hours", "4"];
        a.extend_from_slice(extra);
        a.extend(["--out", out.to_str().unwrap()]);
        let o = dlsched(&a);
        assert!(o.status.success(), "{}", text(&o.stderr));
        (out, text(&o.stderr))
    };
    let (strict, note) = run("strict", &["--policy", "fifo"]);
    assert!(!note.contains("--backfill"), "{note}");
    let (bf, note) = run("bf", &["--policy", "fifo", "--backfill"]);
    assert!(note.contains("note: --backfill changes nothing"), "{note}");
    // And it does change nothing: every task starts at the same time.
    assert_eq!(column(&strict, "start_s"), column(&bf, "start_s"));
    let (_, note) = run("rp", &["--policy", "random-placement", "--backfill"]);
    assert!(note.contains("random-placement") && note.contains("--backfill do not apply"), "{note}");
    // A sweep says so too, once per case.
    let f = write(
        d.path(),
        "e.toml",
        "question = \"q\"\n[base]\nworkload = \"genie\"\nbackfill = true\n\
         [sweep]\npolicy = [\"fifo\", \"random-placement\", \"genie\"]\nseed = [1, 2]\n",
    );
    let e = dlsched::sweep::Experiment::load(&f).unwrap();
    assert_eq!(e.notes.len(), 2, "{:?}", e.notes);
    assert!(e.notes[0].contains("`fifo` on GENIE tasks") && e.notes[1].contains("`random-placement`"), "{:?}", e.notes);
}

#[test]
fn a_file_without_line_breaks_is_an_error_not_an_abort() {
    let d = tempfile::tempdir().unwrap();
    // 2 MiB with no line break: over the 1 MiB line bound.
    let blob = write(d.path(), "blob.csv", &"x".repeat(2 << 20));
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example_jobs.csv");
    let trace = trace.to_str().unwrap();
    clean_error(
        &dlsched(&["simulate", "--trace", trace, "--vcs", blob.to_str().unwrap()]),
        &["blob.csv:1", "longer than 1048576 bytes"],
    );
    clean_error(&dlsched(&["simulate", "--trace", blob.to_str().unwrap()]), &["blob.csv:1", "longer than"]);
    clean_error(&dlsched(&["simulate", "--nodes-file", blob.to_str().unwrap()]), &["blob.csv:1", "longer than"]);
    // An endless device, under a 4 GB address-space limit (it used to abort
    // with SIGABRT, exit 134, inside the csv crate).
    if !Path::new("/dev/zero").exists() || !Path::new("/bin/sh").exists() {
        eprintln!("SKIP a_file_without_line_breaks_is_an_error_not_an_abort (/dev/zero): no /dev/zero or /bin/sh");
        return;
    }
    for flag in ["--vcs", "--trace", "--nodes-file", "--columns-file"] {
        let mut args: Vec<&str> = vec!["simulate"];
        if flag == "--vcs" || flag == "--columns-file" {
            args.extend(["--trace", trace]);
        }
        args.extend([flag, "/dev/zero"]);
        let o = Command::new("/bin/sh")
            .arg("-c")
            .arg("ulimit -v 4000000 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_dlsched"))
            .args(&args)
            .output()
            .unwrap();
        clean_error(&o, &["/dev/zero"]);
    }
}

#[test]
fn sweep_files_and_the_command_line_share_one_set_of_bounds() {
    let d = tempfile::tempdir().unwrap();
    let load = |base: &str| {
        let f = write(d.path(), "e.toml", &format!("question = \"q\"\n[base]\n{base}\n[sweep]\nseed = [1, 2]\n"));
        dlsched::sweep::Experiment::load(&f).map(|_| ()).unwrap_err().message
    };
    for (base, needles) in [
        ("jobs = 5000000000", &["`jobs` is too large", "20000000"][..]),
        ("jobs = 20000001", &["`jobs` is too large", "20000000"]),
        ("jobs = 0", &["`jobs` must be at least 1"]),
        ("nodes = 2\ngpus_per_node = 65", &["`gpus_per_node` is too large", "at most 64"]),
        ("workload = \"genie\"\nhours = 9000", &["`hours`", "8,760"]),
        ("sample_interval = 100000000001", &["`sample_interval`", "at most 1e11"]),
        ("workload = \"genie\"\npolicy = \"rifling\"\ntheta = 0.5", &["`theta` applies only to the GENIE-family"]),
    ] {
        let e = load(base);
        for n in needles {
            assert!(e.contains(n), "{base}: `{e}` lacks `{n}`");
        }
    }
    // The same values on the command line meet the same bounds.
    clean_error(&dlsched(&["simulate", "--jobs", "20000001"]), &["--jobs is too large", "20000000"]);
    clean_error(&dlsched(&["simulate", "--nodes", "2", "--gpus-per-node", "65"]), &["--gpus-per-node", "at most 64"]);
    clean_error(&dlsched(&["simulate", "--workload", "genie", "--hours", "9000"]), &["--hours", "8,760"]);
    clean_error(&dlsched(&["simulate", "--sample-interval", "100000000001"]), &["--sample-interval", "1e11"]);
}

#[test]
fn a_sweep_reads_each_rifling_table_once() {
    let d = tempfile::tempdir().unwrap();
    let table = d.path().join("table.json");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/rifling-lab16.json"), &table).unwrap();
    let f = write(
        d.path(),
        "e.toml",
        "question = \"q\"\n[base]\nworkload = \"genie\"\npolicy = \"rifling-frozen\"\nrifling_table = \"table.json\"\n\
         hours = 1\n[sweep]\nseed = [1, 2, 3]\n",
    );
    let e = dlsched::sweep::Experiment::load(&f).unwrap();
    assert_eq!((e.runs.len(), e.artefacts.len()), (3, 1));
    // The runs use the table read at load time: a file spoiled since is not read again.
    std::fs::write(&table, "not json").unwrap();
    let out = d.path().join("out");
    let o = dlsched::sweep::run_sweep(&e, &out, 2, None, false, &|_, _| {}).unwrap();
    assert_eq!((o.ran, o.failed.len()), (3, 0), "{:?}", o.failed);
}

// Issue 18 §2: plots a paper could use. Each check is one a person makes
// looking at the figure; the SVG is parsed for coordinates and text.

/// The SVG's texts: each a group of glyph outlines labelled with its text
/// (`<g aria-label="...">`), unescaped.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<g aria-label=\"")
        .skip(1)
        .map(|t| {
            let t = &t[..t.find('"').unwrap()];
            t.replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        })
        .collect()
}

/// A numeric attribute `name="..."` of the element starting `el`.
fn attr(el: &str, name: &str) -> f64 {
    // The attribute may open the slice (`x="724" ...`) or follow a space.
    let bare = format!("{name}=\"");
    let key = format!(" {bare}");
    let start = if el.starts_with(&bare) {
        bare.len()
    } else {
        el.find(&key).unwrap_or_else(|| panic!("no {name} in {el}")) + key.len()
    };
    let s = &el[start..];
    s[..s.find('"').unwrap()].parse().unwrap()
}

/// Every element `<tag ...>` of the SVG (its attribute text).
fn elements<'a>(svg: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag} ");
    svg.split(open.as_str()).skip(1).map(|e| &e[..e.find('>').unwrap()]).collect()
}

/// The points of every `<polyline>` with stroke width 3 (data lines and legend samples).
fn polylines(svg: &str) -> Vec<Vec<(f64, f64)>> {
    elements(svg, "polyline")
        .into_iter()
        .filter(|e| e.contains("stroke-width=\"3\""))
        .map(|e| {
            let s = &e[e.find("points=\"").unwrap() + 8..];
            s[..s.find('"').unwrap()]
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect()
}

/// Checks one figure pair `dir/stem.{svg,png}` as a reader would; returns the SVG.
fn check_figure(dir: &Path, stem: &str) -> String {
    let svg = std::fs::read_to_string(dir.join(format!("{stem}.svg"))).unwrap_or_else(|e| panic!("{stem}.svg: {e}"));
    let head = format!(" {}", elements(&svg, "svg")[0]);
    let head = head.as_str();
    let (w, h) = (attr(head, "width") as u32, attr(head, "height") as u32);
    // The PNG twin: same pixel size, and a picture (many non-white pixels, several colours).
    let png = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(dir.join(format!("{stem}.png"))).unwrap()));
    let mut reader = png.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (w, h), "{stem}");
    let px: Vec<&[u8]> = buf[..info.buffer_size()].chunks(3).collect();
    let inked = px.iter().filter(|p| p.iter().any(|&c| c < 200)).count();
    assert!(inked * 50 > px.len(), "{stem}.png is almost blank: {inked} of {} pixels", px.len());
    let colours: std::collections::BTreeSet<&[u8]> = px.iter().copied().collect();
    assert!(colours.len() > 10, "{stem}.png has {} colours", colours.len());
    // No tick label prints a trailing `.0`, nor a long integer.
    for t in svg_texts(&svg) {
        assert!(!t.ends_with(".0") && !t.contains("000000"), "{stem}: tick `{t}`");
    }
    // The text is the embedded font's outlines, as in the PNG: no `<text>`
    // left to a viewer's font.
    assert!(!svg.contains("<text") && svg.contains("<use xlink:href=\"#g"), "{stem}: SVG text not as outlines");
    // Every figure is one width, so its text, at least 7 pt shrunk to one
    // column of a two-column paper, is that size in every figure.
    assert_eq!(w, dlsched::plot::PLOT_WIDTH, "{stem}");
    // A legend, if any, is a box below the plot area (no grid or axis line
    // enters it), and no data line enters it.
    if let Some(legend) = elements(&svg, "rect").into_iter().find(|r| r.contains("fill=\"none\" stroke=\"#000000\"")) {
        let (lx, ly, lw, lh) = (attr(legend, "x"), attr(legend, "y"), attr(legend, "width"), attr(legend, "height"));
        let inside = |&(x, y): &(f64, f64)| x >= lx && x <= lx + lw && y >= ly && y <= ly + lh;
        for l in elements(&svg, "line") {
            let (a, b) = ((attr(l, "x1"), attr(l, "y1")), (attr(l, "x2"), attr(l, "y2")));
            assert!(!inside(&a) && !inside(&b), "{stem}: an axis or grid line in the legend");
        }
        // Below its plot: some axis or grid line is above the box.
        let above = elements(&svg, "line").iter().any(|l| attr(l, "y1").max(attr(l, "y2")) < ly);
        assert!(above, "{stem}: legend at y {ly} above every plot");
        for line in polylines(&svg) {
            assert!(line.iter().all(inside) || !line.iter().any(inside), "{stem}: a data line crosses the legend");
        }
    }
    svg
}

fn human(column: &str) -> &'static str {
    dlsched::plot::HUMAN_NAMES.iter().find(|n| n.0 == column).unwrap().1
}

#[test]
fn every_plot_kind_reads_as_a_paper_figure() {
    let d = tempfile::tempdir().unwrap();
    // A run with a timeline: CDFs, utilisation, queue length.
    let run = d.path().join("run");
    let o = dlsched(&["simulate", "--jobs", "40", "--load", "1.5", "--out", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dlsched(&["plot", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for stem in ["jct_cdf", "queue_delay_cdf", "gpu_utilization", "queue_length"] {
        check_figure(&run, stem);
    }
    let svg = check_figure(&run, "jct_cdf");
    assert!(svg.contains(&format!("{} CDF, run (40 completed jobs)", human("jct_s"))), "{}", &svg[..600]);
    // 40 jobs are too many points for markers: the run's CDF has none
    // (a marker there would stand for no one job).
    assert!(elements(&svg, "circle").is_empty() && elements(&svg, "polygon").is_empty(), "markers on a dense CDF");
    // The queue length is a step function: each segment of the data line is
    // horizontal or vertical.
    let svg = check_figure(&run, "queue_length");
    let line = polylines(&svg).into_iter().max_by_key(Vec::len).unwrap();
    assert!(line.len() > 10);
    for w in line.windows(2) {
        assert!(w[0].0 == w[1].0 || w[0].1 == w[1].1, "sloped segment {w:?}");
    }
    // A one-job run: its CDF spans 0 to 1 (the top tick is 1) and says how many jobs.
    let one = write(d.path(), "one.csv", "job_id,submit_time,duration,gpu_num\na,0,3600,2\n");
    let run1 = run_to(d.path(), &["simulate", "--trace", one.to_str().unwrap()]);
    dlsched::plot::plot_run(&run1).unwrap();
    let svg = check_figure(&run1, "jct_cdf");
    assert!(svg.contains("(1 completed job)"), "{svg}");
    let ticks: Vec<f64> = svg_texts(&svg).into_iter().filter_map(|t| t.parse().ok()).collect();
    assert!(ticks.contains(&1.0) && ticks.contains(&0.0), "{ticks:?}");
    // The x axis is in minutes (an hour-long job): 60 is a tick, 3600 is not.
    assert!(svg.contains("JCT (min)") && ticks.contains(&60.0) && !ticks.contains(&3600.0), "{ticks:?}");

    // A numeric sweep with one seed: lines per policy, legend outside, no error bars.
    let f = write(
        d.path(),
        "num.toml",
        "question = \"q\"\n[base]\ncluster = \"lab16\"\njobs = 20\n[sweep]\nload = [0.5, 1.0]\npolicy = [\"fifo\", \"sjf\"]\n",
    );
    let out = d.path().join("num");
    let o = dlsched(&["sweep", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let svg = check_figure(&out, "jct_mean_s_vs_load");
    assert!(svg.contains("Mean JCT vs offered load (one seed)") && !svg.contains("over"), "{}", &svg[..600]);
    assert!(svg.contains("fifo") && svg.contains("sjf"));
    assert!(elements(&svg, "rect").iter().any(|r| r.contains("fill=\"none\" stroke=\"#000000\"")), "no legend box");
    // A marker at each data point and nowhere else: fifo's two points (load
    // 0.5 and 1.0; its marker is a filled circle) and its legend entry.
    assert_eq!(elements(&svg, "circle").len(), 3, "fifo's markers");
    check_figure(&out, "jct_cdf");

    // A categorical sweep over two seeds: a dot chart per metric, with ± sd.
    let f = write(
        d.path(),
        "cat.toml",
        "question = \"q\"\n[base]\ncluster = \"lab16\"\njobs = 20\n[sweep]\npolicy = [\"fifo\", \"sjf\"]\nbackfill = [false, true]\nseed = [1, 2]\n",
    );
    let out = d.path().join("cat");
    let o = dlsched(&["sweep", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for m in dlsched::plot::SWEEP_METRICS_ALWAYS {
        let svg = check_figure(&out, &format!("{m}_by_config"));
        assert!(svg.contains(&format!("{} per configuration (mean ± sd over 2 seeds)", human(m))), "{m}");
        let names: Vec<String> = svg_texts(&svg);
        for c in ["backfill=false, policy=fifo", "backfill=true, policy=sjf"] {
            assert!(names.iter().any(|n| n == c), "{m}: no `{c}` in {names:?}");
        }
    }
    assert!(!out.join("jct_mean_s_vs_seed.svg").exists());

    // Learning curves: an online RIFLING run, and a frozen one titled as such.
    let rif = d.path().join("rif");
    let o = dlsched(&[
        "simulate",
        "--workload",
        "genie",
        "--policy",
        "rifling",
        "--hours",
        "2",
        "--out",
        rif.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    dlsched::plot::plot_run(&rif).unwrap();
    let svg = check_figure(&rif, "learning_curve");
    assert!(svg.contains("RIFLING learning curve") && svg.contains("Epsilon"), "{}", &svg[..600]);
    let table = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/rifling-lab16.json");
    let frz = d.path().join("frz");
    let o = dlsched(&[
        "simulate",
        "--workload",
        "genie",
        "--policy",
        "rifling-frozen",
        "--rifling-table",
        table.to_str().unwrap(),
        "--hours",
        "2",
        "--out",
        frz.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    dlsched::plot::plot_run(&frz).unwrap();
    let svg = check_figure(&frz, "learning_curve");
    assert!(
        svg.contains("RIFLING frozen (no learning)") && !svg.contains("learning curve") && !svg.contains("Epsilon")
    );
}

#[test]
fn tick_labels_and_time_units_by_hand() {
    use dlsched::plot::{tick_label, time_unit};
    for (v, want) in
        [(14.0, "14"), (1_000_000.0, "1M"), (2500.0, "2.5k"), (0.1 + 0.2, "0.3"), (-0.0, "0"), (0.25, "0.25")]
    {
        assert_eq!(tick_label(v), want, "{v}");
    }
    assert_eq!(time_unit(7200.0), (3600.0, "h"));
    assert_eq!(time_unit(7199.0), (60.0, "min"));
    assert_eq!(time_unit(119.0), (1.0, "s"));
    assert_eq!(dlsched::plot::steps(&[(0.0, 1.0), (2.0, 3.0)]), vec![(0.0, 1.0), (2.0, 1.0), (2.0, 3.0)]);
}

#[test]
fn axis_rules_by_hand() {
    use dlsched::plot::{error_bar, log_y, x_ticks, y_range};
    // Few swept values: a tick at each, nothing between (nodes 2, 4, 8).
    assert_eq!(x_ticks(&[2.0, 4.0, 8.0, 4.0], 1.8, 8.2, true), vec![2.0, 4.0, 8.0]);
    // Integers 1..=20 (too many to tick each): only whole-number ticks.
    let xs: Vec<f64> = (1..=20).map(f64::from).collect();
    let t = x_ticks(&xs, 0.5, 20.5, true);
    assert!(!t.is_empty() && t.iter().all(|v| v.fract() == 0.0), "{t:?}");
    // Integers 2 and 3 on a time axis (no exact-value rule): 2 and 3 only, not 2.2, 2.4.
    assert_eq!(x_ticks(&[2.0, 3.0], 1.97, 3.03, false), vec![2.0, 3.0]);
    // A 1..1e5 series gets a log axis, and 10..750 h (75 times: the JCT of
    // FIFO beside DLAS); 1..30 (ratio 30, not over) and one with a 0 do not.
    assert!(log_y(&[1.0, 10.0, 1e5]) && log_y(&[10.0, 750.0]));
    assert!(!log_y(&[1.0, 30.0]) && !log_y(&[0.0, 1e5]));
    // A completion rate of 0.001..1 is a fraction: linear.
    assert!(!log_y(&[0.001, 1.0]) && log_y(&[0.001, 1.5]));
    // An error bar of 1 ± 3 on a non-negative metric stops at 0.
    assert_eq!(error_bar(1.0, 3.0, true), (0.0, 4.0));
    assert_eq!(error_bar(1.0, 3.0, false), (-2.0, 4.0));
    // 0.90..0.98: padded by a tenth of the 0.08 span, not from 0; 0.2..1 from 0.
    let (lo, hi) = y_range(0.90, 0.98);
    assert!((lo - 0.892).abs() < 1e-12 && (hi - 0.988).abs() < 1e-12, "{lo} {hi}");
    let (lo, hi) = y_range(0.2, 1.0);
    assert!(lo == 0.0 && (hi - 1.05).abs() < 1e-12, "{lo} {hi}");
    // -1..3 (a reward): 5 % of the span of 4 beyond both ends, so that the
    // lowest points do not sit on the axis.
    let (lo, hi) = y_range(-1.0, 3.0);
    assert!((lo + 1.2).abs() < 1e-12 && (hi - 3.2).abs() < 1e-12, "{lo} {hi}");
    // 0.3 and a mean of twelve 0.3s (0.30000000000000004): one value, padded
    // by 5 % of it (0.285..0.315), not by a tenth of a rounding error.
    let twelve = [0.3; 12].iter().sum::<f64>() / 12.0;
    assert_ne!(twelve, 0.3, "the rounding this case is about");
    let (lo, hi) = y_range(0.3, twelve);
    assert!((lo - 0.285).abs() < 1e-9 && (hi - 0.315).abs() < 1e-9, "{lo} {hi}");
}

#[test]
fn a_sweep_run_is_named_by_its_swept_values() {
    // A sweep of two policies: each run's charts are titled by its swept
    // values, not by the hash naming its directory; a lone run by its directory.
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "two.toml", "question = \"q\"\n[base]\njobs = 10\n[sweep]\npolicy = [\"fifo\", \"sjf\"]\n");
    let out = d.path().join("two");
    let o = dlsched(&["sweep", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let mut names = Vec::new();
    for line in summary.lines().skip(1) {
        let id = line.split(',').next().unwrap();
        names.push(dlsched::plot::run_name(&out.join("runs").join(id)));
    }
    names.sort();
    assert_eq!(names, ["policy=fifo", "policy=sjf"]);
    assert_eq!(dlsched::plot::run_name(&d.path().join("lone-run")), "lone-run");
}

#[test]
fn utilisation_is_in_per_cent_dots_start_at_zero_and_log_cdfs_count_their_zeros() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let o = dlsched(&["simulate", "--jobs", "200", "--load", "0.8", "--out", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(dlsched(&["plot", run.to_str().unwrap()]).status.success());
    let svg = std::fs::read_to_string(run.join("gpu_utilization.svg")).unwrap();
    assert!(svg.contains("GPU utilisation (%)") && svg.contains("aria-label=\"100\""), "utilisation axis in per cent");
    // The share of zero waits, counted from jobs.csv, is in the log-x CDF's title.
    let jobs = std::fs::read_to_string(run.join("jobs.csv")).unwrap();
    let head: Vec<&str> = jobs.lines().next().unwrap().split(',').collect();
    let (q, st) =
        (head.iter().position(|h| *h == "queue_delay_s").unwrap(), head.iter().position(|h| *h == "status").unwrap());
    let waits: Vec<f64> = jobs
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[st] == "completed")
        .map(|f| f[q].parse().unwrap())
        .collect();
    let zeros = waits.iter().filter(|w| **w == 0.0).count();
    assert!(zeros > 0 && zeros < waits.len(), "the run needs some zero and some positive waits");
    let svg = std::fs::read_to_string(run.join("queue_delay_cdf.svg")).unwrap();
    // The title may break into lines (one text each).
    let svg = svg_texts(&svg).join(" ");
    let share = format!("{:.1} % are 0, not shown on the log axis", 100.0 * zeros as f64 / waits.len() as f64);
    assert!(svg.contains("log scale") && svg.contains(&share), "want `{share}`");
    // A dot chart's axis starts at 0, however close the means.
    let e = d.path().join("e.toml");
    std::fs::write(&e, "question = \"q\"\n[base]\njobs = 60\n[sweep]\npolicy = [\"fifo\", \"sjf\"]\nseed = [1, 2]\n")
        .unwrap();
    let out = d.path().join("sweep");
    assert!(dlsched(&["sweep", e.to_str().unwrap(), "--out", out.to_str().unwrap()]).status.success());
    let svg = std::fs::read_to_string(out.join("makespan_s_by_config.svg")).unwrap();
    assert!(svg.contains("aria-label=\"0\""), "a tick at 0");
}

#[test]
fn text_is_at_least_7_pt_at_one_column_and_many_configurations_are_facets() {
    use dlsched::plot::{COLUMN_WIDTH_IN, LABEL_SIZE, LEGEND_SIZE, PLOT_WIDTH, TICK_SIZE, TITLE_SIZE, text_pt};
    // 22 px of a 720 px figure shown 3.3 in wide: 22 / 720 * 3.3 * 72 = 7.26 pt.
    assert!((text_pt(22.0, 720) - 7.26).abs() < 1e-9);
    assert_eq!(COLUMN_WIDTH_IN, 3.3);
    for size in [TITLE_SIZE, LABEL_SIZE, TICK_SIZE, LEGEND_SIZE] {
        assert!(text_pt(size, PLOT_WIDTH) >= 7.0, "{size} px");
    }
    // 18 loads (one swept key besides the x axis' `jobs`): 18 lines, drawn
    // as two facets of at most 16, sharing their axes.
    let d = tempfile::tempdir().unwrap();
    let loads: Vec<String> = (0..18).map(|i| format!("{:.1}", 0.3 + 0.1 * f64::from(i))).collect();
    let f = write(
        d.path(),
        "many.toml",
        &format!(
            "question = \"q\"\n[base]\ncluster = \"lab16\"\n[sweep]\njobs = [4, 6]\nload = [{}]\n",
            loads.join(", ")
        ),
    );
    let out = d.path().join("many");
    let o = dlsched(&["sweep", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let legends =
        |svg: &str| elements(svg, "rect").iter().filter(|r| r.contains("fill=\"none\" stroke=\"#000000\"")).count();
    for stem in ["jct_mean_s_vs_jobs", "jct_cdf"] {
        let svg = check_figure(&out, stem);
        let names = svg_texts(&svg);
        for facet in ["configurations 1–16 of 18", "configurations 17–18 of 18"] {
            assert!(names.iter().any(|n| n == facet), "{stem}: no facet `{facet}`");
        }
        // The two facets' lines differ: a legend under each.
        assert_eq!(legends(&svg), 2, "{stem}");
    }
    // 9 loads by backfill (18 configurations): a facet per value of the
    // first key (backfill), its 9 lines named by the load alone; the two
    // facets' legends would be the same, so there is one, under the last.
    let f = write(
        d.path(),
        "by.toml",
        &format!(
            "question = \"q\"\n[base]\ncluster = \"lab16\"\n[sweep]\njobs = [4, 6]\nbackfill = [false, true]\nload = [{}]\n",
            loads[..9].join(", ")
        ),
    );
    let out = d.path().join("by");
    let o = dlsched(&["sweep", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let svg = check_figure(&out, "jct_mean_s_vs_jobs");
    let names = svg_texts(&svg);
    for t in ["backfill=false", "backfill=true", "load=0.3", "load=1.1"] {
        assert!(names.iter().any(|n| n == t), "no `{t}` in {names:?}");
    }
    assert_eq!(names.iter().filter(|n| n.starts_with("load=")).count(), 9, "one legend of 9 loads");
    assert_eq!(legends(&svg), 1);
}

#[test]
fn a_run_of_several_vcs_gets_per_vc_charts() {
    // The example trace and its two VCs (research, production).
    let d = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = d.path().join("vcs");
    let o = dlsched(&[
        "simulate",
        "--trace",
        root.join("traces/example_jobs.csv").to_str().unwrap(),
        "--vcs",
        root.join("traces/example_vcs.csv").to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(dlsched(&["plot", run.to_str().unwrap()]).status.success());
    let svg = check_figure(&run, "vc_jct_cdf");
    let names: Vec<String> = svg_texts(&svg);
    assert!(names.iter().any(|n| n == "research") && names.iter().any(|n| n == "production"), "{names:?}");
    let svg = check_figure(&run, "vc_gpu_utilization");
    // One panel per VC, titled with its GPUs (vc_summary.csv: 8 and 32).
    let names: Vec<String> = svg_texts(&svg);
    assert!(names.iter().any(|n| n == "VC research (8 GPUs)") && names.iter().any(|n| n == "VC production (32 GPUs)"));
    // A run of one VC has none.
    let one = d.path().join("one");
    assert!(dlsched(&["simulate", "--jobs", "10", "--out", one.to_str().unwrap()]).status.success());
    assert!(dlsched(&["plot", one.to_str().unwrap()]).status.success());
    assert!(!one.join("vc_jct_cdf.svg").exists() && !one.join("vc_gpu_utilization.png").exists());
}
