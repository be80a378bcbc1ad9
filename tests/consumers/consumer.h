/* What every consumer test does once it has linked vkmha its way: a small
 * layer forward on Vulkan (validation layer on) and on the reference
 * backend, compared element by element (|vk - ref| <= 1e-5 + 1e-4 |ref|,
 * as tests/test_mha.c), and the validation layer silent. Returns 0 when
 * all holds, else 1 after a message on stdout. Header-only C (the consumers
 * are single files built by the suite or by a parent project). */
#ifndef VKMHA_CONSUMER_H
#define VKMHA_CONSUMER_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <vkmha.h>

/* Run after the Vulkan context exists: the suite's consumers pin the
 * loaded libraries there for sanitizer reports (t_pin_libraries). */
#ifndef CONSUMER_AFTER_CREATE
#define CONSUMER_AFTER_CREATE() ((void)0)
#endif

static int consumer_forward(const char *who)
{
    enum { D = 24, H = 3, L = 7, B = 2 };
    static float w[4][D * D], x[B * L * D], y_vk[B * L * D], y_ref[B * L * D];
    uint32_t seed = 12345;
    for (int m = 0; m < 4; m++)
        for (int i = 0; i < D * D; i++)
            w[m][i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < B * L * D; i++)
        x[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 8388608.0f - 1.0f;

    vkmha_context *vk = NULL, *ref = NULL;
    vkmha_mha *m_vk = NULL, *m_ref = NULL;
    vkmha_context_desc cd = {0};
    cd.enable_validation = true;
    int rc = 1;
    if (vkmha_context_create(&cd, &vk) != VKMHA_SUCCESS) {
        printf("%s: Vulkan context: %s\n", who, vkmha_context_last_error(NULL));
        return 1;
    }
    CONSUMER_AFTER_CREATE();
    cd.enable_validation = false;
    cd.backend = VKMHA_BACKEND_REFERENCE;
    if (vkmha_context_create(&cd, &ref) != VKMHA_SUCCESS) {
        printf("%s: reference context: %s\n", who, vkmha_context_last_error(NULL));
        vkmha_context_destroy(vk);
        return 1;
    }
    vkmha_mha_desc md = {0};
    md.d_model = D;
    md.n_head = H;
    md.w_q = w[0];
    md.w_k = w[1];
    md.w_v = w[2];
    md.w_o = w[3];
    md.post_norm = true;
    vkmha_mask mask = {0};
    mask.kinds = VKMHA_MASK_CAUSAL;
    vkmha_mha_io io = {0};
    io.batch = B;
    io.len_q = L;
    io.query = io.key = io.value = x;
    io.mask = &mask;
    io.out = y_vk;
    if (vkmha_mha_create(vk, &md, &m_vk) || vkmha_mha_forward(m_vk, &io)) {
        printf("%s: Vulkan forward: %s\n", who, vkmha_context_last_error(vk));
        goto done;
    }
    io.out = y_ref;
    if (vkmha_mha_create(ref, &md, &m_ref) || vkmha_mha_forward(m_ref, &io)) {
        printf("%s: reference forward: %s\n", who, vkmha_context_last_error(ref));
        goto done;
    }
    double worst = 0;
    for (int i = 0; i < B * L * D; i++) {
        double e = fabs((double)y_vk[i] - y_ref[i]) - (1e-5 + 1e-4 * fabs((double)y_ref[i]));
        if (!(e <= worst))
            worst = e; /* NaN counts */
    }
    vkmha_context_info info;
    vkmha_context_get_info(vk, &info);
    if (worst > 0 || !info.validation_enabled || info.validation_messages) {
        printf("%s: worst excess over the tolerance %g, %llu validation messages\n", who, worst,
               (unsigned long long)info.validation_messages);
        goto done;
    }
    rc = 0;
done:
    vkmha_mha_destroy(m_vk);
    vkmha_mha_destroy(m_ref);
    vkmha_context_destroy(vk);
    vkmha_context_destroy(ref);
    return rc;
}

#endif /* VKMHA_CONSUMER_H */
