//! Named values: the closed sets of choices a run spec, a sweep file and the
//! command line spell by name (`fifo`, `numpy2-avx512`, `helios-venus`).
//!
//! Each such enum implements [`ValueNames`] (through the crate's
//! `value_names!` macro, which lists every variant with its name), so the
//! library parses and prints these names itself, without the command-line
//! parser. With the `cli` feature the same enums also derive
//! `clap::ValueEnum` for the command line; a test of that build checks that
//! both give the same names in the same order.

/// An enum whose values have names: exact, case-sensitive, listed in
/// declaration order (the order error messages and `--help` list them).
pub trait ValueNames: Sized + Copy + PartialEq + 'static {
    /// The variants a name selects, in declaration order (a variant kept off
    /// the command line, such as the policy kind `iawp`, is not among them).
    fn selectable() -> &'static [Self];

    /// This value's name.
    fn value_name(self) -> &'static str;

    /// The selectable value named `name` (exact and case-sensitive: `FIFO`
    /// is not `fifo`).
    fn from_value_name(name: &str) -> Option<Self> {
        Self::selectable().iter().copied().find(|v| v.value_name() == name)
    }

    /// The names of the selectable values, in declaration order.
    fn value_names() -> Vec<&'static str> {
        Self::selectable().iter().map(|v| v.value_name()).collect()
    }
}

/// Implements [`ValueNames`] for an enum of unit variants, every variant with
/// its name, in declaration order: `value_names!(TieOrder { Trace =>
/// "trace", Numpy2Avx512 => "numpy2-avx512" });`.
macro_rules! value_names {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $crate::names::ValueNames for $ty {
            fn selectable() -> &'static [Self] {
                &[$($ty::$variant),+]
            }

            fn value_name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }
    };
}
pub(crate) use value_names;

#[cfg(all(test, feature = "cli"))]
mod tests {
    use super::ValueNames;

    /// The names clap derives for `T` (its `value_variants`, in order).
    fn clap_names<T: clap::ValueEnum + ValueNames>() -> Vec<String> {
        T::value_variants().iter().filter_map(|v| v.to_possible_value()).map(|p| p.get_name().to_string()).collect()
    }

    /// Both routes give the same names in the same order, and clap parses
    /// each name to the value the library does.
    fn agree<T: clap::ValueEnum + ValueNames + std::fmt::Debug>() {
        let ours: Vec<String> = T::value_names().into_iter().map(str::to_string).collect();
        assert_eq!(ours, clap_names::<T>(), "{}", std::any::type_name::<T>());
        for v in T::selectable() {
            assert_eq!(<T as clap::ValueEnum>::from_str(v.value_name(), false).ok(), Some(*v));
            assert_eq!(T::from_value_name(v.value_name()), Some(*v));
        }
        // Case-sensitive as clap is without `ignore_case`.
        let upper = ours[0].to_uppercase();
        assert_eq!(T::from_value_name(&upper).is_some(), <T as clap::ValueEnum>::from_str(&upper, false).is_ok());
    }

    #[test]
    fn library_names_are_the_command_line_names() {
        agree::<crate::trace::tie_order::TieOrder>();
        agree::<crate::trace::TraceFormat>();
        agree::<crate::policy::genie::ProfileBatches>();
        agree::<crate::policy::genie::GenieVariant>();
        agree::<crate::policy::ldwp::RewardKind>();
        agree::<crate::policy::ldwp::NodeInputs>();
        agree::<crate::policy::placement::PlacementKind>();
        agree::<crate::policy::queue::QueueOrder>();
        agree::<crate::policy::registry::PolicyName>();
        agree::<crate::policy::rifling::RewardKind>();
        agree::<crate::policy::rifling::TieBreak>();
        agree::<crate::policy::rifling::EpsilonPer>();
        agree::<crate::policy::rifling::WaitRule>();
        agree::<crate::policy::rifling::AlphaSchedule>();
        agree::<crate::policy::rifling::FrozenGreedy>();
        agree::<crate::profile::genie::GenieTruth>();
        agree::<crate::profile::coloc::ColocUnmeasured>();
        agree::<crate::engine::CheckpointModel>();
        agree::<crate::experiment::output::OutputFormat>();
        agree::<crate::experiment::spec::RateModelKind>();
        agree::<crate::workload::genie::EctBasis>();
        agree::<crate::workload::genie::TaskMix>();
        agree::<crate::cluster::ClusterPreset>();
    }

    #[test]
    fn a_policy_kind_off_the_command_line_is_named_but_not_selectable() {
        use crate::policy::registry::PolicyName;
        // `iawp` is `#[value(skip)]`: 33 selectable kinds of the 34 registered.
        assert_eq!(PolicyName::Iawp.value_name(), "iawp");
        assert_eq!(PolicyName::from_value_name("iawp"), None);
        assert_eq!(PolicyName::selectable().len() + 1, crate::policy::registry::KINDS.len());
    }
}
