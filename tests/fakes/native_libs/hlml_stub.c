/* A stand-in for libhlml.so: the functions pyhlml (habana-pyhlml 1.24.2) calls for this project, with
 * hlml.h's signatures and hlml_return_t codes.
 *
 * As the real library: every call but hlml_init answers HLML_ERROR_UNINITIALIZED before hlml_init and
 * after hlml_shutdown (not reference counted: pyhlml drops all its references at one shutdown); devices
 * are numbered by the driver (hl-smi's `index`), which is not their module id (hl-smi's `module_id`,
 * what HABANA_VISIBLE_MODULES lists); a bad handle or index is HLML_ERROR_INVALID_ARGUMENT, an unknown
 * UUID HLML_ERROR_NOT_FOUND, a short buffer HLML_ERROR_INSUFFICIENT_SIZE; each device lists the calls it
 * refuses with HLML_ERROR_NOT_SUPPORTED. Memory is in bytes, power in mW, energy in mJ.
 */
#define STUB_CONFIG_ENV "FAKE_HLML_CONFIG"
#define STUB_LOG_ENV "FAKE_HLML_LOG"
#include "stub_common.h"

typedef enum hlml_return {
    HLML_SUCCESS = 0,
    HLML_ERROR_UNINITIALIZED = 1,
    HLML_ERROR_INVALID_ARGUMENT = 2,
    HLML_ERROR_NOT_SUPPORTED = 3,
    HLML_ERROR_NOT_FOUND = 6,
    HLML_ERROR_INSUFFICIENT_SIZE = 7,
    HLML_ERROR_DRIVER_NOT_LOADED = 9,
    HLML_ERROR_UNKNOWN = 49
} hlml_return_t;

typedef void *hlml_device_t;
typedef struct hlml_utilization { unsigned int aip, memory; } hlml_utilization_t; /* pyhlml 1.24's layout */
typedef struct hlml_memory { unsigned long long free, total, used; } hlml_memory_t;

static int initialized;

/* Test hook (not an HLML symbol): back to never initialized, as in a fresh process. */
void fake_hlml_reset(void) {
    pthread_mutex_lock(&stub_lock);
    initialized = 0;
    pthread_mutex_unlock(&stub_lock);
}

static hlml_return_t device_call(hlml_device_t handle, const char *call, const void *out, stub_device **d) {
    if (!initialized) return HLML_ERROR_UNINITIALIZED;
    if (stub_kind(handle) != 1 || !out) return HLML_ERROR_INVALID_ARGUMENT;
    *d = (stub_device *)handle;
    return stub_refuses(*d, call) ? HLML_ERROR_NOT_SUPPORTED : HLML_SUCCESS;
}

#define DEVICE_CALL(call, handle, out) \
    STUB_ENTER(call); \
    stub_device *d = NULL; \
    hlml_return_t rc = device_call(handle, call, out, &d); \
    if (rc != HLML_SUCCESS) STUB_RETURN(rc)

hlml_return_t hlml_init(void) {
    STUB_ENTER("hlml_init");
    if (!cfg.present) STUB_RETURN(HLML_ERROR_DRIVER_NOT_LOADED);
    if (cfg.init_error) STUB_RETURN(cfg.init_error);
    initialized = 1;
    STUB_RETURN(HLML_SUCCESS);
}

hlml_return_t hlml_init_with_flags(unsigned int flags) {
    if (flags) return HLML_ERROR_INVALID_ARGUMENT; /* "Only the default flag (0) is supported" */
    return hlml_init();
}

hlml_return_t hlml_shutdown(void) {
    STUB_ENTER("hlml_shutdown");
    if (!initialized) STUB_RETURN(HLML_ERROR_UNINITIALIZED);
    initialized = 0;
    STUB_RETURN(HLML_SUCCESS);
}

hlml_return_t hlml_device_get_count(unsigned int *device_count) {
    STUB_ENTER("hlml_device_get_count");
    if (!initialized) STUB_RETURN(HLML_ERROR_UNINITIALIZED);
    if (!device_count) STUB_RETURN(HLML_ERROR_INVALID_ARGUMENT);
    *device_count = cfg.count;
    STUB_RETURN(HLML_SUCCESS);
}

hlml_return_t hlml_device_get_handle_by_index(unsigned int index, hlml_device_t *device) {
    STUB_ENTER("hlml_device_get_handle_by_index");
    if (!initialized) STUB_RETURN(HLML_ERROR_UNINITIALIZED);
    if (!device || index >= cfg.count) STUB_RETURN(HLML_ERROR_INVALID_ARGUMENT);
    *device = &cfg.devices[index];
    STUB_RETURN(HLML_SUCCESS);
}

hlml_return_t hlml_device_get_handle_by_UUID(const char *uuid, hlml_device_t *device) {
    STUB_ENTER("hlml_device_get_handle_by_UUID");
    if (!initialized) STUB_RETURN(HLML_ERROR_UNINITIALIZED);
    if (!uuid || !device) STUB_RETURN(HLML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < cfg.count; i++) {
        if (!strcmp(cfg.devices[i].uuid, uuid)) {
            *device = &cfg.devices[i];
            STUB_RETURN(HLML_SUCCESS);
        }
    }
    STUB_RETURN(HLML_ERROR_NOT_FOUND);
}

hlml_return_t hlml_device_get_name(hlml_device_t device, char *name, unsigned int length) {
    DEVICE_CALL("hlml_device_get_name", device, name);
    STUB_RETURN(stub_copy(name, length, d->name) ? HLML_ERROR_INSUFFICIENT_SIZE : HLML_SUCCESS);
}

hlml_return_t hlml_device_get_uuid(hlml_device_t device, char *uuid, unsigned int length) {
    DEVICE_CALL("hlml_device_get_uuid", device, uuid);
    STUB_RETURN(stub_copy(uuid, length, d->uuid) ? HLML_ERROR_INSUFFICIENT_SIZE : HLML_SUCCESS);
}

hlml_return_t hlml_device_get_module_id(hlml_device_t device, unsigned int *module_id) {
    DEVICE_CALL("hlml_device_get_module_id", device, module_id);
    *module_id = d->module_id;
    STUB_RETURN(HLML_SUCCESS);
}

hlml_return_t hlml_device_get_utilization_rates(hlml_device_t device, hlml_utilization_t *utilization) {
    DEVICE_CALL("hlml_device_get_utilization_rates", device, utilization);
    utilization->aip = d->util;
    utilization->memory = d->mem_util;
    STUB_RETURN(HLML_SUCCESS);
}

hlml_return_t hlml_device_get_memory_info(hlml_device_t device, hlml_memory_t *memory) {
    DEVICE_CALL("hlml_device_get_memory_info", device, memory);
    memory->total = d->mem_total;
    memory->used = d->mem_used;
    memory->free = d->mem_total > d->mem_used ? d->mem_total - d->mem_used : 0;
    STUB_RETURN(HLML_SUCCESS);
}

hlml_return_t hlml_device_get_power_usage(hlml_device_t device, unsigned int *power) {
    DEVICE_CALL("hlml_device_get_power_usage", device, power);
    *power = d->power_mw;
    STUB_RETURN(HLML_SUCCESS);
}

hlml_return_t hlml_device_get_total_energy_consumption(hlml_device_t device, unsigned long long *energy) {
    DEVICE_CALL("hlml_device_get_total_energy_consumption", device, energy);
    *energy = d->energy_mj;
    STUB_RETURN(HLML_SUCCESS);
}

hlml_return_t hlml_get_driver_version(char *driver_version, unsigned int length) {
    STUB_ENTER("hlml_get_driver_version");
    if (!initialized) STUB_RETURN(HLML_ERROR_UNINITIALIZED);
    if (!driver_version) STUB_RETURN(HLML_ERROR_INVALID_ARGUMENT);
    STUB_RETURN(stub_copy(driver_version, length, cfg.driver) ? HLML_ERROR_INSUFFICIENT_SIZE : HLML_SUCCESS);
}
