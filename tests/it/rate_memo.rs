//! The rate path of sharing runs with profile rates (issue 20, point 3):
//! the memoised rate and co-location models give the same `f64`s and the
//! same counters as fresh models (and as the co-location rule's reference
//! that scans every row of the table), and the engine's incremental rate
//! updates (only the tenants of GPUs whose tenants changed) leave every
//! running job at the rate a full recomputation gives, after every instant
//! of a randomized sharing run.

use std::collections::BTreeMap;
use std::sync::Arc;

use dlsched::cluster::{Cluster, ClusterSpec, NodeSpec};
use dlsched::engine::{EngineConfig, Simulation};
use dlsched::ids::{GpuId, JobId, VcId};
use dlsched::job::{JobSpec, JobState};
use dlsched::policy::placement::PlacementKind;
use dlsched::policy::queue::{QueueOrder, QueuePolicy};
use dlsched::profile::RateModel;
use dlsched::profile::coloc::{Interference, ProfileInterference, colocated_speed, tenant};
use dlsched::profile::db::ProfileDb;
use dlsched::profile::model::TableModel;
use dlsched::profile::rate::ProfileRate;
use dlsched::trace::TraceRecord;
use dlsched::workload::build_workload;

use crate::common::{mix, rec};

/// 8 nodes × 4 GPUs: V100 (16,000 MiB) and K80 (12,000 MiB), interleaved.
fn cluster_spec() -> ClusterSpec {
    let node = |i: u32| NodeSpec {
        gpus: 4,
        gpu_type: if i.is_multiple_of(2) { "v100".into() } else { "k80".into() },
        gpu_mem_mib: if i.is_multiple_of(2) { 16_000 } else { 12_000 },
        gpus_per_switch: 2,
        sockets: 2,
        rack: 0,
        vc: VcId(0),
    };
    ClusterSpec {
        name: "mixed".into(),
        nodes: (0..8).map(node).collect(),
        vc_names: vec!["default".into()],
        named_vcs: false,
    }
}

/// The first `k` distinct models of the database's co-location table.
fn coloc_models(db: &ProfileDb, k: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in &db.colocation {
        for m in [&r.model_a, &r.model_b] {
            if out.len() < k && !out.contains(m) {
                out.push(m.clone());
            }
        }
    }
    out
}

/// `n` jobs in bursts of 40 every 200 s: 1, 2 or 4 GPUs, a model of the
/// co-location table, a per-GPU batch of 16 to 128, a recorded split on one
/// server or spread, and a memory need small enough for two to share a GPU.
fn records(db: &ProfileDb, seed: u64, n: u64) -> Vec<TraceRecord> {
    let models = coloc_models(db, 6);
    (0..n)
        .map(|i| {
            let h = mix(seed * 10_000 + i);
            let gpus = [1, 1, 1, 2, 4][(h % 5) as usize];
            let mut r = rec(&format!("j{i}"), (i / 40) * 200, gpus, 100 + (h >> 8) % 900);
            r.extra_mut().model = Some(models[((h >> 16) % models.len() as u64) as usize].clone());
            r.extra_mut().local_bsz = Some([16, 32, 64, 128][((h >> 24) % 4) as usize]);
            r.shape = Some(if (h >> 28).is_multiple_of(3) { vec![1; gpus as usize] } else { vec![gpus] }.into());
            r.extra_mut().gpu_mem_mib = Some(1_000 + (h >> 32) % 5_000);
            r
        })
        .collect()
}

fn table_rate(db: &Arc<ProfileDb>) -> ProfileRate {
    ProfileRate::new(Box::new(TableModel::new(db.clone())), "profile-table")
}

fn add(sum: &mut BTreeMap<&'static str, u64>, counters: Vec<(&'static str, u64)>) {
    for (k, v) in counters {
        *sum.entry(k).or_default() += v;
    }
}

#[test]
fn memoised_rates_and_speeds_equal_fresh_models_and_count_alike() {
    let db = Arc::new(ProfileDb::builtin());
    let cluster = Cluster::new(cluster_spec()).unwrap();
    let w = build_workload(records(&db, 1, 120), &cluster, PlacementKind::ShareBestFit.build());
    let specs = w.jobs.specs();
    assert!(specs.len() >= 100);
    let (kept_rate, kept_coloc) = (table_rate(&db), ProfileInterference::new(db.clone()));
    let (mut fresh_rate_counts, mut fresh_coloc_counts) = (BTreeMap::new(), BTreeMap::new());
    // Few placements and GPU types, so questions repeat (memo hits) among new ones.
    for step in 0..2_000u64 {
        let h = mix(step + 5);
        let s: &JobSpec = &specs[(h % specs.len() as u64) as usize];
        let node = ((h >> 8) % 8) as u32;
        let gpus: Vec<GpuId> = if (h >> 12).is_multiple_of(2) {
            (0..s.gpus).map(|i| GpuId(node * 4 + i)).collect()
        } else {
            (0..s.gpus).map(|i| GpuId(((node + i) % 8) * 4 + i % 4)).collect()
        };
        let fresh = table_rate(&db);
        let (a, b) = (kept_rate.rate(s, &gpus, &cluster), fresh.rate(s, &gpus, &cluster));
        assert_eq!(a.to_bits(), b.to_bits(), "step {step}: rate {a} kept, {b} fresh");
        add(&mut fresh_rate_counts, fresh.counters());

        let gpu_type = ["v100", "k80", "V100", "a100"][((h >> 16) % 4) as usize];
        let k = ((h >> 20) % 4) as usize;
        let others: Vec<&JobSpec> = (0..k).map(|j| &specs[(mix(h + j as u64) % specs.len() as u64) as usize]).collect();
        let fresh = ProfileInterference::new(db.clone());
        let (a, b) = (kept_coloc.speed(gpu_type, s, &others), fresh.speed(gpu_type, s, &others));
        assert_eq!(a.to_bits(), b.to_bits(), "step {step}: speed {a} kept, {b} fresh");
        // The rule's reference reads every row of the table (no index, no memo).
        let o: Vec<_> = others.iter().map(|o| tenant(o)).collect();
        let r = colocated_speed(&db, gpu_type, tenant(s), &o).0;
        assert_eq!(a.to_bits(), r.to_bits(), "step {step}: speed {a} kept, {r} by the reference");
        add(&mut fresh_coloc_counts, fresh.counters());
    }
    let kept: BTreeMap<_, _> = kept_rate.counters().into_iter().collect();
    assert_eq!(kept, fresh_rate_counts);
    assert!(kept["evaluations"] > 100, "{kept:?}");
    let kept: BTreeMap<_, _> = kept_coloc.counters().into_iter().collect();
    assert_eq!(kept, fresh_coloc_counts);
    assert!(kept["coloc_evaluations"] > 1_000, "{kept:?}");
}

/// A running job's rate recomputed from nothing by the engine's rule
/// (`Simulation::rate_of`): its placement rate times the least co-location
/// speed over its shared GPUs, from the reference's own models (not the
/// engine's; the test above holds their memos to fresh models).
fn full_recomputation(
    sim: &Simulation,
    models: &(ProfileRate, ProfileInterference),
    job: JobId,
    gpus: &[GpuId],
) -> f64 {
    let (c, jobs) = (sim.cluster(), sim.jobs());
    let spec = jobs.spec(job);
    let (rate, coloc) = models;
    let base = rate.rate(spec, gpus, c);
    if c.shared_gpus() == 0 {
        return base;
    }
    let mut speed: f64 = 1.0;
    for &g in gpus {
        let t = c.tenants(g);
        if t.len() < 2 {
            continue;
        }
        let others: Vec<&JobSpec> = t.iter().filter(|&&x| x != job).map(|&x| jobs.spec(x)).collect();
        speed = speed.min(coloc.speed(&c.node(c.node_of(g)).gpu_type, spec, &others));
    }
    base * speed
}

#[test]
fn incremental_rates_equal_a_full_recomputation_after_every_instant() {
    let db = Arc::new(ProfileDb::builtin());
    for (seed, kind) in
        [(1, PlacementKind::ShareBestFit), (2, PlacementKind::ShareFirstFit), (3, PlacementKind::MemeffPack)]
    {
        let cluster = Cluster::new(cluster_spec()).unwrap();
        let w = build_workload(records(&db, seed, 240), &cluster, kind.build());
        let policy = QueuePolicy::new(QueueOrder::Fifo, true, kind.build(), 1);
        let mut sim = Simulation::new(
            cluster,
            w.jobs,
            Box::new(policy),
            Box::new(table_rate(&db)),
            EngineConfig { sample_interval_ms: 0, ..Default::default() },
        )
        .with_interference(Box::new(ProfileInterference::new(db.clone())));
        let reference = (table_rate(&db), ProfileInterference::new(db.clone()));
        let mut checked = 0u64;
        while sim.step().unwrap().is_some() {
            sim.check_invariants().unwrap();
            for (s, st) in sim.jobs().iter() {
                if let JobState::Running(r) = st
                    && !r.work_done
                {
                    let want = full_recomputation(&sim, &reference, s.id, &r.gpus);
                    assert_eq!(
                        r.rate.to_bits(),
                        want.to_bits(),
                        "{kind:?}: {} at {}: rate {} kept, {want} recomputed",
                        s.name,
                        sim.now(),
                        r.rate
                    );
                    checked += 1;
                }
            }
        }
        let out = sim.finish();
        assert!(out.stats.shared_launches > 20 && out.stats.rate_changes > 20, "{kind:?}: {:?}", out.stats);
        assert!(checked > 500, "{kind:?}: {checked}");
    }
}
