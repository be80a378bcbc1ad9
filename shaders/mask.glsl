// The mask kinds of vkmha_mask, shared by the softmax, the fused attention
// and its weights pass. The including shader declares the uint-word buffers
// `kp` (key padding, [batch][len_k] bytes) and `fm` (full mask,
// [batch][len_q][len_k] bytes) before including this file.

const uint MASK_KEY_PADDING = 1u; // vkmha_mask_kind values
const uint MASK_FULL = 2u;
const uint MASK_CAUSAL = 4u;
const uint MASK_BIAS = 8u;

// The score every masked position gets, exactly as masked_fill(mask == 0, -1e9).
const float MASKED_SCORE = -1e9;

// Whether (batch b, query i, key j) is masked by any kind in `flags`.
bool mask_hides(uint flags, uint b, uint i, uint j, uint len_q, uint len_k)
{
    if ((flags & MASK_CAUSAL) != 0u && j > i)
        return true;
    if ((flags & MASK_KEY_PADDING) != 0u) {
        uint idx = b * len_k + j;
        if (byte_at_words(kp[idx >> 2], idx) == 0u)
            return true;
    }
    if ((flags & MASK_FULL) != 0u) {
        uint idx = (b * len_q + i) * len_k + j;
        if (byte_at_words(fm[idx >> 2], idx) == 0u)
            return true;
    }
    return false;
}
