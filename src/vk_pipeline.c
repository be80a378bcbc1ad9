/* The pipeline store: pipelines by key (a kernel table row's pipe and a
 * dispatch's dtypes: src/vk_kernels.h), created on first use or together on
 * several threads before a plan is recorded; the introspection of the
 * kernels (vkmha_context_get_kernels, driver statistics). The SPIR-V and
 * specialization of each come from the kernel table. */
#include "vk_resources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vkmha_status vk_pipelines_init(vk_state *vk, const vk_tuning_desc *tuning)
{
    vkmha_status st;
    if ((st = vk_tuning_init(vk, tuning)) || (st = vk_descriptors_init(vk)))
        return st;
    vk->pipelines.n_pipes = vk_pipe_count();
    if (!(vk->pipelines.pipes = vkmha__calloc(vk->ctx, vk->pipelines.n_pipes, sizeof *vk->pipelines.pipes)))
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                           "vkmha_context_create: out of host memory");
    return VKMHA_SUCCESS;
}

void vk_pipelines_forget(vk_state *vk)
{
    for (uint32_t i = 0; i < vk->pipelines.n_pipes; i++)
        if (vk->pipelines.pipes[i]) {
            vk->vkd.vkDestroyPipeline(vk->device, vk->pipelines.pipes[i], vk->vkalloc);
            vk->pipelines.pipes[i] = VK_NULL_HANDLE;
        }
    for (uint32_t i = 0; i < vk->pipelines.n_typed_pipes; i++)
        if (vk->pipelines.typed_pipes[i].pipeline)
            vk->vkd.vkDestroyPipeline(vk->device, vk->pipelines.typed_pipes[i].pipeline, vk->vkalloc);
    vk->pipelines.n_typed_pipes = 0;
}

void vk_pipelines_destroy(vk_state *vk)
{
    vk_descriptors_destroy(vk);
    if (vk->pipelines.pipes)
        vk_pipelines_forget(vk);
    vkmha__free(vk->ctx, vk->pipelines.pipes);
    vk->pipelines.pipes = NULL;
    vk->pipelines.n_pipes = 0;
    vkmha__free(vk->ctx, vk->pipelines.typed_pipes);
    vk->pipelines.typed_pipes = NULL;
    vk->pipelines.n_typed_pipes = vk->pipelines.cap_typed_pipes = 0;
    vkmha__free(vk->ctx, vk->pipelines.want);
    vk->pipelines.want = NULL;
    vk->pipelines.n_want = vk->pipelines.cap_want = 0;
}

static bool same_key(const vk_pipe_key *a, const vk_pipe_key *b)
{
    return a->pipe.kernel == b->pipe.kernel && a->pipe.tile == b->pipe.tile &&
           a->pipe.vec == b->pipe.vec && a->pipe.cls == b->pipe.cls && a->dtypes == b->dtypes &&
           a->variant == b->variant;
}

/* Where the pipeline of key k is kept, if anywhere: vk->pipelines.pipes for all-F32
 * and no variant, else its entry of vk->pipelines.typed_pipes (NULL: none yet). */
static VkPipeline *slot_of(const vk_state *vk, const vk_pipe_key *k)
{
    const uint32_t index = vk_pipe_index(k->pipe);
    if (index >= vk->pipelines.n_pipes)
        return NULL; /* off its row: vk_dispatch refused it */
    if (k->dtypes == 0 && k->variant == 0)
        return (VkPipeline *)&vk->pipelines.pipes[index];
    for (uint32_t i = 0; i < vk->pipelines.n_typed_pipes; i++)
        if (same_key(&vk->pipelines.typed_pipes[i].key, k))
            return &vk->pipelines.typed_pipes[i].pipeline;
    return NULL;
}

/* slot_of, adding a null entry of vk->pipelines.typed_pipes when absent. NULL when out
 * of host memory. */
static VkPipeline *pipe_slot(vk_state *vk, const vk_pipe_key *k)
{
    VkPipeline *slot = slot_of(vk, k);
    if (slot)
        return slot;
    if (vk->pipelines.n_typed_pipes == vk->pipelines.cap_typed_pipes) {
        uint32_t cap = vk->pipelines.cap_typed_pipes ? 2 * vk->pipelines.cap_typed_pipes : 16;
        void *p = vkmha__realloc(vk->ctx, vk->pipelines.typed_pipes,
                                 vk->pipelines.n_typed_pipes * sizeof *vk->pipelines.typed_pipes,
                                 cap * sizeof *vk->pipelines.typed_pipes);
        if (!p)
            return NULL;
        vk->pipelines.typed_pipes = p;
        vk->pipelines.cap_typed_pipes = cap;
    }
    struct vk_typed_pipe *t = &vk->pipelines.typed_pipes[vk->pipelines.n_typed_pipes++];
    *t = (struct vk_typed_pipe){.key = *k, .pipeline = VK_NULL_HANDLE};
    return &t->pipeline;
}

/* Creates the pipeline of key k into *out; touches nothing of vk but the
 * device, so that several threads may run it at once (vk_pipelines_build).
 * *what: the call that failed. */
static VkResult create_pipeline(const vk_state *vk, const vk_pipe_key *k, VkPipeline *out,
                                const char **what)
{
    vk_spec s;
    vk_pipe_spec(vk, k->pipe, k->dtypes, &s);
    const vk_spirv_code *code = &vk_spirv[s.spv];
    const uint32_t n_spec = s.n;
    uint32_t spec[VK_MAX_SPEC + 2];
    memcpy(spec, s.value, sizeof s.value);

    /* The shape constants by constant_id, then the dtypes (VK_SPEC_DTYPES)
     * and the variant (VK_SPEC_VARIANT). */
    VkSpecializationMapEntry entries[VK_MAX_SPEC + 2];
    for (uint32_t i = 0; i < n_spec; i++)
        entries[i] = (VkSpecializationMapEntry){i, i * 4, 4};
    entries[n_spec] = (VkSpecializationMapEntry){VK_SPEC_DTYPES, n_spec * 4, 4};
    entries[n_spec + 1] = (VkSpecializationMapEntry){VK_SPEC_VARIANT, (n_spec + 1) * 4, 4};
    spec[n_spec] = k->dtypes;
    spec[n_spec + 1] = k->variant;
    VkSpecializationInfo si = {n_spec + 2, entries, (n_spec + 2) * 4, spec};

    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    mi.codeSize = vk->tuning.native16 ? code->size16 : code->size;
    mi.pCode = vk->tuning.native16 ? code->code16 : code->code;
    VkShaderModule module;
    *what = "vkCreateShaderModule";
    VkResult r = vk->vkd.vkCreateShaderModule(vk->device, &mi, vk->vkalloc, &module);
    if (r != VK_SUCCESS)
        return r;
    VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage = (VkPipelineShaderStageCreateInfo){.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = &si;
    if (s.full_subgroups)
        ci.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
    /* A compile-only context reads each pipeline's register and memory use
     * back (vk_pipeline_statistics). */
    ci.flags = vk->compile_only ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0;
    ci.layout = vk->desc.pipe_layouts[vk_pipe_kind(k->pipe)];
    *what = "vkCreateComputePipelines";
    r = vk->vkd.vkCreateComputePipelines(vk->device, vk->cache.cache, 1, &ci, vk->vkalloc,
                                         out);
    vk->vkd.vkDestroyShaderModule(vk->device, module, vk->vkalloc);
    if (r != VK_SUCCESS)
        *out = VK_NULL_HANDLE;
    return r;
}

vkmha_status vk_pipeline_get(vk_state *vk, const vk_pipe_key *k, VkPipeline *out)
{
    VkPipeline *slot = pipe_slot(vk, k);
    if (!slot)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    if (!*slot) {
        const char *what;
        const VkResult r = create_pipeline(vk, k, slot, &what);
        if (r != VK_SUCCESS)
            return vk_fail(vk, r, what);
        vk->pipelines.created++;
    }
    *out = *slot;
    return VKMHA_SUCCESS;
}

VkPipeline vk_pipeline_find(const vk_state *vk, const vk_pipe_key *k)
{
    const VkPipeline *slot = slot_of(vk, k);
    return slot ? *slot : VK_NULL_HANDLE;
}

vkmha_status vk_pipeline_want(vk_state *vk, const vk_pipe_key *k)
{
    for (uint32_t i = 0; i < vk->pipelines.n_want; i++)
        if (same_key(&vk->pipelines.want[i], k))
            return VKMHA_SUCCESS;
    if (vk->pipelines.n_want == vk->pipelines.cap_want) {
        const uint32_t cap = vk->pipelines.cap_want ? 2 * vk->pipelines.cap_want : 16;
        void *p = vkmha__realloc(vk->ctx, vk->pipelines.want, vk->pipelines.n_want * sizeof *vk->pipelines.want,
                                 cap * sizeof *vk->pipelines.want);
        if (!p)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "%s: out of host memory", vk->ctx->call);
        vk->pipelines.want = p;
        vk->pipelines.cap_want = cap;
    }
    vk->pipelines.want[vk->pipelines.n_want++] = *k;
    return VKMHA_SUCCESS;
}

/* ---- creating pipelines on several threads -------------------------------- */

/* One thread's share of vk_pipelines_build: jobs first, first + step, ... */
typedef struct build_share {
    const vk_state *vk;
    const vk_pipe_key *keys;
    VkPipeline *const *slots;
    VkResult *results;
    const char **whats;
    uint32_t n, first, step;
} build_share;

static void build_jobs(const build_share *b)
{
    for (uint32_t i = b->first; i < b->n; i += b->step)
        b->results[i] =
            create_pipeline(b->vk, &b->keys[i], b->slots[i], &b->whats[i]);
}

#if defined(_WIN32)
#include <windows.h>
typedef HANDLE build_thread;
static DWORD WINAPI build_main(LPVOID arg)
{
    build_jobs(arg);
    return 0;
}
static bool build_start(build_thread *t, build_share *b)
{
    *t = CreateThread(NULL, 0, build_main, b, 0, NULL);
    return *t != NULL;
}
static void build_join(build_thread t)
{
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
}
static uint32_t cpu_count(void)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwNumberOfProcessors;
}
#else
#include <pthread.h>
#include <unistd.h>
typedef pthread_t build_thread;
static void *build_main(void *arg)
{
    build_jobs(arg);
    return NULL;
}
static bool build_start(build_thread *t, build_share *b)
{
    return pthread_create(t, NULL, build_main, b) == 0;
}
static void build_join(build_thread t)
{
    pthread_join(t, NULL);
}
static uint32_t cpu_count(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}
#endif

/* Threads for creating n pipelines: one per CPU up to VK_BUILD_THREADS_MAX
 * (VKMHA_PIPELINE_THREADS lowers it; 1: the calling thread only); the
 * calling thread alone with VKMHA_CONTEXT_SINGLE_THREAD or when the
 * application passed VkAllocationCallbacks (vkmha calls them on the thread
 * of the vkmha call only). */
static uint32_t build_threads(const vk_state *vk, uint32_t n)
{
    if (vk->single_thread || vk->vkalloc || n < 2)
        return 1;
    uint32_t t = cpu_count();
    const char *env = getenv("VKMHA_PIPELINE_THREADS");
    if (env && *env) {
        const long e = strtol(env, NULL, 10);
        t = e >= 1 && (uint64_t)e < t ? (uint32_t)e : t;
    }
    t = t < VK_BUILD_THREADS_MAX ? t : VK_BUILD_THREADS_MAX;
    return t < n ? t : n;
}

vkmha_status vk_pipelines_build(vk_state *vk)
{
    const uint32_t n_want = vk->pipelines.n_want;
    vk->pipelines.n_want = 0;
    /* The slots first (adding typed ones may move the others), then the
     * missing ones' pointers. */
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_want; i++) {
        const VkPipeline *slot = pipe_slot(vk, &vk->pipelines.want[i]);
        if (!slot)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "%s: out of host memory", vk->ctx->call);
        if (!*slot)
            vk->pipelines.want[n++] = vk->pipelines.want[i];
    }
    if (!n)
        return VKMHA_SUCCESS;
    VkPipeline **slots = vkmha__alloc(vk->ctx, n * (sizeof *slots + sizeof(VkResult) +
                                                    sizeof(const char *)));
    if (!slots)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    const char **whats = (const char **)(slots + n);
    VkResult *results = (VkResult *)(whats + n);
    for (uint32_t i = 0; i < n; i++)
        slots[i] = pipe_slot(vk, &vk->pipelines.want[i]);
    const uint32_t threads = build_threads(vk, n);
    build_share shares[VK_BUILD_THREADS_MAX];
    build_thread ids[VK_BUILD_THREADS_MAX];
    bool started[VK_BUILD_THREADS_MAX] = {false};
    for (uint32_t t = 0; t < threads; t++)
        shares[t] = (build_share){vk, vk->pipelines.want, slots, results, whats, n, t, threads};
    /* Shares 1.. on threads of their own, share 0 (and any share whose
     * thread did not start) here. */
    for (uint32_t t = 1; t < threads; t++)
        started[t] = build_start(&ids[t], &shares[t]);
    build_jobs(&shares[0]);
    for (uint32_t t = 1; t < threads; t++) {
        if (started[t])
            build_join(ids[t]);
        else
            build_jobs(&shares[t]);
    }
    vkmha_status st = VKMHA_SUCCESS;
    for (uint32_t i = 0; i < n; i++) {
        if (results[i] == VK_SUCCESS)
            vk->pipelines.created++;
        else if (!st)
            st = vk_fail(vk, results[i], whats[i]);
    }
    vkmha__free(vk->ctx, slots);
    return st;
}

vkmha_status vk_pipelines_create_all(vk_state *vk)
{
    vkmha_status st;
    /* The variant every dispatch of the context takes (vk_dispatch): with
     * the arm64 LLVM 15 workaround, the exact fp16 one. */
    const uint32_t variant = vk->exact_f16_texels ? VK_VARIANT_EXACT_F16 : 0;
    for (uint32_t i = 0; i < vk->pipelines.n_pipes; i++)
        if (vk_pipe_available(vk, vk_pipe_at(i)) &&
            (st = vk_pipeline_want(vk, &(vk_pipe_key){.pipe = vk_pipe_at(i), .variant = variant})))
            return st;
    return vk_pipelines_build(vk);
}

void vk_pipe_info_get(const vk_state *vk, vk_pipe pipe, vk_pipe_info *out)
{
    memset(out, 0, sizeof *out);
    vk_pipe_name(pipe, out->name, sizeof out->name);
    out->op = vk_kernel_defs[pipe.kernel].op;
    out->available = vk_pipe_available(vk, pipe);
    if (!out->available)
        return;
    vk_spec s;
    vk_pipe_spec(vk, pipe, 0, &s);
    const vk_spirv_code *code = &vk_spirv[s.spv];
    out->shader = code->name;
    out->n_spec = s.n;
    for (uint32_t i = 0; i < s.n; i++) {
        out->spec[i] = s.value[i];
        out->spec_names[i] = code->spec_names[i];
    }
    out->workgroup_size = s.value[0];
    /* Within the device's maxComputeSharedMemorySize, which is 32 bits. */
    out->shared_bytes = (uint32_t)s.shared_bytes;
}

_Static_assert(VK_MAX_SPEC <= VKMHA_KERNEL_MAX_PARAMS,
               "vkmha_kernel_info.params holds every specialization constant");

/* Copies a string into a fixed-size field, NUL-terminated (NULL: ""). */
static void copy_name(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

void vk_kernels(const vkmha_context *ctx, uint32_t *count, vkmha_kernel_info *out)
{
    const uint32_t n = vk_pipe_count();
    for (uint32_t i = 0; i < n && i < *count; i++) {
        vk_pipe_info pi;
        vk_pipe_info_get(ctx->vk, vk_pipe_at(i), &pi);
        vkmha_kernel_info *k = &out[i];
        memset(k, 0, sizeof *k);
        copy_name(k->name, sizeof k->name, pi.name);
        copy_name(k->op, sizeof k->op, pi.op);
        k->available = pi.available;
        copy_name(k->shader, sizeof k->shader, pi.shader);
        k->workgroup_size = pi.workgroup_size;
        k->shared_bytes = pi.shared_bytes;
        k->param_count = pi.n_spec;
        for (uint32_t j = 0; j < pi.n_spec; j++) {
            copy_name(k->params[j].name, sizeof k->params[j].name, pi.spec_names[j]);
            k->params[j].value = pi.spec[j];
        }
    }
    *count = n;
}

vkmha_status vk_pipeline_statistics(vk_state *vk, vk_pipe pipe, uint32_t dtypes,
                                    uint32_t variant, uint32_t *subgroup_size,
                                    VkPipelineExecutableStatisticKHR *out, uint32_t *count)
{
    VkPipeline p = VK_NULL_HANDLE;
    vkmha_status st;
    if (!vk->compile_only || !vk->vkd.vkGetPipelineExecutablePropertiesKHR ||
        !vk->vkd.vkGetPipelineExecutableStatisticsKHR)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "pipeline statistics need a compile-only context");
    if (!vk_pipe_available(vk, pipe)) {
        char name[VK_PIPE_NAME_MAX];
        vk_pipe_name(pipe, name, sizeof name);
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "pipeline %s is not used on this device", name);
    }
    if ((st = vk_pipeline_get(vk, &(vk_pipe_key){.pipe = pipe, .dtypes = dtypes,
                                                  .variant = variant},
                              &p)))
        return st;
    /* A compute pipeline has one executable: its compute shader. */
    VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
    pi.pipeline = p;
    VkPipelineExecutablePropertiesKHR props = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
    uint32_t n = 1;
    VkResult r = vk->vkd.vkGetPipelineExecutablePropertiesKHR(vk->device, &pi, &n, &props);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0)
        return vk_fail(vk, r == VK_SUCCESS ? VK_ERROR_UNKNOWN : r,
                       "vkGetPipelineExecutablePropertiesKHR");
    *subgroup_size = props.subgroupSize;
    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = p;
    ei.executableIndex = 0;
    for (uint32_t i = 0; i < *count; i++)
        out[i] = (VkPipelineExecutableStatisticKHR){
            .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    r = vk->vkd.vkGetPipelineExecutableStatisticsKHR(vk->device, &ei, count, out);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return vk_fail(vk, r, "vkGetPipelineExecutableStatisticsKHR");
    return VKMHA_SUCCESS;
}
