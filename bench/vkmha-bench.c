/* vkmha-bench: wall-clock time of the MHA forward on the Vulkan backend
 * against the scalar reference backend (the peer every machine has), in the
 * same run, over a range of sequence lengths. Prints a table and, with
 * --csv FILE, writes the rows as CSV.
 *
 *   vkmha-bench [--d-model 512] [--heads 8] [--batch 1] [--reps 5]
 *               [--max-len 512] [--csv FILE]
 *
 * Times are host wall clock around vkmha_mha_forward (uploads, one submit,
 * wait, downloads included), median of --reps after one warm-up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vkmha.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *random_array(size_t n, float scale, uint64_t *s)
{
    float *p = malloc(n * sizeof *p);
    if (!p)
        exit(1);
    for (size_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = scale * (float)((double)(*s >> 40) / 8388608.0 - 1.0);
    }
    return p;
}

/* Median wall time of `reps` forwards (after one warm-up), or -1 on error. */
static double time_forward(vkmha_mha *mha, const vkmha_mha_io *io, uint32_t reps)
{
    double *t = malloc(reps * sizeof *t), med;
    if (!t || vkmha_mha_forward(mha, io) != VKMHA_SUCCESS) {
        free(t);
        return -1;
    }
    for (uint32_t r = 0; r < reps; r++) {
        double t0 = now_ms();
        if (vkmha_mha_forward(mha, io) != VKMHA_SUCCESS) {
            free(t);
            return -1;
        }
        t[r] = now_ms() - t0;
    }
    qsort(t, reps, sizeof *t, cmp_double);
    med = t[reps / 2];
    free(t);
    return med;
}

int main(int argc, char **argv)
{
    uint32_t d_model = 512, heads = 8, batch = 1, reps = 5, max_len = 512;
    const char *csv_path = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--d-model"))
            d_model = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--heads"))
            heads = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            batch = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-len"))
            max_len = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--csv"))
            csv_path = argv[i + 1];
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!reps)
        reps = 1;
    vkmha_context *vk = NULL, *ref = NULL;
    vkmha_context_desc rd = {0};
    rd.backend = VKMHA_BACKEND_REFERENCE;
    if (vkmha_context_create(NULL, &vk) || vkmha_context_create(&rd, &ref)) {
        fprintf(stderr, "cannot create the contexts\n");
        return 1;
    }
    vkmha_context_info info;
    vkmha_context_get_info(vk, &info);
    uint64_t seed = 1;
    float bound = 1.0f / sqrtf((float)d_model);
    size_t nw = (size_t)d_model * d_model;
    float *w[4];
    for (int i = 0; i < 4; i++)
        w[i] = random_array(nw, bound, &seed);
    vkmha_mha_desc d = {0};
    d.d_model = d_model;
    d.n_head = heads;
    d.w_q = w[0], d.w_k = w[1], d.w_v = w[2], d.w_o = w[3];
    vkmha_mha *mvk = NULL, *mref = NULL;
    if (vkmha_mha_create(vk, &d, &mvk) || vkmha_mha_create(ref, &d, &mref)) {
        fprintf(stderr, "cannot create the layers: %s\n", vkmha_context_last_error(vk));
        return 1;
    }
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv)
        fprintf(csv, "# device,%s,driver,%s %s\nimpl,batch,len,d_model,heads,ms,gflops\n",
                info.device.name, info.device.driver_name, info.device.driver_info);
    printf("MHA forward, d_model %u, %u heads, batch %u, device %s\n", d_model, heads, batch,
           info.device.name);
    printf("%6s %12s %12s %10s %10s\n", "len", "vulkan ms", "reference ms", "speedup",
           "GFLOP/s");
    for (uint32_t len = 64; len <= max_len; len *= 2) {
        size_t n = (size_t)batch * len * d_model;
        float *x = random_array(n, 1.0f, &seed), *out = malloc(n * sizeof *out);
        vkmha_mha_io io = {batch, len, 0, x, x, x, NULL, out, NULL, 0, 0};
        /* 4 projections + QK^T + PV, 2 flops per multiply-add. */
        double flops = 2.0 * batch * len * (4.0 * d_model * d_model + 2.0 * len * d_model);
        double t_vk = time_forward(mvk, &io, reps);
        double t_ref = time_forward(mref, &io, 1);
        printf("%6u %12.3f %12.3f %9.1fx %10.2f\n", len, t_vk, t_ref, t_ref / t_vk,
               flops / (t_vk * 1e6));
        if (csv) {
            fprintf(csv, "vulkan,%u,%u,%u,%u,%.4f,%.3f\n", batch, len, d_model, heads, t_vk,
                    flops / (t_vk * 1e6));
            fprintf(csv, "reference,%u,%u,%u,%u,%.4f,%.3f\n", batch, len, d_model, heads,
                    t_ref, flops / (t_ref * 1e6));
        }
        free(x);
        free(out);
    }
    if (csv)
        fclose(csv);
    vkmha_mha_destroy(mvk);
    vkmha_mha_destroy(mref);
    vkmha_context_destroy(vk);
    vkmha_context_destroy(ref);
    for (int i = 0; i < 4; i++)
        free(w[i]);
    return 0;
}
