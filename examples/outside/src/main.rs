//! dlsched's command line with this crate's policy and trace format.

fn main() -> std::process::ExitCode {
    dlsched::cli::main_with(dlsched_outside_example::registry())
}
