//! GPU memory: a `GpuSource` lists the GPUs (index, UUID, model, used and total memory) and the
//! processes holding memory on them (host PID, bytes). `Nvml` reads NVIDIA's driver through
//! `libnvidia-ml.so.1`, loaded at run time so memmon builds and runs on machines without it;
//! `FakeGpu` serves values, a lost GPU and NVML errors to the tests.

use serde::Deserialize;
use std::ffi::{c_char, c_uint, c_void, CStr};
use std::path::PathBuf;
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
}

/// A process holding memory on a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GpuProcess {
    /// The host PID (NVML reports host PIDs, also for processes in containers).
    pub pid: u32,
    /// The GPU's index.
    pub device: u32,
    /// `None` where the driver does not say (NVML_VALUE_NOT_AVAILABLE).
    pub used_bytes: Option<u64>,
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
    #[error("fake GPU source {path}: {message}")]
    Fake { path: String, message: String },
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
    /// Every GPU the driver sees.
    fn devices(&mut self) -> Result<Vec<GpuDevice>, GpuError>;
    /// Every process holding memory on any GPU (CUDA compute contexts), with its bytes.
    fn processes(&mut self) -> Result<Vec<GpuProcess>, GpuError>;
}

/// Opens the GPU source: the fake one when the tests ask for it (`MEMMON_TEST_FAKE_GPU=FILE`,
/// honoured only in builds with the `test-support` feature, never in an installed memmon),
/// else NVML.
pub fn open() -> Result<Box<dyn GpuSource>, GpuError> {
    #[cfg(feature = "test-support")]
    if let Some(path) = std::env::var_os("MEMMON_TEST_FAKE_GPU") {
        return Ok(Box::new(FakeGpu::from_file(PathBuf::from(path))));
    }
    Ok(Box::new(Nvml::load()?))
}

// ---------------------------------------------------------------------------------------------
// NVML through libloading.

type NvmlReturn = c_uint;
type NvmlDevice = *mut c_void;

const NVML_SUCCESS: NvmlReturn = 0;
const NVML_ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
/// NVML_VALUE_NOT_AVAILABLE: a per-process size the driver cannot give.
const NVML_VALUE_NOT_AVAILABLE: u64 = u64::MAX;
/// NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE.
const NVML_TEXT_BUFFER: usize = 96;

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct NvmlMemory {
    total: u64,
    free: u64,
    used: u64,
}

/// nvmlProcessInfo_t (v2 layout), taken by both _v3 and _v2 of GetComputeRunningProcesses.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct NvmlProcessInfo {
    pid: c_uint,
    used_gpu_memory: u64,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

type FnVoid = unsafe extern "C" fn() -> NvmlReturn;
type FnCount = unsafe extern "C" fn(*mut c_uint) -> NvmlReturn;
type FnHandle = unsafe extern "C" fn(c_uint, *mut NvmlDevice) -> NvmlReturn;
type FnText = unsafe extern "C" fn(NvmlDevice, *mut c_char, c_uint) -> NvmlReturn;
type FnMemory = unsafe extern "C" fn(NvmlDevice, *mut NvmlMemory) -> NvmlReturn;
type FnProcesses =
    unsafe extern "C" fn(NvmlDevice, *mut c_uint, *mut NvmlProcessInfo) -> NvmlReturn;
type FnErrorString = unsafe extern "C" fn(NvmlReturn) -> *const c_char;

/// NVML, loaded from `libnvidia-ml.so.1` and initialised; shut down when dropped.
pub struct Nvml {
    shutdown: FnVoid,
    count: FnCount,
    handle: FnHandle,
    uuid: FnText,
    name: FnText,
    memory: FnMemory,
    processes: FnProcesses,
    processes_call: &'static str,
    error_string: FnErrorString,
    /// Keeps the function pointers above valid.
    _lib: libloading::Library,
}

// SAFETY: NVML is thread-safe (documented: "all NVML calls are thread-safe"); the struct holds
// function pointers into a library it keeps loaded, and is used by one thread at a time.
unsafe impl Send for Nvml {}

fn symbol<T: Copy>(lib: &libloading::Library, name: &'static str) -> Result<T, GpuError> {
    let mut cname = name.as_bytes().to_vec();
    cname.push(0);
    // SAFETY: each T is the C signature NVML's header (nvml.h) gives this symbol.
    unsafe { lib.get::<T>(&cname) }
        .map(|s| *s)
        .map_err(|_| GpuError::MissingSymbol { symbol: name })
}

impl Nvml {
    /// Loads NVML and initialises it (nvmlInit_v2).
    pub fn load() -> Result<Nvml, GpuError> {
        // SAFETY: loading the driver's library runs its initialisers, which NVML documents as
        // safe to load into any process.
        let lib = unsafe { libloading::Library::new(NVML_LIBRARY) }
            .map_err(|e| GpuError::LibraryNotFound(e.to_string()))?;
        let init: FnVoid = symbol(&lib, "nvmlInit_v2")?;
        let (processes, processes_call) =
            match symbol::<FnProcesses>(&lib, "nvmlDeviceGetComputeRunningProcesses_v3") {
                Ok(f) => (f, "nvmlDeviceGetComputeRunningProcesses_v3"),
                Err(_) => (
                    symbol(&lib, "nvmlDeviceGetComputeRunningProcesses_v2")?,
                    "nvmlDeviceGetComputeRunningProcesses_v2",
                ),
            };
        let nvml = Nvml {
            shutdown: symbol(&lib, "nvmlShutdown")?,
            count: symbol(&lib, "nvmlDeviceGetCount_v2")?,
            handle: symbol(&lib, "nvmlDeviceGetHandleByIndex_v2")?,
            uuid: symbol(&lib, "nvmlDeviceGetUUID")?,
            name: symbol(&lib, "nvmlDeviceGetName")?,
            memory: symbol(&lib, "nvmlDeviceGetMemoryInfo")?,
            processes,
            processes_call,
            error_string: symbol(&lib, "nvmlErrorString")?,
            _lib: lib,
        };
        // SAFETY: nvmlInit_v2 takes no arguments.
        let rc = unsafe { init() };
        if rc != NVML_SUCCESS {
            // Not initialised: Drop must not call nvmlShutdown.
            let err = nvml.error("nvmlInit_v2", rc);
            std::mem::forget(nvml);
            return Err(err);
        }
        Ok(nvml)
    }

    fn error(&self, call: &'static str, code: NvmlReturn) -> GpuError {
        // SAFETY: nvmlErrorString returns a static NUL-terminated string for any code.
        let p = unsafe { (self.error_string)(code) };
        let message = if p.is_null() {
            "unknown error".to_string()
        } else {
            // SAFETY: non-null, NUL-terminated, static.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        GpuError::Nvml {
            call,
            code,
            message,
        }
    }

    fn check(&self, call: &'static str, rc: NvmlReturn) -> Result<(), GpuError> {
        if rc == NVML_SUCCESS {
            Ok(())
        } else {
            Err(self.error(call, rc))
        }
    }

    fn handles(&self) -> Result<Vec<NvmlDevice>, GpuError> {
        let mut n: c_uint = 0;
        // SAFETY: n is a valid out-pointer.
        self.check("nvmlDeviceGetCount_v2", unsafe { (self.count)(&mut n) })?;
        (0..n)
            .map(|i| {
                let mut h: NvmlDevice = std::ptr::null_mut();
                // SAFETY: i < count; h is a valid out-pointer.
                self.check("nvmlDeviceGetHandleByIndex_v2", unsafe {
                    (self.handle)(i, &mut h)
                })?;
                Ok(h)
            })
            .collect()
    }

    fn text(&self, call: &'static str, f: FnText, h: NvmlDevice) -> Result<String, GpuError> {
        let mut buf = [0 as c_char; NVML_TEXT_BUFFER];
        // SAFETY: the buffer holds NVML_TEXT_BUFFER bytes, the length given.
        self.check(call, unsafe {
            f(h, buf.as_mut_ptr(), NVML_TEXT_BUFFER as c_uint)
        })?;
        // SAFETY: NVML wrote a NUL-terminated string into the buffer.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }
}

impl GpuSource for Nvml {
    fn name(&self) -> &'static str {
        "nvml"
    }

    fn devices(&mut self) -> Result<Vec<GpuDevice>, GpuError> {
        let mut out = Vec::new();
        for (index, h) in self.handles()?.into_iter().enumerate() {
            let mut mem = NvmlMemory::default();
            // SAFETY: h is a handle from nvmlDeviceGetHandleByIndex_v2; mem is an out-pointer.
            self.check("nvmlDeviceGetMemoryInfo", unsafe {
                (self.memory)(h, &mut mem)
            })?;
            out.push(GpuDevice {
                index: index as u32,
                uuid: self.text("nvmlDeviceGetUUID", self.uuid, h)?,
                name: self.text("nvmlDeviceGetName", self.name, h)?,
                used_bytes: mem.used,
                total_bytes: mem.total,
            });
        }
        Ok(out)
    }

    fn processes(&mut self) -> Result<Vec<GpuProcess>, GpuError> {
        let mut out = Vec::new();
        for (index, h) in self.handles()?.into_iter().enumerate() {
            // Ask for the count, then read; processes may start between the two calls, so a
            // too-small buffer is retried with the new count plus room.
            let mut infos: Vec<NvmlProcessInfo> = Vec::new();
            let mut n: c_uint = 0;
            loop {
                // SAFETY: infos holds n entries (none with a null pointer when n is 0).
                let rc = unsafe {
                    (self.processes)(
                        h,
                        &mut n,
                        if infos.is_empty() {
                            std::ptr::null_mut()
                        } else {
                            infos.as_mut_ptr()
                        },
                    )
                };
                if rc == NVML_ERROR_INSUFFICIENT_SIZE {
                    n += 8;
                    infos = vec![NvmlProcessInfo::default(); n as usize];
                    continue;
                }
                self.check(self.processes_call, rc)?;
                break;
            }
            for p in infos.iter().take(n as usize) {
                out.push(GpuProcess {
                    pid: p.pid,
                    device: index as u32,
                    used_bytes: (p.used_gpu_memory != NVML_VALUE_NOT_AVAILABLE)
                        .then_some(p.used_gpu_memory),
                });
            }
        }
        Ok(out)
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: NVML was initialised in `load`.
        unsafe { (self.shutdown)() };
    }
}

// ---------------------------------------------------------------------------------------------
// The fake, for tests.

/// What the fake reports: its GPUs, the processes on them, and optionally an error every call
/// returns (a lost GPU is `{"call": "...", "code": 15}`), after an optional delay (a slow driver).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FakeState {
    #[serde(default)]
    pub devices: Vec<GpuDevice>,
    #[serde(default)]
    pub processes: Vec<GpuProcess>,
    #[serde(default)]
    pub error: Option<FakeError>,
    /// Each call sleeps this long first.
    #[serde(default)]
    pub delay_ms: u64,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FakeError {
    pub code: u32,
    #[serde(default)]
    pub message: Option<String>,
}

enum FakeFrom {
    /// Shared with the test, which changes it between calls.
    Memory(Arc<Mutex<FakeState>>),
    /// A JSON file (a `FakeState`), read again at every call so a test can change it while
    /// memmon records.
    File(PathBuf),
}

/// A GPU source that reports what it is told.
pub struct FakeGpu {
    from: FakeFrom,
    /// Calls made so far (devices + processes).
    pub calls: u64,
}

impl FakeGpu {
    pub fn new(state: Arc<Mutex<FakeState>>) -> FakeGpu {
        FakeGpu {
            from: FakeFrom::Memory(state),
            calls: 0,
        }
    }

    pub fn from_file(path: PathBuf) -> FakeGpu {
        FakeGpu {
            from: FakeFrom::File(path),
            calls: 0,
        }
    }

    fn state(&mut self, call: &'static str) -> Result<FakeState, GpuError> {
        self.calls += 1;
        let state = match &self.from {
            FakeFrom::Memory(s) => s.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            FakeFrom::File(path) => {
                let fail = |message: String| GpuError::Fake {
                    path: path.display().to_string(),
                    message,
                };
                let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
                serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?
            }
        };
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loading_nvml_without_the_driver_names_the_library() {
        // On a machine with the driver this loads; the test then checks a real read instead.
        match Nvml::load() {
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("libnvidia-ml.so.1 not found"), "{msg}");
            }
            Ok(mut nvml) => {
                let devices = nvml
                    .devices()
                    .expect("NVML loaded but cannot list its GPUs");
                assert!(devices.iter().all(|d| d.total_bytes >= d.used_bytes));
            }
        }
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
            }],
            processes: vec![GpuProcess {
                pid: 7,
                device: 0,
                used_bytes: Some(4 << 30),
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

    #[test]
    fn fake_file_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu.json");
        std::fs::write(&path, "{\"devices\": 3}").unwrap();
        let err = FakeGpu::from_file(path.clone()).devices().unwrap_err();
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn nvml_structs_have_the_header_layout() {
        // nvmlProcessInfo_t: unsigned int pid; unsigned long long usedGpuMemory;
        // unsigned int gpuInstanceId, computeInstanceId: 24 bytes with padding after pid.
        assert_eq!(std::mem::size_of::<NvmlProcessInfo>(), 24);
        assert_eq!(std::mem::offset_of!(NvmlProcessInfo, used_gpu_memory), 8);
        assert_eq!(std::mem::size_of::<NvmlMemory>(), 24);
    }
}
