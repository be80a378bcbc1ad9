#version 450
// Configure's test of the cooperative-matrix glslang (meson.build): does it
// also compile GL_NV_cooperative_matrix2 (workgroup scope, tensor layouts,
// SPIR-V 1.6)? Never built into the library.
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 128) in;
layout(binding = 0) buffer In { float16_t x[]; };
layout(binding = 1) buffer Out { float o[]; };
void main()
{
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> t =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    t = setTensorLayoutDimensionNV(t, 40, 40);
    coopmat<float16_t, gl_ScopeWorkgroup, 32, 32, gl_MatrixUseA> a;
    coopmat<float16_t, gl_ScopeWorkgroup, 32, 32, gl_MatrixUseB> b;
    coopMatLoadTensorNV(a, x, 0, sliceTensorLayoutNV(t, 0, 32, 0, 32));
    coopMatLoadTensorNV(b, x, 0, sliceTensorLayoutNV(t, 8, 32, 0, 32));
    coopmat<float, gl_ScopeWorkgroup, 32, 32, gl_MatrixUseAccumulator> c =
        coopmat<float, gl_ScopeWorkgroup, 32, 32, gl_MatrixUseAccumulator>(0.0);
    c = coopMatMulAdd(a, b, c);
    coopMatStoreTensorNV(c, o, 0, sliceTensorLayoutNV(t, 0, 32, 0, 32));
}
