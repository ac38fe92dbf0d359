//! SRTF and the engine's preemption: hand-computed schedules (the Helios
//! semantics file's §6.1 with the reference options, and the default
//! semantics), seeded random workloads under the invariants.

use dlsched::cluster::{Cluster, ClusterSpec};
use dlsched::engine::{CheckpointModel, EngineConfig, RunOutput, Simulation};
use dlsched::ids::VcId;
use dlsched::job::JobState;
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::srtf::{self, SrtfOptions};
use dlsched::profile::TraceSpeed;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

use crate::common::rec;

/// (trace id, first start s, end s, waited s, preemptions) of every job, in job order.
type Row = (String, u64, u64, u64, u32);

/// Runs `records` under SRTF with `opts` and `ckpt`, checking every
/// invariant after every instant.
pub fn run_srtf(records: Vec<TraceRecord>, spec: ClusterSpec, opts: SrtfOptions, ckpt: CheckpointModel) -> RunOutput {
    let cluster = Cluster::new(spec).unwrap();
    let w = build_workload(records, &cluster, PlacementKind::Consolidate.build());
    let p = srtf::build(&opts, cluster.partitions().len()).unwrap();
    let cfg = EngineConfig { sample_interval_ms: 0, ..Default::default() };
    let mut sim = Simulation::new(cluster, w.jobs, p, Box::new(TraceSpeed), cfg).with_checkpoint(ckpt);
    while sim.step().unwrap().is_some() {
        if let Err(e) = sim.check_invariants() {
            panic!("at {}: {e}", sim.now());
        }
    }
    sim.finish()
}

fn rows(out: &RunOutput) -> Vec<Row> {
    out.jobs
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
        .collect()
}

fn sorted(mut v: Vec<Row>) -> Vec<Row> {
    v.sort();
    v
}

fn want(rows: &[(&str, u64, u64, u64, u32)]) -> Vec<Row> {
    sorted(rows.iter().map(|&(n, a, b, c, d)| (n.to_string(), a, b, c, d)).collect())
}

/// Two VCs of 2 nodes x 8 GPUs: `a` (nodes 0-1) and `c` (nodes 2-3).
fn vcs_a_c() -> ClusterSpec {
    let mut spec = ClusterSpec::uniform("sem", 4, 8, "V100", 16384);
    spec.vc_names = vec!["a".into(), "c".into()];
    spec.named_vcs = true;
    for n in &mut spec.nodes[2..] {
        n.vc = VcId(1);
    }
    spec
}

fn in_vc(vc: &str, mut r: TraceRecord) -> TraceRecord {
    r.extra_mut().vc = Some(vc.into());
    r
}

/// The semantics file's §6.1 input: (VC, id, submit s, GPUs, duration s).
fn sem_jobs() -> Vec<TraceRecord> {
    vec![
        in_vc("a", rec("A", 0, 4, 20)),
        in_vc("c", rec("L0", 0, 16, 30)),
        in_vc("a", rec("C", 1, 1, 100)),
        in_vc("a", rec("E", 2, 3, 100)),
        in_vc("a", rec("B", 3, 4, 30)),
        in_vc("a", rec("P", 4, 8, 40)),
        in_vc("c", rec("L1", 10, 16, 20)),
    ]
}

#[test]
fn helios_semantics_example_6_1() {
    // SEMANTICS-srtf-qssf.md §6.1, every reference option on, the Helios
    // checkpoint table (7 s for 1 GPU, 30 s up to 8, 60 s above).
    // VC a (16 GPUs): t0 A (4) on n0. t1 C (1) on n0 (best fit). t2 E (3) on
    // n0 (full). t3 B (4) on n1. t4 P (8, 40) arrives: ranking A16 B29 P40
    // C97 E98; A+B+P take the 16-GPU count, so C and E are preempted
    // (C 97+7 = 104, E 98+30 = 128) and P cannot be placed (4 + 4 free): it
    // keeps its share, 8 GPUs idle. A's work ends at 20; +1 s: released at 21.
    // t21: ranking B12 P40 C104 E128 = 4+8+1+3: P on n0 (first start 21,
    // waited 17), C and E on n1 (waited 21-4 = 17). Ends: B 3+30+1 = 34,
    // P 21+40+1 = 62, C 21+104+1 = 126, E 21+128+1 = 150, A 21.
    // VC c: t0 L0 (16). t10 L1 (16, 20) ties with L0's 20 left: pending
    // first, L0 preempted (20+60 = 80), L1 runs 10..30, released 31; L0
    // resumes at 31 (waited 21), ends 31+80+1 = 112.
    let out = run_srtf(sem_jobs(), vcs_a_c(), SrtfOptions::helios(), CheckpointModel::HeliosTable);
    let expected = want(&[
        ("A", 0, 21, 0, 0),
        ("C", 1, 126, 17, 1),
        ("E", 2, 150, 17, 1),
        ("B", 3, 34, 0, 0),
        ("P", 21, 62, 17, 0),
        ("L0", 0, 112, 21, 1),
        ("L1", 10, 31, 0, 0),
    ]);
    assert_eq!(sorted(rows(&out)), expected);
    // The identity of §3.7: JCT = queue + duration + ckpt x overhead + 1, and
    // attained service = duration + ckpt x overhead + 1 (time holding GPUs).
    for (s, st) in out.jobs.iter() {
        let JobState::Completed(d) = st else { unreachable!() };
        let overhead = CheckpointModel::HeliosTable.overhead_ms(s.gpus) * u64::from(d.preemptions());
        assert_eq!(d.attained_ms(), s.duration_ms + overhead + 1000, "{}", s.name);
        assert_eq!(d.end.since(s.submit), d.waited_ms(s.submit) + d.attained_ms(), "{}", s.name);
        assert_eq!(d.attained_gpu_ms(), d.attained_ms() * u64::from(s.gpus), "{}", s.name);
    }
    // The engine's counters: 3 preemptions, 7 + 30 + 60 s of overhead.
    assert_eq!((out.stats.preemptions, out.stats.resumes, out.stats.checkpoint_ms), (3, 3, 97_000));
    // B's last run is its only run; L0's last run started at 31.
    let last = |n: &str| out.jobs.iter().find(|(s, _)| s.name == n).map(|(_, st)| st.clone()).unwrap();
    assert!(matches!(last("L0"), JobState::Completed(d) if d.start.as_ms() == 31_000 && d.first_start().as_ms() == 0));
}

#[test]
fn default_semantics_by_hand() {
    // The same input with the default options and no checkpoint cost: ties
    // go to running jobs, a job that cannot be placed holds nothing, no
    // release delay.
    // VC a: t0 A (20) on n0; t1 C on n0; t2 E on n0 (n0 full); t3 B on n1
    // (4 free). t4 P (8, 40): ranking A16 B29 P40 C97 E98. P does not fit the
    // free GPUs (n1: 4). Even with E (3 on n0) and C (1) freed, n0 4 + n1 4:
    // no node with 8, so nothing is preempted and C, E keep running.
    // t20 A ends (n0 4 free, n1 4): ranking B13 P40 C81 E82 (C has run 19 s,
    // E 18 s). Freeing E gives n0 7, then C: n0 8, so E and C are preempted
    // and P goes on n0 at 20 (waited 16). The second plan of the instant
    // (no preempting) places C (1) on n1 (best fit, 4 free) and E (3) on n1:
    // both resume at 20 with 81 and 82 s left: ends 101 and 102; waited 0.
    // B ends 33, P 60.
    // VC c: t10 L1 (20) ties L0 (20 left): the running job keeps its GPUs;
    // L0 ends 30, L1 starts 30 (waited 20), ends 50.
    let out = run_srtf(sem_jobs(), vcs_a_c(), SrtfOptions::default(), CheckpointModel::None);
    let expected = want(&[
        ("A", 0, 20, 0, 0),
        ("C", 1, 101, 0, 1),
        ("E", 2, 102, 0, 1),
        ("B", 3, 33, 0, 0),
        ("P", 20, 60, 16, 0),
        ("L0", 0, 30, 0, 0),
        ("L1", 30, 50, 20, 0),
    ]);
    assert_eq!(sorted(rows(&out)), expected);
}

#[test]
fn seeded_random_workloads_keep_every_invariant() {
    use dlsched::cluster::ClusterPreset;
    let mut two_vcs = ClusterSpec::uniform("2vc", 6, 8, "V100", 16384);
    two_vcs.vc_names = vec!["a".into(), "b".into()];
    two_vcs.named_vcs = true;
    for n in &mut two_vcs.nodes[4..] {
        n.vc = VcId(1);
    }
    let clusters = [ClusterPreset::Lab16.spec(), ClusterSpec::uniform("3x8", 3, 8, "V100", 16384), two_vcs];
    let (mut runs, mut preempting_runs) = (0, 0);
    for spec in clusters {
        for seed in 1..=3u64 {
            for (mode, opts) in [("default", SrtfOptions::default()), ("helios", SrtfOptions::helios())] {
                for ckpt in [CheckpointModel::None, CheckpointModel::HeliosTable] {
                    let cluster = Cluster::new(spec.clone()).unwrap();
                    let recs = crate::common::seeded_two_vc_records(&cluster, seed);
                    let what = format!("{} seed {seed} {mode} {ckpt:?}", spec.name);
                    // run_srtf checks the invariants after every instant.
                    let out = run_srtf(recs.clone(), spec.clone(), opts, ckpt);
                    let delay = if opts.helios_release_delay { 1000 } else { 0 };
                    for (s, st) in out.jobs.iter() {
                        let JobState::Completed(d) = st else { panic!("{what}: {} unfinished: {st:?}", s.name) };
                        // Trace speed: held GPUs = work + overheads (+ the release delay).
                        let work = s.duration_ms + ckpt.overhead_ms(s.gpus) * u64::from(d.preemptions()) + delay;
                        assert_eq!(d.attained_ms(), work, "{what}: {}", s.name);
                    }
                    assert_eq!(out.stats.preemptions, out.stats.resumes, "{what}: every preempted job resumed");
                    preempting_runs += usize::from(out.stats.preemptions > 0);
                    runs += 1;
                    // Determinism: the same run gives the same jobs.csv bytes.
                    let again = run_srtf(recs, spec.clone(), opts, ckpt);
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    dlsched::metrics::export::write_jobs_csv(&out, &mut a).unwrap();
                    dlsched::metrics::export::write_jobs_csv(&again, &mut b).unwrap();
                    assert!(a == b, "{what}: two runs differ");
                }
            }
        }
    }
    // At load 1.5 SRTF preempts in most runs; the invariants were checked under preemption.
    assert!(preempting_runs * 2 > runs, "{preempting_runs} of {runs} runs preempted");
}

#[test]
fn options_read_from_kebab_or_snake_names_and_refuse_unknown_ones() {
    let o: SrtfOptions = serde_json::from_str(r#"{"quota-by-count": true, "helios_release_delay": true}"#).unwrap();
    assert!(o.quota_by_count && o.helios_release_delay && !o.pending_first_on_ties && !o.preempted_to_back);
    assert_eq!(serde_json::from_str::<SrtfOptions>("{}").unwrap(), SrtfOptions::default());
    let e = serde_json::from_str::<SrtfOptions>(r#"{"quota-by-gpus": true}"#).unwrap_err();
    assert!(e.to_string().contains("unknown field `quota-by-gpus`"), "{e}");
    let h = serde_json::to_string(&SrtfOptions::helios()).unwrap();
    assert_eq!(
        h,
        r#"{"placement":"consolidate","quota-by-count":true,"pending-first-on-ties":true,"preempted-to-back":true,"helios-release-delay":true}"#
    );
}
