//! The `svc` binary: everything lives in the library (`svc::cli`).
#![forbid(unsafe_code)]

fn main() {
    let code = svc::cli::main(std::env::args_os().collect());
    std::process::exit(code);
}
