/* A stand-in for NVIDIA's libnvidia-ml.so.1, for memmon's tests on machines without a GPU.
 *
 * memmon loads it through the same dlopen path as the real library (LD_LIBRARY_PATH points at
 * the directory it was built into). It is built by the tests (src/probe/gpu/fake.rs compiles it
 * with `cc`), once per variant, the variant chosen with -D flags:
 *
 *   -DV3_STRIDE=24   nvmlDeviceGetComputeRunningProcesses_v3 fills 24-byte elements (R510+, and
 *                    the drivers after R535's first releases)
 *   -DV3_STRIDE=32   ... fills 32-byte elements (R535's first releases: usedGpuCcProtectedMemory
 *                    added to nvmlProcessInfo_t with no version bump)
 *   (no V3_STRIDE)   no _v3 symbol at all
 *   -DNO_V2          no nvmlDeviceGetComputeRunningProcesses_v2
 *   -DDETAIL_LIST    has nvmlDeviceGetRunningProcessDetailList (versioned, 32-byte elements)
 *
 * What it reports is read at every call, so a test changes it while memmon records, from the
 * file FAKE_NVML_CONFIG names, else from fake-nvml.conf beside the library (a unit test loads a
 * copy of its own). One item a line:
 *
 *   device USED TOTAL ACCOUNTING UUID NAME...   a GPU (index: its order); ACCOUNTING is on, off
 *                                               or unsupported
 *   process DEVICE PID BYTES [GI CI]            a compute process; BYTES `na` for
 *                                               NVML_VALUE_NOT_AVAILABLE; GI CI: MIG instances
 *   record DEVICE PID MAX RUNNING START_US      an accounting record (maxMemoryUsage MAX or `na`,
 *                                               isRunning 0 or 1, startTime in µs since 1970)
 *   hang_ms N                                   every call sleeps N ms first (a hung driver)
 *   error FUNCTION CODE                         FUNCTION (or `*`) returns CODE
 *   fill_capacity 1                             the process calls write every element the caller
 *                                               made room for (the rest zeroed), not just the
 *                                               processes there are
 *
 * Each call is counted in the file FAKE_NVML_CALLS (when set), one line per call, so a test can
 * tell which entry points memmon used.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef unsigned int nvmlReturn_t;
typedef void *nvmlDevice_t;

enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_UNKNOWN = 999,
};

#define NA 0xFFFFFFFFFFFFFFFFull
#define NO_INSTANCE 0xFFFFFFFFu
#define MAX_DEVICES 16
#define MAX_PROCESSES 256

typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessDetail_v1_t; /* also R535's 32-byte nvmlProcessInfo_t */

typedef struct {
  unsigned int version, mode, numProcArrayEntries;
  nvmlProcessDetail_v1_t *procArray;
} nvmlProcessDetailList_v1_t;

#define nvmlProcessDetailList_v1 ((unsigned int)(sizeof(nvmlProcessDetailList_v1_t) | (1u << 24)))

typedef struct {
  unsigned int gpuUtilization, memoryUtilization;
  unsigned long long maxMemoryUsage, time, startTime;
  unsigned int isRunning;
  unsigned int reserved[5];
} nvmlAccountingStats_t;

_Static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "nvmlProcessInfo_v2_t");
_Static_assert(sizeof(nvmlProcessDetail_v1_t) == 32, "nvmlProcessDetail_v1_t");
_Static_assert(sizeof(nvmlAccountingStats_t) == 56, "nvmlAccountingStats_t");
_Static_assert(nvmlProcessDetailList_v1 == 0x1000018, "nvmlProcessDetailList_v1");

struct device {
  unsigned long long used, total;
  int accounting; /* 1 on, 0 off, -1 unsupported */
  char uuid[128], name[128];
};
struct process {
  unsigned int device, pid, gi, ci;
  unsigned long long bytes;
};
struct record {
  unsigned int device, pid, running;
  unsigned long long max, start_us;
};
struct config {
  int devices, processes, records;
  struct device device[MAX_DEVICES];
  struct process process[MAX_PROCESSES];
  struct record record[MAX_PROCESSES];
  long hang_ms;
  int fill_capacity;
  int errors;
  struct {
    char function[128];
    unsigned int code;
  } error[16];
};

static unsigned long long number(const char *s) {
  return strcmp(s, "na") == 0 ? NA : strtoull(s, NULL, 10);
}

/* FAKE_NVML_CONFIG, else fake-nvml.conf in the directory this library was loaded from. */
static const char *config_path(char *buf, size_t n) {
  const char *env = getenv("FAKE_NVML_CONFIG");
  if (env) return env;
  Dl_info info;
  if (!dladdr((void *)config_path, &info) || !info.dli_fname) return NULL;
  const char *slash = strrchr(info.dli_fname, '/');
  if (!slash) return NULL;
  snprintf(buf, n, "%.*s/fake-nvml.conf", (int)(slash - info.dli_fname), info.dli_fname);
  return buf;
}

/* Reads the configuration (an absent or unreadable file: no GPU at all). */
static void load(struct config *c) {
  memset(c, 0, sizeof *c);
  char buf[4096];
  const char *path = config_path(buf, sizeof buf);
  FILE *f = path ? fopen(path, "r") : NULL;
  if (!f) return;
  char line[512], a[128], b[128], d[128], e[128], g[128];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    int n = 0;
    if (sscanf(line, "device %127s %127s %127s %127s %n", a, b, d, e, &n) == 4 && n > 0 &&
        c->devices < MAX_DEVICES) {
      struct device *x = &c->device[c->devices++];
      x->used = number(a);
      x->total = number(b);
      x->accounting = strcmp(d, "on") == 0 ? 1 : strcmp(d, "off") == 0 ? 0 : -1;
      snprintf(x->uuid, sizeof x->uuid, "%s", e);
      snprintf(x->name, sizeof x->name, "%s", line + n);
    } else if (sscanf(line, "process %127s %127s %127s %127s %127s", a, b, d, e, g) >= 3 &&
               c->processes < MAX_PROCESSES) {
      struct process *p = &c->process[c->processes++];
      int k = sscanf(line, "process %127s %127s %127s %127s %127s", a, b, d, e, g);
      p->device = (unsigned int)number(a);
      p->pid = (unsigned int)number(b);
      p->bytes = number(d);
      p->gi = k >= 5 ? (unsigned int)number(e) : NO_INSTANCE;
      p->ci = k >= 5 ? (unsigned int)number(g) : NO_INSTANCE;
    } else if (sscanf(line, "record %127s %127s %127s %127s %127s", a, b, d, e, g) == 5 &&
               c->records < MAX_PROCESSES) {
      struct record *r = &c->record[c->records++];
      r->device = (unsigned int)number(a);
      r->pid = (unsigned int)number(b);
      r->max = number(d);
      r->running = (unsigned int)number(e);
      r->start_us = number(g);
    } else if (sscanf(line, "hang_ms %127s", a) == 1) {
      c->hang_ms = (long)number(a);
    } else if (sscanf(line, "fill_capacity %127s", a) == 1) {
      c->fill_capacity = (int)number(a);
    } else if (sscanf(line, "error %127s %127s", a, b) == 2 && c->errors < 16) {
      snprintf(c->error[c->errors].function, sizeof c->error[0].function, "%s", a);
      c->error[c->errors++].code = (unsigned int)number(b);
    }
  }
  fclose(f);
}

static int initialised;

/* The start of every entry point: counts the call, reads the configuration, sleeps when told
 * to, and gives the error the configuration sets for this function (0 when none). */
static nvmlReturn_t enter(const char *function, struct config *c) {
  const char *calls = getenv("FAKE_NVML_CALLS");
  if (calls) {
    FILE *f = fopen(calls, "a");
    if (f) {
      fprintf(f, "%s\n", function);
      fclose(f);
    }
  }
  load(c);
  if (c->hang_ms > 0) {
    struct timespec t = {c->hang_ms / 1000, (c->hang_ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
  }
  for (int i = 0; i < c->errors; i++)
    if (strcmp(c->error[i].function, function) == 0 || strcmp(c->error[i].function, "*") == 0)
      return c->error[i].code;
  if (!initialised && strcmp(function, "nvmlInit_v2") != 0 &&
      strcmp(function, "nvmlErrorString") != 0)
    return NVML_ERROR_UNINITIALIZED;
  return NVML_SUCCESS;
}

/* Handles are 0x1000 + the index: valid across re-reads of the configuration. */
static int device_of(struct config *c, nvmlDevice_t h) {
  intptr_t i = (intptr_t)h - 0x1000;
  return i >= 0 && i < c->devices ? (int)i : -1;
}

nvmlReturn_t nvmlInit_v2(void) {
  struct config c;
  nvmlReturn_t rc = enter("nvmlInit_v2", &c);
  if (rc == NVML_SUCCESS) initialised = 1;
  return rc;
}

nvmlReturn_t nvmlShutdown(void) {
  initialised = 0;
  return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
  struct config c;
  nvmlReturn_t rc = enter("nvmlSystemGetDriverVersion", &c);
  if (rc) return rc;
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  snprintf(version, length, "%s", "0.0.fake");
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
  struct config c;
  nvmlReturn_t rc = enter("nvmlDeviceGetCount_v2", &c);
  if (rc) return rc;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = (unsigned int)c.devices;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  struct config c;
  nvmlReturn_t rc = enter("nvmlDeviceGetHandleByIndex_v2", &c);
  if (rc) return rc;
  if (!device || index >= (unsigned int)c.devices) return NVML_ERROR_INVALID_ARGUMENT;
  *device = (nvmlDevice_t)(intptr_t)(0x1000 + index);
  return NVML_SUCCESS;
}

static nvmlReturn_t text(const char *function, nvmlDevice_t h, char *out, unsigned int length,
                         int uuid) {
  struct config c;
  nvmlReturn_t rc = enter(function, &c);
  if (rc) return rc;
  int i = device_of(&c, h);
  if (i < 0 || !out) return NVML_ERROR_INVALID_ARGUMENT;
  const char *s = uuid ? c.device[i].uuid : c.device[i].name;
  if (strlen(s) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  snprintf(out, length, "%s", s);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char *uuid, unsigned int length) {
  return text("nvmlDeviceGetUUID", h, uuid, length, 1);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *name, unsigned int length) {
  return text("nvmlDeviceGetName", h, name, length, 0);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *memory) {
  struct config c;
  nvmlReturn_t rc = enter("nvmlDeviceGetMemoryInfo", &c);
  if (rc) return rc;
  int i = device_of(&c, h);
  if (i < 0 || !memory) return NVML_ERROR_INVALID_ARGUMENT;
  memory->total = c.device[i].total;
  memory->used = c.device[i].used;
  memory->free = c.device[i].total - c.device[i].used;
  return NVML_SUCCESS;
}

/* The processes of device i, written as `stride`-byte elements into `out` (room for `*count`),
 * in the count protocol every process call shares: too little room (or none) gives
 * NVML_ERROR_INSUFFICIENT_SIZE and the count needed. */
static nvmlReturn_t processes(struct config *c, int i, unsigned int *count, void *out,
                              size_t stride) {
  unsigned int have = 0;
  for (int k = 0; k < c->processes; k++) have += c->process[k].device == (unsigned int)i;
  if (*count < have || (have > 0 && !out)) {
    *count = have;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  unsigned int room = *count;
  unsigned char *p = out;
  unsigned int n = 0;
  for (int k = 0; k < c->processes; k++) {
    struct process *x = &c->process[k];
    if (x->device != (unsigned int)i) continue;
    nvmlProcessDetail_v1_t e = {x->pid, x->bytes, x->gi, x->ci, 0};
    memcpy(p + n * stride, &e, stride);
    n++;
  }
  if (c->fill_capacity && out) memset(p + n * stride, 0, (room - n) * stride);
  *count = have;
  return NVML_SUCCESS;
}

#ifdef V3_STRIDE
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int *count,
                                                     void *infos) {
  struct config c;
  nvmlReturn_t rc = enter("nvmlDeviceGetComputeRunningProcesses_v3", &c);
  if (rc) return rc;
  int i = device_of(&c, h);
  if (i < 0 || !count) return NVML_ERROR_INVALID_ARGUMENT;
  return processes(&c, i, count, infos, V3_STRIDE);
}
#endif

#ifndef NO_V2
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t h, unsigned int *count,
                                                     nvmlProcessInfo_v2_t *infos) {
  struct config c;
  nvmlReturn_t rc = enter("nvmlDeviceGetComputeRunningProcesses_v2", &c);
  if (rc) return rc;
  int i = device_of(&c, h);
  if (i < 0 || !count) return NVML_ERROR_INVALID_ARGUMENT;
  return processes(&c, i, count, infos, sizeof(nvmlProcessInfo_v2_t));
}
#endif

#ifdef DETAIL_LIST
nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t h,
                                                   nvmlProcessDetailList_v1_t *list) {
  struct config c;
  nvmlReturn_t rc = enter("nvmlDeviceGetRunningProcessDetailList", &c);
  if (rc) return rc;
  int i = device_of(&c, h);
  if (i < 0 || !list) return NVML_ERROR_INVALID_ARGUMENT;
  if (list->version != nvmlProcessDetailList_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (list->mode != 0) { /* graphics and MPS: none here */
    list->numProcArrayEntries = 0;
    return NVML_SUCCESS;
  }
  return processes(&c, i, &list->numProcArrayEntries, list->procArray,
                   sizeof(nvmlProcessDetail_v1_t));
}
#endif

nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t h, unsigned int *mode) {
  struct config c;
  nvmlReturn_t rc = enter("nvmlDeviceGetAccountingMode", &c);
  if (rc) return rc;
  int i = device_of(&c, h);
  if (i < 0 || !mode) return NVML_ERROR_INVALID_ARGUMENT;
  if (c.device[i].accounting < 0) return NVML_ERROR_NOT_SUPPORTED;
  *mode = (unsigned int)c.device[i].accounting;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t h, unsigned int pid,
                                          nvmlAccountingStats_t *stats) {
  struct config c;
  nvmlReturn_t rc = enter("nvmlDeviceGetAccountingStats", &c);
  if (rc) return rc;
  int i = device_of(&c, h);
  if (i < 0 || !stats) return NVML_ERROR_INVALID_ARGUMENT;
  if (c.device[i].accounting != 1) return NVML_ERROR_NOT_SUPPORTED;
  for (int k = 0; k < c.records; k++) {
    struct record *r = &c.record[k];
    if (r->device != (unsigned int)i || r->pid != pid) continue;
    memset(stats, 0, sizeof *stats);
    stats->gpuUtilization = 50;
    stats->memoryUtilization = 10;
    stats->maxMemoryUsage = r->max;
    stats->startTime = r->start_us;
    stats->isRunning = r->running;
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_FOUND;
}
