// The push-constant block of shaders/flash.comp and flash_cpu.comp, and its C
// mirror struct flash_push: this file is both. The shaders include it after
// typed.glsl, whose PUSH_BEGIN, PUSH_END, PUSH_MISALIGN and PUSH_CONST make it
// a GLSL block `p` and constants; src/vk_push.h includes it with C definitions
// of the same macros (and `uint` as uint32_t), which make it a struct and an
// enum. One list of members, so the two cannot drift apart. Members: 32-bit
// scalars only (uint, float), which std430 and C lay out alike.
PUSH_BEGIN(flash_push)
    PUSH_MISALIGN   // vk_dispatch's (shaders/typed.glsl)
    uint groups;    // workgroups: batch * heads * q_blocks * splits (a window's
                    // dispatch: the end of its range; it has one key range)
    uint len_q;
    uint len_k;
    uint heads;     // query heads
    uint group;     // query heads per key/value head
    uint dims;      // d_k | d_v << 16 (fused head dims are at most 256)
    uint split_len; // keys per range
    uint q_sb, q_sh, q_ld; // element strides: batch entry, head, row
    uint k_sb, k_sh, k_ld;
    uint v_sb, v_sh, v_ld;
    uint o_sb, o_sh, o_ld; // out (without MODE_PARTIAL)
    uint flags;     // MASK_* of mask.glsl | MODE_* | BIAS_* below
    float scale;
    uint window;    // MASK_WINDOW's (vkmha_mask.window)
    float softcap;  // MASK_SOFTCAP's
    uint kv_first;  // this dispatch's keys: kv_first .. + kv_count of each range
    uint kv_count;
    uint group_base; // first workgroup of this dispatch
    uint causal_offset; // see mask.glsl's mask_hides
    uint kv_b0;     // k and v hold batch entries from this one (a KV cache's)
    uint kv_key0;   // k and v are bound from this key on (0, or a window's first)
    // flash.comp: RoPE on q as it is loaded (a layer's, vk_mha.c): its pairs
    // per head (0: none) | ROPE_INTERLEAVED | ROPE_FOLDED; query row i of
    // batch entry b takes row b * len_q + i of the (cos, sin) table at
    // binding 10, or row b where a decode step's group of query heads is
    // folded into the rows (ROPE_FOLDED: one token each).
    uint rope;
PUSH_END(flash_push)

// flags: vkmha_mask_kind bits (mask.glsl's MASK_*) | MODE_*. A key range may take
// several dispatches (chunks): lavapipe stops any loop nest after 65535
// iterations, so on CPU devices the host bounds the keys one dispatch
// visits. The state between chunks, and between split-K ranges and the
// combine pass, is the partial (unnormalized acc, m, l).
PUSH_CONST(MODE_RESUME, 0x100u)  // start from the partial state, not from zero
PUSH_CONST(MODE_PARTIAL, 0x200u) // write the partial state, not out
PUSH_CONST(MODE_WEIGHTS, 0x400u) // write the weights from the final (m, l), nothing else
// flash_cpu.comp only: lanes over keys (a block of at most TM queries, as a
// decode step's one): every lane takes all of the block's rows and its own
// part of the range's keys, and writes its partial state as range split *
// WG + lane, which the split-K combine merges (the host sets MODE_PARTIAL
// with it).
PUSH_CONST(MODE_LANE_KEYS, 0x800u)
// The bias's broadcast, in place of strides (the push block is full): a
// bias plane [len_q][len_k] per batch entry and / or per head.
PUSH_CONST(BIAS_PER_BATCH, 0x1000u)
PUSH_CONST(BIAS_PER_HEAD, 0x2000u)
// flash_cpu.comp: from word 2 * heads the per-head rules (mask.glsl's hr)
// hold two words per (batch entry, key/value head), each 0 when its values
// (word 0) or its keys (word 1, scanned with a bias only) hold no NaN, Inf
// or magnitude of 2^64 or more (shaders/vscan.comp): only heads with clean
// values skip hidden keys.
PUSH_CONST(MODE_VSCANNED, 0x8000u)
// rope's flags, above its pairs.
PUSH_CONST(ROPE_INTERLEAVED, 0x10000u) // pairs (2i, 2i + 1); else (i, i + pairs)
PUSH_CONST(ROPE_FOLDED, 0x20000u)
