//! The staged run pipeline: a family's own keys are spellings of its
//! `policy_opt` options (one option system), the artefacts a run reads are
//! held once by type and path, and what a caller hands a run through
//! `RunBuilder::extension` reaches the policy.

use std::path::Path;
use std::sync::{Arc, Mutex};

use dlsched::experiment::raw::{self, Origin, RawSpec, Value};
use dlsched::experiment::{Artefacts, RunBuilder, RunSpec, run_one};
use dlsched::policy::registry::{PolicySpec, RiflingTable};
use dlsched::policy::rifling::{Agent, RiflingParams};

fn rawspec(pairs: &[(&str, Value)]) -> RawSpec {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn spec(pairs: &[(&str, Value)], origin: Origin<'_>) -> RunSpec {
    raw::to_run_spec(&rawspec(pairs), origin, None).unwrap()
}

fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Every RIFLING key sets the option its family declares: the spec from the
/// flat keys equals the one from `policy_opt.params.*` and the one written
/// by hand.
#[test]
fn a_family_key_and_its_policy_opt_give_one_spec() {
    let genie = ("workload", Value::Str("genie".into()));
    let rifling = ("policy", Value::Str("rifling".into()));
    let flat = spec(
        &[
            genie.clone(),
            rifling.clone(),
            ("rifling_k", Value::Int(3)),
            ("rifling_alpha", Value::Float(0.25)),
            ("rifling_wait", Value::Str("never".into())),
            ("rifling_queue_feature", Value::Bool(false)),
            ("genie_best_fit", Value::Bool(true)),
        ],
        Origin::CommandLine,
    );
    let opts = spec(
        &[
            genie,
            rifling,
            ("policy_opt.params.k", Value::Int(3)),
            ("policy_opt.params.alpha", Value::Float(0.25)),
            ("policy_opt.params.wait", Value::Str("never".into())),
            ("policy_opt.params.queue_feature", Value::Bool(false)),
            ("policy_opt.params.best_fit_nodes", Value::Bool(true)),
        ],
        Origin::CommandLine,
    );
    assert_eq!(flat, opts);
    let PolicySpec::Rifling(o) = &flat.policy else { panic!("{:?}", flat.policy) };
    let by_hand = RiflingParams {
        k: 3,
        alpha: 0.25,
        wait: serde_json::from_str("\"never\"").unwrap(),
        queue_feature: false,
        best_fit_nodes: true,
        ..RiflingParams::default()
    };
    assert_eq!(o.params, by_hand);
    // `theta` is GENIE's `theta`.
    // With fifo it is an error on the command line too (issue 35: it was
    // ignored there, and an error in a sweep file).
    let r = rawspec(&[("workload", Value::Str("genie".into())), ("theta", Value::Float(1.5))]);
    let e = raw::to_run_spec(&r, Origin::CommandLine, None).unwrap_err();
    assert!(e.message.contains("--theta applies only to the GENIE-family policies"), "{e}");
    let g = spec(
        &[
            ("workload", Value::Str("genie".into())),
            ("policy", Value::Str("min-min".into())),
            ("theta", Value::Float(1.5)),
        ],
        Origin::CommandLine,
    );
    let PolicySpec::MinMin(o) = &g.policy else { panic!("{:?}", g.policy) };
    assert_eq!(o.theta, 1.5);
}

/// In an experiment file a family's path key is relative to the file, and
/// `rifling_table` is the frozen policy's only; `theta` is refused for a
/// policy outside the GENIE family (from every origin), a RIFLING key left
/// to RIFLING.
#[test]
fn family_keys_in_an_experiment_file() {
    let file = repo("experiments/some.toml");
    let table = ("rifling_table", Value::Str("../policies/rifling-lab16.json".into()));
    let genie = ("workload", Value::Str("genie".into()));
    let frozen =
        spec(&[genie.clone(), ("policy", Value::Str("rifling-frozen".into())), table.clone()], Origin::File(&file));
    let PolicySpec::RiflingFrozen(o) = &frozen.policy else { panic!("{:?}", frozen.policy) };
    assert_eq!(o.table.as_deref(), Some(repo("experiments/../policies/rifling-lab16.json").as_path()));
    let online = spec(&[genie.clone(), ("policy", Value::Str("rifling".into())), table.clone()], Origin::File(&file));
    let PolicySpec::Rifling(o) = &online.policy else { panic!("{:?}", online.policy) };
    assert_eq!(o.table, None);
    // A RIFLING key in a sweep over several families: GENIE runs without it.
    let g = spec(
        &[genie.clone(), ("policy", Value::Str("genie".into())), ("rifling_k", Value::Int(2))],
        Origin::File(&file),
    );
    assert_eq!(g.policy, PolicySpec::Genie(Default::default()));
    let e = raw::to_run_spec(&rawspec(&[genie, ("theta", Value::Float(1.0))]), Origin::File(&file), None)
        .unwrap_err()
        .message;
    assert_eq!(e, "`theta` applies only to the GENIE-family policies, not `policy` = `fifo`");
    // The command line and Python's keywords refuse it the same way (the
    // command line only noted it), each spelling the key as it does.
    for (origin, want) in [
        (Origin::CommandLine, "--theta applies only to the GENIE-family policies, not --policy fifo"),
        (Origin::Keywords, "theta= applies only to the GENIE-family policies, not policy=fifo"),
    ] {
        let e = raw::to_run_spec(&rawspec(&[("theta", Value::Float(1.0))]), origin, None).unwrap_err();
        assert_eq!((e.message.as_str(), e.key.as_deref()), (want, Some("theta")));
    }
}

/// The artefact set holds a file once by type and path: two specs naming
/// one table read it once, and the run reads the held copy.
#[test]
fn artefacts_are_read_once_by_type_and_path() {
    let path = repo("policies/rifling-lab16.json");
    let mut a = Artefacts::default();
    let first = a.load::<RiflingTable>(&path).unwrap();
    let second = a.load::<RiflingTable>(&path).unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(a.len(), 1);
    // The same file as another type is another artefact (and not a GENIE model file).
    let e = a.load::<dlsched::policy::genie::GenieProfiles>(&path).unwrap_err().to_string();
    assert!(e.contains("not a GENIE model file"), "{e}");
    assert_eq!(a.len(), 1);
    // Read through a spec: the same table as the held one.
    let r = rawspec(&[
        ("workload", Value::Str("genie".into())),
        ("policy", Value::Str("rifling-frozen".into())),
        ("rifling_table", Value::Str(path.display().to_string())),
    ]);
    let mut b = Artefacts::default();
    raw::to_run_spec(&r, Origin::CommandLine, Some(&mut b)).unwrap();
    assert_eq!(a, b);
}

/// An agent handed to two runs through `RunBuilder::extension` is the one
/// the policy drives: its updates add up over the two runs, and a fresh
/// run's agent (none handed) learns on its own from zero.
#[test]
fn an_extension_reaches_the_policy() {
    let mut s = spec(
        &[
            ("workload", Value::Str("genie".into())),
            ("policy", Value::Str("rifling".into())),
            ("tasks", Value::Int(30)),
            ("hours", Value::Float(1.0)),
            ("rate_model", Value::Str("table".into())),
            ("sample_interval", Value::Int(0)),
        ],
        Origin::CommandLine,
    );
    let fresh = run_one(&s, |_| {}).unwrap();
    let updates = |r: &dlsched::experiment::RunReport| r.summary.policy_metrics.get("rifling_q_updates").copied();
    let one_run = updates(&fresh).expect("rifling reports its updates");
    assert!(one_run > 0.0);
    let PolicySpec::Rifling(o) = &s.policy else { unreachable!() };
    // lab16: 4 nodes x 4 GPUs, 16 placements + WAIT.
    let agent = Arc::new(Mutex::new(Agent::new(o.params, 17, s.seed)));
    let a = RunBuilder::new(&s).extension(agent.clone()).run(|_| {}).unwrap();
    assert_eq!(updates(&a), Some(one_run), "a fresh agent of the run's seed learns as the run's own");
    s.seed += 1;
    RunBuilder::new(&s).extension(agent.clone()).run(|_| {}).unwrap();
    let after = agent.lock().unwrap().updates as f64;
    assert!(after > one_run, "the second run kept learning in the handed agent: {after} updates");
}
