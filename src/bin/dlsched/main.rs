//! The `dlsched` command line: [`dlsched::cli::main`], with the allocator
//! that hints transparent huge pages for large blocks.

#[cfg(target_os = "linux")]
#[global_allocator]
static GLOBAL: dlsched::cli::hugealloc::HugePageAlloc = dlsched::cli::hugealloc::HugePageAlloc;

fn main() -> std::process::ExitCode {
    dlsched::cli::main()
}
