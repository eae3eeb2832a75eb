/*
 * A fake libnvidia-ml.so.1 for govd's tests: nvidia-ml-py (pynvml) loads it through ctypes, so the
 * real Python binding runs against it. It implements only the symbols govd's NVML backend reaches,
 * with NVML's ABI (nvmlReturn_t = int, handles are pointers, nvmlPciInfo_t as in nvml.h v3) and
 * NVML's rules: clock locks need root, Volta+ for locked graphics clocks and the energy counter,
 * Ampere+ for locked memory clocks, min <= max inside the supported range, and the two locks
 * always a supported (memory, graphics) pair: a lower memory clock supports fewer graphics clocks
 * (the top ones go), so a lock that would leave the graphics lock above what the memory clock in
 * force supports is INVALID_ARGUMENT. UNINITIALIZED before nvmlInit and after a simulated driver
 * reload, GPU_IS_LOST when a GPU is marked lost. A driver reload drops every lock, a lost GPU its
 * own (it comes back reset).
 *
 * State lives in a key=value text file named by FAKE_NVML_STATE, read on every call and rewritten
 * on every write, so the test, the process under test and a later `govd restore` all see the same
 * GPU. Without FAKE_NVML_STATE the state is in memory only. Keys (per-GPU keys `gpuN.<key>`
 * override the global `<key>`):
 *   gpus=2               number of GPUs (default 1)
 *   arch=hopper          hopper | ada | ampere | turing | volta | pascal (default hopper);
 *                        ada has more (core, memory) pairs than govd's model takes
 *   root=0|1             whether the caller counts as root (default: geteuid() == 0)
 *   busy=50              GPU utilisation in percent (default 50)
 *   lost=1               the GPU has fallen off the bus
 *   reload=N             bump it to simulate a driver reload: old sessions get UNINITIALIZED,
 *                        every lock is dropped (locks_reload records the reload they belong to)
 *   gpuN.lock_min/lock_max, gpuN.mem_lock_min/mem_lock_max   locked clocks, MHz (0 = unlocked)
 *   gpuN.lock_writes, gpuN.mem_lock_writes   how many times SetGpuLockedClocks /
 *                        SetMemoryLockedClocks succeeded (tests count writes)
 *   gpuN.energy_mj, gpuN.energy_at_ms                      energy counter and when it last advanced
 *   energy_stall=1       the energy counter stops advancing (firmware stall)
 *   fail.<Call>=<code>   the device call nvmlDevice<Call> returns NVML code <code> (3 NOT_SUPPORTED,
 *                        4 NO_PERMISSION, 15 GPU_IS_LOST, 999 UNKNOWN ...), e.g. fail.GetClockInfo=15
 *                        (a GPU_IS_LOST injected so drops the GPU's locks, as a real loss does);
 *                        gpuN.fail.<Call> for one GPU only
 *   fail.<Call>.times=N  only the next N calls fail (counted down in the state file)
 *   sm_util=70, dram_util=30   GPM's SM and DRAM-bandwidth utilisation in percent (defaults: busy
 *                        and busy/2), accrued over time into each GPM sample
 *
 * GPM (GPU Performance Monitoring) is Hopper or newer, as in NVML: nvmlGpmQueryDeviceSupport
 * answers isSupportedDevice 0 before Hopper (ARGUMENT_VERSION_MISMATCH for another struct
 * version), nvmlGpmSampleGet NOT_SUPPORTED there; nvmlGpmMetricsGet checks the struct version and
 * the two samples (the second taken after the first, on the same GPU) and answers each metric it
 * knows (graphics, SM, SM occupancy, DRAM bandwidth utilisation) from the time between them, the
 * others NOT_SUPPORTED in that metric's own return code.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    OK = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, NO_PERMISSION = 4,
    NOT_FOUND = 6, INSUFFICIENT_SIZE = 7, GPU_IS_LOST = 15, ARGUMENT_VERSION_MISMATCH = 25,
    UNKNOWN = 999
};
enum { CLOCK_GRAPHICS = 0, CLOCK_SM = 1, CLOCK_MEM = 2 };
enum { ARCH_PASCAL = 4, ARCH_VOLTA = 5, ARCH_TURING = 6, ARCH_AMPERE = 7, ARCH_ADA = 8, ARCH_HOPPER = 9 };

#define MAX_GPUS 8
#define MAX_KEYS 128

typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct { unsigned gpu, memory; } nvmlUtilization_t;

struct fake_gpu { int index; };

/* Graphics levels are lo + i*num/den MHz (V100's alternate 7 and 8 MHz steps) up to top_mhz[m] at
 * memory clock m; memory clocks are listed highest (default) first, as NVML lists them. */
struct arch_spec {
    const char *key, *name;
    unsigned arch, pci_id, n_mem, mem_mhz[2], top_mhz[2], lo_mhz, num, den, idle_mw, max_mw;
};

static const struct arch_spec ARCHS[] = {
    {"hopper", "NVIDIA H100 80GB HBM3", ARCH_HOPPER, 0x233010DE, 2, {2619, 1593}, {1980, 1500},
     345, 15, 1, 70000, 700000},
    /* a datacenter table as nvidia-smi shows an H100 SXM's: one memory clock, 110 graphics clocks
     * 15 MHz apart */
    {"h100-sxm", "NVIDIA H100 80GB HBM3", ARCH_HOPPER, 0x233010DE, 1, {2619}, {1980}, 345, 15, 1,
     70000, 700000},
    {"ada", "NVIDIA GeForce RTX 4090", ARCH_ADA, 0x268410DE, 2, {10501, 405}, {2520, 1005}, 210, 15,
     2, 30000, 450000},
    {"ampere", "NVIDIA A100-SXM4-40GB", ARCH_AMPERE, 0x20B010DE, 2, {1215, 405}, {1410, 1005},
     210, 15, 1, 50000, 400000},
    {"turing", "Tesla T4", ARCH_TURING, 0x1EB810DE, 2, {5001, 405}, {1590, 795}, 300, 15, 1, 20000,
     70000},
    {"volta", "Tesla V100-SXM2-16GB", ARCH_VOLTA, 0x1DB110DE, 1, {877}, {1530}, 135, 15, 2, 40000,
     300000},
    {"pascal", "Tesla P100-PCIE-16GB", ARCH_PASCAL, 0x15F810DE, 1, {715}, {1324}, 544, 13, 1, 30000,
     250000},
};

static struct { char key[48]; char val[48]; } kv[MAX_KEYS];
static int n_kv;
static int init_count;
static long reload_at_init;
static struct fake_gpu gpus[MAX_GPUS];

static void load_state(void) {
    const char *path = getenv("FAKE_NVML_STATE");
    if (!path) return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[128];
    n_kv = 0;
    while (n_kv < MAX_KEYS && fgets(line, sizeof line, f)) {
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        line[strcspn(line, " \t")] = 0;
        char *val = eq + 1;
        val[strcspn(val, "\r\n")] = 0;
        snprintf(kv[n_kv].key, sizeof kv[n_kv].key, "%.47s", line);
        snprintf(kv[n_kv].val, sizeof kv[n_kv].val, "%.47s", val);
        n_kv++;
    }
    fclose(f);
}

static void save_state(void) {
    const char *path = getenv("FAKE_NVML_STATE");
    if (!path) return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    for (int i = 0; i < n_kv; i++) fprintf(f, "%s=%s\n", kv[i].key, kv[i].val);
    fclose(f);
    rename(tmp, path); /* atomic, so a reader never sees half a file */
}

static const char *get(const char *key) {
    for (int i = 0; i < n_kv; i++)
        if (strcmp(kv[i].key, key) == 0) return kv[i].val;
    return NULL;
}

static void set(const char *key, long long value) {
    int i = 0;
    while (i < n_kv && strcmp(kv[i].key, key) != 0) i++;
    if (i == n_kv) {
        if (n_kv == MAX_KEYS) return;
        n_kv++;
        snprintf(kv[i].key, sizeof kv[i].key, "%.47s", key);
    }
    snprintf(kv[i].val, sizeof kv[i].val, "%lld", value);
}

static const char *gpu_get(int gpu, const char *key) {
    char full[48];
    snprintf(full, sizeof full, "gpu%d.%s", gpu, key);
    const char *v = get(full);
    return v ? v : get(key);
}

static long long gpu_int(int gpu, const char *key, long long fallback) {
    const char *v = gpu_get(gpu, key);
    return v ? atoll(v) : fallback;
}

static void gpu_set(int gpu, const char *key, long long value) {
    char full[48];
    snprintf(full, sizeof full, "gpu%d.%s", gpu, key);
    set(full, value);
}

static int gpu_count(void) {
    const char *v = get("gpus");
    int n = v ? atoi(v) : 1;
    return n < 0 ? 0 : n > MAX_GPUS ? MAX_GPUS : n;
}

static int is_root(void) {
    const char *v = get("root");
    return v ? atoi(v) != 0 : geteuid() == 0;
}

static const struct arch_spec *spec_of(int gpu) {
    const char *a = gpu_get(gpu, "arch");
    for (size_t i = 0; a && i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (strcmp(ARCHS[i].key, a) == 0) return &ARCHS[i];
    return &ARCHS[0];
}

/* Graphics levels at the memory clock of index m (0 = the highest). */
static unsigned n_levels(const struct arch_spec *s, unsigned m) {
    return (s->top_mhz[m] - s->lo_mhz) * s->den / s->num + 1;
}

static unsigned level(const struct arch_spec *s, unsigned i) { return s->lo_mhz + i * s->num / s->den; }

/* Index of the memory clock a memory lock's upper bound selects: the highest supported one not
 * above it (0, the default, when unlocked). */
static unsigned mem_index(const struct arch_spec *s, long long mem_lock_max) {
    for (unsigned i = 0; mem_lock_max && i < s->n_mem; i++)
        if (s->mem_mhz[i] <= mem_lock_max) return i;
    return 0;
}

static unsigned mem_running(int gpu) {
    const struct arch_spec *s = spec_of(gpu);
    return s->mem_mhz[mem_index(s, gpu_int(gpu, "mem_lock_max", 0))];
}

/* The driver runs the highest level supported at the memory clock running and not above the
 * lock's upper bound. */
static unsigned graphics_running(int gpu) {
    const struct arch_spec *s = spec_of(gpu);
    unsigned m = mem_index(s, gpu_int(gpu, "mem_lock_max", 0));
    long long lock_max = gpu_int(gpu, "lock_max", 0);
    if (lock_max == 0) return gpu_int(gpu, "busy", 50) > 0 ? s->top_mhz[m] : s->lo_mhz;
    unsigned best = s->lo_mhz;
    for (unsigned i = 0; i < n_levels(s, m); i++)
        if (level(s, i) <= lock_max) best = level(s, i);
    return best;
}

static unsigned power_mw(int gpu) {
    const struct arch_spec *s = spec_of(gpu);
    double share = (double)graphics_running(gpu) / s->top_mhz[0];
    double busy = gpu_int(gpu, "busy", 50) / 100.0;
    return (unsigned)(s->idle_mw + (s->max_mw - s->idle_mw) * busy * share * share);
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* shared by every process that reads the state file */
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* A GPU that was lost or whose driver reloaded comes back with the driver-default clocks. */
static void drop_locks(int gpu) {
    static const char *const keys[] = {"lock_min", "lock_max", "mem_lock_min", "mem_lock_max"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) gpu_set(gpu, keys[i], 0);
    save_state();
}

/* Every entry point starts here: initialised, state fresh, no driver reload since nvmlInit. */
static int begin(void) {
    if (init_count == 0) return UNINITIALIZED;
    load_state();
    const char *r = get("reload"), *locks = get("locks_reload");
    long reload = r ? atol(r) : 0;
    if (reload != (locks ? atol(locks) : 0)) { /* the first call to see a reload drops locks */
        set("locks_reload", reload);
        for (int i = 0; i < gpu_count(); i++) drop_locks(i);
    }
    return reload == reload_at_init ? OK : UNINITIALIZED;
}

static int begin_device(struct fake_gpu *h, int *gpu) {
    int rc = begin();
    if (rc != OK) return rc;
    if (h < gpus || h >= gpus + MAX_GPUS || h->index >= gpu_count()) return INVALID_ARGUMENT;
    *gpu = h->index;
    if (!gpu_int(*gpu, "lost", 0)) return OK;
    drop_locks(*gpu);
    return GPU_IS_LOST;
}

#define DEVICE_ENTRY(h)                                   \
    int gpu, rc_ = begin_device((struct fake_gpu *)(h), &gpu); \
    if (rc_ != OK) return rc_

/* The code a test asked nvmlDevice<call> to fail with (fail.<call>), OK when none or used up. */
static int injected(int gpu, const char *call) {
    char key[48], times_key[48];
    snprintf(key, sizeof key, "fail.%s", call);
    const char *code = gpu_get(gpu, key);
    if (!code) return OK;
    snprintf(times_key, sizeof times_key, "fail.%s.times", call);
    long long times = gpu_int(gpu, times_key, -1);
    if (times == 0) return OK;
    if (times > 0) {
        set(times_key, times - 1);
        save_state();
    }
    if (atoi(code) == GPU_IS_LOST) drop_locks(gpu);
    return atoi(code);
}

/* DEVICE_ENTRY, then the failure a test injected into this call, if any. */
#define DEVICE_CALL(h, call)                              \
    DEVICE_ENTRY(h);                                      \
    if ((rc_ = injected(gpu, call)) != OK) return rc_

int nvmlInitWithFlags(unsigned flags) {
    (void)flags;
    load_state();
    if (init_count == 0) {
        const char *r = get("reload");
        reload_at_init = r ? atol(r) : 0;
    }
    for (int i = 0; i < MAX_GPUS; i++) gpus[i].index = i;
    init_count++;
    return OK;
}

int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

int nvmlShutdown(void) {
    if (init_count == 0) return UNINITIALIZED;
    init_count--;
    return OK;
}

const char *nvmlErrorString(int rc) {
    switch (rc) {
    case OK: return "Success";
    case UNINITIALIZED: return "Uninitialized";
    case INVALID_ARGUMENT: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case NO_PERMISSION: return "Insufficient Permissions";
    case NOT_FOUND: return "Not Found";
    case INSUFFICIENT_SIZE: return "Insufficient Size";
    case GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

int nvmlSystemGetDriverVersion(char *version, unsigned length) {
    int rc = begin();
    if (rc != OK) return rc;
    if (!version || length < 16) return INSUFFICIENT_SIZE;
    snprintf(version, length, "%s", "999.99-fake");
    return OK;
}

int nvmlDeviceGetCount_v2(unsigned *count) {
    int rc = begin();
    if (rc != OK) return rc;
    if (!count) return INVALID_ARGUMENT;
    *count = (unsigned)gpu_count();
    return OK;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, struct fake_gpu **handle) {
    int rc = begin();
    if (rc != OK) return rc;
    if (!handle || index >= (unsigned)gpu_count()) return INVALID_ARGUMENT;
    if (gpu_int((int)index, "lost", 0)) return GPU_IS_LOST;
    *handle = &gpus[index];
    return OK;
}

static void uuid_of(int gpu, char *out, size_t size) {
    snprintf(out, size, "GPU-fa4e%04x-0000-4000-8000-%012d", spec_of(gpu)->arch, gpu);
}

int nvmlDeviceGetHandleByUUID(const char *uuid, struct fake_gpu **handle) {
    int rc = begin();
    if (rc != OK) return rc;
    if (!uuid || !handle) return INVALID_ARGUMENT;
    for (int i = 0; i < gpu_count(); i++) {
        char mine[96];
        uuid_of(i, mine, sizeof mine);
        if (strcmp(mine, uuid) == 0) {
            if (gpu_int(i, "lost", 0)) return GPU_IS_LOST;
            *handle = &gpus[i];
            return OK;
        }
    }
    return NOT_FOUND;
}

int nvmlDeviceGetUUID(void *h, char *uuid, unsigned length) {
    DEVICE_ENTRY(h);
    if (!uuid || length < 41) return INSUFFICIENT_SIZE;
    uuid_of(gpu, uuid, length);
    return OK;
}

int nvmlDeviceGetName(void *h, char *name, unsigned length) {
    DEVICE_ENTRY(h);
    if (!name || length < 64) return INSUFFICIENT_SIZE;
    snprintf(name, length, "%s", spec_of(gpu)->name);
    return OK;
}

int nvmlDeviceGetArchitecture(void *h, unsigned *arch) {
    DEVICE_ENTRY(h);
    if (!arch) return INVALID_ARGUMENT;
    *arch = spec_of(gpu)->arch;
    return OK;
}

int nvmlDeviceGetPciInfo_v3(void *h, nvmlPciInfo_t *pci) {
    DEVICE_ENTRY(h);
    if (!pci) return INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    pci->bus = 0x17 + 0x10 * (unsigned)gpu;
    pci->pciDeviceId = spec_of(gpu)->pci_id;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
    return OK;
}

/* NVML's two-call protocol: too small a buffer gets the needed count and INSUFFICIENT_SIZE. */
static int fill_clocks(const unsigned *values, unsigned n, unsigned *count, unsigned *clocks) {
    if (!count) return INVALID_ARGUMENT;
    if (!clocks || *count < n) {
        *count = n;
        return INSUFFICIENT_SIZE;
    }
    memcpy(clocks, values, n * sizeof *values);
    *count = n;
    return OK;
}

int nvmlDeviceGetSupportedMemoryClocks(void *h, unsigned *count, unsigned *clocks) {
    DEVICE_ENTRY(h);
    const struct arch_spec *s = spec_of(gpu);
    return fill_clocks(s->mem_mhz, s->n_mem, count, clocks);
}

int nvmlDeviceGetSupportedGraphicsClocks(void *h, unsigned mem_mhz, unsigned *count, unsigned *clocks) {
    DEVICE_ENTRY(h);
    const struct arch_spec *s = spec_of(gpu);
    unsigned m = s->n_mem;
    for (unsigned i = 0; i < s->n_mem; i++)
        if (s->mem_mhz[i] == mem_mhz) m = i;
    if (m == s->n_mem) return NOT_FOUND;
    unsigned values[512], n = n_levels(s, m); /* every spec has fewer */
    for (unsigned i = 0; i < n; i++) values[i] = level(s, n - 1 - i); /* highest first, as NVML */
    return fill_clocks(values, n, count, clocks);
}

int nvmlDeviceGetClockInfo(void *h, int type, unsigned *mhz) {
    DEVICE_CALL(h, "GetClockInfo");
    if (!mhz) return INVALID_ARGUMENT;
    if (type == CLOCK_GRAPHICS || type == CLOCK_SM) *mhz = graphics_running(gpu);
    else if (type == CLOCK_MEM) *mhz = mem_running(gpu);
    else return NOT_SUPPORTED;
    return OK;
}

int nvmlDeviceGetUtilizationRates(void *h, nvmlUtilization_t *util) {
    DEVICE_CALL(h, "GetUtilizationRates");
    if (!util) return INVALID_ARGUMENT;
    util->gpu = (unsigned)gpu_int(gpu, "busy", 50);
    util->memory = util->gpu / 2;
    return OK;
}

int nvmlDeviceGetPowerUsage(void *h, unsigned *mw) {
    DEVICE_CALL(h, "GetPowerUsage");
    if (!mw) return INVALID_ARGUMENT;
    *mw = power_mw(gpu);
    return OK;
}

/* The counter accrues the present power since it last advanced, so it never runs backwards. */
int nvmlDeviceGetTotalEnergyConsumption(void *h, unsigned long long *mj) {
    DEVICE_CALL(h, "GetTotalEnergyConsumption");
    if (!mj) return INVALID_ARGUMENT;
    if (spec_of(gpu)->arch < ARCH_VOLTA) return NOT_SUPPORTED;
    long long now = now_ms(), at = gpu_int(gpu, "energy_at_ms", now);
    long long energy = gpu_int(gpu, "energy_mj", 1000000);
    if (!gpu_int(gpu, "energy_stall", 0)) energy += (long long)power_mw(gpu) * (now - at) / 1000;
    gpu_set(gpu, "energy_mj", energy);
    gpu_set(gpu, "energy_at_ms", now);
    save_state();
    *mj = (unsigned long long)energy;
    return OK;
}

/* Locks: root only, a generation that has the call, min <= max inside the supported range, and
 * the graphics lock supported at the memory clock the pair of locks selects. A reset is a lock to
 * 0..0, the fake's "unlocked", with no range to check. */
static int lock(void *h, int memory, int reset, unsigned min_mhz, unsigned max_mhz) {
    static const char *const calls[2][2] = {{"SetGpuLockedClocks", "ResetGpuLockedClocks"},
                                            {"SetMemoryLockedClocks", "ResetMemoryLockedClocks"}};
    DEVICE_CALL(h, calls[memory][reset]);
    const struct arch_spec *s = spec_of(gpu);
    if (s->arch < (memory ? ARCH_AMPERE : ARCH_VOLTA)) return NOT_SUPPORTED;
    if (!is_root()) return NO_PERMISSION;
    unsigned lo = memory ? s->mem_mhz[s->n_mem - 1] : s->lo_mhz;
    unsigned hi = memory ? s->mem_mhz[0] : s->top_mhz[0];
    if (!reset && (min_mhz > max_mhz || min_mhz < lo || max_mhz > hi)) return INVALID_ARGUMENT;
    long long graphics_max = memory ? gpu_int(gpu, "lock_max", 0) : max_mhz;
    long long mem_max = memory ? max_mhz : gpu_int(gpu, "mem_lock_max", 0);
    if (graphics_max > s->top_mhz[mem_index(s, mem_max)]) return INVALID_ARGUMENT;
    gpu_set(gpu, memory ? "mem_lock_min" : "lock_min", min_mhz);
    gpu_set(gpu, memory ? "mem_lock_max" : "lock_max", max_mhz);
    const char *writes = memory ? "mem_lock_writes" : "lock_writes";
    if (!reset) gpu_set(gpu, writes, gpu_int(gpu, writes, 0) + 1);
    save_state();
    return OK;
}

int nvmlDeviceSetGpuLockedClocks(void *h, unsigned min_mhz, unsigned max_mhz) {
    return lock(h, 0, 0, min_mhz, max_mhz);
}

int nvmlDeviceResetGpuLockedClocks(void *h) { return lock(h, 0, 1, 0, 0); }

int nvmlDeviceSetMemoryLockedClocks(void *h, unsigned min_mhz, unsigned max_mhz) {
    return lock(h, 1, 0, min_mhz, max_mhz);
}

int nvmlDeviceResetMemoryLockedClocks(void *h) { return lock(h, 1, 1, 0, 0); }

/* -- GPM ------------------------------------------------------------------------------------- */

enum { GPM_GRAPHICS_UTIL = 1, GPM_SM_UTIL = 2, GPM_SM_OCCUPANCY = 3, GPM_DRAM_BW_UTIL = 10 };
#define GPM_METRIC_MAX 210 /* what this "library" was built with; callers may have more room */
#define GPM_MAGIC 0x67706d73

typedef struct { unsigned version, isSupportedDevice; } nvmlGpmSupport_t;
struct gpm_sample { unsigned magic; int gpu, taken; long long at_ms; double sm, dram, gr; };
typedef struct { const char *shortName, *longName, *unit; } metric_info_t;
typedef struct { unsigned metricId; int nvmlReturn; double value; metric_info_t info; } nvmlGpmMetric_t;
typedef struct {
    unsigned version, numMetrics;
    struct gpm_sample *sample1, *sample2;
    nvmlGpmMetric_t metrics[]; /* as many as the caller's struct holds (numMetrics used) */
} nvmlGpmMetricsGet_t;

int nvmlGpmQueryDeviceSupport(void *h, nvmlGpmSupport_t *support) {
    DEVICE_CALL(h, "GpmQueryDeviceSupport");
    if (!support) return INVALID_ARGUMENT;
    if (support->version != 1) return ARGUMENT_VERSION_MISMATCH;
    support->isSupportedDevice = spec_of(gpu)->arch >= ARCH_HOPPER;
    return OK;
}

int nvmlGpmSampleAlloc(struct gpm_sample **sample) {
    int rc = begin();
    if (rc != OK) return rc;
    if (!sample) return INVALID_ARGUMENT;
    *sample = calloc(1, sizeof **sample);
    if (!*sample) return UNKNOWN;
    (*sample)->magic = GPM_MAGIC;
    return OK;
}

int nvmlGpmSampleFree(struct gpm_sample *sample) {
    int rc = begin();
    if (rc != OK) return rc;
    if (!sample || sample->magic != GPM_MAGIC) return INVALID_ARGUMENT;
    sample->magic = 0;
    free(sample);
    return OK;
}

/* The activity counters accrue the present utilisation since they last advanced (% x ms). */
int nvmlGpmSampleGet(void *h, struct gpm_sample *sample) {
    DEVICE_CALL(h, "GpmSampleGet");
    if (!sample || sample->magic != GPM_MAGIC) return INVALID_ARGUMENT;
    if (spec_of(gpu)->arch < ARCH_HOPPER) return NOT_SUPPORTED;
    long long now = now_ms(), at = gpu_int(gpu, "gpm_at_ms", now);
    long long busy = gpu_int(gpu, "busy", 50);
    long long sm = gpu_int(gpu, "gpm_sm", 0) + gpu_int(gpu, "sm_util", busy) * (now - at);
    long long dram = gpu_int(gpu, "gpm_dram", 0) + gpu_int(gpu, "dram_util", busy / 2) * (now - at);
    long long gr = gpu_int(gpu, "gpm_gr", 0) + busy * (now - at);
    gpu_set(gpu, "gpm_sm", sm);
    gpu_set(gpu, "gpm_dram", dram);
    gpu_set(gpu, "gpm_gr", gr);
    gpu_set(gpu, "gpm_at_ms", now);
    save_state();
    *sample = (struct gpm_sample){GPM_MAGIC, gpu, 1, now, (double)sm, (double)dram, (double)gr};
    return OK;
}

int nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *get) {
    int rc = begin();
    if (rc != OK) return rc;
    if (!get) return INVALID_ARGUMENT;
    if (get->version != 1) return ARGUMENT_VERSION_MISMATCH;
    struct gpm_sample *a = get->sample1, *b = get->sample2;
    if (get->numMetrics > GPM_METRIC_MAX || !a || !b || a->magic != GPM_MAGIC
        || b->magic != GPM_MAGIC || !a->taken || !b->taken || a->gpu != b->gpu)
        return INVALID_ARGUMENT;
    if (b->at_ms <= a->at_ms) return INVALID_ARGUMENT; /* sample2 must be the later one */
    double span = (double)(b->at_ms - a->at_ms);
    for (unsigned i = 0; i < get->numMetrics; i++) {
        nvmlGpmMetric_t *m = &get->metrics[i];
        m->nvmlReturn = OK;
        m->info = (metric_info_t){"fake", "fake metric", "%"};
        switch (m->metricId) {
        case GPM_SM_UTIL: m->value = (b->sm - a->sm) / span; break;
        case GPM_DRAM_BW_UTIL: m->value = (b->dram - a->dram) / span; break;
        case GPM_GRAPHICS_UTIL:
        case GPM_SM_OCCUPANCY: m->value = (b->gr - a->gr) / span; break;
        default: m->nvmlReturn = NOT_SUPPORTED; m->value = 0;
        }
    }
    return OK;
}
