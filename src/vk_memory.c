/* Device buffers: creation with the right memory type, the context's growing
 * slot buffers, and size checks against the device's limits. */
#include "vk_resources.h"

int vk_find_memory_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits,
                        VkMemoryPropertyFlags need, VkMemoryPropertyFlags want)
{
    int best = -1, best_score = -1;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if (!(bits & (1u << i)) || (f & need) != need)
            continue;
        int score = 0;
        for (VkMemoryPropertyFlags w = f & want; w; w &= w - 1)
            score++;
        if (score > best_score) {
            best = (int)i;
            best_score = score;
        }
    }
    return best;
}

#include <stdio.h>
#include <string.h>

/* UNSUPPORTED naming `what` when `bytes` exceed the device's `limit`. */
static vkmha_status check_limit(vk_state *vk, uint64_t bytes, uint64_t limit,
                                const char *limit_name, const char *what)
{
    if (bytes > limit)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: %s needs %llu bytes, more than this device's %s (%llu bytes)",
                           vk_call_name(vk), what, (unsigned long long)bytes, limit_name,
                           (unsigned long long)limit);
    return VKMHA_SUCCESS;
}

vkmha_status vk_check_alloc(vk_state *vk, uint64_t bytes, const char *what)
{
    return check_limit(vk, bytes, vk->info.max_allocation_size, "maxMemoryAllocationSize", what);
}

vkmha_status vk_check_size(vk_state *vk, uint64_t bytes, const char *what)
{
    vkmha_status st = check_limit(vk, bytes, vk->info.max_storage_buffer_range,
                                  "maxStorageBufferRange", what);
    return st ? st : vk_check_alloc(vk, bytes, what);
}

bool vk_sparse_tensors(const vk_state *vk)
{
    return vk->sparse && !(vk->tuning.disabled_paths & VKMHA_PATH_SPARSE);
}

/* Why the context makes no sparse tensors, for messages. */
static const char *sparse_why(const vk_state *vk)
{
    return vk->sparse ? "disabled: the self-check found it wrong, or VKMHA_DISABLE_PATHS names it"
                      : vk->sparse_why;
}

uint64_t vk_max_tensor_bytes(const vk_state *vk)
{
    const uint64_t alloc = vk->info.max_allocation_size;
    if (!vk_sparse_tensors(vk) || vk->sparse_space <= alloc)
        return alloc;
    return vk->max_buffer_size < vk->sparse_space ? vk->max_buffer_size : vk->sparse_space;
}

vkmha_status vk_check_tensor(vk_state *vk, uint64_t bytes, const char *what)
{
    const uint64_t alloc = vk->info.max_allocation_size;
    if (bytes <= alloc)
        return VKMHA_SUCCESS;
    if (!vk_sparse_tensors(vk))
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: %s needs %llu bytes, more than this device's "
                           "maxMemoryAllocationSize (%llu bytes), and the context cannot bind "
                           "a buffer to several allocations (sparse binding: %s); tensors of "
                           "fewer rows each can hold it in parts",
                           vk_call_name(vk), what, (unsigned long long)bytes,
                           (unsigned long long)alloc, sparse_why(vk));
    const uint64_t most = vk_max_tensor_bytes(vk);
    if (bytes > most)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: %s needs %llu bytes, more than the %llu bytes this device's "
                           "maxBufferSize and sparseAddressSpaceSize let one buffer hold",
                           vk_call_name(vk), what, (unsigned long long)bytes,
                           (unsigned long long)most);
    if (vk->mem.sparse_bytes > vk->sparse_space - bytes)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: %s needs %llu bytes of sparse address space; the context's "
                           "tensors past maxMemoryAllocationSize hold %llu of this device's "
                           "sparseAddressSpaceSize (%llu bytes)",
                           vk_call_name(vk), what, (unsigned long long)bytes,
                           (unsigned long long)vk->mem.sparse_bytes,
                           (unsigned long long)vk->sparse_space);
    return VKMHA_SUCCESS;
}

/* Bytes of page i of `total` bytes in pages of `page`: page, or less for the
 * last. */
static VkDeviceSize page_bytes(VkDeviceSize total, VkDeviceSize page, uint32_t i)
{
    const VkDeviceSize left = total - (VkDeviceSize)i * page;
    return left < page ? left : page;
}

/* Frees one allocation of `bytes` from memory heap `heap`. */
static void free_memory(vk_state *vk, VkDeviceMemory mem, VkDeviceSize bytes, uint32_t heap)
{
    vk->vkd.vkFreeMemory(vk->device, mem, vk->vkalloc); /* unmaps implicitly */
    vk->mem.memory_bytes -= bytes;
    vk->mem.heap_bytes[heap] -= bytes;
}

void vk_buffer_destroy(vk_state *vk, vk_buffer *b)
{
    if (b->view4)
        vk->vkd.vkDestroyBufferView(vk->device, b->view4, vk->vkalloc);
    if (b->view4h)
        vk->vkd.vkDestroyBufferView(vk->device, b->view4h, vk->vkalloc);
    if (b->view4u)
        vk->vkd.vkDestroyBufferView(vk->device, b->view4u, vk->vkalloc);
    if (b->view1u)
        vk->vkd.vkDestroyBufferView(vk->device, b->view1u, vk->vkalloc);
    if (b->buf)
        vk->vkd.vkDestroyBuffer(vk->device, b->buf, vk->vkalloc);
    if (b->mem)
        free_memory(vk, b->mem, b->alloc_size, b->heap);
    if (b->pages) {
        for (uint32_t i = 0; i < b->n_pages; i++)
            free_memory(vk, b->pages[i], page_bytes(b->alloc_size, b->page_size, i), b->heap);
        vk->mem.sparse_bytes -= b->size;
        vkmha__free(vk->ctx, b->pages);
    }
    memset(b, 0, sizeof *b);
}

/* A buffer of size bytes (whole 32-bit words: packed 16-bit data is read and
 * written a uint at a time, shaders/typed.glsl, also for an odd number of
 * elements), sparse or not, with vkmha's usage; its size is set. */
static vkmha_status create_buffer(vk_state *vk, VkDeviceSize size, bool sparse,
                                  const char *what, vk_buffer *b)
{
    char msg[320];
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.flags = sparse ? VK_BUFFER_CREATE_SPARSE_BINDING_BIT : 0;
    bi.size = size;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT |
               (vk->tuning.matmul_texel ? VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT : 0);
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    snprintf(msg, sizeof msg, "vkCreateBuffer (%s, %llu bytes%s)", what,
             (unsigned long long)size, sparse ? ", sparse" : "");
    VkResult r = vk->vkd.vkCreateBuffer(vk->device, &bi, vk->vkalloc, &b->buf);
    if (r != VK_SUCCESS) {
        b->buf = VK_NULL_HANDLE;
        return vk_fail(vk, r, msg);
    }
    b->size = size;
    return VKMHA_SUCCESS;
}

/* What heap `heap` can still give, where VK_EXT_memory_budget says: its
 * budget for this process less what is in use (this process's allocations
 * included); UINT64_MAX where the device does not say. A device whose
 * memory is the host's (lavapipe, integrated GPUs) reports the host's
 * available memory this way, which can be far below the heap's size. */
static uint64_t budget_left(const vk_state *vk, uint32_t heap)
{
    if (!vk->memory_budget)
        return UINT64_MAX;
    VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 p = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &b};
    vk->vki.GetPhysicalDeviceMemoryProperties2(vk->phys, &p);
    return b.heapUsage[heap] < b.heapBudget[heap] ? b.heapBudget[heap] - b.heapUsage[heap] : 0;
}

/* One allocation of `bytes` of memory type `type` for `what`, counted in the
 * context's memory; never more than its heap holds (its size, lowered by
 * desc->debug->max_device_local_memory) nor more than the heap's budget
 * leaves (a driver that backs device memory with host memory, lavapipe,
 * would grant it and let the host run out instead). */
static vkmha_status allocate(vk_state *vk, uint32_t type, VkDeviceSize bytes, const char *what,
                             VkDeviceMemory *out)
{
    char msg[320];
    const uint32_t heap = vk->mem_props.memoryTypes[type].heapIndex;
    const VkDeviceSize heap_size = vk->mem_props.memoryHeaps[heap].size;
    if (bytes > heap_size || vk->mem.heap_bytes[heap] > heap_size - bytes)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_DEVICE_MEMORY,
                           "%s: %s needs %llu bytes of device memory; the context holds %llu "
                           "of the %llu bytes of memory heap %u",
                           vk_call_name(vk), what, (unsigned long long)bytes,
                           (unsigned long long)vk->mem.heap_bytes[heap],
                           (unsigned long long)heap_size, heap);
    const uint64_t left = budget_left(vk, heap);
    if (bytes > left)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_DEVICE_MEMORY,
                           "%s: %s needs %llu bytes of device memory; the budget of memory "
                           "heap %u (VK_EXT_memory_budget: what this process may still "
                           "allocate from it) leaves %llu; the context holds %llu",
                           vk_call_name(vk), what, (unsigned long long)bytes, heap,
                           (unsigned long long)left, (unsigned long long)vk->mem.heap_bytes[heap]);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = bytes;
    ai.memoryTypeIndex = type;
    /* The heap too: a driver may run out before the heap's size (the
     * memory other processes and the driver hold). */
    snprintf(msg, sizeof msg,
             "vkAllocateMemory (%s, %llu bytes; the context holds %llu of the %llu bytes of "
             "memory heap %u)",
             what, (unsigned long long)bytes, (unsigned long long)vk->mem.heap_bytes[heap],
             (unsigned long long)heap_size, heap);
    /* vkmha_debug_options: fail this allocation as the device would. */
    VkResult r;
    const uint64_t n = ++vk->mem.alloc_calls;
    if (n >= vk->mem.fail_alloc_first && n <= vk->mem.fail_alloc_last)
        r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
    else
        r = vk->vkd.vkAllocateMemory(vk->device, &ai, vk->vkalloc, out);
    if (r != VK_SUCCESS) {
        *out = VK_NULL_HANDLE;
        return vk_fail(vk, r, msg);
    }
    vk->mem.heap_bytes[heap] += bytes;
    vk->mem.memory_bytes += bytes;
    if (vk->mem.memory_bytes > vk->mem.memory_peak_bytes)
        vk->mem.memory_peak_bytes = vk->mem.memory_bytes;
    return VKMHA_SUCCESS;
}

/* The texel views of a working buffer, when the context reads through
 * them (vk_state.matmul_texel). */
static vkmha_status create_views(vk_state *vk, vk_buffer *b)
{
    VkResult r;
    if (!vk->tuning.matmul_texel || b->size < 16)
        return VKMHA_SUCCESS;
    VkBufferViewCreateInfo vi = {.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
    vi.buffer = b->buf;
    vi.format = VK_FORMAT_R32G32B32A32_SFLOAT;
    vi.range = VK_WHOLE_SIZE;
    /* A view covers the whole buffer, so only buffers within
     * maxTexelBufferElements texels get one (16-byte texels here, 8
     * for fp16); the others are read as storage buffers. */
    const bool fits4 = b->size / 16 <= vk->max_texel_elements,
               fits2 = b->size / 8 <= vk->max_texel_elements;
    if (fits4 &&
        (r = vk->vkd.vkCreateBufferView(vk->device, &vi, vk->vkalloc, &b->view4)) != VK_SUCCESS)
        return vk_fail(vk, r, "vkCreateBufferView");
    vi.format = VK_FORMAT_R16G16B16A16_SFLOAT;
    VkBufferViewCreateInfo vu = vi;
    vu.format = VK_FORMAT_R32G32_UINT;
    if (vk->tuning.texel16 && fits2 &&
        ((r = vk->vkd.vkCreateBufferView(vk->device, &vi, vk->vkalloc, &b->view4h)) !=
             VK_SUCCESS ||
         (r = vk->vkd.vkCreateBufferView(vk->device, &vu, vk->vkalloc, &b->view4u)) !=
             VK_SUCCESS))
        return vk_fail(vk, r, "vkCreateBufferView");
    return VKMHA_SUCCESS;
}

vkmha_status vk_buffer_view_words(vk_state *vk, vk_buffer *b)
{
    VkResult r;
    if (b->view1u || !vk->tuning.matmul_texel || b->size < 16 || b->pages || b->offset ||
        b->size / 4 > vk->max_texel_elements)
        return VKMHA_SUCCESS;
    VkBufferViewCreateInfo v1 = {.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
                                 .buffer = b->buf, .format = VK_FORMAT_R32_UINT,
                                 .range = VK_WHOLE_SIZE}; /* read as texels by every device */
    if ((r = vk->vkd.vkCreateBufferView(vk->device, &v1, vk->vkalloc, &b->view1u)) != VK_SUCCESS)
        return vk_fail(vk, r, "vkCreateBufferView");
    return VKMHA_SUCCESS;
}

vkmha_status vk_buffer_create(vk_state *vk, VkDeviceSize size, bool staging, bool download,
                              const char *what, vk_buffer *out)
{
    VkResult r;
    vkmha_status st;
    vk_buffer b = {0};
    uint32_t type = !staging ? vk->mt_work : download ? vk->mt_download : vk->mt_upload;
    bool mapped = staging || vk->work_mapped;

    if ((st = create_buffer(vk, (size + 3) & ~(VkDeviceSize)3, false, what, &b)))
        return st;
    VkMemoryRequirements req;
    vk->vkd.vkGetBufferMemoryRequirements(vk->device, b.buf, &req);
    if (!(req.memoryTypeBits & (1u << type))) {
        vk_buffer_destroy(vk, &b);
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: the chosen memory type %u cannot hold %s", vk_call_name(vk), type,
                           what);
    }
    if ((st = allocate(vk, type, req.size, what, &b.mem))) {
        vk_buffer_destroy(vk, &b);
        return st;
    }
    b.alloc_size = req.size;
    b.heap = vk->mem_props.memoryTypes[type].heapIndex;
    if ((r = vk->vkd.vkBindBufferMemory(vk->device, b.buf, b.mem, 0)) != VK_SUCCESS) {
        vk_buffer_destroy(vk, &b);
        return vk_fail(vk, r, "vkBindBufferMemory");
    }
    if (mapped && (r = vk->vkd.vkMapMemory(vk->device, b.mem, 0, VK_WHOLE_SIZE, 0, &b.map)) !=
                      VK_SUCCESS) {
        vk_buffer_destroy(vk, &b);
        return vk_fail(vk, r, "vkMapMemory");
    }
    if (!staging && (st = create_views(vk, &b))) {
        vk_buffer_destroy(vk, &b);
        return st;
    }
    b.coherent = (vk->mem_props.memoryTypes[type].propertyFlags &
                  VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
    b.id = ++vk->mem.next_buffer_id;
    *out = b;
    return VKMHA_SUCCESS;
}

/* Binds b's pages in order from its start (vkQueueBindSparse on the
 * context's queue), and waits. */
static vkmha_status bind_pages(vk_state *vk, const vk_buffer *b)
{
    VkSparseMemoryBind *binds = vkmha__calloc(vk->ctx, b->n_pages, sizeof *binds);
    if (!binds)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk_call_name(vk));
    for (uint32_t i = 0; i < b->n_pages; i++)
        binds[i] = (VkSparseMemoryBind){.resourceOffset = (VkDeviceSize)i * b->page_size,
                                        .size = page_bytes(b->alloc_size, b->page_size, i),
                                        .memory = b->pages[i]};
    const VkSparseBufferMemoryBindInfo buffer = {
        .buffer = b->buf, .bindCount = b->n_pages, .pBinds = binds};
    const VkBindSparseInfo bind = {.sType = VK_STRUCTURE_TYPE_BIND_SPARSE_INFO,
                                   .bufferBindCount = 1, .pBufferBinds = &buffer};
    const VkResult r = vk_fence_wait(vk, vk_queue_bind_sparse(vk, &bind, vk->fence));
    vkmha__free(vk->ctx, binds);
    return r == VK_SUCCESS ? VKMHA_SUCCESS : vk_fail(vk, r, "vkQueueBindSparse / vkWaitForFences");
}

vkmha_status vk_buffer_create_sparse(vk_state *vk, VkDeviceSize size, VkDeviceSize page_max,
                                     const char *what, vk_buffer *out)
{
    vkmha_status st;
    vk_buffer b = {0};
    if ((st = create_buffer(vk, (size + 3) & ~(VkDeviceSize)3, true, what, &b)))
        return st;
    VkMemoryRequirements req;
    vk->vkd.vkGetBufferMemoryRequirements(vk->device, b.buf, &req);
    /* The working memory type where the sparse buffer may use it, else a
     * device-local one it may (never mapped: copies go through staging). */
    const int local = vk_find_memory_type(&vk->mem_props, req.memoryTypeBits,
                                          VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    const uint32_t type = req.memoryTypeBits >> vk->mt_work & 1 ? vk->mt_work
                          : local >= 0                         ? (uint32_t)local
                                                               : vk->mt_work;
    /* Pages of whole sparse blocks (req.alignment), at least one, each one
     * allocation. */
    const VkDeviceSize alloc = vk->info.max_allocation_size,
                       most = page_max < alloc ? page_max : alloc,
                       page = most < req.alignment ? req.alignment
                                                   : most / req.alignment * req.alignment;
    if (!(req.memoryTypeBits >> type & 1) || page > alloc ||
        (req.size + page - 1) / page > UINT32_MAX) {
        vk_buffer_destroy(vk, &b);
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: %s cannot be bound sparsely: %s, sparse blocks of %llu bytes, "
                           "maxMemoryAllocationSize %llu bytes",
                           vk_call_name(vk), what,
                           req.memoryTypeBits >> type & 1 ? "device-local memory"
                                                          : "no device-local memory type",
                           (unsigned long long)req.alignment,
                           (unsigned long long)vk->info.max_allocation_size);
    }
    const uint32_t n = (uint32_t)((req.size + page - 1) / page);
    if (!(b.pages = vkmha__calloc(vk->ctx, n, sizeof *b.pages))) {
        vk_buffer_destroy(vk, &b);
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk_call_name(vk));
    }
    vk->mem.sparse_bytes += b.size; /* vk_buffer_destroy takes it back */
    b.page_size = page;
    b.heap = vk->mem_props.memoryTypes[type].heapIndex;
    /* n_pages and alloc_size grow with each page: vk_buffer_destroy frees
     * what was allocated when a later page fails. */
    for (uint32_t i = 0; i < n; i++) {
        const VkDeviceSize bytes = page_bytes(req.size, page, i);
        if ((st = allocate(vk, type, bytes, what, &b.pages[i]))) {
            vk_buffer_destroy(vk, &b);
            return st;
        }
        b.n_pages = i + 1;
        b.alloc_size += bytes;
    }
    /* No texel views: Mesa 25.0's lavapipe reads those of a sparse buffer
     * wrong past its first MiB (tests/test_limits.c); the shaders read it as
     * a storage buffer, as one past maxTexelBufferElements. */
    if ((st = bind_pages(vk, &b))) {
        vk_buffer_destroy(vk, &b);
        return st;
    }
    b.id = ++vk->mem.next_buffer_id;
    *out = b;
    return VKMHA_SUCCESS;
}

/* Moves *b onto a list of buffers (retired or deferred), emptying *b. */
static vkmha_status keep(vk_state *vk, vk_buffer **list, uint32_t *n, uint32_t *cap,
                         vk_buffer *b)
{
    if (*n == *cap) {
        const uint32_t c = *cap ? 2 * *cap : 8;
        vk_buffer *r = vkmha__realloc(vk->ctx, *list, *n * sizeof *r, c * sizeof *r);
        if (!r)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "%s: out of host memory", vk_call_name(vk));
        *list = r;
        *cap = c;
    }
    (*list)[(*n)++] = *b;
    memset(b, 0, sizeof *b);
    return VKMHA_SUCCESS;
}

/* Disposes of a scratch buffer being replaced, without waiting for anything:
 * frees *b now when no work may use it; keeps it on the retired list while
 * command buffers the application recorded may (freed by
 * vkmha_context_trim); and while vkmha's own submissions are pending, on the
 * deferred list, freed once they are all done (vk_memory_collect). */
static vkmha_status vk_retire(vk_state *vk, vk_buffer *b)
{
    if (!b->buf)
        return VKMHA_SUCCESS;
    if (vk->mem.recorded)
        return keep(vk, &vk->mem.retired, &vk->mem.n_retired, &vk->mem.cap_retired, b);
    if (!vk_submissions_idle(vk)) {
        vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: a replaced scratch buffer (%llu bytes) is freed once the pending "
                   "submissions are done",
                   vk_call_name(vk), (unsigned long long)b->alloc_size);
        return keep(vk, &vk->mem.deferred, &vk->mem.n_deferred, &vk->mem.cap_deferred, b);
    }
    vk_buffer_destroy(vk, b);
    return VKMHA_SUCCESS;
}

/* Frees and empties a list of buffers. */
static void free_list(vk_state *vk, vk_buffer **list, uint32_t *n, uint32_t *cap)
{
    for (uint32_t i = 0; i < *n; i++)
        vk_buffer_destroy(vk, &(*list)[i]);
    vkmha__free(vk->ctx, *list);
    *list = NULL;
    *n = *cap = 0;
}

void vk_memory_collect(vk_state *vk)
{
    if (vk->mem.n_deferred && vk_submissions_idle(vk))
        free_list(vk, &vk->mem.deferred, &vk->mem.n_deferred, &vk->mem.cap_deferred);
}

void vk_release_retired(vk_state *vk)
{
    free_list(vk, &vk->mem.retired, &vk->mem.n_retired, &vk->mem.cap_retired);
    free_list(vk, &vk->mem.deferred, &vk->mem.n_deferred, &vk->mem.cap_deferred);
    vk->mem.recorded = false;
}

/* Rounds a growing buffer up so that slowly growing shapes do not reallocate
 * every call, without exceeding what the device accepts (the storage range
 * too, unless the buffer is only bound in windows). */
static VkDeviceSize grow_size(const vk_state *vk, VkDeviceSize size, bool windowed)
{
    const VkDeviceSize step = 64 * 1024;
    VkDeviceSize rounded = (size + step - 1) / step * step;
    VkDeviceSize cap = windowed ? vk->info.max_allocation_size : vk_binding_bytes(vk);
    return rounded > cap ? (size > cap ? size : cap) : rounded;
}

/* windowed: the buffer may exceed maxStorageBufferRange (its users bind
 * windows of it: vk_record_matmul). */
static vkmha_status ensure(vk_state *vk, vk_buffer *b, VkDeviceSize size, bool staging,
                           bool download, bool windowed, const char *what)
{
    vkmha_status st;
    if (size == 0)
        size = 4;
    if (b->buf && b->size >= size)
        return VKMHA_SUCCESS;
    /* A plan names the buffers it uses until it runs (vk_exec_begin). */
    if (vk->exec.planning && !staging)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                           "%s: internal error: the %s grows while a call is planned",
                           vk->ctx->call, what);
    if (!staging && (st = windowed ? vk_check_alloc(vk, size, what)
                                   : vk_check_size(vk, size, what)))
        return st;
    if ((st = vk_retire(vk, b)))
        return st;
    return vk_buffer_create(vk, grow_size(vk, size, windowed), staging, download, what, b);
}

static vkmha_status slot_ensure(vk_state *vk, vk_slot slot, VkDeviceSize size, bool windowed)
{
    static const char *const names[SLOT_COUNT] = {
        [SLOT_Q_IN] = "query input",
        [SLOT_K_IN] = "key input",
        [SLOT_V_IN] = "value input",
        [SLOT_AUX] = "auxiliary input",
        [SLOT_MASK_KP] = "mask->key_padding",
        [SLOT_MASK_FULL] = "mask->full",
        [SLOT_MASK_BIAS] = "mask->bias",
        [SLOT_MASK_HEADS] = "mask->alibi and mask->sinks",
        [SLOT_Q_PROJ] = "query projection",
        [SLOT_K_PROJ] = "key projection",
        [SLOT_V_PROJ] = "value projection",
        [SLOT_Q_HEADS] = "query heads",
        [SLOT_K_HEADS] = "key heads",
        [SLOT_V_HEADS] = "value heads",
        [SLOT_SCORES] = "attention scores [batch][heads][len_q][len_k]",
        [SLOT_STATS] = "attention row statistics",
        [SLOT_PARTIAL_O] = "split-K partial outputs",
        [SLOT_PARTIAL_ML] = "split-K partial statistics",
        [SLOT_O_HEADS] = "attention output",
        [SLOT_OUT] = "output",
        [SLOT_WEIGHTS] = "attention weights",
        [SLOT_MM_ACC] = "matmul sums over ranges of k",
        [SLOT_MM_QB] = "a window of a quantized b",
        [SLOT_ROPE] = "RoPE's table of angles"};
    _Static_assert(SLOT_ROPE + 1 == SLOT_COUNT, "every slot has a name");
    return ensure(vk, &vk->mem.slots[slot], size, false, false, windowed, names[slot]);
}

vkmha_status vk_slot_ensure(vk_state *vk, vk_slot slot, VkDeviceSize size)
{
    return slot_ensure(vk, slot, size, false);
}

vkmha_status vk_slot_ensure_windowed(vk_state *vk, vk_slot slot, VkDeviceSize size)
{
    return slot_ensure(vk, slot, size, true);
}

uint64_t vk_scratch_bytes(const vk_state *vk)
{
    uint64_t n = vk->mem.upload.alloc_size + vk->mem.download.alloc_size;
    for (int i = 0; i < SLOT_COUNT; i++)
        n += vk->mem.slots[i].alloc_size;
    for (uint32_t i = 0; i < vk->mem.n_retired; i++)
        n += vk->mem.retired[i].alloc_size;
    for (uint32_t i = 0; i < vk->mem.n_deferred; i++)
        n += vk->mem.deferred[i].alloc_size;
    return n;
}

void vk_scratch_fit(vk_state *vk, uint64_t budget)
{
    if (vk->mem.recorded)
        return;
    for (uint64_t have = vk_scratch_bytes(vk); have > budget;) {
        vk_buffer *largest = vk->mem.upload.alloc_size > vk->mem.download.alloc_size ? &vk->mem.upload
                                                                             : &vk->mem.download;
        for (int i = 0; i < SLOT_COUNT; i++)
            if (vk->mem.slots[i].alloc_size > largest->alloc_size)
                largest = &vk->mem.slots[i];
        have -= largest->alloc_size;
        vk_buffer_destroy(vk, largest);
    }
}

vkmha_status vk_staging_ensure_unmapped(vk_state *vk, VkDeviceSize upload,
                                        VkDeviceSize download)
{
    vkmha_status st;
    if (upload && (st = ensure(vk, &vk->mem.upload, upload, true, false, false, "upload staging")))
        return st;
    if (download && (st = ensure(vk, &vk->mem.download, download, true, true, false, "download staging")))
        return st;
    return VKMHA_SUCCESS;
}

void vk_scratch_referenced(vk_state *vk)
{
    vk->mem.recorded = true;
}

void vk_memory_trim(vk_state *vk)
{
    vk_release_retired(vk);
    for (int i = 0; i < SLOT_COUNT; i++)
        vk_buffer_destroy(vk, &vk->mem.slots[i]);
    vk_buffer_destroy(vk, &vk->mem.upload);
    vk_buffer_destroy(vk, &vk->mem.download);
}

void vk_memory_destroy(vk_state *vk)
{
    vk_memory_trim(vk);
    vk_buffer_destroy(vk, &vk->mem.dummy);
}
