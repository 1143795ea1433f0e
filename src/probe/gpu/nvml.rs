//! NVIDIA's NVML, loaded at run time through libloading, read with the struct the loaded driver
//! really fills.
//!
//! The per-process list moved under fixed names: `nvmlDeviceGetComputeRunningProcesses_v3` filled
//! 24-byte elements (pid, usedGpuMemory, gpuInstanceId, computeInstanceId) until R535's first
//! drivers made the same symbol fill 32 bytes (usedGpuCcProtectedMemory added, no version bump);
//! later drivers went back to 24 bytes and added `nvmlDeviceGetRunningProcessDetailList`, whose
//! list carries a struct version. Read with the wrong element size, pid and bytes come back
//! shuffled as soon as two processes share a GPU. So memmon prefers the versioned call; without
//! it, it asks `_v3` with room for 32-byte elements in a buffer filled with a sentinel byte and
//! tells the element size from what the driver wrote ([`element_size`]); when that cannot be
//! told, it uses `_v2` (always 24 bytes).

use super::{GpuAccounting, GpuDevice, GpuError, GpuProcess, GpuSource, NVML_LIBRARY};
use std::ffi::{c_char, c_uint, c_void, CStr};
use std::fmt;
use std::path::Path;

type NvmlReturn = c_uint;
type NvmlDevice = *mut c_void;

const NVML_SUCCESS: NvmlReturn = 0;
const NVML_ERROR_NOT_SUPPORTED: NvmlReturn = 3;
const NVML_ERROR_NOT_FOUND: NvmlReturn = 6;
const NVML_ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
const NVML_ERROR_FUNCTION_NOT_FOUND: NvmlReturn = 13;
const NVML_ERROR_ARGUMENT_VERSION_MISMATCH: NvmlReturn = 25;
/// NVML_VALUE_NOT_AVAILABLE: a size the driver cannot give.
const NVML_VALUE_NOT_AVAILABLE: u64 = u64::MAX;
/// gpuInstanceId and computeInstanceId outside MIG mode.
const NO_INSTANCE: u32 = u32::MAX;
/// NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE.
const NVML_TEXT_BUFFER: usize = 96;
/// NVML_PROCESS_MODE_COMPUTE, the mode of a process detail list.
const NVML_PROCESS_MODE_COMPUTE: c_uint = 0;
/// NVML_FEATURE_ENABLED.
const NVML_FEATURE_ENABLED: c_uint = 1;

/// nvmlProcessInfo_v2_t: pid, 4 bytes of padding, usedGpuMemory, gpuInstanceId,
/// computeInstanceId.
pub const ELEMENT_V2: usize = 24;
/// nvmlProcessDetail_v1_t, and R535's first nvmlProcessInfo_t: the v2 fields, then
/// usedGpuCcProtectedMemory.
pub const ELEMENT_DETAIL: usize = 32;
/// The byte a per-process buffer is filled with before the driver writes into it.
const SENTINEL: u8 = 0xA5;
/// The largest PID Linux gives (PID_MAX_LIMIT on 64-bit).
const PID_MAX_LIMIT: u32 = 1 << 22;
/// MIG instance IDs are small (at most 7 GPU instances, 8 compute instances each); anything
/// larger that is not NO_INSTANCE is not an instance ID.
const MAX_INSTANCE_ID: u32 = 255;

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct NvmlMemory {
    total: u64,
    free: u64,
    used: u64,
}

/// nvmlProcessDetailList_v1_t.
#[repr(C)]
struct NvmlProcessDetailList {
    version: c_uint,
    mode: c_uint,
    entries: c_uint,
    array: *mut u8,
}

/// nvmlProcessDetailList_v1: NVML_STRUCT_VERSION(ProcessDetailList, 1), the struct's size with
/// the version in the top byte.
const DETAIL_LIST_V1: c_uint = std::mem::size_of::<NvmlProcessDetailList>() as c_uint | (1 << 24);

/// nvmlAccountingStats_t.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct NvmlAccountingStats {
    gpu_utilization: c_uint,
    memory_utilization: c_uint,
    max_memory_usage: u64,
    time: u64,
    start_time: u64,
    is_running: c_uint,
    reserved: [c_uint; 5],
}

type FnVoid = unsafe extern "C" fn() -> NvmlReturn;
type FnCount = unsafe extern "C" fn(*mut c_uint) -> NvmlReturn;
type FnHandle = unsafe extern "C" fn(c_uint, *mut NvmlDevice) -> NvmlReturn;
type FnText = unsafe extern "C" fn(NvmlDevice, *mut c_char, c_uint) -> NvmlReturn;
type FnSystemText = unsafe extern "C" fn(*mut c_char, c_uint) -> NvmlReturn;
type FnMemory = unsafe extern "C" fn(NvmlDevice, *mut NvmlMemory) -> NvmlReturn;
/// `_v3` and `_v2`: the elements are written as raw bytes, their size told apart here.
type FnProcesses = unsafe extern "C" fn(NvmlDevice, *mut c_uint, *mut u8) -> NvmlReturn;
type FnDetailList = unsafe extern "C" fn(NvmlDevice, *mut NvmlProcessDetailList) -> NvmlReturn;
type FnMode = unsafe extern "C" fn(NvmlDevice, *mut c_uint) -> NvmlReturn;
type FnStats = unsafe extern "C" fn(NvmlDevice, c_uint, *mut NvmlAccountingStats) -> NvmlReturn;
type FnErrorString = unsafe extern "C" fn(NvmlReturn) -> *const c_char;

const CALL_DETAIL: &str = "nvmlDeviceGetRunningProcessDetailList";
const CALL_V3: &str = "nvmlDeviceGetComputeRunningProcesses_v3";
const CALL_V2: &str = "nvmlDeviceGetComputeRunningProcesses_v2";

/// How the per-process list is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessCall {
    /// `nvmlDeviceGetRunningProcessDetailList`, versioned (nvmlProcessDetail_v1_t).
    DetailList,
    /// `_v3`, with the element size the driver was seen to write (`None` until a GPU had two
    /// processes: with one, both sizes read the same).
    V3 { element: Option<usize> },
    /// `_v2` (nvmlProcessInfo_v2_t); `v3_untold`: `_v3` was there but its element size could
    /// not be told.
    V2 { v3_untold: bool },
}

impl fmt::Display for ProcessCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessCall::DetailList => write!(
                f,
                "{CALL_DETAIL} (versioned: {ELEMENT_DETAIL}-byte nvmlProcessDetail_v1_t)"
            ),
            ProcessCall::V3 { element: Some(e) } => write!(
                f,
                "{CALL_V3} ({e}-byte elements, as the driver was seen to write them)"
            ),
            ProcessCall::V3 { element: None } => write!(
                f,
                "{CALL_V3} (element size not yet seen: no GPU had two processes, and one reads the same either way)"
            ),
            ProcessCall::V2 { v3_untold: false } => {
                write!(f, "{CALL_V2} ({ELEMENT_V2}-byte nvmlProcessInfo_v2_t)")
            }
            ProcessCall::V2 { v3_untold: true } => write!(
                f,
                "{CALL_V2} ({ELEMENT_V2}-byte nvmlProcessInfo_v2_t; the element size of {CALL_V3} could not be told)"
            ),
        }
    }
}

/// One element of a per-process list, as read at some offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Element {
    pid: u32,
    used: u64,
    gpu_instance: u32,
    compute_instance: u32,
    /// usedGpuCcProtectedMemory, in 32-byte elements.
    cc_protected: Option<u64>,
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

/// Element `i` of `buf` read as `size`-byte elements (24 or 32).
fn element(buf: &[u8], i: usize, size: usize) -> Element {
    let at = i * size;
    Element {
        pid: u32_at(buf, at),
        used: u64_at(buf, at + 8),
        gpu_instance: u32_at(buf, at + 16),
        compute_instance: u32_at(buf, at + 20),
        cc_protected: (size == ELEMENT_DETAIL).then(|| u64_at(buf, at + 24)),
    }
}

/// Whether an element read this way could be a real one: a PID Linux can give, sizes within the
/// GPU's memory (or not available), instance IDs that are MIG's or none.
fn plausible(e: &Element, total: u64) -> bool {
    let size_ok = |b: u64| b == NVML_VALUE_NOT_AVAILABLE || total == 0 || b <= total;
    let instance_ok = |i: u32| i == NO_INSTANCE || i <= MAX_INSTANCE_ID;
    (1..=PID_MAX_LIMIT).contains(&e.pid)
        && size_ok(e.used)
        && instance_ok(e.gpu_instance)
        && instance_ok(e.compute_instance)
        && e.cc_protected.is_none_or(size_ok)
}

/// What a `_v3` buffer says of its element size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Told {
    /// This many bytes an element.
    Size(usize),
    /// At most one element: the first reads the same at either size.
    Either,
    /// Neither size reads as real processes.
    Neither,
}

/// The element size a driver used for the `count` elements it wrote into `buf` (which was
/// filled with `SENTINEL` and had room for `count` 32-byte elements), on a GPU of `total` bytes.
///
/// Both readings are checked for elements that could be real (`plausible`): read at the wrong
/// size, the second element's PID is a piece of a size or an instance ID (usually 0 or over any
/// PID) and its instance IDs are pieces of a size. When both could be, the bytes past `24 ×
/// count` decide: a driver writing 24-byte elements leaves them as the sentinel.
pub fn element_size(buf: &[u8], count: usize, total: u64) -> Told {
    if count == 0 {
        return Told::Either;
    }
    let reads_as = |size: usize| (0..count).all(|i| plausible(&element(buf, i, size), total));
    if count == 1 {
        return if reads_as(ELEMENT_V2) {
            Told::Either
        } else {
            Told::Neither
        };
    }
    let tail_written = buf[ELEMENT_V2 * count..ELEMENT_DETAIL * count]
        .iter()
        .any(|&b| b != SENTINEL);
    match (reads_as(ELEMENT_V2), reads_as(ELEMENT_DETAIL)) {
        (true, false) => Told::Size(ELEMENT_V2),
        (false, true) => Told::Size(ELEMENT_DETAIL),
        (true, true) if tail_written => Told::Size(ELEMENT_DETAIL),
        (true, true) => Told::Size(ELEMENT_V2),
        (false, false) => Told::Neither,
    }
}

/// A failed per-process call: one to try the next call after, or an error to report.
enum CallError {
    /// The call is not usable with this driver (not supported, a struct version it does not
    /// know, an element size that cannot be told).
    Next,
    Fail(GpuError),
}

/// NVML, loaded from `libnvidia-ml.so.1` and initialised; shut down when dropped.
pub struct Nvml {
    shutdown: FnVoid,
    count: FnCount,
    handle: FnHandle,
    uuid: FnText,
    name: FnText,
    memory: FnMemory,
    error_string: FnErrorString,
    detail_list: Option<FnDetailList>,
    v3: Option<FnProcesses>,
    v2: Option<FnProcesses>,
    accounting_mode: Option<FnMode>,
    accounting_stats: Option<FnStats>,
    driver_version: Option<FnSystemText>,
    /// The per-process call in use: the best one the driver has that works.
    call: ProcessCall,
    /// The GPUs' handles and total memory, from the last `devices` (or `processes`).
    handles: Vec<(NvmlDevice, u64)>,
    /// Keeps the function pointers above valid.
    _lib: libloading::Library,
}

// SAFETY: NVML is thread-safe (documented: "all NVML calls are thread-safe"); the struct holds
// function pointers into a library it keeps loaded and opaque device handles, and is used by one
// thread at a time.
unsafe impl Send for Nvml {}

fn symbol<T: Copy>(lib: &libloading::Library, name: &'static str) -> Result<T, GpuError> {
    let mut cname = name.as_bytes().to_vec();
    cname.push(0);
    // SAFETY: each T is the C signature NVML's header (nvml.h) gives this symbol (the process
    // calls' element pointer taken as bytes).
    unsafe { lib.get::<T>(&cname) }
        .map(|s| *s)
        .map_err(|_| GpuError::MissingSymbol { symbol: name })
}

impl Nvml {
    /// Loads NVML (found as `dlopen` finds `libnvidia-ml.so.1`) and initialises it.
    pub fn load() -> Result<Nvml, GpuError> {
        // SAFETY: loading the driver's library runs its initialisers, which NVML documents as
        // safe to load into any process.
        let lib = unsafe { libloading::Library::new(NVML_LIBRARY) }
            .map_err(|e| GpuError::LibraryNotFound(e.to_string()))?;
        Nvml::init(lib)
    }

    /// Loads an NVML library from `path` (the tests' stand-in) and initialises it.
    pub fn load_from(path: &Path) -> Result<Nvml, GpuError> {
        // SAFETY: as `load`; the tests' stand-in runs no initialiser.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| GpuError::LibraryNotFound(e.to_string()))?;
        Nvml::init(lib)
    }

    fn init(lib: libloading::Library) -> Result<Nvml, GpuError> {
        let init: FnVoid = symbol(&lib, "nvmlInit_v2")?;
        let detail_list = symbol(&lib, CALL_DETAIL).ok();
        let v3 = symbol(&lib, CALL_V3).ok();
        let v2 = symbol(&lib, CALL_V2).ok();
        let call = match (detail_list, v3, v2) {
            (Some(_), _, _) => ProcessCall::DetailList,
            (None, Some(_), _) => ProcessCall::V3 { element: None },
            (None, None, Some(_)) => ProcessCall::V2 { v3_untold: false },
            (None, None, None) => return Err(GpuError::MissingSymbol { symbol: CALL_V2 }),
        };
        let nvml = Nvml {
            shutdown: symbol(&lib, "nvmlShutdown")?,
            count: symbol(&lib, "nvmlDeviceGetCount_v2")?,
            handle: symbol(&lib, "nvmlDeviceGetHandleByIndex_v2")?,
            uuid: symbol(&lib, "nvmlDeviceGetUUID")?,
            name: symbol(&lib, "nvmlDeviceGetName")?,
            memory: symbol(&lib, "nvmlDeviceGetMemoryInfo")?,
            error_string: symbol(&lib, "nvmlErrorString")?,
            detail_list,
            v3,
            v2,
            accounting_mode: symbol(&lib, "nvmlDeviceGetAccountingMode").ok(),
            accounting_stats: symbol(&lib, "nvmlDeviceGetAccountingStats").ok(),
            driver_version: symbol(&lib, "nvmlSystemGetDriverVersion").ok(),
            call,
            handles: Vec::new(),
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

    /// The per-process call in use.
    pub fn call(&self) -> ProcessCall {
        self.call
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

    fn total_of(&self, h: NvmlDevice) -> Result<u64, GpuError> {
        let mut mem = NvmlMemory::default();
        // SAFETY: h is a handle from nvmlDeviceGetHandleByIndex_v2; mem is an out-pointer.
        self.check("nvmlDeviceGetMemoryInfo", unsafe {
            (self.memory)(h, &mut mem)
        })?;
        Ok(mem.total)
    }

    /// `f` (`_v3` or `_v2`) on `h` in the count protocol every process call shares: asked with no
    /// room, it says how many there are (NVML_ERROR_INSUFFICIENT_SIZE); asked again with room
    /// for them and a few more (processes start in between), it writes them. The buffer has room
    /// for 32-byte elements whatever the call, filled with `SENTINEL` first. Returns the buffer
    /// and the number of elements written.
    fn raw_processes(
        &self,
        call: &'static str,
        f: FnProcesses,
        h: NvmlDevice,
    ) -> Result<(Vec<u8>, usize), GpuError> {
        let mut room = 0usize;
        for _ in 0..8 {
            let mut buf = vec![SENTINEL; room * ELEMENT_DETAIL];
            let mut n = room as c_uint;
            let ptr = if room == 0 {
                std::ptr::null_mut()
            } else {
                buf.as_mut_ptr()
            };
            // SAFETY: ptr is null with a count of 0, or a buffer of `room` 32-byte elements (the
            // largest element any version of this call writes) with a count of `room`.
            let rc = unsafe { f(h, &mut n, ptr) };
            if rc == NVML_ERROR_INSUFFICIENT_SIZE || (rc == NVML_SUCCESS && n as usize > room) {
                room = n as usize + 8;
                continue;
            }
            self.check(call, rc)?;
            return Ok((buf, n as usize));
        }
        Err(GpuError::Layout {
            call,
            message: "the number of processes kept changing between two calls".into(),
        })
    }

    fn detail_list(&self, f: FnDetailList, h: NvmlDevice) -> Result<Vec<Element>, CallError> {
        let mut room = 0usize;
        for _ in 0..8 {
            let mut buf = vec![0u8; room * ELEMENT_DETAIL];
            let mut list = NvmlProcessDetailList {
                version: DETAIL_LIST_V1,
                mode: NVML_PROCESS_MODE_COMPUTE,
                entries: room as c_uint,
                array: if room == 0 {
                    std::ptr::null_mut()
                } else {
                    buf.as_mut_ptr()
                },
            };
            // SAFETY: the list is nvmlProcessDetailList_v1_t with its version set; its array is
            // null with 0 entries, or `room` nvmlProcessDetail_v1_t.
            let rc = unsafe { f(h, &mut list) };
            let n = list.entries as usize;
            match rc {
                NVML_ERROR_INSUFFICIENT_SIZE => room = n + 8,
                NVML_SUCCESS if n > room => room = n + 8,
                NVML_SUCCESS => {
                    return Ok((0..n).map(|i| element(&buf, i, ELEMENT_DETAIL)).collect());
                }
                NVML_ERROR_NOT_SUPPORTED
                | NVML_ERROR_FUNCTION_NOT_FOUND
                | NVML_ERROR_ARGUMENT_VERSION_MISMATCH => return Err(CallError::Next),
                rc => return Err(CallError::Fail(self.error(CALL_DETAIL, rc))),
            }
        }
        Err(CallError::Fail(GpuError::Layout {
            call: CALL_DETAIL,
            message: "the number of processes kept changing between two calls".into(),
        }))
    }

    /// `_v3` on `h`, its element size told from what the driver wrote (or the one seen before,
    /// as long as it still reads as real processes). The second value: the size, when this
    /// call told it.
    fn v3(
        &self,
        f: FnProcesses,
        h: NvmlDevice,
        total: u64,
        known: Option<usize>,
    ) -> Result<(Vec<Element>, Option<usize>), CallError> {
        let (buf, n) = self.raw_processes(CALL_V3, f, h).map_err(CallError::Fail)?;
        let read = |size: usize| (0..n).map(|i| element(&buf, i, size)).collect::<Vec<_>>();
        if let Some(size) = known {
            let v = read(size);
            if v.iter().all(|e| plausible(e, total)) {
                return Ok((v, None));
            }
        }
        match element_size(&buf, n, total) {
            Told::Size(size) => Ok((read(size), Some(size))),
            Told::Either => Ok((read(ELEMENT_V2), None)),
            Told::Neither => Err(CallError::Next),
        }
    }

    /// The compute processes of GPU `h` (of `total` bytes) with the best call that works,
    /// moving to the next one when a call is not usable with this driver.
    fn device_processes(&mut self, h: NvmlDevice, total: u64) -> Result<Vec<Element>, GpuError> {
        loop {
            let next = match self.call {
                ProcessCall::DetailList => {
                    let f = self.detail_list.expect("detail list is loaded");
                    match self.detail_list(f, h) {
                        Ok(v) => return Ok(v),
                        Err(CallError::Fail(e)) => return Err(e),
                        Err(CallError::Next) => match (self.v3, self.v2) {
                            (Some(_), _) => ProcessCall::V3 { element: None },
                            (None, Some(_)) => ProcessCall::V2 { v3_untold: false },
                            (None, None) => {
                                return Err(GpuError::MissingSymbol { symbol: CALL_V2 })
                            }
                        },
                    }
                }
                ProcessCall::V3 { element } => {
                    let f = self.v3.expect("_v3 is loaded");
                    match self.v3(f, h, total, element) {
                        Ok((v, told)) => {
                            if let Some(size) = told {
                                self.call = ProcessCall::V3 {
                                    element: Some(size),
                                };
                            }
                            return Ok(v);
                        }
                        Err(CallError::Fail(e)) => return Err(e),
                        Err(CallError::Next) if self.v2.is_some() => {
                            ProcessCall::V2 { v3_untold: true }
                        }
                        Err(CallError::Next) => {
                            return Err(GpuError::Layout {
                                call: CALL_V3,
                                message: "the driver wrote elements that read as real processes at neither 24 nor 32 bytes, and it has no _v2 to fall back to".into(),
                            })
                        }
                    }
                }
                ProcessCall::V2 { .. } => {
                    let f = self.v2.expect("_v2 is loaded");
                    let (buf, n) = self.raw_processes(CALL_V2, f, h)?;
                    return Ok((0..n).map(|i| element(&buf, i, ELEMENT_V2)).collect());
                }
            };
            self.call = next;
        }
    }

    /// The handle of GPU `index`, from the last listing (made now if there is none).
    fn handle_of(&mut self, index: u32) -> Result<NvmlDevice, GpuError> {
        if self.handles.len() <= index as usize {
            let hs = self.handles()?;
            self.handles = hs.into_iter().map(|h| (h, 0)).collect();
        }
        self.handles
            .get(index as usize)
            .map(|(h, _)| *h)
            .ok_or(GpuError::Nvml {
                call: "nvmlDeviceGetHandleByIndex_v2",
                code: 2,
                message: format!("no GPU {index}"),
            })
    }
}

impl GpuSource for Nvml {
    fn name(&self) -> &'static str {
        "nvml"
    }

    fn driver_version(&mut self) -> Option<String> {
        let f = self.driver_version?;
        let mut buf = [0 as c_char; 96];
        // SAFETY: the buffer holds 96 bytes, the length given (NVML asks for 80).
        if unsafe { f(buf.as_mut_ptr(), buf.len() as c_uint) } != NVML_SUCCESS {
            return None;
        }
        // SAFETY: NVML wrote a NUL-terminated string into the buffer.
        Some(
            unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned(),
        )
    }

    fn devices(&mut self) -> Result<Vec<GpuDevice>, GpuError> {
        let mut out = Vec::new();
        let mut handles = Vec::new();
        for (index, h) in self.handles()?.into_iter().enumerate() {
            let mut mem = NvmlMemory::default();
            // SAFETY: h is a handle from nvmlDeviceGetHandleByIndex_v2; mem is an out-pointer.
            self.check("nvmlDeviceGetMemoryInfo", unsafe {
                (self.memory)(h, &mut mem)
            })?;
            let accounting = self.accounting_mode.and_then(|f| {
                let mut mode: c_uint = 0;
                // SAFETY: h is a handle; mode is an out-pointer (nvmlEnableState_t).
                (unsafe { f(h, &mut mode) } == NVML_SUCCESS).then_some(mode == NVML_FEATURE_ENABLED)
            });
            out.push(GpuDevice {
                index: index as u32,
                uuid: self.text("nvmlDeviceGetUUID", self.uuid, h)?,
                name: self.text("nvmlDeviceGetName", self.name, h)?,
                used_bytes: mem.used,
                total_bytes: mem.total,
                accounting,
            });
            handles.push((h, mem.total));
        }
        self.handles = handles;
        Ok(out)
    }

    fn processes(&mut self) -> Result<Vec<GpuProcess>, GpuError> {
        let mut out = Vec::new();
        let mut handles = Vec::new();
        for h in self.handles()? {
            let total = match self.handles.iter().find(|(k, _)| *k == h) {
                Some((_, t)) if *t > 0 => *t,
                _ => self.total_of(h)?,
            };
            handles.push((h, total));
        }
        for (index, (h, total)) in handles.iter().enumerate() {
            for e in self.device_processes(*h, *total)? {
                out.push(GpuProcess {
                    pid: e.pid,
                    device: index as u32,
                    used_bytes: (e.used != NVML_VALUE_NOT_AVAILABLE).then_some(e.used),
                    mig: (e.gpu_instance != NO_INSTANCE)
                        .then_some((e.gpu_instance, e.compute_instance)),
                });
            }
        }
        self.handles = handles;
        Ok(out)
    }

    fn process_call(&self) -> String {
        self.call.to_string()
    }

    fn accounting(&mut self, device: u32, pid: u32) -> Result<Option<GpuAccounting>, GpuError> {
        let Some(f) = self.accounting_stats else {
            return Ok(None);
        };
        let h = self.handle_of(device)?;
        let mut stats = NvmlAccountingStats::default();
        // SAFETY: h is a handle; stats is an out-pointer to nvmlAccountingStats_t.
        match unsafe { f(h, pid, &mut stats) } {
            NVML_SUCCESS => Ok(Some(GpuAccounting {
                max_bytes: (stats.max_memory_usage != NVML_VALUE_NOT_AVAILABLE)
                    .then_some(stats.max_memory_usage),
                running: stats.is_running != 0,
                start_unix_us: stats.start_time,
            })),
            NVML_ERROR_NOT_FOUND | NVML_ERROR_NOT_SUPPORTED => Ok(None),
            rc => Err(self.error("nvmlDeviceGetAccountingStats", rc)),
        }
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: NVML was initialised in `init`.
        unsafe { (self.shutdown)() };
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
    fn nvml_structs_have_the_header_layout() {
        assert_eq!(std::mem::size_of::<NvmlMemory>(), 24);
        // nvmlProcessDetailList_v1_t: three unsigned ints, padding, a pointer.
        assert_eq!(std::mem::size_of::<NvmlProcessDetailList>(), 24);
        assert_eq!(DETAIL_LIST_V1, 0x0100_0018);
        // nvmlAccountingStats_t: 2 unsigned ints, 3 unsigned long longs, 6 unsigned ints.
        assert_eq!(std::mem::size_of::<NvmlAccountingStats>(), 56);
        assert_eq!(
            std::mem::offset_of!(NvmlAccountingStats, max_memory_usage),
            8
        );
        assert_eq!(std::mem::offset_of!(NvmlAccountingStats, is_running), 32);
    }

    const GIB: u64 = 1 << 30;

    /// `els` written as `size`-byte elements into a sentinel-filled buffer with room for
    /// `room` 32-byte elements, as a driver would.
    fn written(els: &[(u32, u64, u32, u32)], size: usize, room: usize) -> Vec<u8> {
        let mut buf = vec![SENTINEL; room * ELEMENT_DETAIL];
        for (i, &(pid, used, gi, ci)) in els.iter().enumerate() {
            let at = i * size;
            buf[at..at + 4].copy_from_slice(&pid.to_ne_bytes());
            buf[at + 4..at + 8].fill(0);
            buf[at + 8..at + 16].copy_from_slice(&used.to_ne_bytes());
            buf[at + 16..at + 20].copy_from_slice(&gi.to_ne_bytes());
            buf[at + 20..at + 24].copy_from_slice(&ci.to_ne_bytes());
            if size == ELEMENT_DETAIL {
                buf[at + 24..at + 32].fill(0);
            }
        }
        buf
    }

    const TWO: [(u32, u64, u32, u32); 2] = [
        (4121, 20 * GIB, NO_INSTANCE, NO_INSTANCE),
        (977, 3 * GIB + 4096, NO_INSTANCE, NO_INSTANCE),
    ];

    #[test]
    fn two_processes_tell_the_element_size_the_driver_wrote() {
        for size in [ELEMENT_V2, ELEMENT_DETAIL] {
            let buf = written(&TWO, size, 10);
            assert_eq!(element_size(&buf, 2, 141 * GIB), Told::Size(size));
            let e = element(&buf, 1, size);
            assert_eq!((e.pid, e.used), (977, 3 * GIB + 4096));
        }
    }

    #[test]
    fn read_at_the_wrong_size_the_second_process_is_not_a_process() {
        // The shuffle other tools reported: pid and bytes from the wrong offsets.
        let buf = written(&TWO, ELEMENT_DETAIL, 10);
        assert!(!plausible(&element(&buf, 1, ELEMENT_V2), 141 * GIB));
        let buf = written(&TWO, ELEMENT_V2, 10);
        assert!(!plausible(&element(&buf, 1, ELEMENT_DETAIL), 141 * GIB));
    }

    #[test]
    fn a_driver_zeroing_the_whole_buffer_is_still_read_right() {
        // 24-byte elements, then zeros up to the room given: the tail is written, but read at
        // 32 bytes the second element is not a process.
        let mut buf = written(&TWO, ELEMENT_V2, 10);
        buf[2 * ELEMENT_V2..].fill(0);
        assert_eq!(element_size(&buf, 2, 141 * GIB), Told::Size(ELEMENT_V2));
    }

    #[test]
    fn mig_processes_tell_the_size_too() {
        let mig = [(300, 2 * GIB, 1, 0), (301, 5 * GIB, 2, 0), (302, GIB, 2, 1)];
        for size in [ELEMENT_V2, ELEMENT_DETAIL] {
            let buf = written(&mig, size, 4);
            assert_eq!(element_size(&buf, 3, 80 * GIB), Told::Size(size));
        }
    }

    #[test]
    fn one_process_reads_the_same_at_either_size_and_garbage_at_neither() {
        let buf = written(&TWO[..1], ELEMENT_DETAIL, 9);
        assert_eq!(element_size(&buf, 1, 141 * GIB), Told::Either);
        assert_eq!(element(&buf, 0, ELEMENT_V2).pid, 4121);
        assert_eq!(element_size(&buf, 0, 141 * GIB), Told::Either);
        let garbage = vec![0x5Au8; 4 * ELEMENT_DETAIL];
        assert_eq!(element_size(&garbage, 2, 141 * GIB), Told::Neither);
    }

    /// The stand-in libnvidia-ml.so.1 (tests/fake-nvml.c), loaded with `dlopen` as the driver is.
    #[cfg(feature = "test-support")]
    mod with_the_fake_library {
        use super::*;
        use crate::probe::gpu::fake_library::{build, Variant};
        use crate::probe::gpu::GpuProcess;
        use std::path::PathBuf;

        fn cc() -> PathBuf {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .map(|d| d.join("cc"))
                .find(|p| p.is_file())
                .expect("cc (a C compiler) builds the fake libnvidia-ml.so.1")
        }

        /// A private copy of `variant` (a library of its own, with its own state) reading `conf`.
        fn load(variant: Variant, conf: &str) -> (Nvml, tempfile::TempDir) {
            let dir = tempfile::tempdir().unwrap();
            let built = build(&cc(), variant).unwrap();
            let lib = dir.path().join(NVML_LIBRARY);
            std::fs::copy(built.join(NVML_LIBRARY), &lib).unwrap();
            std::fs::write(dir.path().join("fake-nvml.conf"), conf).unwrap();
            (Nvml::load_from(&lib).unwrap(), dir)
        }

        fn proc_(pid: u32, device: u32, used: Option<u64>) -> GpuProcess {
            GpuProcess {
                pid,
                device,
                used_bytes: used,
                mig: None,
            }
        }

        /// Two processes share GPU 0; a third is alone on GPU 1.
        const SHARED: &str = "device 25769803776 150754820096 on GPU-fake-0 Fake H200
device 2147483648 150754820096 off GPU-fake-1 Fake H200
process 0 4121 21474836480
process 0 977 3221229568
process 1 55 1073741824
";

        #[test]
        fn every_driver_generation_gives_each_process_its_own_bytes() {
            let want = vec![
                proc_(4121, 0, Some(20 * GIB)),
                proc_(977, 0, Some(3 * GIB + 4096)),
                proc_(55, 1, Some(GIB)),
            ];
            for v in Variant::ALL {
                let (mut nvml, _dir) = load(v, SHARED);
                let devices = nvml.devices().unwrap();
                assert_eq!(devices[1].uuid, "GPU-fake-1");
                assert_eq!(devices[0].name, "Fake H200");
                assert_eq!(nvml.processes().unwrap(), want, "{}", v.name());
                let call = match v {
                    Variant::V3Of24 => ProcessCall::V3 { element: Some(24) },
                    Variant::V3Of32 | Variant::V3Of32Only => ProcessCall::V3 { element: Some(32) },
                    Variant::V2Only => ProcessCall::V2 { v3_untold: false },
                    Variant::DetailList => ProcessCall::DetailList,
                };
                assert_eq!(nvml.call(), call, "{}", v.name());
                // Read again: the size told is kept, and still right.
                assert_eq!(nvml.processes().unwrap(), want, "{} again", v.name());
            }
        }

        #[test]
        fn one_process_per_gpu_leaves_the_size_untold_and_reads_right() {
            let conf = "device 1 141 on GPU-a A\nprocess 0 77 100\n";
            let (mut nvml, _dir) = load(Variant::V3Of32, conf);
            assert_eq!(nvml.processes().unwrap(), vec![proc_(77, 0, Some(100))]);
            assert_eq!(nvml.call(), ProcessCall::V3 { element: None });
            assert!(nvml.process_call().contains("not yet seen"));
        }

        #[test]
        fn a_driver_writing_every_element_it_has_room_for_is_read_right() {
            let conf = format!("{SHARED}fill_capacity 1\n");
            for v in [Variant::V3Of24, Variant::V3Of32Only] {
                let (mut nvml, _dir) = load(v, &conf);
                let p = nvml.processes().unwrap();
                assert_eq!(p.len(), 3, "{}", v.name());
                assert_eq!(p[1], proc_(977, 0, Some(3 * GIB + 4096)), "{}", v.name());
            }
        }

        #[test]
        fn a_detail_list_the_driver_refuses_falls_back_to_v3_told_from_its_bytes() {
            let conf = format!("{SHARED}error nvmlDeviceGetRunningProcessDetailList 25\n");
            let (mut nvml, _dir) = load(Variant::DetailList, &conf);
            assert_eq!(nvml.processes().unwrap()[1].pid, 977);
            assert_eq!(nvml.call(), ProcessCall::V3 { element: Some(24) });
        }

        #[test]
        fn mig_instances_and_sizes_the_driver_cannot_give() {
            let conf = "device 9 85899345920 unsupported GPU-mig A100
process 0 300 2147483648 1 0
process 0 301 na 2 0
";
            for v in Variant::ALL {
                let (mut nvml, _dir) = load(v, conf);
                let p = nvml.processes().unwrap();
                assert_eq!(p[0].mig, Some((1, 0)), "{}", v.name());
                assert_eq!(p[0].used_bytes, Some(2 * GIB), "{}", v.name());
                assert_eq!(p[1].used_bytes, None, "{}", v.name());
                assert_eq!(nvml.devices().unwrap()[0].accounting, None);
            }
        }

        #[test]
        fn accounting_records_of_running_and_ended_processes() {
            let conf = format!(
                "{SHARED}record 0 4121 32212254720 1 1771372328000000\nrecord 0 600 4294967296 0 1771372300000000\n"
            );
            let (mut nvml, _dir) = load(Variant::V3Of24, &conf);
            let d = nvml.devices().unwrap();
            assert_eq!(
                (d[0].accounting, d[1].accounting),
                (Some(true), Some(false))
            );
            let r = nvml.accounting(0, 4121).unwrap().unwrap();
            assert_eq!(r.max_bytes, Some(30 * GIB));
            assert!(r.running);
            assert_eq!(r.start_unix_us, 1_771_372_328_000_000);
            let ended = nvml.accounting(0, 600).unwrap().unwrap();
            assert!(!ended.running);
            assert_eq!(nvml.accounting(0, 977).unwrap(), None, "no record");
            assert_eq!(nvml.accounting(1, 55).unwrap(), None, "accounting off");
        }

        #[test]
        fn errors_name_the_call_and_the_drivers_words() {
            let conf = format!("{SHARED}error nvmlDeviceGetComputeRunningProcesses_v3 15\n");
            let (mut nvml, _dir) = load(Variant::V3Of32, &conf);
            let e = nvml.processes().unwrap_err();
            assert!(e.gpu_gone());
            assert_eq!(
                e.to_string(),
                "nvmlDeviceGetComputeRunningProcesses_v3 failed: GPU is lost (NVML error 15)"
            );
            assert_eq!(nvml.driver_version().as_deref(), Some("0.0.fake"));
        }
    }
}
