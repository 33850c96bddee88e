//! Compiles the kernel probes of `bpf/` into libbpf skeletons, only with the `bpf` feature:
//! the default build needs no clang (issue 29).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "bpf")]
    probes::build();
}

#[cfg(feature = "bpf")]
mod probes {
    use libbpf_cargo::SkeletonBuilder;
    use std::path::PathBuf;

    /// One program file per backend: a backend that fails to load leaves the others running.
    const BACKENDS: [&str; 4] = ["execution", "connection", "sensitive_files", "af_alg"];

    pub fn build() {
        let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        println!("cargo:rerun-if-changed=bpf");
        for name in BACKENDS {
            let src = format!("bpf/{name}.bpf.c");
            let skel = out.join(format!("{name}.skel.rs"));
            SkeletonBuilder::new()
                .source(&src)
                .clang_args(["-I", "bpf", "-Wall", "-O2"])
                .build_and_generate(&skel)
                .unwrap_or_else(|e| panic!("building {src}: {e}"));
        }
    }
}
