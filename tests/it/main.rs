//! The integration test binary: hand-computed schedules, invariants on seeded
//! random workloads, determinism, trace formats, the CLI, and replays of the
//! real traces in `../shared` (skipped, with a printed reason, when absent).

// `EngineConfig { sample_interval_ms: 0, ..Default::default() }` names only
// the field a test sets, so that it survives new engine options.
#![allow(clippy::needless_update)]

mod chronus;
mod cli;
mod common;
mod config_error;
mod custom_las;
mod custom_policy;
mod elastic_engine;
mod elastic_policies;
mod elastic_run;
mod elasticflow;
mod elasticflow_policies;
mod engine_hooks;
mod env;
mod experiment_figures;
mod fairness;
mod fidelity;
mod figures;
mod fill;
mod first_run;
mod floors;
mod formats;
mod gandiva;
mod gavel;
mod genie;
mod genie_baselines;
mod genie_truth;
mod golden;
mod hand;
mod invariants;
mod las;
mod ldwp;
mod malformed;
mod memeff_tasks;
mod memory;
mod mixed_memory;
mod names;
mod nodesel;
mod openb;
mod output_safety;
mod paired;
mod parquet;
mod philly;
mod pipeline;
mod pollux;
mod pollux_fidelity;
mod pollux_profile;
mod pollux_workload;
mod predictor;
mod preempt;
mod profile_db;
mod profile_model;
mod qssf;
mod rate_memo;
mod rates;
mod rifling;
mod round_skipping;
mod share_search;
mod sharing;
mod sia;
mod sia_model;
mod slurm;
mod spec;
mod srtf;
mod srtf_cli;
mod sweep;
mod task_metrics;
mod themis;
mod tie_order;
mod tiresias;
mod trace_sources;
mod train;
mod unfinished;
mod vc_scale;
mod vc_timeline;
