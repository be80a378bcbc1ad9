/* The context's VkPipelineCache: loaded at creation from a file or from bytes
 * (validated first, src/pipeline_cache_format.c), passed to every
 * vkCreateComputePipelines, and handed back in vkmha's format
 * (vkmha_context_get_pipeline_cache) or written to a file
 * (vkmha_context_save_pipeline_cache). A cache that fails validation is
 * logged at INFO and never reaches the driver: the context then starts with
 * an empty cache, exactly as without one. */
#include "pipeline_cache_format.h"
#include "vk_resources.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(_WIN32)
#include <io.h>
#include <windows.h>
/* The file's data on the disk (fsync), and an atomic replacement of `to`
 * (rename, which on Windows refuses an existing destination). */
static int flush_to_disk(FILE *f)
{
    return _commit(_fileno(f));
}
static int replace_file(const char *from, const char *to)
{
    if (MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
        return 0;
    errno = GetLastError() == ERROR_ACCESS_DENIED ? EACCES : EIO;
    return -1;
}
#else
static int flush_to_disk(FILE *f)
{
    return fsync(fileno(f));
}
static int replace_file(const char *from, const char *to)
{
    return rename(from, to);
}
#endif

/* Larger files are not read: a driver's cache of vkmha's few pipelines is
 * kilobytes to a few megabytes. */
#define MAX_FILE_BYTES (256u << 20)

#define CREATE "vkmha_context_create"

static void identity(const vk_state *vk, vk_cache_identity *id)
{
    VkPhysicalDeviceProperties p;
    vk->vki.GetPhysicalDeviceProperties(vk->phys, &p);
    memset(id, 0, sizeof *id);
    id->vkmha_version = VKMHA_VERSION_NUMBER;
    id->vendor_id = p.vendorID;
    id->device_id = p.deviceID;
    id->driver_version = p.driverVersion;
    memcpy(id->pipeline_cache_uuid, p.pipelineCacheUUID, sizeof id->pipeline_cache_uuid);
    memcpy(id->device_uuid, vk->info.device_uuid, sizeof id->device_uuid);
}

/* What became of the cache, at INFO (vkmha_log_level). */
#define log_info(vk, ...) vkmha__log((vk)->ctx, VKMHA_LOG_INFO, VKMHA_SUCCESS, __VA_ARGS__)

/* Reads the file at path into *bytes (vkmha__alloc'd) and *size. A file that
 * cannot be used is not an error: *bytes stays NULL and `why` says why
 * (empty when the file does not exist). Only running out of memory fails. */
static vkmha_status read_file(vk_state *vk, const char *path, void **bytes, size_t *size,
                              char *why, size_t cap)
{
    char err[128];
    struct stat st;
    *bytes = NULL;
    *size = 0;
    why[0] = '\0';
    if (stat(path, &st) != 0) {
        if (errno != ENOENT)
            snprintf(why, cap, "cannot read it: %s", vkmha__error_text(errno, err, sizeof err));
        return VKMHA_SUCCESS;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, cap, "not a regular file");
        return VKMHA_SUCCESS;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > MAX_FILE_BYTES) {
        snprintf(why, cap, "too large (%lld bytes, at most %u are read)",
                 (long long)st.st_size, MAX_FILE_BYTES);
        return VKMHA_SUCCESS;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, cap, "cannot read it: %s", vkmha__error_text(errno, err, sizeof err));
        return VKMHA_SUCCESS;
    }
    size_t want = (size_t)st.st_size;
    uint8_t *buf = vkmha__alloc(vk->ctx, want);
    if (!buf) {
        fclose(f);
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                           CREATE ": out of host memory reading the pipeline cache %s (%zu "
                           "bytes)",
                           path, want);
    }
    /* A file that shrank since stat reads short (and then fails validation
     * as truncated); one that grew is read up to its size at stat time and
     * fails as truncated too, since its header promises more. */
    size_t got = fread(buf, 1, want, f);
    bool failed = ferror(f) != 0;
    int read_errno = errno;
    fclose(f);
    if (failed) {
        vkmha__free(vk->ctx, buf);
        snprintf(why, cap, "cannot read it: %s", vkmha__error_text(read_errno, err, sizeof err));
        return VKMHA_SUCCESS;
    }
    *bytes = buf;
    *size = got;
    return VKMHA_SUCCESS;
}

static vkmha_status check_desc(vk_state *vk, const vkmha_context_desc *desc)
{
    if (desc->pipeline_cache_path && (desc->pipeline_cache_data || desc->pipeline_cache_size))
        return vkmha__fail(vk->ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           CREATE ": desc->pipeline_cache_path and desc->pipeline_cache_data "
                           "/ desc->pipeline_cache_size are both set; pass one or the other");
    if (desc->pipeline_cache_data && !desc->pipeline_cache_size)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           CREATE ": desc->pipeline_cache_data is set but "
                           "desc->pipeline_cache_size is 0");
    if (!desc->pipeline_cache_data && desc->pipeline_cache_size)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           CREATE ": desc->pipeline_cache_size is %zu but "
                           "desc->pipeline_cache_data is NULL",
                           desc->pipeline_cache_size);
    if (desc->pipeline_cache_path && !desc->pipeline_cache_path[0])
        return vkmha__fail(vk->ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           CREATE ": desc->pipeline_cache_path is an empty string");
    return VKMHA_SUCCESS;
}

vkmha_status vk_pipeline_cache_init(vk_state *vk, const vkmha_context_desc *desc)
{
    vkmha_status st;
    if ((st = check_desc(vk, desc)))
        return st;
    const char *path = desc->pipeline_cache_path;
    if (path) {
        size_t len = strlen(path) + 1;
        if (!(vk->cache.path = vkmha__alloc(vk->ctx, len)))
            return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               CREATE ": out of host memory");
        memcpy(vk->cache.path, path, len);
    }

    /* The candidate bytes: the file's or the caller's. */
    void *file = NULL;
    const void *bytes = desc->pipeline_cache_data;
    size_t size = desc->pipeline_cache_size;
    char why[256] = "";
    if (path) {
        if ((st = read_file(vk, path, &file, &size, why, sizeof why)))
            return st;
        bytes = file;
        if (!file && !why[0])
            log_info(vk, CREATE ": no pipeline cache at %s yet", path);
        else if (!file)
            log_info(vk, CREATE ": pipeline cache %s ignored: %s", path, why);
    }
    const char *name = path ? path : "desc->pipeline_cache_data";

    const void *data = NULL;
    size_t data_size = 0;
    if (bytes) {
        vk_cache_identity id;
        identity(vk, &id);
        if (vk_pipeline_cache_parse(bytes, size, &id, &data, &data_size, why, sizeof why))
            log_info(vk, CREATE ": pipeline cache %s ignored: %s", name, why);
    }

    VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    ci.initialDataSize = data_size;
    ci.pInitialData = data;
    VkResult r = vk->vkd.vkCreatePipelineCache(vk->device, &ci, vk->vkalloc,
                                               &vk->cache.cache);
    if (r != VK_SUCCESS && data) {
        log_info(vk, CREATE ": pipeline cache %s ignored: the driver refused it (%s)", name,
                 vk_result_string(r));
        data = NULL;
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = vk->vkd.vkCreatePipelineCache(vk->device, &ci, vk->vkalloc, &vk->cache.cache);
    }
    vkmha__free(vk->ctx, file);
    if (r != VK_SUCCESS) {
        vk->cache.cache = VK_NULL_HANDLE;
        return vk_fail(vk, r, CREATE ": vkCreatePipelineCache");
    }
    if (data) {
        vk->cache.loaded = true;
        vk->cache.bytes = data_size;
        log_info(vk, CREATE ": pipeline cache %s loaded (%zu bytes of driver data)", name,
                 data_size);
    }
    return VKMHA_SUCCESS;
}

void vk_pipeline_cache_destroy(vk_state *vk)
{
    if (vk->cache.cache)
        vk->vkd.vkDestroyPipelineCache(vk->device, vk->cache.cache, vk->vkalloc);
    vk->cache.cache = VK_NULL_HANDLE;
    vkmha__free(vk->ctx, vk->cache.path);
    vk->cache.path = NULL;
}

/* The cache in vkmha's format, with vkmha_context_get_pipeline_cache's size
 * protocol (messages name the public call fn). */
static vkmha_status get_cache(vk_state *vk, const char *fn, void *data, size_t *size)
{
    size_t n = 0;
    VkResult r = vk->vkd.vkGetPipelineCacheData(vk->device, vk->cache.cache, &n, NULL);
    if (r != VK_SUCCESS)
        return vk_fail(vk, r, "vkGetPipelineCacheData");
    if (n > SIZE_MAX - VK_CACHE_HEADER_SIZE)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                           "%s: the driver's pipeline cache is too large (%zu bytes)", fn, n);
    const size_t need = VK_CACHE_HEADER_SIZE + n, cap = *size;
    *size = need;
    if (!data)
        return VKMHA_SUCCESS;
    if (cap < need)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           "%s: *size (%zu) is smaller than the %zu bytes of the pipeline "
                           "cache; pass data NULL to ask for the size",
                           fn, cap, need);
    uint8_t *out = (uint8_t *)data;
    r = vk->vkd.vkGetPipelineCacheData(vk->device, vk->cache.cache, &n,
                                       out + VK_CACHE_HEADER_SIZE);
    /* VK_INCOMPLETE would mean the cache grew since the size query, which
     * nothing in between does (one thread uses a context at a time). */
    if (r != VK_SUCCESS)
        return vk_fail(vk, r, "vkGetPipelineCacheData");
    vk_cache_identity id;
    identity(vk, &id);
    vk_pipeline_cache_header(&id, out + VK_CACHE_HEADER_SIZE, n, out);
    *size = VK_CACHE_HEADER_SIZE + n;
    return VKMHA_SUCCESS;
}

VKMHA_API vkmha_status vkmha_context_get_pipeline_cache(vkmha_context *ctx, void *data,
                                                        size_t *size)
{
    static const char fn[] = "vkmha_context_get_pipeline_cache";
    if (!ctx)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    vkmha__begin_call(ctx, fn);
    if (!size)
        return vkmha__fail(ctx, VKMHA_ERROR_INVALID_ARGUMENT, "%s: size is NULL", fn);
    if (!ctx->ops->pipeline_cache)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: the reference backend has no pipeline cache", fn);
    return ctx->ops->pipeline_cache(ctx, fn, data, size);
}

vkmha_status vk_pipeline_cache_get(vkmha_context *ctx, const char *fn, void *data,
                                   size_t *size)
{
    return get_cache(ctx->vk, fn, data, size);
}

const char *vk_pipeline_cache_path(const vkmha_context *ctx)
{
    return ctx->vk->cache.path;
}

/* Writes n bytes to the new file tmp, flushed to the disk. false with errno
 * on failure, after removing what it wrote. */
static bool write_file(const char *tmp, const void *bytes, size_t n)
{
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return false;
    bool ok = fwrite(bytes, 1, n, f) == n && fflush(f) == 0 && flush_to_disk(f) == 0;
    int err = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok)
        remove(tmp);
    errno = err;
    return ok;
}

VKMHA_API vkmha_status vkmha_context_save_pipeline_cache(vkmha_context *ctx, const char *path)
{
    static const char fn[] = "vkmha_context_save_pipeline_cache";
    vkmha_status st;
    char err[128];
    if (!ctx)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    vkmha__begin_call(ctx, fn);
    if (!ctx->ops->pipeline_cache)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: the reference backend has no pipeline cache", fn);
    const char *own_path = ctx->ops->pipeline_cache_path(ctx);
    if (!path && !own_path)
        return vkmha__fail(ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           "%s: path is NULL and the context was created without "
                           "desc->pipeline_cache_path",
                           fn);
    if (!path)
        path = own_path;
    if (!path[0])
        return vkmha__fail(ctx, VKMHA_ERROR_INVALID_ARGUMENT, "%s: path is an empty string",
                           fn);
    size_t size = 0, path_len = strlen(path);
    if ((st = ctx->ops->pipeline_cache(ctx, fn, NULL, &size)))
        return st;
    uint8_t *bytes = vkmha__alloc(ctx, size);
    char *tmp = vkmha__alloc(ctx, path_len + sizeof ".tmp");
    if (!bytes || !tmp) {
        st = vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
        goto done;
    }
    if ((st = ctx->ops->pipeline_cache(ctx, fn, bytes, &size)))
        goto done;
    memcpy(tmp, path, path_len);
    memcpy(tmp + path_len, ".tmp", sizeof ".tmp");
    /* A crash leaves either the old file or the new one, never a torn one:
     * rename replaces the file atomically. */
    if (!write_file(tmp, bytes, size)) {
        st = vkmha__fail(ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                         "%s: cannot write path (%s): %s", fn, tmp,
                         vkmha__error_text(errno, err, sizeof err));
        goto done;
    }
    if (replace_file(tmp, path) != 0) {
        st = vkmha__fail(ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                         "%s: cannot rename %s to path (%s): %s", fn, tmp, path,
                         vkmha__error_text(errno, err, sizeof err));
        remove(tmp);
        goto done;
    }
    st = VKMHA_SUCCESS;
done:
    vkmha__free(ctx, bytes);
    vkmha__free(ctx, tmp);
    return st;
}
