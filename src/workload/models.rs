//! Model/batch enrichment: gives trace jobs without a model or batch one
//! drawn from the profile database ([`assign_models`]).

use crate::profile::aliases::{self, AliasUse};
use crate::profile::db::ProfileDb;
use crate::profile::model::TableModel;
use crate::trace::TraceRecord;

/// Gives every duration-defined job without a model or batch one drawn from
/// the profile database (a work-defined job, [`crate::job::ElasticSpec`],
/// draws none), on the `workload.model_mix` stream: a model uniformly among those
/// measured on `gpu_type` (all measured models if none is), then a per-GPU
/// batch uniformly among the batches measured for that model on `gpu_type`
/// (on its best-covered GPU type when `gpu_type` is not measured).
///
/// Only batches whose GPU memory ([`ProfileDb::gpu_mem_mib`], MiB) is at most
/// `max_gpu_mem_mib` (the largest GPU of the cluster) are drawn, and only
/// models with such a batch; a model the trace names with no fitting batch
/// draws among all its batches (the job is then skipped for memory).
///
/// # Errors
/// A message naming the first job whose model the database does not know.
pub fn assign_models(
    db: &ProfileDb,
    records: &mut [TraceRecord],
    gpu_type: &str,
    max_gpu_mem_mib: u64,
    seed: u64,
) -> Result<(), String> {
    use rand::seq::SliceRandom;
    let table = TableModel::new(db);
    let gpu_type = gpu_type.to_ascii_lowercase();
    let mut on_type: Vec<&str> =
        db.throughput.iter().filter(|r| r.gpu_type == gpu_type).map(|r| r.model.as_str()).collect();
    on_type.sort_unstable();
    on_type.dedup();
    let models = if on_type.is_empty() { table.measured_models() } else { on_type };
    let fits = |m: &str, b: u32| db.gpu_mem_mib(m, b).is_none_or(|mib| mib.ceil() <= max_gpu_mem_mib as f64);
    check_models(db, records)?;
    let batches_for = |m: &str| {
        let (gpu, _, _) = table.resolve_gpu(m, &gpu_type);
        let on = table.measured_batches_on(m, &gpu);
        let all = if on.is_empty() { table.measured_batches(m) } else { on };
        let fitting: Vec<u32> = all.iter().copied().filter(|&b| fits(m, b)).collect();
        if fitting.is_empty() { all } else { fitting }
    };
    let fitting_models: Vec<&str> =
        models.iter().copied().filter(|m| batches_for(m).iter().any(|&b| fits(m, b))).collect();
    let models = if fitting_models.is_empty() { models } else { fitting_models };
    if models.is_empty() {
        return Ok(());
    }
    let mut rng = crate::rng::stream(seed, "workload.model_mix");
    // A work-defined job runs at its progress model's speed, not the rate
    // model's: it draws nothing.
    for r in records.iter_mut().filter(|r| r.elastic().is_none() && (r.model().is_none() || r.local_bsz().is_none())) {
        if r.model().is_none() {
            let i = rand::Rng::gen_range(&mut rng, 0..models.len());
            r.extra_mut().model = Some(models[i].to_string());
        }
        if r.local_bsz().is_none() {
            let pool = batches_for(r.model().unwrap_or_default());
            r.extra_mut().local_bsz = pool.choose(&mut rng).copied();
        }
    }
    Ok(())
}

/// Checks that every model name of `records` is a model of `db`, or an
/// alias of another system's traces ([`crate::profile::aliases`]) whose
/// model `db` has, whatever the run's rate model: a name the database does
/// not know is a typo or a model the run cannot rate, never ignored.
///
/// # Errors
/// A message naming the first such job's line, its id and the name, with
/// the database's models and the aliases.
pub fn check_models(db: &ProfileDb, records: &[TraceRecord]) -> Result<(), String> {
    let known = |m: &str| {
        db.models.iter().any(|i| i.model == m)
            || aliases::ALIASES.iter().any(|a| a.name == m && db.models.iter().any(|i| i.model == a.model))
    };
    match records.iter().find(|r| r.model().is_some_and(|m| !known(m))) {
        Some(r) => Err(format!(
            "line {}, column `model`: job `{}` names model `{}`, which the profile database does not know; \
             its models are {}; the aliases other systems' traces use are {} (`dlsched profile show --list` lists the models)",
            r.line,
            r.job_id,
            r.model().unwrap_or_default(),
            db.models.iter().map(|m| m.model.as_str()).collect::<Vec<_>>().join(", "),
            aliases::names()
        )),
        None => Ok(()),
    }
}

/// Replaces every model name of `records` that is an alias of another
/// system's traces ([`crate::profile::aliases`]) by its canonical model,
/// unless `db` has a model of that very name or lacks the alias's model.
/// Returns how many rows used each alias, in the alias table's order (empty
/// when none did).
pub fn resolve_model_aliases(db: &ProfileDb, records: &mut [TraceRecord]) -> Vec<AliasUse> {
    let known = |m: &str| db.models.iter().any(|i| i.model == m);
    let mut counts = vec![0u64; aliases::ALIASES.len()];
    for r in records.iter_mut() {
        let Some(name) = r.model() else { continue };
        if known(name) {
            continue;
        }
        if let Some(i) = aliases::ALIASES.iter().position(|a| a.name == name && known(a.model)) {
            counts[i] += 1;
            r.extra_mut().model = Some(aliases::ALIASES[i].model.to_string());
        }
    }
    aliases::ALIASES.iter().zip(counts).filter(|(_, n)| *n > 0).map(|(alias, jobs)| AliasUse { alias, jobs }).collect()
}
