//! The `berth` command line.

fn main() {
    std::process::exit(berth_runtime::cli::main());
}
