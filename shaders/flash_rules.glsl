// What the fused kernels (shaders/flash.comp, flash_cpu.comp) share of the
// score rules beyond shaders/mask.glsl: where a workgroup's bias starts, the
// keys a block of queries may see, and the online softmax's start with an
// attention sink. Include after mask.glsl.

// Bias element (b, h, 0, 0): the push block has no bias strides, only the
// broadcast (BIAS_PER_*), each plane [len_q][len_k].
uint flash_bias_base(uint b, uint h)
{
    const uint plane = p.len_q * p.len_k;
    const bool per_head = (p.flags & BIAS_PER_HEAD) != 0u;
    const uint sh = per_head ? plane : 0u;
    const uint sb = (p.flags & BIAS_PER_BATCH) != 0u ? (per_head ? p.heads : 1u) * plane : 0u;
    return b * sb + h * sh;
}

// The (m, l) a row of head h starts from in partial-state range `range`
// (a key split's, or a lane's of one): with a sink logit s (MASK_SINKS)
// range 0 starts from (s, 1), the sink's exp(s - s) in the denominator and
// nothing in the output; the other ranges, and rows without a sink, from
// (-inf, 0). The split-K combine then merges the sink in like any range.
vec2 flash_start(uint h, uint range)
{
    const float s = sink_logit(h);
    return range == 0u && s != neg_inf() ? vec2(s, 1.0) : vec2(neg_inf(), 0.0);
}

// The keys some row of a block of queries may see, (vis_lo, vis_hi): the
// block's first and last rows' positions (causal_last of rows first and
// last) bound them, by the causal mask above and a window's width below
// (and, without the causal mask, above); lo_none where no window bounds
// them below, 0x7fffffff where nothing bounds them above.
ivec2 flash_visible(int first_pos, int last_pos, int lo_none)
{
    const bool causal = (p.flags & MASK_CAUSAL) != 0u, window = (p.flags & MASK_WINDOW) != 0u;
    const int lo = window ? first_pos - int(p.window) + 1 : lo_none;
    const int hi = causal ? last_pos
                   : window ? (last_pos > 0x3fffffff - int(p.window) ? 0x7fffffff
                                                                     : last_pos + int(p.window) - 1)
                            : 0x7fffffff;
    return ivec2(lo, hi);
}
