// The output of a matmul element, shared by shaders/matmul.comp,
// matmul_coop.comp and matmul_gemv.comp (after the push block `p` and the
// typed bindings bias and c).

// Ranges of k of a product past maxStorageBufferRange, as variants (bits 1
// and 2 of VARIANT: src/vk_base.h): C += ..., or (16-bit C) the bias
// binding is the fp32 sum of the ranges before, [M][N] at ld_add.
const bool ACCUMULATE = ((VARIANT >> 1) & 1u) != 0u;
const bool ADDEND = ((VARIANT >> 2) & 1u) != 0u;

// What is added to output (r, col) of this dispatch besides the product.
float bias_at(uint r, uint col)
{
    return ADDEND ? ld_bias(r * p.ld_add + col) : ld_bias(col);
}

// Output (r, col) of the batch entry at offc (inside M x N): alpha times the
// product's sum, the bias, and with ACCUMULATE what C held.
void store_out(uint offc, uint r, uint col, float sum)
{
    const uint at = offc + r * p.ldc + col;
    st_c(at, p.alpha * sum + ((p.flags & FLAG_BIAS) != 0u ? bias_at(r, col) : 0.0) +
                 (ACCUMULATE ? ld_c(at) : 0.0));
}
