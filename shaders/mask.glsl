// The mask kinds of vkmha_mask, shared by the softmax, the fused attention
// and its weights pass. The including shader declares the uint-word buffers
// `kp` (key padding, [batch][len_k] bytes) and `fm` (full mask,
// [batch][len_q][len_k] bytes) and the float buffer `bias` at binding slots
// MASK_SLOT, MASK_SLOT + 1 and MASK_SLOT + 2 before including this file, and
// reads them through the functions below, which add their misalignment
// (shaders/typed.glsl).

const uint MASK_KEY_PADDING = 1u; // vkmha_mask_kind values
const uint MASK_FULL = 2u;
const uint MASK_CAUSAL = 4u;
const uint MASK_BIAS = 8u;
// Not a vkmha_mask_kind: the including shader's `lens` buffer holds each
// batch entry's key length (a KV cache's entries); keys j >= lens[b] do not
// exist for entry b (weight exactly 0, not even -1e9).
const uint MASK_LENGTHS = 16u;

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

// The last key query i sees under the causal mask (negative: none), given
// the push block's causal_offset (an int, as uint bits) and the entry's key
// length len_b: i + causal_offset + len_b - len_k, so i + causal_offset for
// an entry of len_k keys, and the offset shifts with an entry's length
// (vkmha_mask.causal_offset; the host keeps every term below 2^31).
int causal_last(uint i, uint causal_offset, uint len_b, uint len_k)
{
    return int(i) + int(causal_offset) + int(len_b) - int(len_k);
}

// Whether (batch b, query i, key j) is masked by any kind in `flags`;
// last: causal_last(i, ...).
bool mask_hides(uint flags, uint b, uint i, uint j, uint len_q, uint len_k, int last)
{
    if ((flags & MASK_CAUSAL) != 0u && int(j) > last)
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
