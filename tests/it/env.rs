//! The learning environment (`experiment::env`): the engine driven one
//! choice at a time gives the runs a policy would, the action modes' masks
//! by hand, and episodes drawn reproducibly and apart by split.

use dlsched::cluster::ClusterPreset;
use dlsched::experiment::env::{ActionMode, EVAL_SEED_BASE, Env, EnvConfig, EpisodeSource, Split, VecEnv};
use dlsched::experiment::{ClusterChoice, RunSpec, WorkloadSource, run_one};
use dlsched::metrics::export::write_jobs_csv;
use dlsched::trace::{ColumnMap, TraceFormat};
use dlsched::workload::synthetic::SyntheticSpec;

fn synthetic(jobs: u32, load: f64, seed: u64) -> RunSpec {
    let workload = WorkloadSource::Synthetic(SyntheticSpec { jobs, load, ..SyntheticSpec::default() });
    let mut spec = RunSpec::new(workload, ClusterChoice::Preset { preset: ClusterPreset::Lab16 });
    spec.seed = seed;
    spec
}

fn trace_spec(dir: &std::path::Path, rows: &str, nodes: u32, gpus_per_node: u32) -> RunSpec {
    let path = dir.join("t.csv");
    std::fs::write(&path, format!("job_id,gpu_num,submit_time,duration\n{rows}")).unwrap();
    let workload = WorkloadSource::Trace { path, format: TraceFormat::JobsCsv, columns: ColumnMap::default() };
    RunSpec::new(workload, ClusterChoice::Uniform { nodes, gpus_per_node, gpu_type: None })
}

fn first_valid(env: &Env) -> usize {
    env.mask().iter().position(|&m| m).unwrap()
}

fn jobs_csv(out: &dlsched::engine::RunOutput) -> Vec<u8> {
    let mut v = Vec::new();
    write_jobs_csv(out, &mut v).unwrap();
    v
}

#[test]
fn an_agent_starting_the_first_placeable_job_over_the_whole_queue_is_fifo_with_backfill() {
    // The independent route: the registry's FIFO with backfill (the synthetic
    // workload's default) starts, in arrival order, every job that fits now.
    for seed in [1, 2, 3] {
        let spec = synthetic(60, 1.3, seed);
        let cfg = EnvConfig { max_queue: 64, ..EnvConfig::default() };
        let mut env = Env::new(spec.clone(), cfg).unwrap();
        assert!(!env.reset(Some(seed)).unwrap());
        let mut steps = 0;
        loop {
            let out = env.step(first_valid(&env)).unwrap();
            steps += 1;
            if out.terminated {
                break;
            }
        }
        let driven = env.report().unwrap();
        let policy = run_one(&spec, |_| {}).unwrap();
        assert_eq!(jobs_csv(&driven.output), jobs_csv(&policy.output), "seed {seed}");
        assert_eq!(driven.summary.jct_mean_s.to_bits(), policy.summary.jct_mean_s.to_bits());
        // Every step started a job (no wait was ever the first valid action).
        assert_eq!(steps, 60);
    }
}

#[test]
fn placement_mode_offers_the_head_jobs_symmetric_placements() {
    let d = tempfile::tempdir().unwrap();
    // Two nodes of 4 GPUs; A (2 GPUs) and B (4 GPUs) arrive at 0.
    let spec = trace_spec(d.path(), "A,2,0,100\nB,4,0,100\n", 2, 4);
    let cfg = EnvConfig { action: ActionMode::Placement, ..EnvConfig::default() };
    let mut env = Env::new(spec, cfg).unwrap();
    // Actions: (d_node - 1) * 4 + d_gpn - 1 for d_node in 1..=2, d_gpn in 1..=4, then wait.
    assert_eq!(env.n_actions(), 9);
    env.reset(Some(0)).unwrap();
    // Head A: <1,2> (index 1) and <2,1> (index 4); wait is invalid (nothing
    // runs and nothing is still to arrive: waiting would end the run).
    let m: Vec<usize> = (0..9).filter(|&a| env.mask()[a]).collect();
    assert_eq!(m, vec![1, 4]);
    env.step(4).unwrap(); // A on one GPU of each node
    // Node free shares in the flat observation: 3/4 each (after 2 slots x 4 values).
    let k = 8;
    assert_eq!(&env.obs()[k * 4..k * 4 + 2], &[0.75, 0.75]);
    // Head B (4 GPUs) on 3 + 3 free: only <2,2> (index 5); wait is valid now (A runs).
    let m: Vec<usize> = (0..9).filter(|&a| env.mask()[a]).collect();
    assert_eq!(m, vec![5, 8]);
    env.step(5).unwrap();
    // Both placed, nothing waits: the next decision point is none, the run ends.
    assert!(env.done());
    let r = env.report().unwrap();
    assert_eq!(r.summary.jobs_completed, 2);
    // Both ran from 0 to 100 s on their own GPUs.
    assert_eq!(r.summary.jct_mean_s, 100.0);
}

#[test]
fn node_mode_offers_the_nodes_that_can_take_the_head_job() {
    let d = tempfile::tempdir().unwrap();
    // Two nodes of 4 GPUs; A 2 GPUs, B 3, C 6 (wider than a node), all at 0.
    let spec = trace_spec(d.path(), "A,2,0,100\nB,3,0,50\nC,6,0,10\n", 2, 4);
    let cfg = EnvConfig { action: ActionMode::Node, ..EnvConfig::default() };
    let mut env = Env::new(spec, cfg).unwrap();
    assert_eq!(env.n_actions(), 3);
    env.reset(Some(0)).unwrap();
    assert_eq!(env.mask(), &[true, true, false]);
    env.step(1).unwrap(); // A on node 1: free 4, 2
    // B (3 GPUs) fits node 0 only.
    assert_eq!(env.mask(), &[true, false, true]);
    env.step(0).unwrap(); // free 1, 2
    // C (6 GPUs) cannot start (1 + 2 free): no decision point until B ends
    // at 50 s; then 4 + 2 free: node 0 can be C's first node (4 GPUs, then 2
    // of node 1), node 1 cannot (2 free, fewer than a node's 4).
    assert_eq!(env.now_s(), 50.0);
    assert_eq!(env.mask(), &[true, false, true]);
    let out = env.step(0).unwrap();
    assert!(out.terminated);
    let r = env.report().unwrap();
    // JCTs: A 100, B 50, C waits 50 s and runs 10.
    assert_eq!(r.summary.jct_mean_s, (100.0 + 50.0 + 60.0) / 3.0);
}

#[test]
fn unseeded_resets_draw_reproducible_distinct_episodes_and_eval_seeds_are_apart() {
    let spec = synthetic(20, 0.8, 7);
    let seeds = |split: Split| {
        let mut env = Env::new(spec.clone(), EnvConfig { split, ..EnvConfig::default() }).unwrap();
        let mut s = Vec::new();
        env.reset(Some(5)).unwrap();
        s.push(env.episode_seed());
        for _ in 0..5 {
            env.reset(None).unwrap();
            s.push(env.episode_seed());
        }
        s
    };
    let a = seeds(Split::Train);
    assert_eq!(a, seeds(Split::Train));
    assert_eq!(a[0], 5);
    let distinct: std::collections::BTreeSet<u64> = a.iter().copied().collect();
    assert_eq!(distinct.len(), a.len());
    assert!(a.iter().all(|&s| s < EVAL_SEED_BASE));
    let e = seeds(Split::Eval);
    assert!(e.iter().all(|&s| s >= EVAL_SEED_BASE));
    // The same keys, the other half of the seed space.
    assert_eq!(e.iter().map(|s| s - EVAL_SEED_BASE).collect::<Vec<_>>(), a);
    // A seed of the evaluation half is refused for training.
    let mut env = Env::new(spec, EnvConfig::default()).unwrap();
    assert!(env.reset(Some(EVAL_SEED_BASE)).is_err());
}

#[test]
fn trace_windows_come_from_the_splits_own_part_of_the_trace() {
    let d = tempfile::tempdir().unwrap();
    // 100 one-GPU jobs, job i at 60 i s.
    let rows: String = (0..100).map(|i| format!("j{i},1,{},30\n", 60 * i)).collect();
    let spec = trace_spec(d.path(), &rows, 1, 4);
    let window = |split: Split| EnvConfig {
        episodes: EpisodeSource::TraceWindows { jobs: 10, eval_share: 0.2 },
        split,
        ..EnvConfig::default()
    };
    for (split, lo, hi) in [(Split::Train, 0, 79), (Split::Eval, 80, 99)] {
        let mut env = Env::new(spec.clone(), window(split)).unwrap();
        let mut starts = std::collections::BTreeSet::new();
        for i in 0..20 {
            env.reset(if i == 0 { Some(3) } else { None }).unwrap();
            while !env.done() {
                env.step(first_valid(&env)).unwrap();
            }
            let r = env.report().unwrap();
            let names: Vec<u32> =
                r.output.jobs.specs().iter().map(|s| s.name.trim_start_matches('j').parse().unwrap()).collect();
            assert_eq!(names.len(), 10);
            // Consecutive jobs of the split's part, shifted to start at 0.
            assert!(names.windows(2).all(|w| w[1] == w[0] + 1), "{names:?}");
            assert!(names[0] >= lo && names[9] <= hi, "{split:?}: {names:?}");
            assert_eq!(r.output.jobs.specs()[0].submit.as_ms(), 0);
            starts.insert(names[0]);
        }
        assert!(starts.len() > 5, "{starts:?}");
    }
    // A window longer than the evaluation part is refused with the counts.
    let too_long = EnvConfig {
        episodes: EpisodeSource::TraceWindows { jobs: 30, eval_share: 0.2 },
        split: Split::Eval,
        ..EnvConfig::default()
    };
    let e = Env::new(spec, too_long).err().unwrap().to_string();
    assert!(e.contains("80 for training and 20 for evaluation"), "{e}");
}

#[test]
fn a_vector_steps_each_environment_as_it_would_step_alone() {
    let spec = synthetic(30, 1.2, 1);
    let cfg = EnvConfig { max_queue: 4, ..EnvConfig::default() };
    let mut alone: Vec<Env> = (0..3).map(|_| Env::new(spec.clone(), cfg.clone()).unwrap()).collect();
    let mut venv = VecEnv::new((0..3).map(|_| Env::new(spec.clone(), cfg.clone()).unwrap()).collect(), true).unwrap();
    let seeds = [Some(10), Some(11), Some(12)];
    venv.reset(&seeds).unwrap();
    for (e, s) in alone.iter_mut().zip(seeds) {
        e.reset(s).unwrap();
    }
    // The last valid action (often wait), 300 steps, through episode ends.
    let mut ended = 0;
    for _ in 0..300 {
        let actions: Vec<usize> = venv.envs().iter().map(|e| e.mask().iter().rposition(|&m| m).unwrap()).collect();
        let outs = venv.step(&actions);
        for ((e, o), &a) in alone.iter_mut().zip(&outs).zip(&actions) {
            let out = e.step(a).unwrap();
            assert_eq!(out.reward.to_bits(), o.out.reward.to_bits());
            assert_eq!((out.terminated, out.truncated), (o.out.terminated, o.out.truncated));
            if out.terminated || out.truncated {
                assert_eq!(o.final_obs.as_deref(), Some(e.obs()));
                ended += 1;
                e.reset(None).unwrap();
            }
        }
        for (e, v) in alone.iter().zip(venv.envs()) {
            assert_eq!(e.obs(), v.obs());
            assert_eq!(e.mask(), v.mask());
        }
    }
    assert!(ended > 0);
}

#[test]
fn placement_mode_starts_a_head_job_of_no_symmetric_shape_by_the_placement_rule() {
    let d = tempfile::tempdir().unwrap();
    // Two nodes of 4 GPUs: 3 GPUs = <1,3> only; 7 GPUs has no <d_node, d_gpn>
    // (7 x 1 needs 7 nodes): consolidate places it as soon as 7 GPUs are free.
    let spec = trace_spec(d.path(), "A,7,0,100\nB,3,0,100\n", 2, 4);
    let cfg = EnvConfig { action: ActionMode::Placement, ..EnvConfig::default() };
    let mut env = Env::new(spec, cfg).unwrap();
    env.reset(Some(0)).unwrap();
    // A started at 0 without a decision; B (head now) waits for 3 GPUs: at
    // 100 s A ends and <1,3> (index 2) is B's one placement.
    assert_eq!(env.now_s(), 100.0);
    let m: Vec<usize> = (0..9).filter(|&a| env.mask()[a]).collect();
    assert_eq!(m, vec![2]);
    assert!(env.step(2).unwrap().terminated);
    assert_eq!(env.report().unwrap().summary.jct_mean_s, (100.0 + 200.0) / 2.0);
}

#[test]
fn a_vectors_environments_draw_different_unseeded_episodes() {
    let spec = synthetic(20, 0.8, 7);
    let mut venv =
        VecEnv::new((0..3).map(|_| Env::new(spec.clone(), EnvConfig::default()).unwrap()).collect(), false).unwrap();
    venv.reset(&[None, None, None]).unwrap();
    let seeds: Vec<u64> = venv.envs().iter().map(Env::episode_seed).collect();
    assert!(seeds[0] != seeds[1] && seeds[1] != seeds[2] && seeds[0] != seeds[2], "{seeds:?}");
    // The first draws stream 0: a single environment's draw.
    let mut alone = Env::new(spec, EnvConfig::default()).unwrap();
    alone.reset(None).unwrap();
    assert_eq!(seeds[0], alone.episode_seed());
}

#[test]
fn a_masked_wait_is_refused_with_the_reason_and_the_episode_goes_on() {
    let d = tempfile::tempdir().unwrap();
    let spec = trace_spec(d.path(), "A,2,0,100\nB,4,0,100\n", 2, 4);
    let cfg = EnvConfig { action: ActionMode::Placement, ..EnvConfig::default() };
    let mut env = Env::new(spec.clone(), cfg).unwrap();
    env.reset(Some(0)).unwrap();
    // Nothing runs and nothing is still to arrive: wait (8), and an invalid
    // placement (0, which means wait), would end the run with 2 jobs left.
    for a in [8, 0] {
        let e = env.step(a).unwrap_err().to_string();
        assert!(e.contains("waiting would end the run with 2 jobs never started"), "{e}");
    }
    assert!(!env.done());
    env.step(4).unwrap();
    // Bounds of the arrays.
    let big = EnvConfig { max_queue: 5000, ..EnvConfig::default() };
    let e = Env::new(spec, big).err().unwrap().to_string();
    assert!(e.contains("max_queue=5000: 1 to 4096"), "{e}");
}
