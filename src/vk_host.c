/* The host-array driver: an op on host arrays as one synchronous call of
 * the executor (src/vk_command.c): its masks ensured and uploaded
 * (src/vk_mask.c), its inputs uploaded, its passes recorded, its outputs
 * downloaded. Above the executor and the masks, below the ops. */
#include "vk_exec.h"

vkmha_status vk_run_host(vk_state *vk, const vk_host_call *c)
{
    vkmha_status st;
    if ((c->mask && (st = vk_mask_ensure(vk, c->mask, c->batch, c->len_q, c->len_k))) ||
        (st = vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL)))
        return st;
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(c->up) && !st; i++)
        if (c->up[i].bytes)
            st = vk_upload(vk, c->up[i].buf, 0, c->up[i].src, c->up[i].bytes);
    if (!st && c->mask)
        st = vk_mask_upload(vk, c->mask, c->batch, c->len_q, c->len_k);
    if (!st)
        st = c->record(vk, c->arg);
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(c->down) && !st; i++) {
        const vk_host_download *d = &c->down[i];
        if (d->dst)
            st = vk_download(vk, d->buf, d->dst, d->len, d->n1, d->stride1, d->n2, d->stride2);
    }
    return vk_exec_end(vk, st, NULL);
}
