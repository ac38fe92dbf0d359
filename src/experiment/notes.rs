//! What a finished run could not use or had to assume, as notes for the
//! user: one text per note, built here once for every front end (`simulate`
//! prints each on stderr, a sweep each distinct one once, the Python package
//! raises each as a warning), each option named as the front end spells it
//! ([`Origin`]).

use super::raw::{Origin, RawSpec, Value};
use super::run::RunReport;
use super::spec::{RateModelKind, WorkloadSource};
use crate::cluster::ShareLimits;
use crate::policy::placement::PlacementKind;
use crate::policy::registry::{PolicyName, QueueOptions};

/// The policy kinds that rate a job differently per GPU type, and so need a
/// rate model that does.
pub const HETEROGENEITY_AWARE: [&str; 4] = ["gavel", "gavel-fifo", "gavel-max-sum", "sia"];

/// The notes of a finished run, in a fixed order, without the `note: `
/// prefix:
///
/// - the malformed rows left out (`skip_malformed`), by column;
/// - the trace's columns no format reads (an error under `strict_input`);
/// - the model aliases the trace used (flagging a name two systems use for
///   different models);
/// - work-defined jobs whose trace duration is not used;
/// - jobs whose deadline is earlier than submit + duration;
/// - a heterogeneity-aware policy ([`HETEROGENEITY_AWARE`]) at trace speed
///   on a cluster of several GPU types, where every type is equally fast;
/// - the VCs the trace's jobs name when the cluster has none.
///
/// Options are named as `origin` spells them (`--rate-model table`,
/// `` `rate_model` = `table` ``, `rate_model=table`).
pub fn run_notes(report: &RunReport, origin: Origin<'_>) -> Vec<String> {
    let mut notes = Vec::new();
    let input = &report.input;
    if !input.malformed.is_empty() {
        notes.push(malformed_note(report, origin));
    }
    if let (Some(path), false) = (&input.path, input.ignored_columns.is_empty()) {
        notes.push(format!(
            "{}: ignored columns: {} (not columns of the {} format)",
            path.display(),
            input.ignored_columns.join(", "),
            input.format
        ));
    }
    for u in &report.model_aliases {
        let other = u.alias.ambiguous_with.map_or(String::new(), |o| {
            format!(
                " (the {} meaning; another system's `{}` is {o}: write that name for it)",
                u.alias.source, u.alias.name
            )
        });
        notes.push(format!("model `{}` read as `{}` for {} jobs{other}", u.alias.name, u.alias.model, u.jobs));
    }
    if report.unused_durations > 0 {
        notes.push(format!(
            "{} work-defined jobs (num_iteration) also have a trace duration; it is not used: each runs until \
             its iterations are done, at ElasticFlow's measured iterations/s",
            report.unused_durations
        ));
    }
    if let Some(n) = report.summary.deadline_infeasible_jobs.filter(|&n| n > 0) {
        notes.push(format!(
            "{n} of {} jobs with a deadline have one earlier than submit + duration (they are simulated and counted in deadline_infeasible_jobs)",
            report.summary.deadline_jobs.unwrap_or(0)
        ));
    }
    let specs = report.output.jobs.specs();
    let mut types: Vec<&str> = report.output.cluster.spec().nodes.iter().map(|n| n.gpu_type.as_str()).collect();
    types.sort_unstable();
    types.dedup();
    let kind = report.spec.policy.kind();
    if report.spec.rate_model == RateModelKind::Trace
        && types.len() > 1
        && HETEROGENEITY_AWARE.contains(&kind)
        && specs.iter().any(|s| s.elastic().is_none())
    {
        notes.push(format!(
            "{kind} ran at trace speed on a cluster of {} GPU types ({}): a duration-defined job is then equally fast on every type, so the policy's heterogeneity awareness changes nothing; {} rates each job per GPU type",
            types.len(),
            types.join(", "),
            origin.setting("rate_model", "table")
        ));
    }
    if !report.output.cluster.spec().named_vcs {
        let labelled = specs.iter().filter(|s| s.vc_label().is_some()).count();
        if labelled > 0 {
            notes.push(format!(
                "{labelled} of {} jobs name a VC (the trace's `vc` column), which this run ignores: the cluster has no VCs, so every job may use all of it; {} FILE partitions the cluster into the trace's VCs",
                specs.len(),
                origin.key("vcs")
            ));
        }
    }
    notes
}

/// The note on the malformed rows a run left out: how many, by column (a
/// row of the wrong shape counted apart), and where they are listed.
fn malformed_note(report: &RunReport, origin: Origin<'_>) -> String {
    let rows = &report.input.malformed;
    let mut by_column: std::collections::BTreeMap<Option<&str>, usize> = Default::default();
    for r in rows {
        *by_column.entry(r.column.as_deref()).or_insert(0) += 1;
    }
    // Columns first (by name), then rows of the wrong shape.
    let mut parts: Vec<String> =
        by_column.iter().filter_map(|(c, n)| c.map(|c| format!("{n} in column `{c}`"))).collect();
    if let Some(n) = by_column.get(&None) {
        parts.push(format!("{n} of the wrong shape (fields, quotes or encoding)"));
    }
    let first = &rows[0];
    let from = report.input.path.as_ref().map_or(String::new(), |p| format!("{}: ", p.display()));
    let listed = match report.spec.workload {
        WorkloadSource::Trace { .. } => "skipped.csv lists each with its line, column and reason",
        _ => {
            "skipped.csv lists each with its line, column and reason (not in the summary's counts: the jobs are drawn from the file)"
        }
    };
    format!(
        "{from}{} malformed row{} left out ({}): {}; the first, line {}: {}{}; {listed}",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        origin.key("skip_malformed"),
        parts.join(", "),
        first.line,
        first.column.as_deref().map_or(String::new(), |c| format!("column `{c}`: ")),
        first.message
    )
}

/// The notes on options the run's policy or placement ignores, from the
/// raw spec `p` (its keys as given; the command line gives the share limits
/// at their defaults), in a fixed order: the share limits (`max_tenants`,
/// `mem_headroom`) off their defaults without a placement that shares (or
/// the `memory-efficiency` policy), the GENIE models or best fit for a
/// policy outside the GENIE family, a RIFLING table for a policy outside
/// the RIFLING family; the keys that shape a workload the run does not have
/// (`hours` and `ect` outside GENIE tasks, `hours` also read by the pollux
/// workload; `jobs`, `load`, `jobs_per_hour` with a trace; `max_duration`
/// and `max_job_gpus` outside the synthetic workload; `rate_model` = `trace`
/// and `backfill` for a queue policy on GENIE tasks). Each front end adds them to the run's
/// ([`run_notes`]): `simulate` prints each, a sweep each distinct one once
/// (a sweep over several families sets such keys for all its runs), the
/// Python package raises each as a warning. (A key that only its family's
/// policies read, `theta`, is an error for another:
/// [`super::raw::to_run_spec`].)
pub fn option_notes(p: &RawSpec, origin: Origin<'_>) -> Vec<String> {
    use crate::names::ValueNames;
    let text = |k: &str| match p.get(k) {
        Some(Value::Str(s)) => Some(s.as_str()),
        _ => None,
    };
    // A registered kind is neither GENIE's nor RIFLING's; an unknown name
    // never gets here (the spec refused it).
    let policy = text("policy").map_or(Some(PolicyName::Fifo), PolicyName::from_value_name);
    let placement =
        text("placement").and_then(PlacementKind::from_value_name).unwrap_or(QueueOptions::default().placement);
    let defaults = ShareLimits::default();
    let off_default = |k: &str, d: f64| match p.get(k) {
        Some(Value::UInt(n)) => *n as f64 != d,
        Some(Value::Int(n)) => *n as f64 != d,
        Some(Value::Float(x)) => *x != d,
        Some(_) => true,
        None => false,
    };
    let mut notes = Vec::new();
    if !placement.may_share()
        && policy != Some(PolicyName::MemoryEfficiency)
        && (off_default("max_tenants", f64::from(defaults.max_tenants))
            || off_default("mem_headroom", defaults.mem_headroom))
    {
        notes.push(format!(
            "{} and {} apply only to a sharing placement (share-first-fit, share-best-fit, fgd, memeff-pack, iawp)",
            origin.key("max_tenants"),
            origin.key("mem_headroom")
        ));
    }
    let genie = policy.and_then(PolicyName::genie).is_some();
    if !genie && (p.contains_key("genie_models") || matches!(p.get("genie_best_fit"), Some(Value::Bool(true)))) {
        notes.push(format!(
            "{} and {} apply only to the GENIE-family policies",
            origin.key("genie_models"),
            origin.key("genie_best_fit")
        ));
    }
    // The keys that shape a workload the run does not have.
    let workload = text("workload").unwrap_or("synthetic");
    let (genie_workload, pollux_workload) = (workload == "genie", workload == "pollux");
    if !genie_workload
        && (text("ect").is_some_and(|e| e != "predicted") || (p.contains_key("hours") && !pollux_workload))
    {
        notes.push(format!(
            "{} applies only to the genie and pollux workloads, {} only to genie ({})",
            origin.key("hours"),
            origin.key("ect"),
            origin.setting("workload", "genie")
        ));
    }
    if genie_workload && text("rate_model") == Some("trace") {
        notes.push(
            "GENIE tasks run at the profile table's speeds (trace speed would make every placement equal)".into(),
        );
    }
    if genie_workload
        && matches!(p.get("backfill"), Some(Value::Bool(true)))
        && policy.is_some_and(|n| n.genie().is_none() && n.rifling().is_none())
    {
        // Every GENIE task asks for one GPU under a queue policy: when the
        // first task in the queue cannot start, no GPU is free for a later one.
        notes.push(format!(
            "{} changes nothing here: fifo and sjf run each GENIE task on 1 GPU, so no task can start while the first in the queue waits",
            origin.key("backfill")
        ));
    }
    let trace = p.contains_key("trace");
    let synthetic = crate::workload::synthetic::SyntheticSpec::default();
    if trace
        && !genie_workload
        && ((p.contains_key("jobs") && !pollux_workload)
            || off_default("load", synthetic.load)
            || p.contains_key("jobs_per_hour"))
    {
        notes.push(if pollux_workload {
            format!(
                "{} and {} shape the synthetic workload; the pollux workload draws {} jobs over {} hours from the {} job list",
                origin.key("load"),
                origin.key("jobs_per_hour"),
                origin.key("jobs"),
                origin.key("hours"),
                origin.key("trace")
            )
        } else {
            format!(
                "{}, {} and {} shape the synthetic workload; a {} replay takes its jobs and arrivals from the file",
                origin.key("jobs"),
                origin.key("load"),
                origin.key("jobs_per_hour"),
                origin.key("trace")
            )
        });
    }
    if (trace || workload != "synthetic") && (p.contains_key("max_duration") || p.contains_key("max_job_gpus")) {
        notes.push(format!(
            "{} and {} cut the synthetic workload's jobs; a {} replay runs the file's jobs as they are, and the genie and pollux workloads set their own",
            origin.key("max_duration"),
            origin.key("max_job_gpus"),
            origin.key("trace")
        ));
    }
    if policy.and_then(PolicyName::rifling).is_none() && p.contains_key("rifling_table") {
        notes.push(format!(
            "{} and the {} options apply only to the RIFLING policies",
            origin.key("rifling_table"),
            origin.key("rifling_*")
        ));
    }
    notes
}
