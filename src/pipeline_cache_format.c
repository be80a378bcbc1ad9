/* vkmha's pipeline cache format (src/pipeline_cache_format.h): writing the
 * header and validating untrusted bytes. No Vulkan, no allocation. */
#include "pipeline_cache_format.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const uint8_t magic[8] = {'V', 'K', 'M', 'H', 'A', 'P', 'C', '\0'};

/* The driver's own header at the start of its data
 * (VkPipelineCacheHeaderVersionOne): headerSize, headerVersion, vendorID,
 * deviceID as 32-bit little-endian words, then pipelineCacheUUID. */
#define DRIVER_HEADER_SIZE 32u
#define DRIVER_HEADER_VERSION_ONE 1u

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

uint64_t vk_pipeline_cache_checksum(const void *bytes, size_t n)
{
    const uint8_t *p = (const uint8_t *)bytes;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 offset basis */
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull; /* FNV 64 prime */
    }
    return h;
}

void vk_pipeline_cache_header(const vk_cache_identity *id, const void *data, size_t data_size,
                              uint8_t out[VK_CACHE_HEADER_SIZE])
{
    memset(out, 0, VK_CACHE_HEADER_SIZE);
    memcpy(out + VK_CACHE_OFF_MAGIC, magic, sizeof magic);
    put32(out + VK_CACHE_OFF_FORMAT, VK_CACHE_FORMAT_VERSION);
    put32(out + VK_CACHE_OFF_HEADER_SIZE, VK_CACHE_HEADER_SIZE);
    put32(out + VK_CACHE_OFF_VKMHA, id->vkmha_version);
    put32(out + VK_CACHE_OFF_VENDOR, id->vendor_id);
    put32(out + VK_CACHE_OFF_DEVICE, id->device_id);
    put32(out + VK_CACHE_OFF_DRIVER, id->driver_version);
    memcpy(out + VK_CACHE_OFF_CACHE_UUID, id->pipeline_cache_uuid, 16);
    memcpy(out + VK_CACHE_OFF_DEVICE_UUID, id->device_uuid, 16);
    put64(out + VK_CACHE_OFF_DATA_SIZE, data_size);
    put64(out + VK_CACHE_OFF_CHECKSUM, vk_pipeline_cache_checksum(data, data_size));
}

#if defined(__MINGW32__)
__attribute__((format(gnu_printf, 3, 4)))
#elif defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static vkmha_status reject(char *why, size_t cap, const char *fmt, ...);

static vkmha_status reject(char *why, size_t cap, const char *fmt, ...)
{
    if (cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return VKMHA_ERROR_INVALID_ARGUMENT;
}

/* Checks a 32-bit identity field; names it when it differs. */
#define SAME32(got, want, name)                                                         \
    if ((got) != (want))                                                                \
        return reject(why, why_cap,                                                     \
                      "made for another device (" name " 0x%x, this device has 0x%x)",  \
                      (unsigned)(got), (unsigned)(want))

vkmha_status vk_pipeline_cache_parse(const void *bytes, size_t size,
                                     const vk_cache_identity *id, const void **data,
                                     size_t *data_size, char *why, size_t why_cap)
{
    const uint8_t *p = (const uint8_t *)bytes;
    *data = NULL;
    *data_size = 0;
    if (why_cap)
        why[0] = '\0';
    if (size == 0)
        return reject(why, why_cap, "empty (0 bytes)");
    if (size >= sizeof magic ? memcmp(p, magic, sizeof magic) != 0
                             : memcmp(p, magic, size) != 0)
        return reject(why, why_cap, "not a vkmha pipeline cache (bad magic)");
    if (size < VK_CACHE_HEADER_SIZE)
        return reject(why, why_cap, "truncated (%zu of %u header bytes)", size,
                      VK_CACHE_HEADER_SIZE);
    uint32_t format = get32(p + VK_CACHE_OFF_FORMAT);
    uint32_t header_size = get32(p + VK_CACHE_OFF_HEADER_SIZE);
    if (format != VK_CACHE_FORMAT_VERSION)
        return reject(why, why_cap, "format version %u (this vkmha reads version %u)",
                      (unsigned)format, VK_CACHE_FORMAT_VERSION);
    if (header_size != VK_CACHE_HEADER_SIZE)
        return reject(why, why_cap, "header size %u (format version %u has %u)",
                      (unsigned)header_size, VK_CACHE_FORMAT_VERSION, VK_CACHE_HEADER_SIZE);
    /* Sizes before identity: a file cut short says so, whatever its origin. */
    uint64_t n = get64(p + VK_CACHE_OFF_DATA_SIZE), have = size - VK_CACHE_HEADER_SIZE;
    if (n > have) {
        if (n > UINT64_MAX - VK_CACHE_HEADER_SIZE)
            return reject(why, why_cap, "data size %llu is impossible", (unsigned long long)n);
        return reject(why, why_cap, "truncated (%zu of %llu bytes)", size,
                      (unsigned long long)(n + VK_CACHE_HEADER_SIZE));
    }
    if (n < have)
        return reject(why, why_cap, "%llu bytes after its data (%zu bytes, %llu expected)",
                      (unsigned long long)(have - n), size,
                      (unsigned long long)(n + VK_CACHE_HEADER_SIZE));
    uint32_t version = get32(p + VK_CACHE_OFF_VKMHA);
    if (version != id->vkmha_version)
        return reject(why, why_cap, "made by vkmha %u.%u.%u (this is %u.%u.%u)",
                      (unsigned)(version / 10000), (unsigned)(version / 100 % 100),
                      (unsigned)(version % 100), (unsigned)(id->vkmha_version / 10000),
                      (unsigned)(id->vkmha_version / 100 % 100),
                      (unsigned)(id->vkmha_version % 100));
    SAME32(get32(p + VK_CACHE_OFF_VENDOR), id->vendor_id, "vendorID");
    SAME32(get32(p + VK_CACHE_OFF_DEVICE), id->device_id, "deviceID");
    SAME32(get32(p + VK_CACHE_OFF_DRIVER), id->driver_version, "driverVersion");
    if (memcmp(p + VK_CACHE_OFF_CACHE_UUID, id->pipeline_cache_uuid, 16) != 0)
        return reject(why, why_cap, "made for another device (pipelineCacheUUID differs)");
    if (memcmp(p + VK_CACHE_OFF_DEVICE_UUID, id->device_uuid, 16) != 0)
        return reject(why, why_cap, "made for another device (deviceUUID differs)");
    const uint8_t *d = p + VK_CACHE_HEADER_SIZE;
    if (vk_pipeline_cache_checksum(d, (size_t)n) != get64(p + VK_CACHE_OFF_CHECKSUM))
        return reject(why, why_cap, "checksum mismatch");
    /* The driver validates its own header too, but not every driver does so
     * reliably; a checksum-correct file can still have been written by
     * something else than vkmha. */
    if (n > 0) {
        if (n < DRIVER_HEADER_SIZE || get32(d) < DRIVER_HEADER_SIZE || get32(d) > n ||
            get32(d + 4) != DRIVER_HEADER_VERSION_ONE)
            return reject(why, why_cap, "the driver data has no valid "
                                        "VkPipelineCacheHeaderVersionOne");
        if (get32(d + 8) != id->vendor_id || get32(d + 12) != id->device_id ||
            memcmp(d + 16, id->pipeline_cache_uuid, 16) != 0)
            return reject(why, why_cap,
                          "made for another device (the driver data's own header differs)");
    }
    *data = d;
    *data_size = (size_t)n;
    return VKMHA_SUCCESS;
}
