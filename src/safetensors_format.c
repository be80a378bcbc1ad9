/* The safetensors parser and the layer's names (see safetensors_format.h).
 * The JSON header is tokenized by jsmn (Debian's libjsmn-dev, header-only,
 * compiled in here in strict mode); this file checks the grammar between
 * the tokens, which jsmn does not, and what the tokens mean.
 * Every input is untrusted: no recursion (a deeply nested header cannot
 * exhaust the stack), every size and offset overflow-checked, and every
 * rejection explained in `why`. */
#include "safetensors_format.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "internal.h"

#define JSMN_STATIC
#define JSMN_STRICT
#include <jsmn.h>

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT

static const struct {
    const char *name;
    uint32_t size; /* bytes per element */
} dtypes[ST_DTYPE_COUNT] = {
    [ST_F32] = {"F32", 4},   [ST_F16] = {"F16", 2},   [ST_BF16] = {"BF16", 2},
    [ST_F64] = {"F64", 8},   [ST_I64] = {"I64", 8},   [ST_U64] = {"U64", 8},
    [ST_I32] = {"I32", 4},   [ST_U32] = {"U32", 4},   [ST_I16] = {"I16", 2},
    [ST_U16] = {"U16", 2},   [ST_I8] = {"I8", 1},     [ST_U8] = {"U8", 1},
    [ST_BOOL] = {"BOOL", 1}, [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E5M2] = {"F8_E5M2", 1},
};

vkmha_status st_bad(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    if (cap == 0)
        return INVALID;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return INVALID;
}

/* st_shown of the n bytes at p. */
static st_shown show(const char *p, size_t n)
{
    st_shown r;
    size_t k = 0;
    for (; k < n && k < 80; k++)
        r.s[k] = p[k] >= 0x20 && p[k] < 0x7f ? p[k] : '?';
    if (k < n)
        memcpy(r.s + k, "...", 4);
    else
        r.s[k] = '\0';
    return r;
}

st_shown st_show_tensor(const st_tensor *t)
{
    return show(t->name, t->name_len);
}

/* Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF)
 * and no NUL byte (jsmn would stop there). Returns the offset of the first
 * bad byte, or n. */
static size_t utf8_check(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp;
        if (c == 0)
            return i;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            len = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
            len = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
            len = 4, cp = c & 0x07;
        else
            return i;
        if (n - i < len)
            return i;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return i;
        i += len;
    }
    return n;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The token after the subtree at i, iteratively; -1 if the tokens end first. */
static int skip(const jsmntok_t *t, int n, int i)
{
    uint64_t pending = 1;
    while (pending > 0) {
        if (i >= n)
            return -1;
        pending--;
        if (t[i].type == JSMN_OBJECT)
            pending += 2 * (uint64_t)t[i].size;
        else if (t[i].type == JSMN_ARRAY)
            pending += (uint64_t)t[i].size;
        i++;
    }
    return i;
}

static bool tok_is(const char *js, const jsmntok_t *t, const char *s)
{
    size_t n = strlen(s);
    return t->type == JSMN_STRING && (size_t)(t->end - t->start) == n &&
           memcmp(js + t->start, s, n) == 0;
}

/* A JSON non-negative integer without sign, fraction, exponent or leading
 * zero, that fits in 64 bits. */
static bool tok_u64(const char *js, const jsmntok_t *t, uint64_t *out)
{
    const char *p = js + t->start;
    int n = t->end - t->start;
    uint64_t v = 0;
    if (t->type != JSMN_PRIMITIVE || n < 1 || (n > 1 && p[0] == '0'))
        return false;
    for (int k = 0; k < n; k++) {
        if (p[k] < '0' || p[k] > '9')
            return false;
        uint64_t d = (uint64_t)(p[k] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* ---- JSON grammar between jsmn's tokens ----------------------------------- */

/* jsmn finds tokens but is lenient about what lies between them (a missing
 * or extra comma, a doubled colon) and about primitives (it takes "tru").
 * check_grammar walks the tokens in document order with a stack of open
 * containers and checks every gap and primitive against JSON's grammar, so
 * that a header is accepted only if it is JSON. */

static bool only_space(const char *js, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (!is_space(js[i]))
            return false;
    return true;
}

/* Whether the gap [from, to) is whitespace around exactly the character
 * sep ('\0': nothing but whitespace). */
static bool gap_is(const char *js, size_t from, size_t to, char sep)
{
    while (from < to && is_space(js[from]))
        from++;
    if (sep) {
        if (from == to || js[from] != sep)
            return false;
        from++;
    }
    return only_space(js, from, to);
}

/* true, false, null or a JSON number. */
static bool primitive_ok(const char *p, size_t n)
{
    if ((n == 4 && !memcmp(p, "true", 4)) || (n == 5 && !memcmp(p, "false", 5)) ||
        (n == 4 && !memcmp(p, "null", 4)))
        return true;
    size_t i = 0;
#define DIGITS(at_least_one)                                                      \
    do {                                                                          \
        size_t d0 = i;                                                            \
        while (i < n && p[i] >= '0' && p[i] <= '9')                               \
            i++;                                                                  \
        if ((at_least_one) && i == d0)                                            \
            return false;                                                         \
    } while (0)
    if (i < n && p[i] == '-')
        i++;
    if (i < n && p[i] == '0')
        i++;
    else
        DIGITS(true);
    if (i < n && p[i] == '.') {
        i++;
        DIGITS(true);
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-'))
            i++;
        DIGITS(true);
    }
#undef DIGITS
    return i == n;
}

/* A token's bytes in the text, quotes included. */
static size_t raw_start(const jsmntok_t *t)
{
    return (size_t)t->start - (t->type == JSMN_STRING);
}

static size_t raw_end(const jsmntok_t *t)
{
    return (size_t)t->end + (t->type == JSMN_STRING);
}

/* Returns the header offset of the first violation, or -1. stack: scratch
 * for n token indices. */
static long check_grammar(const char *js, const jsmntok_t *t, int n, int *stack, int *count)
{
    int depth = 0;
    size_t cursor = 0;
    for (int i = 0; i <= n; i++) {
        const size_t at = i < n ? raw_start(&t[i]) : SIZE_MAX;
        /* Close the containers that end before token i. */
        while (depth > 0 && (size_t)t[stack[depth - 1]].end <= at) {
            const jsmntok_t *c = &t[stack[depth - 1]];
            if (!gap_is(js, cursor, (size_t)c->end - 1, '\0') ||
                (c->type == JSMN_OBJECT && count[depth - 1] % 2 != 0))
                return (long)cursor;
            cursor = (size_t)c->end;
            depth--;
        }
        if (i == n)
            break;
        if (depth == 0) {
            if (i != 0)
                return (long)at; /* a second top-level value */
        } else {
            const jsmntok_t *c = &t[stack[depth - 1]];
            const int k = count[depth - 1]++;
            char sep = k == 0 ? '\0' : ',';
            if (c->type == JSMN_OBJECT) {
                if (k % 2 == 0 && t[i].type != JSMN_STRING)
                    return (long)at; /* a key that is not a string */
                sep = k % 2 ? ':' : sep;
            }
            if (!gap_is(js, cursor, at, sep))
                return (long)cursor;
        }
        if (t[i].type == JSMN_PRIMITIVE &&
            !primitive_ok(js + t[i].start, (size_t)(t[i].end - t[i].start)))
            return (long)at;
        if (t[i].type == JSMN_STRING)
            for (int k = t[i].start; k < t[i].end; k++)
                if ((unsigned char)js[k] < 0x20)
                    return k; /* a control character inside a string */
        if (t[i].type == JSMN_OBJECT || t[i].type == JSMN_ARRAY) {
            stack[depth] = i;
            count[depth++] = 0;
            cursor = (size_t)t[i].start + 1;
        } else {
            cursor = raw_end(&t[i]);
        }
    }
    return -1;
}

/* One tensor's entry: the object at token i. */
static vkmha_status parse_tensor(const char *js, const jsmntok_t *t, int n, int i,
                                 st_tensor *ts, char *why, size_t cap)
{
    const st_shown nm = st_show_tensor(ts);
    bool have_dtype = false, have_shape = false, have_offsets = false;
    if (t[i].type != JSMN_OBJECT)
        return st_bad(why, cap, "tensor '%s': its entry is not a JSON object", nm.s);
    int j = i + 1;
    for (int k = 0; k < t[i].size; k++) {
        if (j + 1 >= n || t[j].type != JSMN_STRING || t[j].size != 1)
            return st_bad(why, cap, "tensor '%s': malformed entry", nm.s);
        const jsmntok_t *key = &t[j], *val = &t[j + 1];
        if (tok_is(js, key, "dtype")) {
            if (have_dtype)
                return st_bad(why, cap, "tensor '%s': dtype given twice", nm.s);
            have_dtype = true;
            int d = 0;
            while (d < ST_DTYPE_COUNT && !tok_is(js, val, dtypes[d].name))
                d++;
            if (d == ST_DTYPE_COUNT)
                return st_bad(why, cap, "tensor '%s': unknown dtype '%s'", nm.s,
                           show(js + val->start, (size_t)(val->end - val->start)).s);
            ts->dtype = (st_dtype)d;
        } else if (tok_is(js, key, "shape")) {
            if (have_shape)
                return st_bad(why, cap, "tensor '%s': shape given twice", nm.s);
            have_shape = true;
            if (val->type != JSMN_ARRAY)
                return st_bad(why, cap, "tensor '%s': shape is not an array", nm.s);
            if ((uint32_t)val->size > ST_MAX_RANK)
                return st_bad(why, cap, "tensor '%s': shape has %d dims (at most %u supported)",
                           nm.s, val->size, ST_MAX_RANK);
            ts->rank = (uint32_t)val->size;
            ts->numel = 1;
            for (uint32_t r = 0; r < ts->rank; r++) {
                if (j + 2 + (int)r >= n || !tok_u64(js, &t[j + 2 + r], &ts->dims[r]))
                    return st_bad(why, cap,
                               "tensor '%s': shape[%u] is not a non-negative 64-bit integer",
                               nm.s, r);
                if (!vkmha__mul_u64(ts->numel, ts->dims[r], &ts->numel))
                    return st_bad(why, cap, "tensor '%s': shape's element count overflows",
                               nm.s);
            }
        } else if (tok_is(js, key, "data_offsets")) {
            if (have_offsets)
                return st_bad(why, cap, "tensor '%s': data_offsets given twice", nm.s);
            have_offsets = true;
            if (val->type != JSMN_ARRAY || val->size != 2 || j + 3 >= n ||
                !tok_u64(js, &t[j + 2], &ts->begin) || !tok_u64(js, &t[j + 3], &ts->end))
                return st_bad(why, cap,
                           "tensor '%s': data_offsets is not an array of two non-negative "
                           "64-bit integers",
                           nm.s);
        }
        /* Other fields are ignored, as the reference implementation does. */
        if ((j = skip(t, n, j + 1)) < 0)
            return st_bad(why, cap, "tensor '%s': malformed entry", nm.s);
    }
    if (!have_dtype || !have_shape || !have_offsets)
        return st_bad(why, cap, "tensor '%s': no %s", nm.s,
                   !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
    return VKMHA_SUCCESS;
}

/* __metadata__: an object of strings. */
static vkmha_status parse_metadata(const jsmntok_t *t, int n, int i, char *why, size_t cap)
{
    if (t[i].type != JSMN_OBJECT)
        return st_bad(why, cap, "__metadata__ is not a JSON object");
    for (int k = 0; k < t[i].size; k++) {
        int key = i + 1 + 2 * k;
        if (key + 1 >= n || t[key].type != JSMN_STRING || t[key].size != 1 ||
            t[key + 1].type != JSMN_STRING)
            return st_bad(why, cap, "__metadata__ entry %d is not a string: string pair", k);
    }
    return VKMHA_SUCCESS;
}

static int cmp_names(const void *pa, const void *pb)
{
    const st_tensor *a = *(const st_tensor *const *)pa, *b = *(const st_tensor *const *)pb;
    size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
    int c = memcmp(a->name, b->name, n);
    return c ? c : (a->name_len > b->name_len) - (a->name_len < b->name_len);
}

static int cmp_offsets(const void *pa, const void *pb)
{
    const st_tensor *a = *(const st_tensor *const *)pa, *b = *(const st_tensor *const *)pb;
    if (a->begin != b->begin)
        return (a->begin > b->begin) - (a->begin < b->begin);
    return (a->end > b->end) - (a->end < b->end);
}

/* Names unique, each tensor's bytes match its shape and dtype, and the
 * tensors cover the data exactly. sorted: scratch for count pointers. */
static vkmha_status check_tensors(st_file *f, const st_tensor **sorted, char *why, size_t cap)
{
    for (size_t k = 0; k < f->count; k++) {
        st_tensor *ts = &f->tensors[k];
        uint64_t bytes;
        const st_shown nm = st_show_tensor(ts);
        if (ts->begin > ts->end || ts->end > f->data_size)
            return st_bad(why, cap,
                       "tensor '%s': data_offsets [%llu, %llu) out of the data's %llu bytes",
                       nm.s, (unsigned long long)ts->begin, (unsigned long long)ts->end,
                       (unsigned long long)f->data_size);
        if (!vkmha__mul_u64(ts->numel, dtypes[ts->dtype].size, &bytes) ||
            bytes != ts->end - ts->begin)
            return st_bad(why, cap,
                       "tensor '%s': data_offsets [%llu, %llu) hold %llu bytes, but %llu "
                       "elements of %s need %s%llu",
                       nm.s, (unsigned long long)ts->begin, (unsigned long long)ts->end,
                       (unsigned long long)(ts->end - ts->begin),
                       (unsigned long long)ts->numel, dtypes[ts->dtype].name,
                       bytes == ts->numel * dtypes[ts->dtype].size ? "" : "more than ",
                       (unsigned long long)(ts->numel * dtypes[ts->dtype].size));
        ts->bytes = f->data + ts->begin;
        sorted[k] = ts;
    }
    qsort(sorted, f->count, sizeof *sorted, cmp_names);
    for (size_t k = 1; k < f->count; k++)
        if (cmp_names(&sorted[k - 1], &sorted[k]) == 0)
            return st_bad(why, cap, "tensor '%s' appears twice", st_show_tensor(sorted[k]).s);
    qsort(sorted, f->count, sizeof *sorted, cmp_offsets);
    uint64_t at = 0;
    for (size_t k = 0; k < f->count; k++) {
        const st_tensor *ts = sorted[k];
        if (ts->begin < at)
            return st_bad(why, cap, "tensors '%s' and '%s' overlap (data_offsets [%llu, %llu) "
                       "and [%llu, %llu))",
                       st_show_tensor(sorted[k - 1]).s, st_show_tensor(ts).s,
                       (unsigned long long)sorted[k - 1]->begin,
                       (unsigned long long)sorted[k - 1]->end,
                       (unsigned long long)ts->begin, (unsigned long long)ts->end);
        if (ts->begin > at)
            return st_bad(why, cap,
                       "bytes [%llu, %llu) of the data belong to no tensor (before '%s')",
                       (unsigned long long)at, (unsigned long long)ts->begin,
                       st_show_tensor(ts).s);
        at = ts->end;
    }
    if (at != f->data_size)
        return st_bad(why, cap, "bytes [%llu, %llu) of the data belong to no tensor (after the last)",
                   (unsigned long long)at, (unsigned long long)f->data_size);
    return VKMHA_SUCCESS;
}

static const char *jsmn_error(int e)
{
    return e == JSMN_ERROR_INVAL ? "invalid character" :
           e == JSMN_ERROR_PART ? "truncated JSON" : "too many tokens";
}

vkmha_status st_parse(const vkmha_allocator *a, const void *bytes, size_t size, st_file *out,
                      char *why, size_t cap)
{
    const uint8_t *b = bytes;
    jsmntok_t *t = NULL;
    int *stack = NULL;
    const st_tensor **sorted = NULL;
    vkmha_status st;
    memset(out, 0, sizeof *out);
    if (!b || size < 8)
        return st_bad(why, cap, "truncated: %zu bytes, but the header length alone takes 8", size);
    uint64_t hlen = 0;
    for (int k = 7; k >= 0; k--)
        hlen = hlen << 8 | b[k];
    if (hlen > ST_MAX_HEADER)
        return st_bad(why, cap, "header length %llu is above the format's limit of %u bytes",
                   (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > size - 8)
        return st_bad(why, cap, "truncated: header length %llu, but only %zu bytes follow",
                   (unsigned long long)hlen, size - 8);
    const char *js = (const char *)b + 8;
    const size_t n_js = (size_t)hlen;
    size_t bad_at = utf8_check(b + 8, n_js);
    if (bad_at != n_js)
        return st_bad(why, cap, "header is not UTF-8 text: byte 0x%02x at header offset %zu",
                   b[8 + bad_at], bad_at);
    jsmn_parser p;
    jsmn_init(&p);
    int n = jsmn_parse(&p, js, n_js, NULL, 0);
    if (n < 0)
        return st_bad(why, cap, "header is not valid JSON (%s near header offset %u)",
                   jsmn_error(n), p.pos);
    if (n == 0)
        return st_bad(why, cap, "header is empty (a JSON object is required)");
    if (!(t = vkmha__alloc_with(a, (size_t)n * sizeof *t))) {
        snprintf(why, cap, "out of host memory");
        return VKMHA_ERROR_OUT_OF_HOST_MEMORY;
    }
    jsmn_init(&p);
    n = jsmn_parse(&p, js, n_js, t, (unsigned)n);
    if (n < 0) {
        st = st_bad(why, cap, "header is not valid JSON (%s near header offset %u)",
                 jsmn_error(n), p.pos);
        goto fail;
    }
    if (!(stack = vkmha__alloc_with(a, 2 * (size_t)n * sizeof *stack))) {
        st = VKMHA_ERROR_OUT_OF_HOST_MEMORY;
        goto fail;
    }
    long bad_json = check_grammar(js, t, n, stack, stack + n);
    if (bad_json >= 0) {
        st = st_bad(why, cap, "header is not valid JSON (near header offset %ld)", bad_json);
        goto fail;
    }
    size_t lead = 0;
    while (lead < n_js && is_space(js[lead]))
        lead++;
    size_t tail = (size_t)t[0].end;
    while (tail < n_js && is_space(js[tail]))
        tail++;
    if (t[0].type != JSMN_OBJECT || (size_t)t[0].start != lead || tail != n_js ||
        skip(t, n, 0) != n) {
        st = st_bad(why, cap, "header is not one JSON object");
        goto fail;
    }
    if (!(out->tensors = vkmha__alloc_with(a, (size_t)t[0].size * sizeof *out->tensors))) {
        st = VKMHA_ERROR_OUT_OF_HOST_MEMORY;
        goto fail;
    }
    out->data = b + 8 + n_js;
    out->data_size = (uint64_t)(size - 8 - n_js);
    bool have_metadata = false;
    int j = 1;
    for (int k = 0; k < t[0].size; k++) {
        if (j + 1 >= n || t[j].type != JSMN_STRING || t[j].size != 1) {
            st = st_bad(why, cap, "header: entry %d has no string key", k);
            goto fail;
        }
        if (tok_is(js, &t[j], "__metadata__")) {
            if (have_metadata) {
                st = st_bad(why, cap, "__metadata__ appears twice");
                goto fail;
            }
            have_metadata = true;
            if ((st = parse_metadata(t, n, j + 1, why, cap)))
                goto fail;
        } else {
            st_tensor *ts = &out->tensors[out->count++];
            memset(ts, 0, sizeof *ts);
            ts->name = js + t[j].start;
            ts->name_len = (size_t)(t[j].end - t[j].start);
            if ((st = parse_tensor(js, t, n, j + 1, ts, why, cap)))
                goto fail;
        }
        if ((j = skip(t, n, j + 1)) < 0) {
            st = st_bad(why, cap, "header is not one JSON object");
            goto fail;
        }
    }
    if (out->count &&
        !(sorted = vkmha__alloc_with(a, out->count * sizeof *sorted))) {
        st = VKMHA_ERROR_OUT_OF_HOST_MEMORY;
        goto fail;
    }
    if ((st = check_tensors(out, sorted, why, cap)))
        goto fail;
    vkmha__free_with(a, (void *)sorted);
    vkmha__free_with(a, stack);
    vkmha__free_with(a, t);
    return VKMHA_SUCCESS;
fail:
    if (st == VKMHA_ERROR_OUT_OF_HOST_MEMORY)
        snprintf(why, cap, "out of host memory");
    vkmha__free_with(a, (void *)sorted);
    vkmha__free_with(a, stack);
    vkmha__free_with(a, t);
    st_free(a, out);
    return st;
}

void st_free(const vkmha_allocator *a, st_file *f)
{
    vkmha__free_with(a, f->tensors);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *prefix, const char *name)
{
    const size_t np = prefix ? strlen(prefix) : 0, nn = strlen(name);
    for (size_t k = 0; k < f->count; k++) {
        const st_tensor *ts = &f->tensors[k];
        if (ts->name_len == np + nn && memcmp(ts->name, prefix, np) == 0 &&
            memcmp(ts->name + np, name, nn) == 0)
            return ts;
    }
    return NULL;
}

const char *st_dtype_name(uint32_t dtype)
{
    return dtypes[dtype].name;
}

uint32_t st_dtype_size(uint32_t dtype)
{
    return dtypes[dtype].size;
}
