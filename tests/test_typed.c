/* The per-binding dtype encoding and the shaders' typed access helpers
 * (shaders/typed.glsl) round-trip every element width: 32-bit (F32), 16-bit
 * (F16, BF16), 8-bit (VK_DTYPE_I8) and 4-bit (VK_DTYPE_U4, two per byte),
 * on every pipeline variant that uses them. (U8 shares the 8-bit helpers
 * but binds as 0: a U8 view is a mask, which mask.glsl reads as bytes, so
 * vk_view_dtypes leaves its slot F32 and mask dispatches keep their
 * pipelines.)
 *
 *   - The encoding (host): VK_DT / VK_DT_OF give back each of the 16 values
 *     of each of the VK_DT_SLOTS slots with every other slot filled, and
 *     vk_view_dtypes encodes a dispatch's views so.
 *   - The helpers (device): split heads x -> y, then merge y -> z, each
 *     element read with ld_x and written with st_y (heads.comp) or through
 *     ld4 / st4 (heads_cpu.comp), on views at byte offsets inside one arena
 *     buffer: y must be the host's permutation of x and z must be x, bit for
 *     bit, and every other bit of the arena (the neighbours of y's and z's
 *     first and last elements in their words, for narrow elements their
 *     other bytes or nibbles) must keep its sentinel. The shape, 2 x 5 x 3
 *     heads of 7, is no multiple of a word's elements.
 *   - The variants: the GPU kernel (heads.comp, VKMHA_ROW_KERNELS=gpu) and
 *     the CPU-shaped one (heads_cpu.comp), each with native 16-bit storage
 *     and packed, each with views on descriptor boundaries and views past
 *     them (the misaligned pipeline variant: the misalign bytes in elements
 *     of each width, half bytes for 4-bit elements).
 * No tolerance: every comparison is exact. */
#include "util.h"

#include "internal.h"
#include "vk_internal.h"

#include <stdlib.h>
#include <string.h>

enum { B = 2, L = 5, H = 3, D = 7, N = B * L * H * D };

static const struct {
    uint32_t dt;
    const char *name;
} types[] = {
    {VKMHA_DTYPE_F32, "f32"}, {VKMHA_DTYPE_F16, "f16"}, {VKMHA_DTYPE_BF16, "bf16"},
    {VK_DTYPE_I8, "i8"},      {VK_DTYPE_U4, "u4"},
};

/* Element i of a packed array of `bits`-bit elements. */
static uint32_t get_bits(const uint8_t *p, uint32_t bits, size_t i)
{
    uint32_t v = 0;
    if (bits == 4)
        return (p[i / 2] >> (4 * (i % 2))) & 0xfu;
    memcpy(&v, p + i * (bits / 8), bits / 8);
    return v;
}

static void set_bits(uint8_t *p, uint32_t bits, size_t i, uint32_t v)
{
    if (bits == 4) {
        p[i / 2] = (uint8_t)((p[i / 2] & ~(0xfu << (4 * (i % 2)))) | (v & 0xfu) << (4 * (i % 2)));
        return;
    }
    memcpy(p + i * (bits / 8), &v, bits / 8);
}

/* A random element of dt that survives its decoding to fp32 and encoding
 * back unchanged: a finite value of fp32 or a 16-bit format (NaN payloads
 * need not survive; fp32 and bf16 subnormals, fp32 subnormals in the
 * shader, may be flushed by a device), any integer of the narrow ones. */
static uint32_t random_element(t_rng *r, uint32_t dt)
{
    for (;;) {
        const uint32_t v = (uint32_t)t_next(r);
        switch (dt) {
        case VKMHA_DTYPE_F32:
            if ((v & 0x7f800000u) != 0x7f800000u && (v & 0x7f800000u) != 0)
                return v;
            break;
        case VKMHA_DTYPE_F16:
            if ((v & 0x7c00u) != 0x7c00u)
                return v & 0xffffu;
            break;
        case VKMHA_DTYPE_BF16:
            if ((v & 0x7f80u) != 0x7f80u && (v & 0x7f80u) != 0)
                return v & 0xffffu;
            break;
        case VK_DTYPE_U4:
            return v & 0xfu;
        default:
            return v & 0xffu;
        }
    }
}

/* The host's split heads of x (element indices): y[b][h][l][d] =
 * x[b][l][h][d]. */
static size_t split_index(size_t y)
{
    const size_t d = y % D, l = y / D % L, h = y / D / L % H, b = y / D / L / H;
    return ((b * L + l) * H + h) * D + d;
}

/* One case: x at x_at, y at y_at, z at z_at (bytes) of one arena. */
static void round_trip(vkmha_context *gpu, const char *variant, uint32_t dt, const char *dname,
                       VkDeviceSize x_at, VkDeviceSize y_at, VkDeviceSize z_at, t_rng *r)
{
    vk_state *vk = gpu->vk;
    const uint32_t bits = vk_dtype_bits(dt);
    const size_t bytes = (N * (size_t)bits + 7) / 8, arena_bytes = 4096;
    uint8_t *want = malloc(arena_bytes), *got = malloc(arena_bytes), *upload = malloc(arena_bytes);
    if (!want || !got || !upload) {
        t_report(false, "%s %s: out of host memory", variant, dname);
        free(want), free(got), free(upload);
        return;
    }
    for (size_t i = 0; i < arena_bytes; i++) /* the sentinel, the same each run */
        want[i] = (uint8_t)(0xa5 ^ (i * 29));
    uint8_t *arena_x = want + x_at, *arena_y = want + y_at, *arena_z = want + z_at;
    for (size_t i = 0; i < N; i++)
        set_bits(arena_x, bits, i, random_element(r, dt));
    memcpy(upload, want, arena_bytes); /* x and the sentinel everywhere else */
    for (size_t i = 0; i < N; i++) {
        set_bits(arena_y, bits, i, get_bits(arena_x, bits, split_index(i)));
        set_bits(arena_z, bits, i, get_bits(arena_x, bits, i));
    }
    vk_buffer arena = {0};
    const heads_shape hs = {.batch = B, .len = L, .heads = H, .head_dim = D};
    bool ok = vk_buffer_create(vk, arena_bytes, false, false, "arena", &arena) == VKMHA_SUCCESS;
    vkmha__begin_call(gpu, "typed round trip");
    if (ok && vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL) == VKMHA_SUCCESS) {
        const vk_view x = {.buf = &arena, .offset = x_at, .dtype = dt},
                      y = {.buf = &arena, .offset = y_at, .dtype = dt},
                      z = {.buf = &arena, .offset = z_at, .dtype = dt};
        vk_site *site = &vk->desc.op_sites.sites[OPSITE_HEADS];
        vkmha_status st = vk_upload(vk, &arena, 0, upload, arena_bytes);
        if (!st) {
            vk_barrier(vk);
            st = vk_record_heads(vk, site, &hs, true, x, y);
        }
        /* The merge reads what the split wrote: its own site (a site is
         * used once per command buffer), after a barrier. */
        vk_site *more = NULL;
        if (!st) {
            vk_barrier(vk);
            more = vk_window_sites_take(vk, KIND_HEADS, 1);
            st = more ? vk_record_heads(vk, more, &hs, false, y, z) : VKMHA_ERROR_VULKAN;
        }
        if (!st) {
            vk_barrier(vk);
            st = vk_download(vk, &arena, got, arena_bytes, 1, arena_bytes, 1, arena_bytes);
        }
        ok = vk_exec_end(vk, st, NULL) == VKMHA_SUCCESS;
    } else {
        ok = false;
    }
    size_t bad = arena_bytes;
    for (size_t i = 0; ok && i < arena_bytes && bad == arena_bytes; i++)
        if (got[i] != want[i])
            bad = i;
    if (bad != arena_bytes)
        t_diag("%s %s: arena byte %zu is 0x%02x, want 0x%02x (x at %llu, y at %llu, z at %llu)",
               variant, dname, bad, got[bad], want[bad], (unsigned long long)x_at,
               (unsigned long long)y_at, (unsigned long long)z_at);
    t_report(ok && bad == arena_bytes,
             "%s: %s split and merged back exactly, x at byte %llu, y at %llu, z at %llu, "
             "the bits around them kept (%zu bytes each)",
             variant, dname, (unsigned long long)x_at, (unsigned long long)y_at,
             (unsigned long long)z_at, bytes);
    vk_buffer_destroy(vk, &arena);
    free(want), free(got), free(upload);
}

static void encoding(void)
{
    bool ok = true;
    for (uint32_t slot = 0; slot < VK_DT_SLOTS; slot++)
        for (uint32_t v = 0; v < 16; v++) {
            uint32_t word = VK_DT(slot, v);
            for (uint32_t o = 0; o < VK_DT_SLOTS; o++) /* every other slot 15 - v */
                if (o != slot)
                    word |= VK_DT(o, 15u - v);
            ok = ok && VK_DT_OF(word, slot) == v;
            for (uint32_t o = 0; o < VK_DT_SLOTS; o++)
                ok = ok && (o == slot || VK_DT_OF(word, o) == 15u - v);
        }
    t_report(ok, "VK_DT / VK_DT_OF: each of 16 values in each of %u slots read back, the "
                 "other slots' values kept", VK_DT_SLOTS);
    vk_buffer dummy = {.buf = (VkBuffer)(uintptr_t)1};
    static const uint32_t dts[] = {VKMHA_DTYPE_F32, VKMHA_DTYPE_F16, VKMHA_DTYPE_BF16,
                                   VKMHA_DTYPE_U8, VK_DTYPE_I8, VK_DTYPE_U4};
    vk_view views[VK_MAX_BINDINGS];
    for (uint32_t i = 0; i < VK_MAX_BINDINGS; i++)
        views[i] = (vk_view){.buf = &dummy, .dtype = dts[(i + 1) % VKMHA_ARRAY_LEN(dts)]};
    uint32_t want = 0;
    for (uint32_t i = 0; i < VK_DT_SLOTS; i++)
        if (views[i].dtype != VKMHA_DTYPE_U8) /* masks: read as bytes, no dtype */
            want |= VK_DT(i, views[i].dtype);
    t_report(vk_view_dtypes(views, VK_MAX_BINDINGS) == want,
             "vk_view_dtypes: 0x%08x for views of every width in the first %u slots (U8 masks "
             "0, views past the slots ignored)",
             vk_view_dtypes(views, VK_MAX_BINDINGS), VK_DT_SLOTS);
}

int main(void)
{
    t_rng r = {20261127};
    encoding();
    static const struct {
        const char *tag, *row_kernels;
        bool packed;
    } variants[] = {
        {"CPU-shaped kernel, native 16-bit", NULL, false},
        {"CPU-shaped kernel, packed 16-bit", NULL, true},
        {"GPU kernel, native 16-bit", "gpu", false},
        {"GPU kernel, packed 16-bit", "gpu", true},
    };
    for (size_t v = 0; v < VKMHA_ARRAY_LEN(variants); v++) {
        if (variants[v].row_kernels)
            setenv("VKMHA_ROW_KERNELS", variants[v].row_kernels, 1);
        vkmha_debug_options dbg = {.no_native_16bit = variants[v].packed};
        vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &dbg, NULL, NULL);
        unsetenv("VKMHA_ROW_KERNELS");
        vk_state *vk = gpu->vk;
        const bool cpu_shaped = vk->tuning.cpu_rows_wg != 0;
        char tag[128];
        snprintf(tag, sizeof tag, "%s (%s kernel ran, %s)", variants[v].tag,
                 cpu_shaped ? "heads_cpu" : "heads", vk->tuning.native16 ? "native16" : "packed");
        const VkDeviceSize align = vk->min_storage_offset_align;
        vkmha__begin_call(gpu, "typed round trip");
        if (vk_window_sites_reserve(vk, KIND_HEADS, 1) != VKMHA_SUCCESS)
            t_report(false, "%s: a second heads site", tag);
        for (size_t d = 0; d < VKMHA_ARRAY_LEN(types); d++) {
            const uint32_t dt = types[d].dt, bits = vk_dtype_bits(dt);
            /* On descriptor boundaries, then an element (a byte for 4-bit
             * elements) past them for x and z, three for y. */
            const VkDeviceSize e = bits >= 8 ? bits / 8 : 1;
            round_trip(gpu, tag, dt, types[d].name, 0, 1024, 2048, &r);
            round_trip(gpu, tag, dt, types[d].name, align + e, 1024 + 3 * e, 2048 + e, &r);
        }
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
    }
    return t_finish();
}
