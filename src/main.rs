//! The `svc` binary: everything lives in the library (`svc::cli`).
#![forbid(unsafe_code)]

fn main() {
    // Allocator settings first, before any thread exists: large buffers are mapped on their
    // own and returned to the kernel when freed (see svc::sys::malloc).
    svc::sys::malloc::tune();
    let code = svc::cli::main(std::env::args_os().collect());
    std::process::exit(code);
}
