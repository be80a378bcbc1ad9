/* vkmha_mha_create_from_safetensors: maps the file, lets the parser
 * (src/safetensors_format.c, no Vulkan) validate it and find the layer's
 * tensors, converts F16 / BF16 (and unaligned F32) tensors to fp32, and
 * creates the layer as vkmha_mha_create does, which copies the weights to the
 * device. Aligned F32 tensors go from the mapping to the device directly. */
#include "internal.h"
#include "safetensors_format.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifndef _WIN32
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#else
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#endif

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT

typedef struct mapping {
    const void *bytes;
    size_t size;
    void *owned; /* the mapping to unmap (NULL for an empty file) */
} mapping;

/* Maps `path` read-only; on failure a message naming the path and the
 * system's reason. */
static vkmha_status map_file(vkmha_context *ctx, const char *fn, const char *path, mapping *m)
{
    char err[128];
    memset(m, 0, sizeof *m);
#ifndef _WIN32
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return vkmha__fail(ctx, INVALID, "%s: cannot open desc->path (%s): %s", fn, path,
                           vkmha__error_text(errno, err, sizeof err));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int e = errno;
        close(fd);
        return vkmha__fail(ctx, INVALID, "%s: desc->path (%s) %s", fn, path,
                           S_ISREG(sb.st_mode) ? vkmha__error_text(e, err, sizeof err)
                                               : "is not a regular file");
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return vkmha__fail(ctx, INVALID, "%s: desc->path (%s) is too large to map", fn, path);
    }
    m->size = (size_t)sb.st_size;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return vkmha__fail(ctx, e == ENOMEM ? VKMHA_ERROR_OUT_OF_HOST_MEMORY : INVALID,
                               "%s: cannot map desc->path (%s): %s", fn, path,
                               vkmha__error_text(e, err, sizeof err));
        }
        m->bytes = m->owned = p;
    }
    close(fd);
    return VKMHA_SUCCESS;
#else
    /* CreateFileMapping + MapViewOfFile: the read-only mapping, as mmap. The
     * view stays valid after both handles are closed. The path is in the
     * process's ANSI code page (CreateFileA). */
    HANDLE file = CreateFileA(path, GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING,
                              FILE_ATTRIBUTE_NORMAL, NULL);
    if (file == INVALID_HANDLE_VALUE) {
        const DWORD e = GetLastError(), attributes = GetFileAttributesA(path);
        /* A directory cannot be opened this way ("access denied"): say
         * what it is, as on POSIX. */
        if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY))
            return vkmha__fail(ctx, INVALID, "%s: desc->path (%s) is not a regular file", fn,
                               path);
        return vkmha__fail(ctx, INVALID, "%s: cannot open desc->path (%s): %s", fn, path,
                           vkmha__win_error_text(e, err, sizeof err));
    }
    LARGE_INTEGER size;
    if (GetFileType(file) != FILE_TYPE_DISK || !GetFileSizeEx(file, &size)) {
        CloseHandle(file);
        return vkmha__fail(ctx, INVALID, "%s: desc->path (%s) is not a regular file", fn, path);
    }
    if ((uint64_t)size.QuadPart > SIZE_MAX) {
        CloseHandle(file);
        return vkmha__fail(ctx, INVALID, "%s: desc->path (%s) is too large to map", fn, path);
    }
    m->size = (size_t)size.QuadPart;
    /* An empty file cannot be mapped (and needs no mapping): the parser
     * refuses it with its own message, as on POSIX. */
    if (m->size > 0) {
        HANDLE section = CreateFileMappingA(file, NULL, PAGE_READONLY, 0, 0, NULL);
        void *p = section ? MapViewOfFile(section, FILE_MAP_READ, 0, 0, 0) : NULL;
        DWORD e = GetLastError();
        if (section)
            CloseHandle(section);
        if (!p) {
            CloseHandle(file);
            m->size = 0;
            return vkmha__fail(ctx,
                               e == ERROR_NOT_ENOUGH_MEMORY || e == ERROR_COMMITMENT_LIMIT
                                   ? VKMHA_ERROR_OUT_OF_HOST_MEMORY
                                   : INVALID,
                               "%s: cannot map desc->path (%s): %s", fn, path,
                               vkmha__win_error_text(e, err, sizeof err));
        }
        m->bytes = m->owned = p;
    }
    CloseHandle(file);
    return VKMHA_SUCCESS;
#endif
}

static void unmap_file(vkmha_context *ctx, mapping *m)
{
#ifndef _WIN32
    (void)ctx;
    if (m->owned)
        munmap(m->owned, m->size);
#else
    (void)ctx;
    if (m->owned)
        UnmapViewOfFile(m->owned);
#endif
    memset(m, 0, sizeof *m);
}

VKMHA_API vkmha_status vkmha_mha_create_from_safetensors(vkmha_context *ctx,
                                                         const vkmha_safetensors_desc *desc,
                                                         vkmha_mha **out)
{
    const char *fn = "vkmha_mha_create_from_safetensors";
    char why[512];
    mapping map = {0};
    st_file file = {0};
    st_layer L;
    float *converted[ST_WEIGHT_COUNT] = {0};
    const float *w[ST_WEIGHT_COUNT] = {0};
    uint8_t *quantized[4] = {NULL, NULL, NULL, NULL};
    vkmha_status st;
    if (out)
        *out = NULL;
    if (!ctx)
        return INVALID;
    vkmha__begin_call(ctx, fn);
    if (!out)
        return vkmha__fail(ctx, INVALID, "%s: out is NULL", fn);
    if (!desc)
        return vkmha__fail(ctx, INVALID, "%s: desc is NULL", fn);
    if (!desc->path == !desc->data)
        return vkmha__fail(ctx, INVALID, "%s: %s", fn,
                           desc->path ? "desc->path and desc->data are both set (one of them)"
                                      : "desc->path and desc->data are both NULL (one is required)");
    if (desc->norm_prefix && !desc->post_norm)
        return vkmha__fail(ctx, INVALID, "%s: desc->norm_prefix is set but desc->post_norm is false",
                           fn);
    const char *source = desc->path ? desc->path : "desc->data";
    if (desc->path) {
        if ((st = map_file(ctx, fn, desc->path, &map)))
            return st;
    } else {
        map.bytes = desc->data;
        map.size = desc->size;
    }
    if ((st = st_parse(&ctx->allocator, map.bytes, map.size, &file, why, sizeof why)) ||
        (st = st_find_layer(&file, desc->prefix, desc->norm_prefix, desc->n_head,
                            desc->n_kv_head, &L, why, sizeof why))) {
        vkmha__fail(ctx, st, "%s: %s: %s", fn, source, why);
        goto done;
    }
    for (int i = 0; i < ST_WEIGHT_COUNT; i++) {
        const st_slice *s = &L.w[i];
        uint64_t bytes;
        if (!s->t || (w[i] = st_slice_f32(s)))
            continue;
        if ((st = vkmha__check_count(ctx, fn, "a tensor converted to fp32", s->count,
                                     sizeof(float), &bytes)))
            goto done;
        if (!(converted[i] = vkmha__alloc(ctx, (size_t)bytes))) {
            st = vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
            goto done;
        }
        st_slice_to_f32(s, converted[i]);
        w[i] = converted[i];
    }
    vkmha_mha_desc md;
    memset(&md, 0, sizeof md);
    md.d_model = L.d_model;
    md.n_head = L.n_head;
    md.n_kv_head = L.n_kv_head;
    md.d_k = L.d_k;
    md.d_v = L.d_v;
    md.kdim = L.kdim;
    md.vdim = L.vdim;
    md.scale = desc->scale;
    md.w_q = w[ST_W_Q], md.w_k = w[ST_W_K], md.w_v = w[ST_W_V], md.w_o = w[ST_W_O];
    md.b_q = w[ST_B_Q], md.b_k = w[ST_B_K], md.b_v = w[ST_B_V], md.b_o = w[ST_B_O];
    md.post_norm = desc->post_norm;
    md.norm_gamma = w[ST_GAMMA];
    md.norm_beta = w[ST_BETA];
    md.norm_eps = desc->norm_eps;
    /* The fp32 values (exact for F16 and BF16 tensors) are rounded to the
     * storage dtype by the layer: a tensor stored in its own 16-bit dtype
     * keeps its bits. */
    md.weight_dtype = VKMHA_DTYPE_F32;
    md.storage_dtype = desc->storage_dtype;
    md.head_begin = desc->head_begin;
    md.head_end = desc->head_end;
    md.weight_quant = desc->weight_quant; /* a float file's, checked by the layer */
    md.weight_group_size = desc->weight_group_size;
    if (L.group && ((desc->weight_quant && desc->weight_quant != L.quant) ||
                    (desc->weight_group_size && desc->weight_group_size != L.group))) {
        st = vkmha__fail(ctx, INVALID, "%s: %s: desc->%s (%u) differs from the file's "
                         "quantized projections (%s, groups of %u)", fn, source,
                         desc->weight_quant && desc->weight_quant != L.quant
                             ? "weight_quant" : "weight_group_size",
                         desc->weight_quant && desc->weight_quant != L.quant
                             ? desc->weight_quant : desc->weight_group_size,
                         vkmha__quant_name(L.quant), L.group);
        goto done;
    }
    if (L.group) { /* GPTQ's or vkmha's layout: the bytes, given quantized */
        md.weight_quant = L.quant;
        md.weight_group_size = L.group;
        md.weights_quantized = true;
        const void **mw[4] = {&md.w_q, &md.w_k, &md.w_v, &md.w_o};
        for (int i = 0; i < 4; i++) {
            const vkmha_quant_desc q = vkmha__weight_quant(&md, i);
            const vkmha_quant_layout l = vkmha__quant_layout(&q);
            if (!(quantized[i] = vkmha__alloc(ctx, (size_t)l.bytes))) {
                st = vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                                 fn);
                goto done;
            }
            if ((st = st_quant_bytes(&L, i, &q, &l, quantized[i], why, sizeof why))) {
                vkmha__fail(ctx, st, "%s: %s: %s", fn, source, why);
                goto done;
            }
            *mw[i] = quantized[i];
        }
    }
    st = vkmha__mha_create(ctx, &md, out); /* messages keep this function's name */
done:
    for (int i = 0; i < 4; i++)
        vkmha__free(ctx, quantized[i]);
    for (int i = 0; i < ST_WEIGHT_COUNT; i++)
        vkmha__free(ctx, converted[i]);
    st_free(&ctx->allocator, &file);
    if (desc->path)
        unmap_file(ctx, &map);
    return st;
}
