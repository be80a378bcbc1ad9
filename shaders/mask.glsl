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

// Whether (batch b, query i, key j) is masked by any kind in `flags`.
bool mask_hides(uint flags, uint b, uint i, uint j, uint len_q, uint len_k)
{
    if ((flags & MASK_CAUSAL) != 0u && j > i)
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
