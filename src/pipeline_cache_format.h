/* vkmha's pipeline cache file format: a fixed header that ties the driver's
 * VkPipelineCache bytes to one device, driver and vkmha version, followed by
 * those bytes. Pure C, no Vulkan: the parser is fed untrusted files, so it is
 * also a fuzz target (tests/fuzz/fuzz_pipeline_cache.c).
 *
 * Layout, all integers little-endian, offsets in bytes:
 *    0  8  magic "VKMHAPC\0"
 *    8  4  format version (VK_CACHE_FORMAT_VERSION)
 *   12  4  header size (VK_CACHE_HEADER_SIZE)
 *   16  4  vkmha version (VKMHA_VERSION_NUMBER of the writer)
 *   20  4  VkPhysicalDeviceProperties.vendorID
 *   24  4  VkPhysicalDeviceProperties.deviceID
 *   28  4  VkPhysicalDeviceProperties.driverVersion
 *   32 16  VkPhysicalDeviceProperties.pipelineCacheUUID
 *   48 16  VkPhysicalDeviceIDProperties.deviceUUID (vkmha_device_info.device_uuid)
 *   64  8  data size: bytes of driver data that follow the header
 *   72  8  FNV-1a 64 of the driver data
 *   80     driver data (vkGetPipelineCacheData), exactly `data size` bytes
 */
#ifndef VKMHA_PIPELINE_CACHE_FORMAT_H
#define VKMHA_PIPELINE_CACHE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "vkmha.h"

#define VK_CACHE_HEADER_SIZE 80u
#define VK_CACHE_FORMAT_VERSION 1u

/* Offsets of the header's fields (the layout above). */
enum {
    VK_CACHE_OFF_MAGIC = 0,
    VK_CACHE_OFF_FORMAT = 8,
    VK_CACHE_OFF_HEADER_SIZE = 12,
    VK_CACHE_OFF_VKMHA = 16,
    VK_CACHE_OFF_VENDOR = 20,
    VK_CACHE_OFF_DEVICE = 24,
    VK_CACHE_OFF_DRIVER = 28,
    VK_CACHE_OFF_CACHE_UUID = 32,
    VK_CACHE_OFF_DEVICE_UUID = 48,
    VK_CACHE_OFF_DATA_SIZE = 64,
    VK_CACHE_OFF_CHECKSUM = 72,
};

/* What a cache must have been made for to be used. */
typedef struct vk_cache_identity {
    uint32_t vkmha_version;
    uint32_t vendor_id, device_id, driver_version;
    uint8_t pipeline_cache_uuid[16];
    uint8_t device_uuid[16];
} vk_cache_identity;

/* FNV-1a, 64 bits, of n bytes. */
uint64_t vk_pipeline_cache_checksum(const void *bytes, size_t n);

/* Writes the VK_CACHE_HEADER_SIZE-byte header for `data_size` bytes of
 * driver data `data` made for `id` into out. */
void vk_pipeline_cache_header(const vk_cache_identity *id, const void *data, size_t data_size,
                              uint8_t out[VK_CACHE_HEADER_SIZE]);

/* Validates `size` bytes of a cache (untrusted: any bytes, any size) against
 * `id`. VKMHA_SUCCESS: *data, *data_size are the driver data inside `bytes`
 * (*data_size may be 0). Otherwise VKMHA_ERROR_INVALID_ARGUMENT, *data NULL,
 * *data_size 0, and why (why_cap bytes, may be 0) says why, e.g.
 * "truncated (100 of 112 bytes)", "checksum mismatch", "made for another
 * device (pipelineCacheUUID differs)". Besides vkmha's header, non-empty
 * driver data must begin with a VkPipelineCacheHeaderVersionOne of the same
 * vendor ID, device ID and pipelineCacheUUID. */
vkmha_status vk_pipeline_cache_parse(const void *bytes, size_t size,
                                     const vk_cache_identity *id, const void **data,
                                     size_t *data_size, char *why, size_t why_cap);

#endif /* VKMHA_PIPELINE_CACHE_FORMAT_H */
