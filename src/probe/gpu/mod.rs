//! GPU memory: a `GpuSource` lists the GPUs (index, UUID, model, used and total memory, whether
//! NVML accounting is on), the processes holding memory on them (host PID, bytes), and, where
//! accounting is on, a process's accounting record (`maxMemoryUsage`: the most GPU memory it
//! ever had, kept after it ends). `Nvml` (`nvml.rs`) reads NVIDIA's driver through
//! `libnvidia-ml.so.1`, loaded at run time so memmon builds and runs on machines without it, with
//! the process struct the loaded driver really fills; `FakeGpu` serves values, a lost GPU and
//! NVML errors to the unit tests in-process; `fake_library` builds a stand-in
//! `libnvidia-ml.so.1` that the integration tests load through the real `dlopen` path.

mod nvml;

#[cfg(feature = "test-support")]
pub mod fake_library;

pub use nvml::{Nvml, ProcessCall};

use serde::Deserialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The library memmon loads: the NVIDIA driver's NVML, installed with the driver.
pub const NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// One GPU as the driver describes it. Sizes are bytes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GpuDevice {
    /// NVML's index (the order of `nvidia-smi`, not `CUDA_VISIBLE_DEVICES`').
    pub index: u32,
    pub uuid: String,
    /// The model, e.g. `NVIDIA H200`.
    pub name: String,
    /// Device memory in use by anyone (all processes, the driver's own reservations).
    pub used_bytes: u64,
    pub total_bytes: u64,
    /// NVML accounting mode (`nvidia-smi -am 1`): `None` where the GPU does not support it (or
    /// the driver has no accounting calls).
    #[serde(default)]
    pub accounting: Option<bool>,
}

/// A process holding memory on a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GpuProcess {
    /// The PID as NVML gives it: the host's (NVML does not translate PIDs into a container's
    /// namespace on most drivers; `sampler::gpu` maps them).
    pub pid: u32,
    /// The GPU's index.
    pub device: u32,
    /// `None` where the driver does not say (NVML_VALUE_NOT_AVAILABLE).
    pub used_bytes: Option<u64>,
    /// The MIG GPU instance and compute instance it runs in, when the GPU is in MIG mode.
    #[serde(default)]
    pub mig: Option<(u32, u32)>,
}

/// A process's NVML accounting record on one GPU (accounting mode on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct GpuAccounting {
    /// `maxMemoryUsage`: the most GPU memory the process ever had allocated on this GPU, in
    /// bytes; `None` where the driver does not say (NVML_VALUE_NOT_AVAILABLE).
    pub max_bytes: Option<u64>,
    /// The process is still running (else the record is its final one).
    pub running: bool,
    /// `startTime`: when the process started, µs since 1970 (tells a record of an earlier
    /// process that had the same PID).
    pub start_unix_us: u64,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum GpuError {
    #[error("{NVML_LIBRARY} not found (the NVIDIA driver's NVML library; is the NVIDIA driver installed?): {0}")]
    LibraryNotFound(String),
    #[error("{NVML_LIBRARY} has no {symbol}: the driver is too old for memmon")]
    MissingSymbol { symbol: &'static str },
    #[error("{call} failed: {message} (NVML error {code})")]
    Nvml {
        call: &'static str,
        code: u32,
        message: String,
    },
    /// A per-process list whose layout cannot be told (see `nvml::element_size`).
    #[error("{call}: {message}")]
    Layout { call: &'static str, message: String },
    #[error("NVML did not answer within {0} (--gpu-timeout): a hung driver call")]
    Timeout(String),
    /// memmon's PID namespace, or the host's /proc given, cannot be read: what the
    /// `probe::pidns::PidnsError` says (kept as text: a `GpuError` is cloned to every asker).
    #[error("{0}")]
    Namespace(String),
}

impl crate::error::Classified for GpuError {
    /// A driver that cannot be read on its own is a failure; `--gpu` asking for it is bad input
    /// (`RecordError::Gpu`).
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
}

/// NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus or was reset.
pub const NVML_ERROR_GPU_IS_LOST: u32 = 15;

impl GpuError {
    /// True when a GPU went away (lost, or no longer found): readings of it stop.
    pub fn gpu_gone(&self) -> bool {
        matches!(self, GpuError::Nvml { code, .. } if *code == NVML_ERROR_GPU_IS_LOST)
    }
}

/// A reader of GPU memory. Calls may be slow (a driver call each): the recorder makes them on
/// a thread of their own (`sampler/gpu.rs`), never on the /proc tick path.
pub trait GpuSource: Send {
    /// `nvml` or `fake`, for the metadata.
    fn name(&self) -> &'static str;
    /// The driver's version, where it says.
    fn driver_version(&mut self) -> Option<String> {
        None
    }
    /// Every GPU the driver sees.
    fn devices(&mut self) -> Result<Vec<GpuDevice>, GpuError>;
    /// Every process holding memory on any GPU (CUDA compute contexts), with its bytes.
    fn processes(&mut self) -> Result<Vec<GpuProcess>, GpuError>;
    /// How `processes` reads them (the NVML call and the element layout), for the metadata.
    fn process_call(&self) -> String;
    /// The accounting record of NVML's `pid` on GPU `device`; `Ok(None)` when there is none
    /// (the process never used that GPU, it started before accounting was turned on, or
    /// accounting is off there).
    fn accounting(&mut self, device: u32, pid: u32) -> Result<Option<GpuAccounting>, GpuError>;
}

/// Opens NVML (`libnvidia-ml.so.1`, found the way `dlopen` finds libraries, LD_LIBRARY_PATH
/// included) and initialises it.
pub fn open() -> Result<Box<dyn GpuSource>, GpuError> {
    Ok(Box::new(Nvml::load()?))
}

/// The bytes a process maps from NVIDIA's device files (`/dev/nvidia0`, `/dev/nvidiactl`,
/// `/dev/nvidia-uvm`...), from the text of its /proc/PID/maps: where CUDA's pinned host buffers
/// (`cudaHostAlloc`) live. Reading maps lists the mappings without walking page tables: the
/// size mapped, not what is resident (that is in smaps).
pub fn nvidia_mapped_bytes(maps: &str) -> u64 {
    maps.lines()
        .filter(|l| is_nvidia_mapping(l))
        .filter_map(|l| {
            let (range, _) = l.split_once(' ')?;
            let (a, b) = range.split_once('-')?;
            Some(u64::from_str_radix(b, 16).ok()? - u64::from_str_radix(a, 16).ok()?)
        })
        .sum()
}

/// A line of /proc/PID/maps (or a mapping's first line in smaps) naming an NVIDIA device file.
pub fn is_nvidia_mapping(line: &str) -> bool {
    line.split_whitespace()
        .nth(5)
        .is_some_and(|path| path.starts_with("/dev/nvidia"))
}

// ---------------------------------------------------------------------------------------------
// The in-process fake, for unit tests and benchmarks.

/// What the fake reports: its GPUs, the processes on them, their accounting records, and
/// optionally an error every call returns (a lost GPU is `code: 15`), after an optional delay
/// (a slow driver).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeState {
    pub devices: Vec<GpuDevice>,
    pub processes: Vec<GpuProcess>,
    /// (device, pid, record).
    pub accounting: Vec<(u32, u32, GpuAccounting)>,
    pub error: Option<FakeError>,
    /// Each call sleeps this long first.
    pub delay_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeError {
    pub code: u32,
    pub message: Option<String>,
}

/// A GPU source that reports what it is told, shared with the test, which changes it between
/// calls.
pub struct FakeGpu {
    state: Arc<Mutex<FakeState>>,
    /// Calls made so far.
    pub calls: u64,
}

impl FakeGpu {
    pub fn new(state: Arc<Mutex<FakeState>>) -> FakeGpu {
        FakeGpu { state, calls: 0 }
    }

    fn state(&mut self, call: &'static str) -> Result<FakeState, GpuError> {
        self.calls += 1;
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if state.delay_ms > 0 {
            std::thread::sleep(Duration::from_millis(state.delay_ms));
        }
        if let Some(e) = &state.error {
            return Err(GpuError::Nvml {
                call,
                code: e.code,
                message: e.message.clone().unwrap_or_else(|| match e.code {
                    NVML_ERROR_GPU_IS_LOST => "GPU is lost".into(),
                    _ => "fake error".into(),
                }),
            });
        }
        Ok(state)
    }
}

impl GpuSource for FakeGpu {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn devices(&mut self) -> Result<Vec<GpuDevice>, GpuError> {
        Ok(self.state("nvmlDeviceGetMemoryInfo")?.devices)
    }

    fn processes(&mut self) -> Result<Vec<GpuProcess>, GpuError> {
        Ok(self
            .state("nvmlDeviceGetComputeRunningProcesses_v3")?
            .processes)
    }

    fn process_call(&self) -> String {
        "the in-process fake".into()
    }

    fn accounting(&mut self, device: u32, pid: u32) -> Result<Option<GpuAccounting>, GpuError> {
        Ok(self
            .state("nvmlDeviceGetAccountingStats")?
            .accounting
            .iter()
            .find(|(d, p, _)| *d == device && *p == pid)
            .map(|(_, _, a)| *a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_mappings_are_summed_from_maps_and_nothing_else() {
        let maps = "\
00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/python3
200000000-300200000 rw-s 00000000 00:05 1045 /dev/nvidia0
7f0000000000-7f0100000000 rw-s 00000000 00:05 1041 /dev/nvidiactl
7f0100000000-7f0100001000 rw-s 00000000 00:05 1044 /dev/nvidia-uvm
7f0200000000-7f0300000000 rw-p 00000000 00:00 0
7ffd0000-7ffd1000 rw-p 00000000 00:00 0     [stack]
";
        assert_eq!(
            nvidia_mapped_bytes(maps),
            0x1_0020_0000 + 0x1_0000_0000 + 0x1000
        );
        assert_eq!(nvidia_mapped_bytes(""), 0);
    }

    #[test]
    fn fake_reports_what_it_is_told_then_a_lost_gpu() {
        let state = Arc::new(Mutex::new(FakeState {
            devices: vec![GpuDevice {
                index: 0,
                uuid: "GPU-0".into(),
                name: "Fake H200".into(),
                used_bytes: 5 << 30,
                total_bytes: 141 << 30,
                accounting: Some(true),
            }],
            processes: vec![GpuProcess {
                pid: 7,
                device: 0,
                used_bytes: Some(4 << 30),
                mig: None,
            }],
            ..Default::default()
        }));
        let mut fake = FakeGpu::new(state.clone());
        assert_eq!(fake.devices().unwrap()[0].total_bytes, 141 << 30);
        assert_eq!(fake.processes().unwrap()[0].used_bytes, Some(4 << 30));
        state.lock().unwrap().error = Some(FakeError {
            code: NVML_ERROR_GPU_IS_LOST,
            message: None,
        });
        let err = fake.processes().unwrap_err();
        assert!(err.gpu_gone());
        assert_eq!(
            err.to_string(),
            "nvmlDeviceGetComputeRunningProcesses_v3 failed: GPU is lost (NVML error 15)"
        );
        assert_eq!(fake.calls, 3);
    }
}
