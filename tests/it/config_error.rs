//! Configuration errors are typed: each says what kind of mistake it is and
//! which raw-spec key is at fault, and its message is the one the command
//! line and sweep files have always printed (the texts below are those of
//! the binary before the errors were typed, for the same input).

use std::path::Path;

use dlsched::error::{ConfigError, ConfigErrorKind, RunError};
use dlsched::experiment::raw::{self, Origin, RawSpec, Value};
use dlsched::sweep::Experiment;

fn rawspec(pairs: &[(&str, Value)]) -> RawSpec {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn s(v: &str) -> Value {
    Value::Str(v.into())
}

/// The error of a raw spec read as an experiment file's `[base]` (the file
/// need not exist: no key here names a path).
fn file_err(pairs: &[(&str, Value)]) -> ConfigError {
    raw::to_run_spec(&rawspec(pairs), Origin::File(Path::new("e.toml")), None).unwrap_err()
}

fn kind_key(e: &ConfigError) -> (ConfigErrorKind, Option<&str>) {
    (e.kind, e.key.as_deref())
}

#[test]
fn a_misspelt_policy_is_an_unknown_name_at_key_policy() {
    let e = file_err(&[("policy", s("fiffo"))]);
    assert_eq!(kind_key(&e), (ConfigErrorKind::UnknownName, Some("policy")));
    // The message lists every policy, as before; it displays as itself.
    assert!(e.message.starts_with("`policy` = `fiffo`: expected one of fifo, sjf, genie, genie-fifo, "), "{e}");
    assert_eq!(e.to_string(), e.message);
    // On the command line's spelling too (Python's `policy=` the same way).
    let e = raw::to_run_spec(&rawspec(&[("policy", s("fiffo"))]), Origin::Keywords, None).unwrap_err();
    assert_eq!(kind_key(&e), (ConfigErrorKind::UnknownName, Some("policy")));
    assert!(e.message.starts_with("policy=fiffo: expected one of fifo, "), "{e}");
}

#[test]
fn an_unknown_policy_option_is_an_unknown_name_at_its_policy_opt_key() {
    let e = file_err(&[("policy", s("genie")), ("workload", s("genie")), ("policy_opt.thta", Value::Int(1))]);
    assert_eq!(kind_key(&e), (ConfigErrorKind::UnknownName, Some("policy_opt.thta")));
    assert!(
        e.message.starts_with(
            "`policy_opt.thta` = `1`: unknown field `thta`, expected one of `theta`, `backfill`, `best_fit_nodes`"
        ),
        "{e}"
    );
    // A known option with a value of the wrong type is an invalid value.
    let e = file_err(&[("policy_opt.backfill", Value::Int(3))]);
    assert_eq!(kind_key(&e), (ConfigErrorKind::InvalidValue, Some("policy_opt.backfill")));
    assert!(e.message.starts_with("`policy_opt.backfill` = `3`: invalid type: integer `3`, expected a boolean"), "{e}");
}

#[test]
fn an_out_of_range_number_is_an_invalid_value_at_its_key() {
    // theta >= 0 (crate::bounds::theta).
    let e = file_err(&[("policy", s("genie")), ("workload", s("genie")), ("theta", Value::Float(-1.0))]);
    assert_eq!(kind_key(&e), (ConfigErrorKind::InvalidValue, Some("theta")));
    assert_eq!(e.message, "`theta` must be a number >= 0, got -1");
    let e = file_err(&[("sample_interval", Value::Int(-1))]);
    assert_eq!(kind_key(&e), (ConfigErrorKind::InvalidValue, Some("sample_interval")));
    assert_eq!(e.message, "`sample_interval` must not be negative");
    let e = file_err(&[("mem_headroom", Value::Float(1.5))]);
    assert_eq!(kind_key(&e), (ConfigErrorKind::InvalidValue, Some("mem_headroom")));
    assert_eq!(e.message, "the memory headroom (`mem_headroom`) must be in [0, 1), got 1.5");
}

#[test]
fn settings_that_cannot_go_together_are_a_conflict() {
    // A GENIE policy without the GENIE workload (moldable tasks).
    let e = file_err(&[("policy", s("genie"))]);
    assert_eq!(kind_key(&e), (ConfigErrorKind::Conflict, Some("policy")));
    assert_eq!(e.message, "`policy` = `genie` schedules moldable tasks: it needs `workload = \"genie\"`");
    // Two keys that each build the cluster.
    let e = file_err(&[("cluster", s("lab16")), ("nodes", Value::Int(2)), ("gpus_per_node", Value::Int(4))]);
    assert_eq!(kind_key(&e), (ConfigErrorKind::Conflict, Some("cluster")));
    assert_eq!(e.message, "`cluster` is a preset; it goes with none of `vcs`, `nodes`, `gpus_per_node`");
}

#[test]
fn theta_for_fifo_in_a_sweep_file_is_a_conflict_at_key_theta() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("e.toml");
    std::fs::write(&f, "question = \"q\"\n[base]\npolicy = \"fifo\"\ntheta = 0.5\n").unwrap();
    let e = Experiment::load(&f).unwrap_err();
    assert_eq!(kind_key(&e), (ConfigErrorKind::Conflict, Some("theta")));
    // The file and run prefix the run spec's message, as before.
    assert_eq!(
        e.message,
        format!("{}: run : `theta` applies only to the GENIE-family policies, not `policy` = `fifo`", f.display())
    );
    // An unknown key of the file.
    std::fs::write(&f, "question = \"q\"\n[base]\npolcy = \"fifo\"\n").unwrap();
    let e = Experiment::load(&f).unwrap_err();
    assert_eq!(kind_key(&e), (ConfigErrorKind::UnknownName, Some("polcy")));
    assert!(e.message.starts_with(&format!("{}: unknown key `base.polcy`; allowed: trace, ", f.display())), "{e}");
}

#[test]
fn a_header_only_trace_is_an_empty_workload() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("empty.csv");
    std::fs::write(&t, "job_id,vc,gpu_num,submit_time,duration\n").unwrap();
    let spec = raw::to_run_spec(&rawspec(&[("trace", s(t.to_str().unwrap()))]), Origin::CommandLine, None).unwrap();
    let Err(RunError::Config(e)) = dlsched::experiment::run_one(&spec, |_| {}) else { panic!("not a config error") };
    assert_eq!(kind_key(&e), (ConfigErrorKind::EmptyWorkload, None));
    assert_eq!(e.message, format!("{}: the trace has no job rows (header only): nothing to simulate", t.display()));
}

#[test]
fn kinds_have_kebab_case_names_and_strings_are_other() {
    let names: Vec<&str> = ConfigErrorKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names, ["unknown-name", "invalid-value", "conflict", "empty-workload", "artefact", "other"]);
    let e: ConfigError = String::from("something").into();
    assert_eq!((e.kind, e.key, e.message.as_str()), (ConfigErrorKind::Other, None, "something"));
    let e = ConfigError::new(ConfigErrorKind::Conflict, "x").with_key("k").map_message(|m| format!("f: {m}"));
    assert_eq!((e.kind, e.key.as_deref(), e.to_string().as_str()), (ConfigErrorKind::Conflict, Some("k"), "f: x"));
}

#[test]
fn genie_models_fitted_against_another_truth_are_an_artefact_error() {
    // The shipped K80 fit, on lab16 under the default `table` rate model.
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/genie-lab16-k80-seed1.json");
    let keys = [("workload", s("genie")), ("policy", s("genie")), ("genie_models", s(models.to_str().unwrap()))];
    let spec = raw::to_run_spec(&rawspec(&keys), Origin::CommandLine, None).unwrap();
    let Err(RunError::Config(e)) = dlsched::experiment::run_one(&spec, |_| {}) else { panic!("not a config error") };
    assert_eq!(kind_key(&e), (ConfigErrorKind::Artefact, None));
    assert_eq!(
        e.message,
        format!(
            "{}: these GENIE models were profiled against the `genie-k80` ground truth, the run uses `table` (its \
             rate model); profile with `dlsched genie-profile --truth table`",
            models.display()
        )
    );
}

/// Sharing GPUs among GENIE tasks under a queue policy needs GPUs of one
/// memory size: on Philly's 12 and 24 GiB GPUs the run is a conflict, said
/// in one line of single spaces.
#[test]
fn shared_gpus_of_two_memory_sizes_for_tasks_are_a_conflict() {
    let r: RawSpec = [
        ("workload", Value::Str("genie".into())),
        ("cluster", Value::Str("philly".into())),
        ("placement", Value::Str("share-best-fit".into())),
        ("tasks", Value::Int(5)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let spec = raw::to_run_spec(&r, Origin::CommandLine, None).unwrap();
    let Err(RunError::Config(e)) = dlsched::experiment::run_one(&spec, |_| {}) else {
        panic!("expected a ConfigError")
    };
    assert_eq!(e.kind, ConfigErrorKind::Conflict);
    assert!(e.message.starts_with("placement `share-best-fit` shares GPUs, and GENIE tasks"), "{}", e.message);
    assert!(e.message.contains("need GPUs of one memory size to share them"), "{}", e.message);
    assert!(!e.message.contains("  "), "no runs of spaces: {}", e.message);
}

/// A value the policy's own check refuses (RIFLING's alpha outside (0, 1])
/// is an invalid value, its message the policy's.
#[test]
fn a_value_the_policy_refuses_is_an_invalid_value() {
    let r: RawSpec = [
        ("workload", Value::Str("genie".into())),
        ("policy", Value::Str("rifling".into())),
        ("rifling_alpha", Value::Float(2.0)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let e = raw::to_run_spec(&r, Origin::CommandLine, None).unwrap_err();
    assert_eq!(e.kind, ConfigErrorKind::InvalidValue);
    assert_eq!(e.message, "RIFLING alpha (--rifling-alpha) must be in (0, 1], got 2");
}

#[test]
fn an_option_alias_sets_the_option_it_names() {
    // `reset_interval` is an alias of gavel's `reset-interval`: set either
    // way, the spec is the same and differs from the default (1,920 s).
    let policy = |key: &str| {
        let r = rawspec(&[("policy", s("gavel")), (key, Value::Float(0.0))]);
        let spec = raw::to_run_spec(&r, Origin::File(Path::new("e.toml")), None).unwrap();
        serde_json::to_value(&spec.policy).unwrap()
    };
    let (alias, own) = (policy("policy_opt.reset_interval"), policy("policy_opt.reset-interval"));
    assert_eq!(alias, own);
    assert_eq!(alias["reset-interval"], serde_json::json!(0.0), "{alias}");
    assert!(alias.get("reset_interval").is_none(), "{alias}");
}
