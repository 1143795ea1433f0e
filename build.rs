//! One link flag, for memmon's own memory: `-z pack-relative-relocs` stores the executable's
//! relative relocations as a bitmap (DT_RELR) instead of 24 bytes each. The dynamic loader reads
//! every one of them at each start, so without it ~500 KiB of the binary (`.rela.dyn`) are
//! mapped into every memmon for its whole life (BENCHMARKS.md, "memmon's own memory"). GNU ld
//! 2.38 and lld know the flag (an older ld warns and ignores it); glibc 2.36 loads such files.
fn main() {
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
