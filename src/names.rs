//! Named values: the closed sets of choices a run spec, a sweep file and the
//! command line spell by name (`fifo`, `numpy2-avx512`, `helios-venus`).
//!
//! Each such enum implements [`ValueNames`] (through the crate's
//! `value_names!` macro, which lists every variant with its name), so the
//! library parses and prints these names itself, without the command-line
//! parser. With the `cli` feature the same enums also derive
//! `clap::ValueEnum` for the command line; an integration test
//! (`tests/it/names.rs`) checks that both give the same names in the same
//! order.

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
