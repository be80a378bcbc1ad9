// Workgroup-wide reductions of one float per invocation, for any workgroup
// size WG and any subgroup size. The caller declares the spec constant WG and
// calls these from uniform control flow (every invocation of the workgroup).
//
// USE_SUBGROUP (a compile-time define, two SPIR-V variants are built): reduce
// within each subgroup with subgroup arithmetic, then across the
// gl_NumSubgroups partials in shared memory. gl_SubgroupSize and
// gl_NumSubgroups are read at run time: nothing assumes 4, 8, 32 or 64, and a
// partial last subgroup is fine. Without it: a shared-memory tree.
// Both variants combine partials in a fixed order, so results are
// deterministic run to run.

#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

shared float red_buf[WG];

#if USE_SUBGROUP
#define VKMHA_REDUCE(NAME, SG_OP, OP)                          \
    float NAME(float v)                                        \
    {                                                          \
        v = SG_OP(v);                                          \
        if (subgroupElect())                                   \
            red_buf[gl_SubgroupID] = v;                        \
        barrier();                                             \
        float r = red_buf[0];                                  \
        for (uint i = 1u; i < gl_NumSubgroups; i++)            \
            r = OP(r, red_buf[i]);                             \
        barrier();                                             \
        return r;                                              \
    }
#else
#define VKMHA_REDUCE(NAME, SG_OP, OP)                          \
    float NAME(float v)                                        \
    {                                                          \
        uint tid = gl_LocalInvocationIndex;                    \
        red_buf[tid] = v;                                      \
        barrier();                                             \
        for (uint s = 1u; s < WG; s <<= 1) {                   \
            if ((tid & (2u * s - 1u)) == 0u && tid + s < WG)   \
                red_buf[tid] = OP(red_buf[tid], red_buf[tid + s]); \
            barrier();                                         \
        }                                                      \
        float r = red_buf[0];                                  \
        barrier();                                             \
        return r;                                              \
    }
#endif

float add_op(float a, float b) { return a + b; }

VKMHA_REDUCE(wg_sum, subgroupAdd, add_op)
VKMHA_REDUCE(wg_max, subgroupMax, max)
