//! Themis: hand-computed schedules (lease rounds, the fairness knob,
//! preemption with and without checkpoint cost, ρ by hand), VC partitions,
//! the profile rate model, and the CLI.

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{CheckpointModel, EngineConfig, RunOutput, Simulation};
use dlsched::ids::VcId;
use dlsched::job::JobState;
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::themis::{Themis, ThemisOptions};
use dlsched::profile::{RateModel, TraceSpeed};
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

use crate::common::dlsched;
use crate::common::rec;

/// (trace id, first start s, end s, waited s, preemptions).
type Row = (String, u64, u64, u64, u32);

/// Runs `records` under Themis, checking every invariant after every
/// instant; returns the output and the policy metrics.
pub fn run_themis(
    records: Vec<TraceRecord>,
    spec: ClusterSpec,
    opts: ThemisOptions,
    ckpt: CheckpointModel,
    rates: fn() -> Box<dyn RateModel>,
) -> (RunOutput, Vec<(&'static str, f64)>) {
    let cluster = Cluster::new(spec).unwrap();
    let w = build_workload(records, &cluster, PlacementKind::Consolidate.build());
    let p = Themis::new(opts, cluster.partitions().len(), rates());
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    let mut sim = Simulation::new(cluster, w.jobs, Box::new(p), rates(), cfg).with_checkpoint(ckpt);
    while sim.step().unwrap().is_some() {
        if let Err(e) = sim.check_invariants() {
            panic!("at {}: {e}", sim.now());
        }
    }
    let out = sim.finish();
    let m = out.policy_metrics.clone();
    (out, m)
}

fn trace_speed() -> Box<dyn RateModel> {
    Box::new(TraceSpeed)
}

fn rows(out: &RunOutput) -> Vec<Row> {
    let mut v: Vec<Row> = out
        .jobs
        .iter()
        .map(|(s, st)| match st {
            JobState::Completed(d) => (
                s.name.to_string(),
                d.first_start().as_ms() / 1000,
                d.end.as_ms() / 1000,
                d.waited_ms(s.submit) / 1000,
                d.preemptions(),
            ),
            other => panic!("{} did not complete: {other:?}", s.name),
        })
        .collect();
    v.sort();
    v
}

fn want(rows: &[(&str, u64, u64, u64, u32)]) -> Vec<Row> {
    let mut v: Vec<Row> = rows.iter().map(|&(n, a, b, c, d)| (n.to_string(), a, b, c, d)).collect();
    v.sort();
    v
}

fn metric(m: &[(&'static str, f64)], name: &str) -> f64 {
    m.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no metric {name}: {m:?}")).1
}

/// H (1 GPU, 1,500 s) at 0, W (1 GPU, 1,000 s) at 1, V (1 GPU, 100 s) at
/// 950, on one GPU, 1,000-s leases.
fn knob_jobs() -> Vec<TraceRecord> {
    vec![rec("H", 0, 1, 1500), rec("W", 1, 1, 1000), rec("V", 950, 1, 100)]
}

fn one_gpu() -> ClusterSpec {
    ClusterSpec::uniform("1x1", 1, 1, "V100", 16384)
}

#[test]
fn the_fairness_knob_trades_mean_for_max_rho_at_lease_rounds() {
    // Trace speed: T_id = duration. t0 H starts (alone). t1 W waits (first
    // round asked for t1000). t950 V waits.
    // Round t1000 (H's lease ends): rho = (elapsed + remaining) / T_id:
    //   W (999 + 1000)/1000 = 1.999, V (50 + 100)/100 = 1.5, H (1000 + 500)/1500 = 1.0.
    // Gains ln(rho_lose / rho_win) per GPU, rho_lose = waiting one more lease (1,000 s):
    //   V ln(1150/150) = 2.037, H ln(2500/1500) = 0.511, W ln(2999/1999) = 0.406.
    // f = 0: all three take part; V wins the GPU, H is preempted (500 s left).
    // t1100 V ends; offer of the free GPU to W (2099/1000 = 2.099) and H
    // ((1100 + 500)/1500 = 1.0667); next round at 2000, 900 s away: gains
    // W ln(2999/2099) = 0.357, H ln(2500/1600) = 0.446: H resumes, ends 1600;
    // then W runs 1600..2600.
    // rho: H 1600/1500 = 1.0667, V (1100 - 950)/100 = 1.5, W 2599/1000 = 2.599;
    // mean 5.165667/3 = 1.721889, max 2.599.
    let f0 = ThemisOptions { lease_s: 1000.0, fairness_knob: 0.0 };
    let (out, m) = run_themis(knob_jobs(), one_gpu(), f0, CheckpointModel::None, trace_speed);
    assert_eq!(rows(&out), want(&[("H", 0, 1600, 100, 1), ("V", 1000, 1100, 50, 0), ("W", 1600, 2600, 1599, 0)]));
    assert!((metric(&m, "themis_rho_max") - 2.599).abs() < 1e-9, "{m:?}");
    assert!((metric(&m, "themis_rho_mean") - 5.165_666_666_666_667 / 3.0).abs() < 1e-9, "{m:?}");

    // f = 0.5: of n bidders the worst ceil(n/2) take part. t1000: W and V
    // (the two worst); V's gain is higher, V wins, H is preempted, W gets
    // nothing. t1100: n = 2, one takes part: W (2.099, the worst) resumes
    // over H. Round t2000: W (1999 + 100)/1000 = 2.099 takes part and keeps
    // its GPU (a lease renewed in place, no preemption); H
    // (2000 + 500)/1500 = 1.667 waits. t2100 W ends, H resumes to 2600.
    // rho: H 2600/1500 = 1.7333, V 1.5, W 2099/1000 = 2.099: max down from
    // 2.599, mean up from 1.7219 to 5.332333/3 = 1.777444.
    let f5 = ThemisOptions { lease_s: 1000.0, fairness_knob: 0.5 };
    let (out, m) = run_themis(knob_jobs(), one_gpu(), f5, CheckpointModel::None, trace_speed);
    assert_eq!(rows(&out), want(&[("H", 0, 2600, 1100, 1), ("V", 1000, 1100, 50, 0), ("W", 1100, 2100, 1099, 0)]));
    assert!((metric(&m, "themis_rho_max") - 2.099).abs() < 1e-9, "{m:?}");
    assert!((metric(&m, "themis_rho_mean") - 5.332_333_333_333_333 / 3.0).abs() < 1e-9, "{m:?}");

    // The same with the Helios checkpoint table (7 s for 1 GPU): H's
    // preemption at 1000 leaves it 500 + 7 = 507 s; rho at 1100
    // (1100 + 507)/1500 = 1.071 and at 2000 (2000 + 507)/1500 = 1.671 stay
    // below W's 2.099, so the schedule holds and H ends 2100 + 507 = 2607.
    let (out, _) = run_themis(knob_jobs(), one_gpu(), f5, CheckpointModel::HeliosTable, trace_speed);
    assert_eq!(rows(&out), want(&[("H", 0, 2607, 1100, 1), ("V", 1000, 1100, 50, 0), ("W", 1100, 2100, 1099, 0)]));
}

/// Two VCs of one node x 2 GPUs: `a` (node 0) and `b` (node 1).
fn two_vcs() -> ClusterSpec {
    let mut spec = ClusterSpec::uniform("2vc", 2, 2, "V100", 16384);
    spec.vc_names = vec!["a".into(), "b".into()];
    spec.named_vcs = true;
    spec.nodes[1].vc = VcId(1);
    spec
}

fn in_vc(vc: &str, mut r: TraceRecord) -> TraceRecord {
    r.extra_mut().vc = Some(vc.into());
    r
}

#[test]
fn each_vc_holds_its_own_auction_and_gang_jobs_take_whole_allocations() {
    // 100-s leases, f = 0.8 (the default: the worst ceil(0.2 n) take part).
    // VC a: A (2 GPUs, 300 s) at 0 runs. B (1 GPU, 100 s) at 10 and C
    // (1 GPU, 50 s) at 20 wait.
    // Round t100: rho A (100 + 200)/300 = 1.0, B (90 + 100)/100 = 1.9,
    // C (80 + 50)/50 = 2.6; n = 3, one takes part: C (the worst) wins a GPU;
    // leftover in rho order: B takes the other; A cannot get 2 GPUs: it is
    // preempted (200 s left). C ends 150, B ends 200; at 200 A takes both
    // GPUs again, ends 400 (waited 100).
    // VC b, at the same time, alone: D (2 GPUs, 150 s) at 0 runs, E (1 GPU,
    // 10 s) at 50 waits. Round t100: rho D (100 + 50)/150 = 1.0, E
    // (50 + 10)/10 = 6.0; E wins a GPU, D loses its 2-GPU allocation
    // (preempted, 50 s left); E ends 110; D resumes at 110, ends 160.
    let jobs = vec![
        in_vc("a", rec("A", 0, 2, 300)),
        in_vc("b", rec("D", 0, 2, 150)),
        in_vc("a", rec("B", 10, 1, 100)),
        in_vc("a", rec("C", 20, 1, 50)),
        in_vc("b", rec("E", 50, 1, 10)),
    ];
    let opts = ThemisOptions { lease_s: 100.0, ..ThemisOptions::default() };
    let (out, m) = run_themis(jobs, two_vcs(), opts, CheckpointModel::None, trace_speed);
    assert_eq!(
        rows(&out),
        want(&[
            ("A", 0, 400, 100, 1),
            ("B", 100, 200, 90, 0),
            ("C", 100, 150, 80, 0),
            ("D", 0, 160, 10, 1),
            ("E", 100, 110, 50, 0),
        ])
    );
    // rho: A 400/300, B 190/100, C 130/50, D 160/150, E 60/10 = 6 (the max).
    let mean = (400.0 / 300.0 + 1.9 + 2.6 + 160.0 / 150.0 + 6.0) / 5.0;
    assert!((metric(&m, "themis_rho_max") - 6.0).abs() < 1e-9, "{m:?}");
    assert!((metric(&m, "themis_rho_mean") - mean).abs() < 1e-9, "{m:?}");
}

#[test]
fn options_validate_and_read_kebab_or_snake_names() {
    use dlsched::policy::build::BuildPolicy;
    let o: ThemisOptions = serde_json::from_str(r#"{"lease-s": 60, "fairness_knob": 0.5}"#).unwrap();
    assert_eq!(o, ThemisOptions { lease_s: 60.0, fairness_knob: 0.5 });
    assert_eq!(serde_json::from_str::<ThemisOptions>("{}").unwrap(), ThemisOptions::default());
    assert_eq!(ThemisOptions::default(), ThemisOptions { lease_s: 600.0, fairness_knob: 0.8 });
    let e = serde_json::from_str::<ThemisOptions>(r#"{"knob": 0.5}"#).unwrap_err();
    assert!(e.to_string().contains("unknown field `knob`"), "{e}");
    for bad in [
        ThemisOptions { lease_s: 0.0, ..Default::default() },
        ThemisOptions { fairness_knob: 1.5, ..Default::default() },
    ] {
        let e = bad.validate("themis").unwrap_err();
        assert!(e.contains("lease-s") || e.contains("fairness-knob"), "{e}");
    }
}

/// (job, start s, end s, queue delay s) from a jobs.csv.
fn csv_rows(path: &std::path::Path) -> Vec<(String, u64, u64, u64)> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let (id, s, e, q) = (col("job_id"), col("start_s"), col("end_s"), col("queue_delay_s"));
    let mut v: Vec<_> = r
        .records()
        .map(|x| {
            let x = x.unwrap();
            (x[id].to_string(), x[s].parse().unwrap(), x[e].parse().unwrap(), x[q].parse().unwrap())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn themis_runs_from_the_cli_and_a_sweep_and_reruns_from_its_manifest() {
    use dlsched::experiment::sweep::{Experiment, to_run_spec};
    use dlsched::policy::registry::PolicySpec;
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs.csv");
    std::fs::write(&jobs, "job_id,submit_time,duration,gpu_num\nH,0,1500,1\nW,1,1000,1\nV,950,100,1\n").unwrap();
    let out = d.path().join("run");
    let o = dlsched(&[
        "simulate",
        "--trace",
        jobs.to_str().unwrap(),
        "--nodes",
        "1",
        "--gpus-per-node",
        "1",
        "--policy",
        "themis",
        "--policy-opt",
        "lease-s=1000",
        "--policy-opt",
        "fairness-knob=0.5",
        "--checkpoint",
        "helios-table",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The knob example at f = 0.5 with the checkpoint table
    // (the_fairness_knob_trades_mean_for_max_rho_at_lease_rounds): H's
    // last start 2100, end 2607, waited 1100; W 1100..2100; V 1000..1100.
    let want: Vec<(String, u64, u64, u64)> =
        vec![("H".into(), 2100, 2607, 1100), ("V".into(), 1000, 1100, 50), ("W".into(), 1100, 2100, 1099)];
    assert_eq!(csv_rows(&out.join("jobs.csv")), want);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    // rho: W 2099/1000 = 2.099 (max); mean (2607/1500 + 1.5 + 2.099)/3 = 1.779.
    assert_eq!(s["policy_metrics"]["themis_rho_max"], 2.099);
    assert_eq!(s["policy_metrics"]["themis_rho_mean"], 1.779);
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        serde_json::from_value::<PolicySpec>(m["spec"]["policy"].clone()).unwrap(),
        PolicySpec::Themis(ThemisOptions { lease_s: 1000.0, fairness_knob: 0.5 })
    );
    let again = d.path().join("again");
    let o = dlsched(&[
        "simulate",
        "--from-manifest",
        out.join("manifest.json").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in ["manifest.json", "jobs.csv", "summary.json"] {
        assert_eq!(std::fs::read(out.join(f)).unwrap(), std::fs::read(again.join(f)).unwrap(), "{f}");
    }
    // A bad value names the option.
    let o = dlsched(&[
        "simulate",
        "--trace",
        jobs.to_str().unwrap(),
        "--policy",
        "themis",
        "--policy-opt",
        "fairness-knob=2",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("fairness-knob must be in [0, 1]"));
    // A sweep sets and sweeps the options.
    let p = d.path().join("e.toml");
    std::fs::write(
        &p,
        "question = \"q\"\n[base]\ntrace = \"jobs.csv\"\npolicy = \"themis\"\npolicy_opt.lease-s = 60\n[sweep]\npolicy_opt.fairness-knob = [0.0, 0.8]\n",
    )
    .unwrap();
    let e = Experiment::load(&p).unwrap();
    let mut got: Vec<(u64, u64)> = e
        .runs
        .iter()
        .map(|r| match to_run_spec(&r.params, &p).unwrap().policy {
            PolicySpec::Themis(o) => (o.lease_ms(), (o.fairness_knob * 10.0) as u64),
            other => panic!("{other:?}"),
        })
        .collect();
    got.sort();
    assert_eq!(got, vec![(60_000, 0), (60_000, 8)]);
}

#[test]
fn themis_runs_on_heterogeneous_nodes_with_the_profile_model() {
    // A nodes file (Alibaba format) with two GPU types, the profile rate
    // model, the checkpoint table and a synthetic workload: every job
    // completes and the rho metrics are there (mean <= max). (VCs: the hand
    // test each_vc_holds_its_own_auction...; rho may fall below 1 here, as
    // the measured tables favour spreading on some GPU types.)
    let d = tempfile::tempdir().unwrap();
    let nodes = d.path().join("nodes.csv");
    std::fs::write(
        &nodes,
        "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,4,V100M16\nn1,96000,393216,4,V100M16\nn2,96000,393216,4,T4\n",
    )
    .unwrap();
    let out = d.path().join("run");
    let o = dlsched(&[
        "simulate",
        "--nodes-file",
        nodes.to_str().unwrap(),
        "--policy",
        "themis",
        "--policy-opt",
        "lease-s=300",
        "--rate-model",
        "table",
        "--checkpoint",
        "helios-table",
        "--jobs",
        "60",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["jobs_completed"], s["jobs_total"], "{s}");
    assert_eq!(s["rate_model"], "profile-table");
    let rho_max = s["policy_metrics"]["themis_rho_max"].as_f64().unwrap();
    let rho_mean = s["policy_metrics"]["themis_rho_mean"].as_f64().unwrap();
    assert!(rho_mean > 0.0 && rho_max >= rho_mean, "{s}");
}
