//! GPU memory at one tick: what the watched tree holds on the GPUs (NVML's per-process used
//! memory, summed over the tree's PIDs), the used and total memory of the GPUs it uses, the
//! GPU's high-water marks of the tree's processes (NVML accounting), and the host memory they
//! map from NVIDIA's device files.

use serde::{Deserialize, Serialize};

/// One GPU the tree uses, at one tick. Sizes are bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuUse {
    /// NVML's index (nvidia-smi's order).
    pub index: u32,
    pub uuid: String,
    /// The model, e.g. `NVIDIA H200`.
    pub name: String,
    /// What the tree's processes hold on this GPU; `None` where the driver did not say.
    pub tree_bytes: Option<u64>,
    /// The device's used memory (every process, and the driver's own).
    pub used_bytes: u64,
    pub total_bytes: u64,
}

/// The GPU part of a sample. Every field `None`: no GPU reading at this tick (GPU off, no
/// reading yet, or the last reading failed or is stale).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuTick {
    /// Device memory held by the tree's processes, summed over the GPUs; `Some(0)` when the
    /// tree holds none.
    pub bytes: Option<u64>,
    /// Used and total memory summed over the GPUs the tree uses; `None` when it uses none.
    pub device_used_bytes: Option<u64>,
    pub device_total_bytes: Option<u64>,
    /// Each GPU the tree uses.
    pub gpus: Vec<GpuUse>,
    /// The largest NVML accounting `maxMemoryUsage` of a tree process on one GPU (running, or
    /// ended since the previous row): its exact GPU peak so far. `None` when accounting is off
    /// on a GPU the tree uses, or a tree process has no record; `Some(0)` when the tree uses no
    /// GPU and accounting is on.
    pub hwm_bytes: Option<u64>,
    /// The sum of those maxima: an upper bound of the tree's GPU peak, not a peak.
    pub hwm_sum_bytes: Option<u64>,
    /// The bytes the tree's GPU processes map from NVIDIA's device files (/proc/PID/maps),
    /// read at the GPU reading.
    pub nvidia_mapped_bytes: Option<u64>,
}
