// C++17 consumer, compiled with -Wall -Wextra -pedantic -Werror: both public
// headers, and every desc and struct of the API initialized with the
// documented idiom `= {0}` (and `{}`), which must compile without a warning
// (enum-valued fields are uint32_t and every field has VKMHA_ZERO: see
// include/vkmha.h). Then a layer forward and each op on the reference
// backend, checked against values computed here.
#include <vkmha.h>
#include <vkmha_vulkan.h>

#include <cmath>
#include <string_view>
#include <cstdio>
#include <vector>

static int cases = 0, failed = 0;

static void report(bool ok, const char *what)
{
    cases++;
    failed += !ok;
    std::printf("%s %d - %s\n", ok ? "ok" : "not ok", cases, what);
}

int main()
{
    // The idiom on every struct of both headers.
    vkmha_context_desc cd = {0};
    vkmha_allocator al = {0};
    vkmha_tile_config tile = {0};
    vkmha_debug_options dbg = {0};
    vkmha_device_info dev = {0};
    vkmha_kernel_info ki = {0};
    vkmha_kernel_param kp = {0};
    vkmha_context_info info = {0};
    vkmha_mask mask = {0};
    vkmha_matmul_desc mm = {0};
    vkmha_softmax_desc sm = {0};
    vkmha_heads_desc hd = {0};
    vkmha_attention_desc ad = {0};
    vkmha_mha_desc md = {0};
    vkmha_mha_io io = {0};
    vkmha_tensor_desc td = {0};
    vkmha_tensor_mask tm = {0};
    vkmha_mha_tensors mt = {0};
    vkmha_vulkan_desc vd = {0};
    vkmha_safetensors_desc st = {0};
    vkmha_context_desc empty{}; // and C++'s own value-initialization
    (void)al, (void)tile, (void)dbg, (void)dev, (void)ki, (void)kp, (void)vd, (void)st, (void)empty;
    report(cd.backend == 0 && md.w_q == nullptr && io.attention_path == 0 && tm.bias == nullptr &&
               mt.out == nullptr && td.rank == 0,
           "every desc of vkmha.h and vkmha_vulkan.h takes {0} in C++17 without a warning");
    // Positional initializers with enumerators, as in C.
    vkmha_tensor_desc td2 = {VKMHA_DTYPE_F32, 2, {3, 4}};
    report(td2.dims[1] == 4, "positional initializer with an enumerator");

    cd.backend = VKMHA_BACKEND_REFERENCE;
    vkmha_context *ctx = nullptr;
    if (vkmha_context_create(&cd, &ctx) != VKMHA_SUCCESS) {
        std::printf("Bail out! reference context: %s\n", vkmha_context_last_error(nullptr));
        return 1;
    }
    report(vkmha_context_get_info(ctx, &info) == VKMHA_SUCCESS &&
               info.backend == VKMHA_BACKEND_REFERENCE,
           "reference context");
    uint32_t kernels = 1;
    report(vkmha_context_get_kernels(ctx, &kernels, &ki) == VKMHA_SUCCESS && kernels == 0,
           "the reference context lists no kernels");

    // matmul: C = A B^T, 2 x 3 times (2 x 3)^T.
    std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {1, 0, 1, 0, 1, 0}, c(4, -1.0f);
    mm.m = 2;
    mm.n = 2;
    mm.k = 3;
    mm.op_b = VKMHA_OP_T;
    bool ok = vkmha_matmul(ctx, &mm, a.data(), b.data(), nullptr, c.data()) == VKMHA_SUCCESS &&
              c[0] == 4 && c[1] == 2 && c[2] == 10 && c[3] == 5;
    report(ok, "vkmha_matmul on the reference backend");

    // softmax of a row of equal values: uniform.
    std::vector<float> x(5, 0.5f), y(5);
    sm.len_q = 1;
    sm.len_k = 5;
    ok = vkmha_softmax(ctx, &sm, x.data(), &mask, y.data()) == VKMHA_SUCCESS &&
         std::fabs(y[2] - 0.2f) < 1e-6f;
    report(ok, "vkmha_softmax: uniform row");

    // split then merge heads: the identity.
    hd.len = 3;
    hd.heads = 2;
    hd.head_dim = 2;
    std::vector<float> h(12), s(12), back(12);
    for (int i = 0; i < 12; i++)
        h[i] = float(i);
    ok = vkmha_split_heads(ctx, &hd, h.data(), s.data()) == VKMHA_SUCCESS &&
         vkmha_merge_heads(ctx, &hd, s.data(), back.data()) == VKMHA_SUCCESS && back == h &&
         s[2] == 4.0f;
    report(ok, "vkmha_split_heads / vkmha_merge_heads");

    // attention with one key: the output is that key's value.
    ad.heads = 1;
    ad.len_q = 2;
    ad.len_k = 1;
    ad.d_k = ad.d_v = 2;
    std::vector<float> q = {1, 2, 3, 4}, k = {1, 1}, v = {7, 8}, o(4);
    ok = vkmha_attention(ctx, &ad, q.data(), k.data(), v.data(), nullptr, o.data(), nullptr) ==
             VKMHA_SUCCESS &&
         o[0] == 7 && o[1] == 8 && o[2] == 7 && o[3] == 8;
    report(ok, "vkmha_attention: one key gives its value");

    // The layer with identity weights and one key: out = value.
    const uint32_t D = 4;
    std::vector<float> eye(D * D, 0.0f), in = {1, -2, 3, -4}, out(D);
    for (uint32_t i = 0; i < D; i++)
        eye[i * D + i] = 1.0f;
    md.d_model = D;
    md.n_head = 2;
    md.w_q = md.w_k = md.w_v = md.w_o = eye.data();
    vkmha_mha *mha = nullptr;
    io.len_q = 1;
    io.query = io.key = io.value = in.data();
    io.out = out.data();
    ok = vkmha_mha_create(ctx, &md, &mha) == VKMHA_SUCCESS &&
         vkmha_mha_forward(mha, &io) == VKMHA_SUCCESS && out == in;
    report(ok, "vkmha_mha_forward with identity weights and one position returns its input");
    vkmha_mha_destroy(mha);

    // Bad input: a status and the message, as in C.
    md.n_head = 3;
    ok = vkmha_mha_create(ctx, &md, &mha) == VKMHA_ERROR_INVALID_ARGUMENT && mha == nullptr &&
         std::string_view(vkmha_context_last_error(ctx)).find("n_head") != std::string_view::npos;
    report(ok, "a bad desc: VKMHA_ERROR_INVALID_ARGUMENT naming the field");
    vkmha_context_destroy(ctx);

    std::printf("1..%d\n", cases);
    return failed ? 1 : 0;
}
