//! LDWP (deep-Q node dispatch): online runs byte-identical for a seed, the
//! frozen model greedy and deterministic, training reproducible, the shipped
//! model matching its manifest, transfer keeping the hidden layer.

use std::path::{Path, PathBuf};

use dlsched::cluster::ClusterPreset;
use dlsched::experiment::{ClusterChoice, RateModelKind, RunSpec, WorkloadSource, run_one};
use dlsched::policy::ldwp::{LdwpOptions, LdwpParams, input_width, load_model};
use dlsched::policy::registry::PolicySpec;
use dlsched::workload::synthetic::SyntheticSpec;

use crate::common::dlsched;

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn spec(policy: PolicySpec, seed: u64) -> RunSpec {
    RunSpec {
        policy,
        seed,
        sample_interval_ms: 0,
        rate_model: RateModelKind::Table,
        ..RunSpec::new(
            WorkloadSource::Synthetic(SyntheticSpec { jobs: 120, load: 0.6, ..SyntheticSpec::default() }),
            ClusterChoice::Preset { preset: ClusterPreset::Lab16 },
        )
    }
}

fn small() -> LdwpParams {
    // Small hidden layers keep the debug build fast; the code path is the same.
    LdwpParams { hidden: vec![16, 8], pretrain: 20, epsilon_decay: 50, ..LdwpParams::default() }
}

fn ends(out: &dlsched::engine::RunOutput) -> Vec<String> {
    out.jobs.iter().map(|(s, st)| format!("{} {st:?}", s.name)).collect()
}

#[test]
fn online_ldwp_completes_every_job_and_is_deterministic() {
    let p = PolicySpec::Ldwp(LdwpOptions { params: small(), ..LdwpOptions::default() });
    let a = run_one(&spec(p.clone(), 3), |_| {}).unwrap();
    let b = run_one(&spec(p, 3), |_| {}).unwrap();
    assert_eq!(ends(&a.output), ends(&b.output));
    assert_eq!(a.output.policy_files, b.output.policy_files);
    assert_eq!(a.output.policy_metrics, b.output.policy_metrics);
    assert!(a.output.jobs.iter().all(|(_, s)| matches!(s, dlsched::job::JobState::Completed(_))));
    let m: std::collections::BTreeMap<_, _> = a.output.policy_metrics.iter().copied().collect();
    // Every arrival that fits one node is one decision; TD steps start after
    // pre-training (one SGD step per decision from then on, both kinds).
    let single = 120.0 - m["dispatch_multi_node_jobs"];
    assert_eq!(m["ldwp_decisions"], single);
    assert_eq!(m["ldwp_updates"], single);
    assert_eq!(m["dispatch_invalid_choices"], 0.0);
    let (_, curve) = &a.output.policy_files[0];
    assert_eq!(curve.lines().count() as f64, single + 1.0);
    assert_eq!(curve.lines().filter(|l| l.contains(",pretrain,")).count(), 20);
}

#[test]
fn frozen_needs_a_model_and_a_model_of_its_cluster() {
    let e = dlsched(&["simulate", "--policy", "ldwp-frozen", "--rate-model", "table", "--jobs", "10", "--out", "/dev/null/x"]);
    let err = String::from_utf8_lossy(&e.stderr);
    assert!(err.contains("ldwp-frozen needs a trained model"), "{err}");
    let model = repo("policies/ldwp-lab16.json");
    let m = model.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let e = dlsched(&[
        "simulate", "--policy", "ldwp-frozen", "--policy-opt", &format!("model={m}"), "--nodes", "8",
        "--gpus-per-node", "4", "--gpu-type", "k80", "--rate-model", "table", "--jobs", "10", "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&e.stderr);
    assert!(err.contains("trained on cluster `lab16` (4 nodes)") && err.contains("(8 nodes)"), "{err}");
    // Online with transfer runs on the 8-node cluster.
    let e = dlsched(&[
        "simulate", "--policy", "ldwp", "--policy-opt", &format!("model={m}"), "--policy-opt", "transfer=true",
        "--nodes", "8", "--gpus-per-node", "4", "--gpu-type", "k80", "--rate-model", "table", "--jobs", "10",
        "--out", out.to_str().unwrap(),
    ]);
    assert!(e.status.success(), "{}", String::from_utf8_lossy(&e.stderr));
}

#[test]
fn frozen_shipped_model_is_greedy_and_deterministic() {
    let p = PolicySpec::LdwpFrozen(LdwpOptions { model: Some(repo("policies/ldwp-lab16.json")), ..Default::default() });
    let a = run_one(&spec(p.clone(), 5), |_| {}).unwrap();
    let b = run_one(&spec(p, 5), |_| {}).unwrap();
    assert_eq!(ends(&a.output), ends(&b.output));
    let m: std::collections::BTreeMap<_, _> = a.output.policy_metrics.iter().copied().collect();
    // No learning: the model's update counter is what the file holds.
    let (saved, _) = load_model(&repo("policies/ldwp-lab16.json")).unwrap();
    assert_eq!(m["ldwp_updates"], saved.updates as f64);
    let (_, curve) = &a.output.policy_files[0];
    assert!(curve.lines().skip(1).all(|l| l.contains(",frozen,") && l.ends_with(',')), "{curve}");
}

/// The shipped model: loads, names the cluster it fits, and its manifest's
/// claims (network, weight count, episodes, decisions) hold.
#[test]
fn shipped_lab16_model_matches_its_manifest() {
    let path = repo("policies/ldwp-lab16.json");
    let (a, cluster) = load_model(&path).unwrap();
    assert_eq!(cluster.as_deref(), Some("lab16"));
    let lab16 = ClusterPreset::Lab16.spec();
    assert_eq!(a.nodes, lab16.nodes.len());
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let man = &doc["manifest"];
    assert_eq!(man["cluster_nodes"], a.nodes);
    let sizes: Vec<usize> = serde_json::from_value(man["network"].clone()).unwrap();
    assert_eq!(sizes, vec![input_width(a.models.len(), 4), 256, 128, 4]);
    assert_eq!(a.q.sizes(), sizes);
    assert_eq!(man["weights_count"], a.q.n_params());
    // (20 + 3 + 12 · 4) · 256 + 256 + 256 · 128 + 128 + 128 · 4 + 4 = 51,844 with the builtin 20 models.
    assert_eq!(a.q.n_params(), (a.models.len() + 3 + 48) * 256 + 256 + 256 * 128 + 128 + 128 * 4 + 4);
    let curve = std::fs::read_to_string(repo("policies/ldwp-lab16.curve.csv")).unwrap();
    let rows: Vec<&str> = curve.lines().skip(1).collect();
    assert_eq!(rows.len() as u64, man["episodes"].as_u64().unwrap());
    let last_decisions: u64 = rows.last().unwrap().split(',').nth(2).unwrap().parse().unwrap();
    assert_eq!(last_decisions, a.decisions);
    assert_eq!(a.episode + 1, man["episodes"].as_u64().unwrap());
    assert!(a.q.is_finite());
}

fn agent_json(path: &Path) -> serde_json::Value {
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["agent"].clone()
}

#[test]
fn one_training_episode_is_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let mut outs = Vec::new();
    for name in ["a.json", "b.json"] {
        let out = dir.path().join(name);
        let r = dlsched(&[
            "ldwp-train", "--episodes", "1", "--jobs", "40", "--load", "0.6", "--seed", "77", "--param",
            "hidden=[16,8]", "--param", "pretrain=10", "--out", out.to_str().unwrap(),
        ]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        outs.push(out);
    }
    assert_eq!(agent_json(&outs[0]), agent_json(&outs[1]));
    let c0 = std::fs::read(outs[0].with_extension("curve.csv")).unwrap();
    assert_eq!(c0, std::fs::read(outs[1].with_extension("curve.csv")).unwrap());
    assert_eq!(String::from_utf8(c0).unwrap().lines().count(), 2);
    let (a, _) = load_model(&outs[0]).unwrap();
    assert_eq!(a.q.sizes()[1..3], [16, 8]);
    // A bad parameter is an error naming it.
    let r = dlsched(&["ldwp-train", "--param", "lr=-1", "--out", dir.path().join("c.json").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&r.stderr).contains("--ldwp-lr"), "{}", String::from_utf8_lossy(&r.stderr));
}

/// Transfer to another node count: the hidden layer (256 → 128 weights and
/// bias) equals the source model's; the input layer takes the new cluster's
/// width and the output layer one Q per new node.
#[test]
fn transfer_keeps_the_hidden_layer_and_fits_the_new_cluster() {
    let (src, _) = load_model(&repo("policies/ldwp-lab16.json")).unwrap();
    let t = src.transfer(11, 1);
    assert_eq!(t.q.layers[1], src.q.layers[1]);
    assert_eq!(t.q.sizes(), vec![input_width(src.models.len(), 11), 256, 128, 11]);
    assert_ne!(t.q.layers[2].w.column(0), src.q.layers[2].w.column(0));
    assert_eq!(t.decisions, 0);
}
