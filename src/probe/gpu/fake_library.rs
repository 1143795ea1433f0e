//! The tests' stand-in for `libnvidia-ml.so.1` (tests/fake-nvml.c), built with a C compiler into
//! a directory of its own per variant, so that memmon loads it through the real `dlopen` path
//! (`LD_LIBRARY_PATH` pointing at that directory) and reads it with the real NVML code. Only in
//! builds with the `test-support` feature (the tests').
//!
//! Why a C file compiled by the tests rather than a build script or a Rust cdylib: the stand-in
//! must export the C symbols of each driver generation separately (a `_v3` with 24- or 32-byte
//! elements, no `_v3`, the detail list), which is one `-D` flag each; a build script would build
//! them for every `cargo build`, and a cdylib crate would need a workspace. `cc` is on every
//! machine that builds Rust (it is Rust's linker on Linux).

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The C source, compiled into the tests.
const SOURCE: &str = include_str!("../../../tests/fake-nvml.c");

/// What a stand-in driver exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `_v3` writing 24-byte elements, and `_v2` (R510 to R530, and after R535's first).
    V3Of24,
    /// `_v3` writing 32-byte elements, and `_v2` (R535's first releases).
    V3Of32,
    /// `_v3` writing 32-byte elements and no `_v2`: the size must be told from the bytes.
    V3Of32Only,
    /// `_v2` only (drivers before R510).
    V2Only,
    /// `nvmlDeviceGetRunningProcessDetailList` (versioned), `_v3` of 24 bytes and `_v2`.
    DetailList,
}

impl Variant {
    pub const ALL: [Variant; 5] = [
        Variant::V3Of24,
        Variant::V3Of32,
        Variant::V3Of32Only,
        Variant::V2Only,
        Variant::DetailList,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::V3Of24 => "v3-24",
            Variant::V3Of32 => "v3-32",
            Variant::V3Of32Only => "v3-32-only",
            Variant::V2Only => "v2-only",
            Variant::DetailList => "detail-list",
        }
    }

    fn flags(self) -> &'static [&'static str] {
        match self {
            Variant::V3Of24 => &["-DV3_STRIDE=24"],
            Variant::V3Of32 => &["-DV3_STRIDE=32"],
            Variant::V3Of32Only => &["-DV3_STRIDE=32", "-DNO_V2"],
            Variant::V2Only => &[],
            Variant::DetailList => &["-DDETAIL_LIST", "-DV3_STRIDE=24"],
        }
    }
}

fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Builds `variant` with the C compiler `cc` (once: a later call, from any test process, finds
/// it built) and returns the directory holding its `libnvidia-ml.so.1`.
pub fn build(cc: &Path, variant: Variant) -> io::Result<PathBuf> {
    let flags = variant.flags();
    let key = fnv1a(
        &std::iter::once(SOURCE.as_bytes())
            .chain(flags.iter().map(|f| f.as_bytes()))
            .collect::<Vec<_>>(),
    );
    let dir = std::env::temp_dir().join(format!("memmon-fake-nvml-{}-{key:016x}", variant.name()));
    let lib = dir.join(super::NVML_LIBRARY);
    if lib.exists() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&dir)?;
    // Built under a name of this call's own (its process and a count: tests of one process
    // run on threads, and may build one variant at once), then renamed: a test elsewhere never
    // loads a half-written library.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let me = format!(
        "{}-{}",
        std::process::id(),
        CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let src = dir.join(format!("fake-nvml.{me}.c"));
    let tmp = dir.join(format!("lib.{me}.so"));
    std::fs::write(&src, SOURCE)?;
    let out = Command::new(cc)
        .args(["-shared", "-fPIC", "-O1", "-std=c11", "-Wall", "-Werror"])
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .arg("-ldl")
        .output()?;
    let _ = std::fs::remove_file(&src);
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{} could not build the fake libnvidia-ml.so.1 ({}): {}",
            cc.display(),
            variant.name(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::rename(&tmp, &lib)?;
    Ok(dir)
}
