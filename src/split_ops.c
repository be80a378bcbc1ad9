/* Calls too large for one binding as several calls (see src/split.c): split
 * and merge heads in blocks of batch entries, a batched matmul in blocks of
 * products, and the layer in blocks of batch entries. */
#include "split.h"

/* ---- split and merge heads ---------------------------------------------- */

/* The bytes a block of n rows and nh heads spans in [len][heads][d] ("rows",
 * the split's x and the merge's y) and [heads][len][d] of one entry. */
static uint64_t rows_span(const heads_shape *s, uint64_t n, uint64_t nh, uint64_t es)
{
    return ((n - 1) * s->heads + nh) * s->head_dim * es;
}

static uint64_t heads_span(const heads_shape *s, uint64_t n, uint64_t nh, uint64_t es)
{
    return ((nh - 1) * s->len + n) * s->head_dim * es;
}

/* One entry that does not fit: blocks of rows and heads (a transpose: each
 * block spans few rows of one layout and few heads of the other), bound at
 * the full array's strides (heads_shape.full_len, full_heads). */
static vkmha_status heads_blocks(vkmha_context *ctx, const vkmha_run *run, const heads_shape *s,
                                 bool split, const vkmha_arg *x, const vkmha_arg *y,
                                 uint64_t limit)
{
    const uint64_t es = vkmha__dtype_size(s->dtype), plane = (uint64_t)s->len * s->head_dim * es;
    /* Heads whose rows all fit, else one head's rows in blocks; none for an
     * entry of 2^32 elements or more, whose strides the shaders' 32-bit
     * element indices cannot take. */
    const bool big = (uint64_t)s->len * s->heads * s->head_dim > UINT32_MAX;
    const uint64_t rows_in = limit / (s->head_dim * es); /* rows of d that fit */
    uint64_t nh = big ? 0 : limit / plane, n = 0;
    nh = nh < s->heads ? nh : s->heads;
    if (!big && rows_in) {
        const uint64_t h = nh ? nh : 1;
        if (rows_in >= h) /* the [len][heads][d] span of n rows of h heads */
            n = (rows_in - h) / s->heads + 1;
        if (!nh) /* and n rows of one head in [heads][len][d] */
            n = n < rows_in ? n : rows_in;
        nh = h;
    }
    n = n < s->len ? n : s->len;
    if (!nh || !n) { /* not one row (or 2^32 elements): refused naming the array */
        const uint64_t all = (uint64_t)s->batch * s->len * s->heads * s->head_dim * es;
        vkmha_status st = vkmha__check_parts(ctx, (const char *const[]){"x", "y"},
                                      (const vkmha_arg *const[]){x, y},
                                      (const uint64_t[]){all, all}, 2);
        return st ? st : ctx->ops->heads(ctx, run, s, split, x, y);
    }
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: arrays beyond this device's buffer range: split into calls of blocks of "
               "%llu rows x %llu heads",
               ctx->call, (unsigned long long)n, (unsigned long long)nh);
    vkmha_status st = VKMHA_SUCCESS;
    for (uint32_t b = 0; b < s->batch && !st; b++)
        for (uint64_t h0 = 0; h0 < s->heads && !st; h0 += nh)
            for (uint64_t l0 = 0; l0 < s->len && !st; l0 += n) {
                heads_shape ps = *s;
                ps.batch = 1;
                ps.len = (uint32_t)(s->len - l0 < n ? s->len - l0 : n);
                ps.heads = (uint32_t)(s->heads - h0 < nh ? s->heads - h0 : nh);
                ps.full_len = s->len, ps.full_heads = s->heads;
                const uint64_t entry = (uint64_t)s->len * s->heads * s->head_dim * es,
                               at_rows = b * entry + (l0 * s->heads + h0) * s->head_dim * es,
                               at_heads = b * entry + (h0 * s->len + l0) * s->head_dim * es,
                               span_rows = rows_span(s, ps.len, ps.heads, es),
                               span_heads = heads_span(s, ps.len, ps.heads, es);
                const vkmha_arg ax = vkmha__arg_at(x, split ? at_rows : at_heads),
                                ay = vkmha__arg_at(y, split ? at_heads : at_rows);
                if (!(st = vkmha__check_parts(ctx, (const char *const[]){"x", "y"},
                                       (const vkmha_arg *const[]){&ax, &ay},
                                       (const uint64_t[]){split ? span_rows : span_heads,
                                                          split ? span_heads : span_rows},
                                       2)))
                    st = ctx->ops->heads(ctx, run, &ps, split, &ax, &ay);
            }
    return st;
}

vkmha_status vkmha__heads_split(vkmha_context *ctx, const vkmha_run *run, const heads_shape *s,
                                bool split, const vkmha_arg *x, const vkmha_arg *y)
{
    /* [batch][len][heads][d] and [batch][heads][len][d]: an entry is
     * contiguous in both. */
    const uint64_t limit = vkmha__split_limit(ctx, run), es = vkmha__dtype_size(s->dtype),
                   entry = (uint64_t)s->len * s->heads * s->head_dim * es;
    if (limit && entry > limit)
        return heads_blocks(ctx, run, s, split, x, y, limit);
    const uint32_t nb = limit ? (uint32_t)(limit / entry < s->batch ? limit / entry : s->batch)
                              : s->batch;
    vkmha_status st = VKMHA_SUCCESS;
    if (nb < s->batch)
        vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: arrays beyond this device's buffer range: split into calls of %u batch "
                   "entries",
                   ctx->call, nb);
    for (uint32_t b0 = 0; b0 < s->batch && !st; b0 += nb) {
        heads_shape ps = *s;
        ps.batch = s->batch - b0 < nb ? s->batch - b0 : nb;
        const vkmha_arg ax = vkmha__arg_at(x, b0 * entry), ay = vkmha__arg_at(y, b0 * entry);
        const uint64_t bytes = ps.batch * entry;
        if (!(st = vkmha__check_parts(ctx, (const char *const[]){"x", "y"},
                               (const vkmha_arg *const[]){&ax, &ay},
                               (const uint64_t[]){bytes, bytes}, 2)))
            st = ctx->ops->heads(ctx, run, &ps, split, &ax, &ay);
    }
    return st;
}

/* ---- matmul ---------------------------------------------------------------- */

/* Whether a quantized B (op T, host arrays) is past an allocation:
 * matmul_blocks cuts it (past the range only, the backend copies windows
 * of its rows on the device). */
static bool quant_b_past(const vkmha_context *ctx, const mm_shape *s)
{
    return s->quant_b.type && s->trans_b && ctx->allocation_size &&
           s->extent_b > ctx->allocation_size;
}

/* One product on host arrays larger than maxMemoryAllocationSize (each is
 * copied into one allocation): calls of blocks of rows of A and C and, with
 * op T, of columns of C (rows of B) whose parts each fit it (a multiple of
 * 16 where it splits); windows past maxStorageBufferRange are the
 * backend's. B past it with op N (strided columns) goes to the backend
 * whole, which runs it in blocks of B's rows (ranges of k) summed on the
 * device, a quantized one sliced into matrices of their own; not one row
 * fitting, too, and the backend refuses it naming the array. A quantized
 * B with op T past an allocation is cut here into blocks of its rows, each
 * a quantized matrix of its own (vkmha__quant_slice into one host buffer;
 * past the range too, the backend windows each block). */
static vkmha_status matmul_blocks(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                                  const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                                  const vkmha_arg *c)
{
    const uint64_t es = vkmha__dtype_size(s->dtype), most = ctx->allocation_size / es;
    const bool quant = s->quant_b.type != 0, cut_q = quant_b_past(ctx, s);
    uint64_t nc = s->n, mc = s->m;
    if (s->trans_b && !quant && s->extent_b > most)
        nc = vkmha__part16(vkmha__rows_within(most, s->k, s->ldb), s->n);
    if (cut_q)
        nc = vkmha__part16(vkmha__quant_rows_within(&s->quant_b, ctx->allocation_size), s->n);
    const uint64_t rows_a = vkmha__rows_within(most, s->k, s->lda),
                   rows_c = vkmha__rows_within(most, nc, s->ldc);
    mc = rows_a < mc ? rows_a : mc;
    mc = vkmha__part16(rows_c < mc ? rows_c : mc, s->m);
    if (!mc || !nc || (!s->trans_b && !quant && s->extent_b > most) ||
        (quant && !cut_q && s->extent_b > ctx->allocation_size))
        return ctx->ops->matmul(ctx, run, s, a, b, bias, c);
    vkmha_quant_desc sub = s->quant_b;
    sub.rows = (uint32_t)nc;
    uint8_t *piece = cut_q ? vkmha__alloc(ctx, (size_t)vkmha__quant_layout(&sub).bytes) : NULL;
    if (cut_q && !piece)
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           ctx->call);
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: arrays beyond this device's maxMemoryAllocationSize: split into calls of "
               "%llu x %llu blocks of C",
               ctx->call, (unsigned long long)mc, (unsigned long long)nc);
    vkmha_status st = VKMHA_SUCCESS;
    for (uint64_t m0 = 0; m0 < s->m && !st; m0 += mc)
        for (uint64_t n0 = 0; n0 < s->n && !st; n0 += nc) {
            mm_shape ps = *s;
            ps.m = (uint32_t)(s->m - m0 < mc ? s->m - m0 : mc);
            ps.n = (uint32_t)(s->n - n0 < nc ? s->n - n0 : nc);
            ps.extent_a = (uint64_t)(ps.m - 1) * s->lda + s->k;
            ps.extent_b = s->trans_b && !quant ? (uint64_t)(ps.n - 1) * s->ldb + s->k
                                               : s->extent_b;
            ps.extent_c = (uint64_t)(ps.m - 1) * s->ldc + ps.n;
            ps.sa = ps.sb = ps.sc = 0; /* one product: no batch strides */
            vkmha_arg pb = vkmha__arg_at(b, s->trans_b && !quant ? n0 * s->ldb * es : 0);
            if (cut_q) { /* rows n0 .. of B's planes as a matrix of ps.n rows */
                ps.quant_b.rows = ps.n;
                ps.layout_b = vkmha__quant_layout(&ps.quant_b);
                ps.extent_b = ps.layout_b.bytes;
                vkmha__quant_slice(&s->quant_b, &s->layout_b, b->host, (uint32_t)n0, 0,
                                   &ps.quant_b, &ps.layout_b, piece);
                pb.host = piece;
            }
            const vkmha_arg pa = vkmha__arg_at(a, m0 * s->lda * es),
                            pbias = vkmha__arg_at(bias, n0 * es),
                            pc = vkmha__arg_at(c, (m0 * s->ldc + n0) * es);
            st = ctx->ops->matmul(ctx, run, &ps, &pa, &pb, &pbias, &pc);
        }
    vkmha__free(ctx, piece);
    return st;
}

/* The backend's matmul, or one product's blocks (matmul_blocks). */
static vkmha_status matmul_call(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                                const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                                const vkmha_arg *c)
{
    const uint64_t es = vkmha__dtype_size(s->dtype), most = ctx->allocation_size,
                   es_b = s->quant_b.type ? 1 : es; /* a quantized B's extent is bytes */
    if (s->batch == 1 && run->form == FORM_HOST && most &&
        (s->extent_a * es > most || s->extent_b * es_b > most || s->extent_c * es > most))
        return matmul_blocks(ctx, run, s, a, b, bias, c);
    return ctx->ops->matmul(ctx, run, s, a, b, bias, c);
}

vkmha_status vkmha__matmul_split(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                                 const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                                 const vkmha_arg *c)
{
    const uint64_t limit = vkmha__split_limit(ctx, run), es = vkmha__dtype_size(s->dtype),
                   es_b = s->quant_b.type ? 1 : es; /* a quantized B's extent is bytes */
    /* One matrix of each: the extent without the batch strides. */
    const uint64_t one_a = s->extent_a - (s->batch - 1) * s->sa,
                   one_b = s->extent_b - (s->batch - 1) * s->sb,
                   one_c = s->extent_c - (s->batch - 1) * s->sc;
    uint32_t nb = s->batch;
    /* A single product is windowed by the backend (vk_record_matmul). */
    while (limit && nb > 1 &&
           (((nb - 1) * s->sa + one_a) * es > limit || ((nb - 1) * s->sb + one_b) * es_b > limit ||
            ((nb - 1) * s->sc + one_c) * es > limit))
        nb = nb / 2 > 1 ? nb / 2 : 1;
    if (nb == s->batch)
        return matmul_call(ctx, run, s, a, b, bias, c);
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: arrays beyond this device's buffer range: split into calls of %u products",
               ctx->call, nb);
    vkmha_status st = VKMHA_SUCCESS;
    for (uint32_t b0 = 0; b0 < s->batch && !st; b0 += nb) {
        mm_shape ps = *s;
        ps.batch = s->batch - b0 < nb ? s->batch - b0 : nb;
        ps.extent_a = (ps.batch - 1) * s->sa + one_a;
        ps.extent_b = (ps.batch - 1) * s->sb + one_b;
        ps.extent_c = (ps.batch - 1) * s->sc + one_c;
        const vkmha_arg aa = vkmha__arg_at(a, b0 * s->sa * es), ab = vkmha__arg_at(b, b0 * s->sb * es),
                        ac = vkmha__arg_at(c, b0 * s->sc * es);
        st = matmul_call(ctx, run, &ps, &aa, &ab, bias, &ac);
    }
    return st;
}

/* ---- the layer ----------------------------------------------------------- */

/* f's entries b0 .. b0 + n - 1 as a call of their own, each of lq query
 * rows and lk new keys: its batch, its arrays' elements (the weights are
 * the caller's) and its cache entries and their lengths. */
static mha_fwd entries_of(const vkmha_mha_desc *d, const mha_fwd *f, uint32_t b0, uint32_t n,
                          uint32_t lq, uint32_t lk)
{
    mha_fwd p = *f;
    p.B = p.as.batch = n;
    p.Lq = p.as.len_q = lq;
    p.Lk = lk;
    p.n_query = p.n_out = (uint64_t)n * lq * d->d_model;
    p.n_key = (uint64_t)n * lk * d->kdim;
    p.n_value = (uint64_t)n * lk * d->vdim;
    p.entry = f->entry + b0;
    p.old = f->old ? f->old + b0 : NULL;
    p.lengths = f->lengths ? f->lengths + b0 : NULL;
    p.as.lengths = f->as.lengths ? f->as.lengths + b0 : NULL;
    return p;
}

/* The layer's call of n entries from b0 and ni query rows from i0 (all of
 * an entry's rows, or rows of one entry): its shape, masks, cache entries
 * and arguments; per[]: each argument's bytes per entry. */
static vkmha_status layer_part(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                               const vkmha_arg args[5], const uint64_t per[5], uint32_t b0,
                               uint32_t n, uint32_t i0, uint32_t ni)
{
    vkmha_context *ctx = mha->ctx;
    const vkmha_mha_desc *d = &mha->d;
    const uint64_t row = (uint64_t)d->d_model * f->es, H = d->n_head, L = f->as.len_k;
    mha_fwd p = entries_of(d, f, b0, n, ni, f->Lk);
    p.n_weights = n * H * ni * L;
    const part pm = {b0, n, 0, (uint32_t)H, i0, ni};
    p.mask = vkmha__part_mask(&f->mask, f->Lq, (uint32_t)L, &pm);
    p.positions = f->positions ? f->positions + (uint64_t)b0 * f->pos_ld : NULL;
    p.q0 = f->q0 + i0;
    const uint64_t q_at = ((uint64_t)b0 * f->Lq + i0) * row;
    vkmha_arg a[5] = {vkmha__arg_at(&args[0], q_at), vkmha__arg_at(&args[1], b0 * per[1]),
                      vkmha__arg_at(&args[2], b0 * per[2]), vkmha__arg_at(&args[3], q_at),
                      vkmha__arg_at(&args[4], b0 * per[4])};
    if (f->cache && i0 > 0) {
        /* The entry's first rows appended its keys and values: the others
         * attend over what the cache then holds (the lengths of the call),
         * as a call without key and value does. */
        p.append = false;
        p.Lk = 0;
        p.n_key = p.n_value = 0;
        a[1].host = a[2].host = NULL;
        a[1].tensor = a[2].tensor = NULL;
        a[1].at = a[2].at = 0;
    }
    /* The key and value inputs are read only by their projections, which
     * bind them in windows (vk_mha.c). */
    const uint64_t bytes[5] = {n * ni * row, 0, 0, n * ni * row, n * per[4]};
    vkmha_status st = vkmha__check_parts(ctx, vkmha__mha_io_names,
                                  (const vkmha_arg *const[]){&a[0], &a[1], &a[2], &a[3], &a[4]},
                                  bytes, 5);
    if (!st)
        st = vkmha__check_mask_parts(ctx, &p.mask, (uint32_t)L, &pm);
    return st ? st : ctx->ops->mha_forward(mha, run, &p, a);
}

vkmha_status vkmha__mha_forward_split(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                                      const vkmha_arg args[5])
{
    if (f->tokens) /* a mixed batch: its own parts */
        return vkmha__mha_forward_mixed(mha, run, f, args);
    vkmha_context *ctx = mha->ctx;
    const vkmha_mha_desc *d = &mha->d;
    const uint64_t limit = vkmha__split_limit(ctx, run), es = f->es, Lq = f->Lq, Lk = f->Lk,
                   L = f->as.len_k, H = d->n_head, Hkv = d->n_kv_head;
    const uint64_t splits = f->as.kv_splits > 1 ? f->as.kv_splits : 1;
    const bool weights = args[4].host || args[4].tensor,
               unfused = f->as.path == VKMHA_ATTENTION_PATH_UNFUSED;
    const uint64_t dim = d->d_k > d->d_v ? d->d_k : d->d_v;
    /* One batch entry's arguments (io[]), then its other arrays: the
     * projections and the concat of the heads, the fused path's fp32
     * partial outputs, the masks, a KV cache's entry (bound from the call's
     * first entry when the cache is past the range, and read in windows:
     * vk_mha.c, vk_attention.c), and the unfused path's fp32 scores when
     * that path is asked for, and RoPE's (cos, sin) table of its query rows
     * and new keys (vk_mha.c). The key and value inputs are bound in
     * windows: only the copies of host arrays must fit an allocation. */
    const uint64_t rope_row = (uint64_t)d->rope_dims * 4, rope_keys = f->append ? Lk : 0;
    const uint64_t per[12] = {Lq * d->d_model * es, Lk * d->kdim * es, Lk * d->vdim * es,
                              Lq * d->d_model * es, weights ? H * Lq * L * es : 0,
                              Lq * H * dim * es, Lk * Hkv * dim * es,
                              splits * Lq * H * (d->d_v > 2 ? d->d_v : 2) * 4,
                              vkmha__mask_part_bytes(&f->mask.m, (uint32_t)L,
                                         &(part){0, 1, 0, (uint32_t)H, 0, (uint32_t)Lq}),
                              f->cache ? Hkv * f->cache->d.capacity * dim *
                                             vkmha__dtype_size(f->cache->d.dtype)
                                       : 0,
                              unfused ? H * Lq * L * 4 : 0, (Lq + rope_keys) * rope_row};
    /* The key and value projections (per[6]) and a cache's entries (per[9])
     * too, which the attention reads in windows: the projections must fit an
     * allocation (a slot's). */
    uint64_t entry = 0;
    for (int i = 0; i < 12; i++)
        if (i != 1 && i != 2 && i != 6 && i != 9)
            entry = per[i] > entry ? per[i] : entry;
    const uint64_t kv_in = per[1] > per[2] ? per[1] : per[2],
                   alloc = run->form == FORM_HOST ? ctx->allocation_size : 0, kv_proj = per[6];
    uint64_t nb = limit && entry ? limit / entry : f->B;
    if (alloc && kv_in && alloc / kv_in < nb)
        nb = alloc / kv_in;
    if (limit && kv_proj && ctx->allocation_size / kv_proj < nb)
        nb = ctx->allocation_size / kv_proj;
    nb = nb < f->B ? nb : f->B;
    uint32_t ni = (uint32_t)Lq;
    if (nb == 0 && !weights && !(f->mask.m.bias && f->mask.m.bias_heads > 1) &&
        (!alloc || kv_in <= alloc) && per[6] <= ctx->allocation_size &&
        (!f->mask.m.key_padding || L <= limit)) {
        /* Not one entry: rows of its queries (each row's query and output,
         * projection and concat, partial outputs, scores, mask rows), all
         * of its keys each time (a KV cache's: the first rows append the
         * new ones, layer_part). */
        const uint64_t per_row[6] = {d->d_model * es, H * dim * es,
                                     splits * H * (d->d_v > 2 ? d->d_v : 2) * 4,
                                     unfused ? H * L * 4 : 0, f->mask.m.full ? L : 0,
                                     f->mask.m.bias ? L * 4 : 0};
        uint64_t most = Lq;
        for (int i = 0; i < 6; i++)
            if (per_row[i] && limit / per_row[i] < most)
                most = limit / per_row[i];
        /* RoPE's table: a row per query row, and the new keys' rows (the
         * first call of rows appends them). */
        if (rope_row) {
            const uint64_t keys = rope_keys * rope_row,
                           fit = keys < limit ? (limit - keys) / rope_row : 0;
            most = fit < most ? fit : most;
        }
        if (most) {
            nb = 1;
            ni = (uint32_t)most;
        }
    }
    if (!limit || nb == 0) /* fits, or not one row does: the backend names it */
        nb = f->B;
    const bool whole = nb == f->B && ni == Lq;
    if (whole)
        return layer_part(mha, run, f, args, per, 0, f->B, 0, (uint32_t)Lq);
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: arrays beyond this device's buffer range: split into calls of %llu batch "
               "entries of %u query rows",
               ctx->call, (unsigned long long)nb, ni);
    /* vkmha_mha_submit: the parts record into one submission. */
    vkmha_run part_run = *run;
    vkmha_submission *open = NULL;
    vkmha_status st = VKMHA_SUCCESS;
    if (run->form == FORM_SUBMIT && (st = ctx->ops->parts_open(ctx, &part_run, &open)))
        return st;
    for (uint32_t b0 = 0; b0 < f->B && !st; b0 += (uint32_t)nb)
        for (uint32_t i0 = 0; i0 < Lq && !st; i0 += ni)
            st = layer_part(mha, &part_run, f, args, per, b0,
                            (uint32_t)(f->B - b0 < nb ? f->B - b0 : nb), i0,
                            (uint32_t)(Lq - i0 < ni ? Lq - i0 : ni));
    return open ? ctx->ops->parts_close(ctx, open, st, run->sub) : st;
}

/* ---- a mixed batch --------------------------------------------------------- */

void vkmha__part_args(const vkmha_mha_desc *d, const mha_fwd *f, const mha_part *p,
                      const vkmha_arg io[5], vkmha_arg out[5])
{
    const uint64_t row[5] = {d->d_model, d->kdim, d->vdim, d->d_model, 0};
    for (int i = 0; i < 5; i++)
        out[i] = vkmha__arg_at(&io[i], p->row0 * row[i] * f->es);
}

/* The most positions entries b0 .. b1 - 1 of f hold after the call. */
static uint32_t longest(const mha_fwd *f, uint32_t b0, uint32_t b1)
{
    uint32_t most = 0;
    for (uint32_t b = b0; b < b1; b++)
        most = f->lengths[b] > most ? f->lengths[b] : most;
    return most;
}

/* Part p of f: entries b0 .. b1 - 1 (equal counts), from packed row row0;
 * the causal mask aligned to each part's end (its own len_q and len_k). */
static vkmha_status mixed_part(vkmha_context *ctx, const vkmha_mha_desc *d, const mha_fwd *f,
                               uint32_t b0, uint32_t b1, uint64_t row0, mha_part *p)
{
    const uint32_t t = f->tokens[b0], most = longest(f, b0, b1);
    mha_fwd *pf = &p->f;
    *pf = entries_of(d, f, b0, b1 - b0, t, f->append ? t : 0);
    pf->tokens = NULL;
    pf->as.len_k = most;
    pf->as.kv_splits = f->as.kv_splits < most ? f->as.kv_splits : most;
    pf->positions = f->positions ? f->positions + row0 : NULL;
    pf->pos_ld = t;
    pf->q0 = 0;
    pf->n_weights = 0;
    p->row0 = row0;
    /* f's offset was placed without a shift (mha.c's causal_shift). */
    return vkmha__mask_place(ctx, ctx->call, &pf->mask.m,
                             (int64_t)(int32_t)f->mask.m.causal_offset + most - t, t, most);
}

/* Entries b0 .. b1 - 1 of mixed batch f, from packed row row0: a mixed
 * batch of their own (rows packed rows). */
static mha_fwd mixed_entries(const vkmha_mha_desc *d, const mha_fwd *f, uint32_t b0,
                             uint32_t b1, uint64_t row0, uint32_t rows)
{
    mha_fwd s = entries_of(d, f, b0, b1 - b0, rows, f->append ? rows : 0);
    s.n_query = s.n_out = (uint64_t)rows * d->d_model; /* packed, not per entry */
    s.n_key = f->append ? (uint64_t)rows * d->kdim : 0;
    s.n_value = f->append ? (uint64_t)rows * d->vdim : 0;
    s.tokens = f->tokens + b0;
    s.as.len_k = longest(f, b0, b1);
    s.as.kv_splits = f->as.kv_splits < s.as.len_k ? f->as.kv_splits : s.as.len_k;
    s.positions = f->positions ? f->positions + row0 : NULL;
    return s;
}

/* A mixed batch whose packed query rows are more than one binding holds
 * (limit bytes): calls of consecutive entries whose rows fit (each a mixed
 * batch of its own, in one command buffer), an entry past the limit alone
 * a call of its own shape, which runs in calls of its query rows
 * (vkmha__mha_forward_split); into one submission for vkmha_mha_submit.
 * The entries are disjoint: no call reads what another writes. */
static vkmha_status mixed_calls(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                                const vkmha_arg args[5], uint64_t limit)
{
    vkmha_context *ctx = mha->ctx;
    const vkmha_mha_desc *d = &mha->d;
    const uint64_t row = (uint64_t)d->d_model * f->es;
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: a mixed batch of %u rows beyond this device's buffer range: calls of "
               "entries whose rows fit",
               ctx->call, f->Lq);
    vkmha_run part_run = *run;
    vkmha_submission *open = NULL;
    vkmha_status st = VKMHA_SUCCESS;
    if (run->form == FORM_SUBMIT && (st = ctx->ops->parts_open(ctx, &part_run, &open)))
        return st;
    uint64_t row0 = 0;
    for (uint32_t b0 = 0, b1; b0 < f->B && !st; b0 = b1) {
        uint64_t rows = f->tokens[b0];
        for (b1 = b0 + 1; b1 < f->B && (rows + f->tokens[b1]) * row <= limit; b1++)
            rows += f->tokens[b1];
        mha_part p = {.row0 = row0};
        vkmha_arg a[5];
        if (rows * row <= limit) {
            p.f = mixed_entries(d, f, b0, b1, row0, (uint32_t)rows);
            vkmha__part_args(d, f, &p, args, a);
            st = vkmha__mha_forward_mixed(mha, &part_run, &p.f, a);
        } else if (!(st = mixed_part(ctx, d, f, b0, b1, row0, &p))) {
            vkmha__part_args(d, f, &p, args, a);
            st = vkmha__mha_forward_split(mha, &part_run, &p.f, a);
        }
        row0 += rows;
    }
    return open ? ctx->ops->parts_close(ctx, open, st, run->sub) : st;
}

vkmha_status vkmha__mha_forward_mixed(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                                      const vkmha_arg args[5])
{
    vkmha_context *ctx = mha->ctx;
    const uint64_t limit = vkmha__split_limit(ctx, run), rows = f->n_query * f->es;
    if (limit && rows > limit)
        return mixed_calls(mha, run, f, args, limit);
    uint32_t n = 0;
    for (uint32_t b = 0; b < f->B; b++)
        n += b == 0 || f->tokens[b] != f->tokens[b - 1];
    mha_part *parts = vkmha__calloc(ctx, n, sizeof *parts);
    if (!parts)
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           ctx->call);
    vkmha_status st = VKMHA_SUCCESS;
    uint64_t row0 = 0;
    for (uint32_t i = 0, b0 = 0, b1; i < n && !st; i++, b0 = b1) {
        for (b1 = b0 + 1; b1 < f->B && f->tokens[b1] == f->tokens[b0]; b1++)
            ;
        st = mixed_part(ctx, &mha->d, f, b0, b1, row0, &parts[i]);
        row0 += (uint64_t)(b1 - b0) * f->tokens[b0];
    }
    if (!st) {
        vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: a mixed batch of %u entries (%u rows) as %u runs of equal counts, in "
                   "one command buffer",
                   ctx->call, f->B, f->Lq, n);
        mha_fwd whole = *f;
        whole.parts = parts;
        whole.n_parts = n;
        st = ctx->ops->mha_forward(mha, run, &whole, args);
    }
    vkmha__free(ctx, parts);
    return st;
}
