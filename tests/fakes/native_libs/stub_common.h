/* Shared by nvml_stub.c and hlml_stub.c: the device table of one test, one lock, an optional call log.
 *
 * The table is read again at every call from the file that STUB_CONFIG_ENV names, so a test can change
 * a reading (an energy counter, a utilization) between two calls. Lines are `key=value`:
 *   driver=570.86.15   init_error=9   devices=8   migs=1
 *   device.<n>.<field>=<value>   mig.<n>.<field>=<value>
 * Handles are addresses inside the static tables: they stay valid across reloads, as real handles stay
 * valid for the life of the library. Without the variable the library loads but its init answers
 * DRIVER_NOT_LOADED: a host with the vendor library installed and no device driver.
 */
#ifndef STUB_COMMON_H
#define STUB_COMMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STUB_MAX 32
#define STUB_TEXT 160

typedef struct stub_device {
    char name[STUB_TEXT];
    char uuid[STUB_TEXT];
    char unsupported[1024]; /* ",call,call," : the C functions that answer NOT_SUPPORTED for this device */
    unsigned int parent, index, module_id;
    unsigned int util, mem_util, clock_mhz, mem_clock_mhz, temperature, power_mw, power_limit_mw;
    unsigned long long mem_total, mem_used, energy_mj;
} stub_device;

typedef struct stub_config {
    int present;
    int init_error;
    char driver[STUB_TEXT];
    unsigned int count, mig_count;
    stub_device devices[STUB_MAX], migs[STUB_MAX];
} stub_config;

static stub_config cfg;
static pthread_mutex_t stub_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct { const char *key; size_t offset; int wide; } stub_numbers[] = {
    {"parent", offsetof(stub_device, parent), 0},         {"index", offsetof(stub_device, index), 0},
    {"module_id", offsetof(stub_device, module_id), 0},   {"util", offsetof(stub_device, util), 0},
    {"mem_util", offsetof(stub_device, mem_util), 0},     {"clock_mhz", offsetof(stub_device, clock_mhz), 0},
    {"mem_clock_mhz", offsetof(stub_device, mem_clock_mhz), 0},
    {"temperature", offsetof(stub_device, temperature), 0}, {"power_mw", offsetof(stub_device, power_mw), 0},
    {"power_limit_mw", offsetof(stub_device, power_limit_mw), 0},
    {"mem_total", offsetof(stub_device, mem_total), 1},   {"mem_used", offsetof(stub_device, mem_used), 1},
    {"energy_mj", offsetof(stub_device, energy_mj), 1},
};

static void stub_text(char *out, size_t size, const char *value) { snprintf(out, size, "%s", value); }

static void stub_set_field(stub_device *d, const char *field, const char *value) {
    if (!strcmp(field, "name")) {
        stub_text(d->name, sizeof d->name, value);
    } else if (!strcmp(field, "uuid")) {
        stub_text(d->uuid, sizeof d->uuid, value);
    } else if (!strcmp(field, "unsupported")) {
        snprintf(d->unsupported, sizeof d->unsupported, ",%s,", value);
    } else {
        for (size_t i = 0; i < sizeof stub_numbers / sizeof stub_numbers[0]; i++) {
            if (strcmp(field, stub_numbers[i].key)) continue;
            char *at = (char *)d + stub_numbers[i].offset;
            unsigned long long n = strtoull(value, NULL, 10);
            if (stub_numbers[i].wide) *(unsigned long long *)at = n;
            else *(unsigned int *)at = (unsigned int)n;
        }
    }
}

static void stub_parse_line(char *line) {
    char *value = strchr(line, '=');
    if (!value) return;
    *value++ = '\0';
    value[strcspn(value, "\r\n")] = '\0';
    unsigned int n;
    char field[64];
    if (!strcmp(line, "driver")) stub_text(cfg.driver, sizeof cfg.driver, value);
    else if (!strcmp(line, "init_error")) cfg.init_error = atoi(value);
    else if (!strcmp(line, "devices")) cfg.count = (unsigned int)atoi(value);
    else if (!strcmp(line, "migs")) cfg.mig_count = (unsigned int)atoi(value);
    else if (sscanf(line, "device.%u.%63s", &n, field) == 2 && n < STUB_MAX) stub_set_field(&cfg.devices[n], field, value);
    else if (sscanf(line, "mig.%u.%63s", &n, field) == 2 && n < STUB_MAX) stub_set_field(&cfg.migs[n], field, value);
    if (cfg.count > STUB_MAX) cfg.count = STUB_MAX;
    if (cfg.mig_count > STUB_MAX) cfg.mig_count = STUB_MAX;
}

/* Called first, under the lock, by every exported function: reload the table, log the call. */
static void stub_load(const char *call) {
    const char *path = getenv(STUB_CONFIG_ENV);
    FILE *file = path ? fopen(path, "r") : NULL;
    memset(&cfg, 0, sizeof cfg);
    if (file) {
        char line[2048];
        cfg.present = 1;
        while (fgets(line, sizeof line, file)) stub_parse_line(line);
        fclose(file);
    }
    const char *log_path = getenv(STUB_LOG_ENV);
    FILE *log = log_path ? fopen(log_path, "a") : NULL;
    if (log) {
        fprintf(log, "%s\n", call);
        fclose(log);
    }
}

static int stub_refuses(const stub_device *d, const char *call) {
    char needle[STUB_TEXT];
    snprintf(needle, sizeof needle, ",%s,", call);
    return strstr(d->unsupported, needle) != NULL;
}

/* Which table entry a handle points at: 0 none, 1 a device, 2 a MIG device. */
static int stub_kind(const void *handle) {
    uintptr_t at = (uintptr_t)handle, devices = (uintptr_t)cfg.devices, migs = (uintptr_t)cfg.migs;
    if (at >= devices && at < devices + cfg.count * sizeof(stub_device) && (at - devices) % sizeof(stub_device) == 0)
        return 1;
    if (at >= migs && at < migs + cfg.mig_count * sizeof(stub_device) && (at - migs) % sizeof(stub_device) == 0)
        return 2;
    return 0;
}

/* Copy a string as the C APIs do: refuse a buffer too small for it and its NUL (returns 1). */
static int stub_copy(char *out, unsigned int length, const char *text) {
    if (strlen(text) + 1 > length) return 1;
    memcpy(out, text, strlen(text) + 1);
    return 0;
}

#define STUB_ENTER(call) \
    pthread_mutex_lock(&stub_lock); \
    stub_load(call)
#define STUB_RETURN(rc) \
    do { \
        int rc_ = (int)(rc); \
        pthread_mutex_unlock(&stub_lock); \
        return rc_; \
    } while (0)

#endif
