// The mask kinds of vkmha_mask, shared by the softmax, the fused attention
// and its weights pass. The including shader declares the uint-word buffers
// `kp` (key padding, [batch][len_k] bytes) and `fm` (full mask,
// [batch][len_q][len_k] bytes) and the float buffer `bias` at binding slots
// MASK_SLOT, MASK_SLOT + 1 and MASK_SLOT + 2 before including this file, and
// reads them through the functions below, which add their misalignment
// (shaders/typed.glsl). It defines HEAD_RULES_BINDING, the binding of the
// per-head rules `hr` declared here: [heads] ALiBi slopes, then [heads] sink
// logits (each where its kind is set; the host writes them into the call's
// commands, at a descriptor's start), and its push block has the members
// heads, window and softcap.

const uint MASK_KEY_PADDING = 1u; // vkmha_mask_kind values
const uint MASK_FULL = 2u;
const uint MASK_CAUSAL = 4u;
const uint MASK_BIAS = 8u;
const uint MASK_WINDOW = 16u;
const uint MASK_ALIBI = 32u;
const uint MASK_SOFTCAP = 64u;
const uint MASK_SINKS = 128u;
// Not a vkmha_mask_kind: the including shader's `lens` buffer holds each
// batch entry's key length (a KV cache's entries); keys j >= lens[b] do not
// exist for entry b (weight exactly 0, not even -1e9).
const uint MASK_LENGTHS = 0x4000u;
// The kinds that are data, whose hidden keys a kernel finds by looking
// (flash.comp classifies key blocks by them; flash_cpu.comp's DATA_SKIP
// variant, flash_cpu_skip, takes calls with them).
const uint MASK_DATA = MASK_KEY_PADDING | MASK_FULL | MASK_BIAS;

layout(binding = HEAD_RULES_BINDING) readonly buffer HeadRules { float hr[]; };

// The score every masked position gets, exactly as masked_fill(mask == 0, -1e9).
const float MASKED_SCORE = -1e9;

// Byte i of the key padding and of the full mask; the 4 bytes from i
// (a multiple of 4) as one word; element i of the bias.
uint kp_byte(uint i)
{
    i += MISALIGN_BYTES(MASK_SLOT);
    return byte_at_words(kp[i >> 2], i);
}
uint fm_byte(uint i)
{
    i += MISALIGN_BYTES(MASK_SLOT + 1u);
    return byte_at_words(fm[i >> 2], i);
}
uint kp_word(uint i)
{
    if ((MISALIGN_BYTES(MASK_SLOT) & 3u) != 0u)
        return kp_byte(i) | kp_byte(i + 1u) << 8 | kp_byte(i + 2u) << 16 | kp_byte(i + 3u) << 24;
    return kp[(i + MISALIGN_BYTES(MASK_SLOT)) >> 2];
}
uint fm_word(uint i)
{
    if ((MISALIGN_BYTES(MASK_SLOT + 1u) & 3u) != 0u)
        return fm_byte(i) | fm_byte(i + 1u) << 8 | fm_byte(i + 2u) << 16 | fm_byte(i + 3u) << 24;
    return fm[(i + MISALIGN_BYTES(MASK_SLOT + 1u)) >> 2];
}
float bias_at(uint i)
{
    return bias[i + (MISALIGN_BYTES(MASK_SLOT + 2u) >> 2)];
}

// Query i's key position pos_i (include/vkmha.h, "Masks"): the last key it
// sees under the causal mask (negative: none), given the push block's
// causal_offset (an int, as uint bits) and the entry's key length len_b:
// i + causal_offset + len_b - len_k, so i + causal_offset for an entry of
// len_k keys, and the offset shifts with an entry's length
// (vkmha_mask.causal_offset; the host keeps every term below 2^31).
int causal_last(uint i, uint causal_offset, uint len_b, uint len_k)
{
    return int(i) + int(causal_offset) + int(len_b) - int(len_k);
}

// Whether (batch b, query i, key j) is masked by any kind in `flags`;
// last: causal_last(i, ...).
bool mask_hides(uint flags, uint b, uint i, uint j, uint len_q, uint len_k, int last)
{
    const int d = last - int(j); // how far back key j lies
    if ((flags & MASK_CAUSAL) != 0u && d < 0)
        return true;
    // The window: back (and without the causal mask ahead) by less than it.
    if ((flags & MASK_WINDOW) != 0u &&
        (d >= int(p.window) || ((flags & MASK_CAUSAL) == 0u && -d >= int(p.window))))
        return true;
    if ((flags & MASK_KEY_PADDING) != 0u) {
        if (kp_byte(b * len_k + j) == 0u)
            return true;
    }
    if ((flags & MASK_FULL) != 0u) {
        if (fm_byte((b * len_q + i) * len_k + j) == 0u)
            return true;
    }
    return false;
}

// The window's test on keys j .. j + 3 (jj) of a query at position `last`.
bvec4 window_hides4(uvec4 jj, int last)
{
    const ivec4 d = ivec4(last) - ivec4(jj);
    const bvec4 back = greaterThanEqual(d, ivec4(int(p.window)));
    if ((p.flags & MASK_CAUSAL) != 0u)
        return back;
    return bvec4(uvec4(back) | uvec4(greaterThanEqual(-d, ivec4(int(p.window)))));
}

// The soft cap (VKMHA_MASK_SOFTCAP): cap * tanh(x / cap) as
// sign(x) cap (1 - t) / (1 + t), t = exp(-2 |x| / cap) in [0, 1], which
// gives cap for x = +Inf and NaN for NaN (GLSL's tanh may be
// (e^2x - 1) / (e^2x + 1), NaN at large |x|).
float soft_cap(float x)
{
    precise float t = exp(-2.0 * abs(x / p.softcap));
    precise float r = p.softcap * ((1.0 - t) / (1.0 + t));
    return x < 0.0 ? -r : x > 0.0 || x == 0.0 ? r : x;
}
vec4 soft_cap4(vec4 x)
{
    return vec4(soft_cap(x.x), soft_cap(x.y), soft_cap(x.z), soft_cap(x.w));
}

// Head h's ALiBi slope (0: none) and sink logit (-inf: none).
float alibi_slope(uint h)
{
    return (p.flags & MASK_ALIBI) != 0u ? hr[h] : 0.0;
}
float sink_logit(uint h)
{
    return (p.flags & MASK_SINKS) != 0u ? hr[p.heads + h] : uintBitsToFloat(0xff800000u);
}

// The score entering the softmax of query i (at position `last`), key j of
// batch entry b from x = scale * q . k, in the reference's order: soft cap,
// bias (bias element bias_i), ALiBi (slope of the head), then -1e9 where any
// mask kind hides the key.
float rule_score(float x, uint b, uint i, uint j, int last, uint bias_i, float slope)
{
    precise float y = x;
    if ((p.flags & MASK_SOFTCAP) != 0u)
        y = soft_cap(y);
    if ((p.flags & MASK_BIAS) != 0u)
        y += bias_at(bias_i);
    if ((p.flags & MASK_ALIBI) != 0u)
        y -= slope * float(last - int(j));
    if (mask_hides(p.flags, b, i, j, p.len_q, p.len_k, last))
        y = MASKED_SCORE;
    return y;
}
