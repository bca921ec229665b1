/* A stand-in for libnvidia-ml.so.1: the functions pynvml (nvidia-ml-py 13.615) calls for this project and
 * MLflow's GPU monitor, with nvml.h's signatures and return codes.
 *
 * As the real library: nvmlInitWithFlags/nvmlShutdown are reference counted and every other call answers
 * NVML_ERROR_UNINITIALIZED outside them; devices are numbered in the table's (PCI) order whatever
 * CUDA_VISIBLE_DEVICES says; nvmlDeviceGetHandleByUUID finds GPU- and MIG- UUIDs; nvmlDeviceGetIndex of a
 * MIG device is its index inside its parent GPU ("MIG device indices are unique within a device"); a bad
 * handle or index is NVML_ERROR_INVALID_ARGUMENT, an unknown UUID NVML_ERROR_NOT_FOUND, a short buffer
 * NVML_ERROR_INSUFFICIENT_SIZE; each device lists the calls it refuses with NVML_ERROR_NOT_SUPPORTED.
 */
#define STUB_CONFIG_ENV "FAKE_NVML_CONFIG"
#define STUB_LOG_ENV "FAKE_NVML_LOG"
#include "stub_common.h"

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlUtilization_st { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct nvmlMemory_st { unsigned long long total, free, used; } nvmlMemory_t;
typedef enum nvmlClockType_enum { NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_CLOCK_VIDEO, NVML_CLOCK_COUNT } nvmlClockType_t;
typedef enum nvmlTemperatureSensors_enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;

static unsigned int init_count;

/* Test hook (not an NVML symbol): forget every nvmlInit, as a fresh process would have none. */
void fake_nvml_reset(void) {
    pthread_mutex_lock(&stub_lock);
    init_count = 0;
    pthread_mutex_unlock(&stub_lock);
}

/* The checks every device query makes, in NVML's order; *d is the device when NVML_SUCCESS. */
static nvmlReturn_t device_call(nvmlDevice_t handle, const char *call, const void *out, stub_device **d) {
    if (!init_count) return NVML_ERROR_UNINITIALIZED;
    if (!stub_kind(handle) || !out) return NVML_ERROR_INVALID_ARGUMENT;
    *d = (stub_device *)handle;
    return stub_refuses(*d, call) ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

#define DEVICE_CALL(call, handle, out) \
    STUB_ENTER(call); \
    stub_device *d = NULL; \
    nvmlReturn_t rc = device_call(handle, call, out, &d); \
    if (rc != NVML_SUCCESS) STUB_RETURN(rc)

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    STUB_ENTER("nvmlInitWithFlags");
    if (!cfg.present) STUB_RETURN(NVML_ERROR_DRIVER_NOT_LOADED);
    if (cfg.init_error) STUB_RETURN(cfg.init_error);
    init_count++;
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    STUB_ENTER("nvmlShutdown");
    if (!init_count) STUB_RETURN(NVML_ERROR_UNINITIALIZED);
    init_count--;
    STUB_RETURN(NVML_SUCCESS);
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    STUB_ENTER("nvmlSystemGetDriverVersion");
    if (!init_count) STUB_RETURN(NVML_ERROR_UNINITIALIZED);
    if (!version) STUB_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    STUB_RETURN(stub_copy(version, length, cfg.driver) ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    STUB_ENTER("nvmlDeviceGetCount_v2");
    if (!init_count) STUB_RETURN(NVML_ERROR_UNINITIALIZED);
    if (!count) STUB_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *count = cfg.count;
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    STUB_ENTER("nvmlDeviceGetHandleByIndex_v2");
    if (!init_count) STUB_RETURN(NVML_ERROR_UNINITIALIZED);
    if (!device || index >= cfg.count) STUB_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *device = (nvmlDevice_t)&cfg.devices[index];
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    STUB_ENTER("nvmlDeviceGetHandleByUUID");
    if (!init_count) STUB_RETURN(NVML_ERROR_UNINITIALIZED);
    if (!uuid || !device) STUB_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < cfg.count; i++) {
        if (!strcmp(cfg.devices[i].uuid, uuid)) {
            *device = (nvmlDevice_t)&cfg.devices[i];
            STUB_RETURN(NVML_SUCCESS);
        }
    }
    for (unsigned int i = 0; i < cfg.mig_count; i++) {
        if (!strcmp(cfg.migs[i].uuid, uuid)) {
            *device = (nvmlDevice_t)&cfg.migs[i];
            STUB_RETURN(NVML_SUCCESS);
        }
    }
    STUB_RETURN(NVML_ERROR_NOT_FOUND);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    DEVICE_CALL("nvmlDeviceGetIndex", device, index);
    *index = stub_kind(d) == 2 ? d->index : (unsigned int)(d - cfg.devices);
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice) {
    DEVICE_CALL("nvmlDeviceIsMigDeviceHandle", device, isMigDevice);
    *isMigDevice = stub_kind(d) == 2;
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device) {
    DEVICE_CALL("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", migDevice, device);
    if (stub_kind(d) != 2 || d->parent >= cfg.count) STUB_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *device = (nvmlDevice_t)&cfg.devices[d->parent];
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    DEVICE_CALL("nvmlDeviceGetName", device, name);
    STUB_RETURN(stub_copy(name, length, d->name) ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    DEVICE_CALL("nvmlDeviceGetUUID", device, uuid);
    STUB_RETURN(stub_copy(uuid, length, d->uuid) ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock) {
    DEVICE_CALL("nvmlDeviceGetClockInfo", device, clock);
    if (type >= NVML_CLOCK_COUNT) STUB_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *clock = type == NVML_CLOCK_MEM ? d->mem_clock_mhz : d->clock_mhz;
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int *temp) {
    DEVICE_CALL("nvmlDeviceGetTemperature", device, temp);
    if (sensor != NVML_TEMPERATURE_GPU) STUB_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *temp = d->temperature;
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    DEVICE_CALL("nvmlDeviceGetUtilizationRates", device, utilization);
    utilization->gpu = d->util;
    utilization->memory = d->mem_util;
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    DEVICE_CALL("nvmlDeviceGetMemoryInfo", device, memory);
    memory->total = d->mem_total;
    memory->used = d->mem_used;
    memory->free = d->mem_total > d->mem_used ? d->mem_total - d->mem_used : 0;
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
    DEVICE_CALL("nvmlDeviceGetPowerUsage", device, power);
    *power = d->power_mw;
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
    DEVICE_CALL("nvmlDeviceGetEnforcedPowerLimit", device, limit);
    *limit = d->power_limit_mw;
    STUB_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy) {
    DEVICE_CALL("nvmlDeviceGetTotalEnergyConsumption", device, energy);
    *energy = d->energy_mj;
    STUB_RETURN(NVML_SUCCESS);
}
