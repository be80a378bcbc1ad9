/* libFuzzer target: vk_pipeline_cache_parse on arbitrary bytes, the parser
 * every pipeline cache file and every desc->pipeline_cache_data goes through
 * before anything reaches the driver. Pure C, no Vulkan. Besides memory
 * safety (built with AddressSanitizer and UBSan by -Dfuzzing=true, run by
 * tests/fuzz/run-fuzz; FUZZ_RUNS=1000000 for a long session), it checks:
 *   - an accepted input is exactly vkmha's header for FUZZ_ID followed by the
 *     data it returns: the header rebuilt from the data is byte for byte the
 *     input's first VK_CACHE_HEADER_SIZE bytes, and the data is the rest;
 *   - a rejected input returns no data and a non-empty reason that fits.
 * The seeds in tests/fuzz/corpus_pipeline_cache/ are caches made for FUZZ_ID
 * (so the fuzzer starts past the identity checks) and some broken ones. */
#include "pipeline_cache_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The identity the seeds were made for: lavapipe's vendor (Mesa), device and
 * driver version, and made-up UUIDs. */
static const vk_cache_identity FUZZ_ID = {
    .vkmha_version = VKMHA_VERSION_NUMBER,
    .vendor_id = 0x10005,
    .device_id = 0,
    .driver_version = 1,
    .pipeline_cache_uuid = {'f', 'u', 'z', 'z', '-', 'c', 'a', 'c', 'h', 'e', '-', 'u', 'u',
                            'i', 'd', '!'},
    .device_uuid = {'f', 'u', 'z', 'z', '-', 'd', 'e', 'v', 'i', 'c', 'e', '-', 'u', 'u', 'i',
                    'd'},
};

static void fail(const char *what, size_t size)
{
    fprintf(stderr, "fuzz_pipeline_cache: %s (input of %zu bytes)\n", what, size);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size)
{
    const void *data = (const void *)bytes;
    size_t data_size = 12345;
    char why[96];
    memset(why, 'x', sizeof why);
    vkmha_status st =
        vk_pipeline_cache_parse(bytes, size, &FUZZ_ID, &data, &data_size, why, sizeof why);
    if (st == VKMHA_SUCCESS) {
        uint8_t header[VK_CACHE_HEADER_SIZE];
        if (size < VK_CACHE_HEADER_SIZE || data != bytes + VK_CACHE_HEADER_SIZE ||
            data_size != size - VK_CACHE_HEADER_SIZE)
            fail("accepted, but the data is not the input after the header", size);
        vk_pipeline_cache_header(&FUZZ_ID, data, data_size, header);
        if (memcmp(header, bytes, VK_CACHE_HEADER_SIZE) != 0)
            fail("accepted a header that differs from the one vkmha writes", size);
        return 0;
    }
    if (st != VKMHA_ERROR_INVALID_ARGUMENT)
        fail("returned neither success nor VKMHA_ERROR_INVALID_ARGUMENT", size);
    if (data != NULL || data_size != 0)
        fail("rejected, but returned data", size);
    if (memchr(why, '\0', sizeof why) == NULL || why[0] == '\0')
        fail("rejected without a terminated, non-empty reason", size);
    return 0;
}
