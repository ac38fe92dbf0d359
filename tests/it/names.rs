//! The library's own names of its named values (`dlsched::names`) are the
//! command line's: clap's `ValueEnum` derive (the `cli` feature) and the
//! `value_names!` lists agree for every such enum, name for name and in order.

use dlsched::names::ValueNames;

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
    agree::<dlsched::trace::tie_order::TieOrder>();
    agree::<dlsched::trace::TraceFormat>();
    agree::<dlsched::policy::genie::ProfileBatches>();
    agree::<dlsched::policy::genie::GenieVariant>();
    agree::<dlsched::policy::ldwp::RewardKind>();
    agree::<dlsched::policy::ldwp::NodeInputs>();
    agree::<dlsched::policy::placement::PlacementKind>();
    agree::<dlsched::policy::queue::QueueOrder>();
    agree::<dlsched::policy::registry::PolicyName>();
    agree::<dlsched::policy::rifling::RewardKind>();
    agree::<dlsched::policy::rifling::TieBreak>();
    agree::<dlsched::policy::rifling::EpsilonPer>();
    agree::<dlsched::policy::rifling::WaitRule>();
    agree::<dlsched::policy::rifling::AlphaSchedule>();
    agree::<dlsched::policy::rifling::FrozenGreedy>();
    agree::<dlsched::profile::genie::GenieTruth>();
    agree::<dlsched::profile::coloc::ColocUnmeasured>();
    agree::<dlsched::engine::CheckpointModel>();
    agree::<dlsched::profile::elastic::ElasticModel>();
    agree::<dlsched::experiment::output::OutputFormat>();
    agree::<dlsched::experiment::spec::RateModelKind>();
    agree::<dlsched::workload::genie::EctBasis>();
    agree::<dlsched::workload::genie::TaskMix>();
    agree::<dlsched::cluster::ClusterPreset>();
}

#[test]
fn a_policy_kind_off_the_command_line_is_named_but_not_selectable() {
    use dlsched::policy::registry::PolicyName;
    // `iawp` is `#[value(skip)]`: 33 selectable kinds of the 34 registered.
    assert_eq!(PolicyName::Iawp.value_name(), "iawp");
    assert_eq!(PolicyName::from_value_name("iawp"), None);
    assert_eq!(PolicyName::selectable().len() + 1, dlsched::policy::registry::KINDS.len());
}
