fn main() {
    let code = svc::cli::main(std::env::args_os().collect());
    std::process::exit(code);
}
