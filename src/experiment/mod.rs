//! One run from plain data: build the cluster, the workload and the policy,
//! simulate, summarise, and write the run directory.
//!
//! A [`RunSpec`] is filled one way: the command line and a sweep file both
//! fill a flat raw spec (one key table, [`raw::KEYS`]) and
//! [`raw::to_run_spec`] turns it into a validated spec; `manifest.json`
//! holds that spec in full (`spec`), and [`RunSpec::from_manifest`] reads it
//! back to rerun the run byte for byte.

pub mod env;
pub mod fill;
pub mod notes;
pub mod output;
pub mod paired;
pub mod plot;
pub mod raw;
pub mod registry;
pub mod run;
pub mod spec;
pub mod sweep;
pub mod train;

pub use crate::workload::models::assign_models;
pub use output::{
    NO_PARQUET, OUTPUT_FILES, OutputFormat, PARQUET_TABLES, PLOT_FILES, check_csv_tables, check_run_dir, clear_run_dir,
    run_dir_files, write_run_dir, write_run_dir_as,
};
pub use registry::Registry;
pub use run::{
    InputInfo, PolicyBuilder, PreparedRun, RunBuilder, RunReport, run_one, run_one_checked, run_one_with_agent,
    run_one_with_artefacts, run_one_with_policy,
};
pub use spec::{
    ClusterChoice, DEFAULT_SAMPLE_INTERVAL_S, DEFAULT_SEED, GPU_TYPE_MEMORY, RateModelKind, RunSpec, WorkloadSource,
    gpu_type_mem_mib,
};

pub use crate::policy::registry::{
    Artefact, Artefacts, Extensions, genie_profiles, load_genie_profiles, load_rifling_agent, load_rifling_table,
};
