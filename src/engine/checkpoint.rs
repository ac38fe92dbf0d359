//! Checkpoint/restore overhead of a preemption, chosen per run.
//!
//! A preempted job saves a checkpoint and restores it when resumed. The
//! engine charges that cost the Helios simulator's way: at the preemption,
//! the overhead is **added to the job's remaining work** (ms at rate 1), so
//! once resumed it holds its GPUs that much longer, and a policy that ranks by
//! remaining work sees it (S-Lab-System-Group/HeliosArtifact @ bdaae10,
//! `framework/QSSF Service/policies/srtf.py:55-66` and `policy.py:45-52`; see
//! `../shared/fidelity/helios-philly/SEMANTICS-srtf-qssf.md` §3.4). Nothing
//! is charged at restart, and never without a preemption.
//!
//! Not offered: an overhead per DL model from the profile database. None of
//! the measurement sets it is imported from (Gavel, Pollux, Sia,
//! ElasticFlow, Chronus, Shockwave, Tiresias, Lucid; `../shared/profiles/`)
//! publishes a checkpoint or restore time, and dlsched does not invent one.
//! Nor is the overhead offered as time during which the job holds no GPUs
//! and cannot be resumed: the one reference that needs an overhead charges it
//! as work.

use serde::{Deserialize, Serialize};

/// How much a preemption costs the preempted job; a run's `checkpoint`
/// (`--checkpoint none|helios-table`, sweep key `checkpoint`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum CheckpointModel {
    /// Free: a preempted job resumes with exactly the work it had left.
    #[default]
    None,
    /// The Helios simulator's fixed table by GPU count: 7 s for a 1-GPU job,
    /// 30 s up to 8 GPUs, 60 s above (HeliosArtifact @ bdaae10,
    /// `framework/QSSF Service/policy.py:45-52`).
    HeliosTable,
    /// Gandiva's suspend/resume: a constant 100 ms (`GANDIVA_SUSPEND_MS`)
    /// per preemption whatever the GPU count (Xiao et al., OSDI'18, §4.1: a job
    /// is suspended at a mini-batch boundary, where its GPU memory use is
    /// lowest, so that little state is copied to host memory and back).
    Gandiva,
}

crate::names::value_names!(CheckpointModel {
    None => "none",
    HeliosTable => "helios-table",
    Gandiva => "gandiva",
});

/// The suspend-and-resume cost of one preemption under
/// [`CheckpointModel::Gandiva`], ms of work at rate 1: 100 ms.
///
/// **Our reading of the paper**, not a figure checked against its text in
/// this repository: Gandiva (Xiao et al., OSDI'18, §4.1 and the §6.1
/// micro-benchmarks) reports suspend/resume overheads of the order of
/// 100 ms for its time slices of about a minute, because it suspends at the
/// memory nadir between mini-batches. The same cost is charged for a
/// migration (preempt + launch elsewhere), which in the paper costs more
/// (a checkpoint to storage and a restart on the new server); dlsched has
/// one cost per preemption.
pub const GANDIVA_SUSPEND_MS: u64 = 100;

impl CheckpointModel {
    /// The model's name (`none`, `helios-table`).
    pub fn name(self) -> &'static str {
        match self {
            CheckpointModel::None => "none",
            CheckpointModel::HeliosTable => "helios-table",
            CheckpointModel::Gandiva => "gandiva",
        }
    }

    /// The largest overhead the model charges one preemption, ms (over
    /// every GPU count): 0, 60,000 (the Helios table's above 8 GPUs) or
    /// [`GANDIVA_SUSPEND_MS`].
    pub fn max_overhead_ms(self) -> u64 {
        match self {
            CheckpointModel::None => 0,
            CheckpointModel::HeliosTable => 60_000,
            CheckpointModel::Gandiva => GANDIVA_SUSPEND_MS,
        }
    }

    /// True for [`CheckpointModel::None`] (the default, which run specs and
    /// manifests leave out).
    pub fn is_none(&self) -> bool {
        *self == CheckpointModel::None
    }

    /// Work added to a job of `gpus` GPUs at each preemption, ms at rate 1.
    pub fn overhead_ms(self, gpus: u32) -> u64 {
        match self {
            CheckpointModel::None => 0,
            CheckpointModel::HeliosTable if gpus <= 1 => 7_000,
            CheckpointModel::HeliosTable if gpus <= 8 => 30_000,
            CheckpointModel::HeliosTable => 60_000,
            CheckpointModel::Gandiva => GANDIVA_SUSPEND_MS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helios_table_by_gpu_count() {
        // policy.py:45-52: 1 GPU -> 7 s, 2..=8 -> 30 s, more -> 60 s.
        let h = CheckpointModel::HeliosTable;
        let got: Vec<u64> = [1, 2, 8, 9, 16, 32].iter().map(|&g| h.overhead_ms(g)).collect();
        assert_eq!(got, vec![7_000, 30_000, 30_000, 60_000, 60_000, 60_000]);
        assert_eq!(CheckpointModel::None.overhead_ms(8), 0);
        assert_eq!(CheckpointModel::default(), CheckpointModel::None);
    }

    #[test]
    fn gandiva_is_a_constant_per_suspend() {
        // 100 ms per preemption, for 1 GPU as for 64 (not by GPU count).
        let g = CheckpointModel::Gandiva;
        let got: Vec<u64> = [1, 2, 8, 9, 64].iter().map(|&n| g.overhead_ms(n)).collect();
        assert_eq!(got, vec![100; 5]);
        assert_eq!(g.name(), "gandiva");
        assert_eq!(serde_json::to_string(&g).unwrap(), "\"gandiva\"");
    }
}
