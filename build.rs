//! Two link flags, both for memmon's own memory (BENCHMARKS.md, "memmon's own memory"):
//!
//! - `-z pack-relative-relocs` stores the executable's relative relocations as a bitmap
//!   (DT_RELR) instead of 24 bytes each. The dynamic loader reads every one of them at each
//!   start, so without it ~500 KiB of the binary (`.rela.dyn`) are mapped into every memmon for
//!   its whole life. GNU ld 2.38 and lld know the flag; glibc 2.36 loads such files.
//! - `--symbol-ordering-file=link/hot-symbols.txt` (lld only; Rust links with lld on x86_64
//!   Linux since 1.90) lays the functions a running recorder executes side by side. The kernel
//!   maps a 64 KiB block around each page of the executable a process touches, and a recorder's
//!   code spread over all of `.text` mapped 4 MiB of it; together, ~1 MiB. `scripts/hot-symbols`
//!   writes the file (docs/ARCHITECTURE.md, "How the executable is linked").
//!
//! A flag is passed only if a probe link with the same compiler, flags and linker takes it, so
//! another linker builds memmon as before, only without the smaller footprint.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if !linux_gnu {
        return;
    }
    let relr = "-Wl,-z,pack-relative-relocs";
    if links_with(relr) {
        println!("cargo:rustc-link-arg-bins={relr}");
    }
    // The names in the file are those of a release build (their hashes differ in a debug one).
    if std::env::var("PROFILE").as_deref() == Ok("release") {
        let order = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
            .join("link/hot-symbols.txt");
        println!("cargo:rerun-if-changed={}", order.display());
        let flag = format!(
            "-Wl,--symbol-ordering-file={},--no-warn-symbol-ordering",
            order.display()
        );
        if order.is_file() && !order.display().to_string().contains(',') && links_with(&flag) {
            println!("cargo:rustc-link-arg-bin=memmon={flag}");
        }
    }
}

/// Whether an empty program links with `arg` added, by the compiler, flags, target and linker
/// this build uses.
fn links_with(arg: &str) -> bool {
    let (Some(rustc), Some(out)) = (std::env::var_os("RUSTC"), std::env::var_os("OUT_DIR")) else {
        return false;
    };
    let out = Path::new(&out);
    let source = out.join("probe.rs");
    if std::fs::write(&source, "fn main() {}\n").is_err() {
        return false;
    }
    let mut probe = Command::new(rustc);
    probe
        .arg("--crate-name=probe")
        .arg("--crate-type=bin")
        .arg("--out-dir")
        .arg(out)
        .arg(&source)
        .arg(format!("-Clink-arg={arg}"));
    if let Ok(target) = std::env::var("TARGET") {
        probe.arg(format!("--target={target}"));
    }
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        let mut flag = std::ffi::OsString::from("-Clinker=");
        flag.push(linker);
        probe.arg(flag);
    }
    if let Ok(flags) = std::env::var("CARGO_ENCODED_RUSTFLAGS") {
        probe.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    }
    probe
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
