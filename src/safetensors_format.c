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

VKMHA_PRINTF(3, 4)
static vkmha_status bad(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    if (cap == 0)
        return INVALID;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return INVALID;
}

/* A name from the file, printable in a message: at most 80 bytes, anything
 * but printable ASCII shown as '?'. */
typedef struct shown {
    char s[88];
} shown;

static shown show(const char *p, size_t n)
{
    shown r;
    size_t k = 0;
    for (; k < n && k < 80; k++)
        r.s[k] = p[k] >= 0x20 && p[k] < 0x7f ? p[k] : '?';
    if (k < n)
        memcpy(r.s + k, "...", 4);
    else
        r.s[k] = '\0';
    return r;
}

static shown show_tensor(const st_tensor *t)
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
    const shown nm = show_tensor(ts);
    bool have_dtype = false, have_shape = false, have_offsets = false;
    if (t[i].type != JSMN_OBJECT)
        return bad(why, cap, "tensor '%s': its entry is not a JSON object", nm.s);
    int j = i + 1;
    for (int k = 0; k < t[i].size; k++) {
        if (j + 1 >= n || t[j].type != JSMN_STRING || t[j].size != 1)
            return bad(why, cap, "tensor '%s': malformed entry", nm.s);
        const jsmntok_t *key = &t[j], *val = &t[j + 1];
        if (tok_is(js, key, "dtype")) {
            if (have_dtype)
                return bad(why, cap, "tensor '%s': dtype given twice", nm.s);
            have_dtype = true;
            int d = 0;
            while (d < ST_DTYPE_COUNT && !tok_is(js, val, dtypes[d].name))
                d++;
            if (d == ST_DTYPE_COUNT)
                return bad(why, cap, "tensor '%s': unknown dtype '%s'", nm.s,
                           show(js + val->start, (size_t)(val->end - val->start)).s);
            ts->dtype = (st_dtype)d;
        } else if (tok_is(js, key, "shape")) {
            if (have_shape)
                return bad(why, cap, "tensor '%s': shape given twice", nm.s);
            have_shape = true;
            if (val->type != JSMN_ARRAY)
                return bad(why, cap, "tensor '%s': shape is not an array", nm.s);
            if ((uint32_t)val->size > ST_MAX_RANK)
                return bad(why, cap, "tensor '%s': shape has %d dims (at most %u supported)",
                           nm.s, val->size, ST_MAX_RANK);
            ts->rank = (uint32_t)val->size;
            ts->numel = 1;
            for (uint32_t r = 0; r < ts->rank; r++) {
                if (j + 2 + (int)r >= n || !tok_u64(js, &t[j + 2 + r], &ts->dims[r]))
                    return bad(why, cap,
                               "tensor '%s': shape[%u] is not a non-negative 64-bit integer",
                               nm.s, r);
                if (!vkmha__mul_u64(ts->numel, ts->dims[r], &ts->numel))
                    return bad(why, cap, "tensor '%s': shape's element count overflows",
                               nm.s);
            }
        } else if (tok_is(js, key, "data_offsets")) {
            if (have_offsets)
                return bad(why, cap, "tensor '%s': data_offsets given twice", nm.s);
            have_offsets = true;
            if (val->type != JSMN_ARRAY || val->size != 2 || j + 3 >= n ||
                !tok_u64(js, &t[j + 2], &ts->begin) || !tok_u64(js, &t[j + 3], &ts->end))
                return bad(why, cap,
                           "tensor '%s': data_offsets is not an array of two non-negative "
                           "64-bit integers",
                           nm.s);
        }
        /* Other fields are ignored, as the reference implementation does. */
        if ((j = skip(t, n, j + 1)) < 0)
            return bad(why, cap, "tensor '%s': malformed entry", nm.s);
    }
    if (!have_dtype || !have_shape || !have_offsets)
        return bad(why, cap, "tensor '%s': no %s", nm.s,
                   !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
    return VKMHA_SUCCESS;
}

/* __metadata__: an object of strings. */
static vkmha_status parse_metadata(const jsmntok_t *t, int n, int i, char *why, size_t cap)
{
    if (t[i].type != JSMN_OBJECT)
        return bad(why, cap, "__metadata__ is not a JSON object");
    for (int k = 0; k < t[i].size; k++) {
        int key = i + 1 + 2 * k;
        if (key + 1 >= n || t[key].type != JSMN_STRING || t[key].size != 1 ||
            t[key + 1].type != JSMN_STRING)
            return bad(why, cap, "__metadata__ entry %d is not a string: string pair", k);
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
        const shown nm = show_tensor(ts);
        if (ts->begin > ts->end || ts->end > f->data_size)
            return bad(why, cap,
                       "tensor '%s': data_offsets [%llu, %llu) out of the data's %llu bytes",
                       nm.s, (unsigned long long)ts->begin, (unsigned long long)ts->end,
                       (unsigned long long)f->data_size);
        if (!vkmha__mul_u64(ts->numel, dtypes[ts->dtype].size, &bytes) ||
            bytes != ts->end - ts->begin)
            return bad(why, cap,
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
            return bad(why, cap, "tensor '%s' appears twice", show_tensor(sorted[k]).s);
    qsort(sorted, f->count, sizeof *sorted, cmp_offsets);
    uint64_t at = 0;
    for (size_t k = 0; k < f->count; k++) {
        const st_tensor *ts = sorted[k];
        if (ts->begin < at)
            return bad(why, cap, "tensors '%s' and '%s' overlap (data_offsets [%llu, %llu) "
                       "and [%llu, %llu))",
                       show_tensor(sorted[k - 1]).s, show_tensor(ts).s,
                       (unsigned long long)sorted[k - 1]->begin,
                       (unsigned long long)sorted[k - 1]->end,
                       (unsigned long long)ts->begin, (unsigned long long)ts->end);
        if (ts->begin > at)
            return bad(why, cap,
                       "bytes [%llu, %llu) of the data belong to no tensor (before '%s')",
                       (unsigned long long)at, (unsigned long long)ts->begin,
                       show_tensor(ts).s);
        at = ts->end;
    }
    if (at != f->data_size)
        return bad(why, cap, "bytes [%llu, %llu) of the data belong to no tensor (after the last)",
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
        return bad(why, cap, "truncated: %zu bytes, but the header length alone takes 8", size);
    uint64_t hlen = 0;
    for (int k = 7; k >= 0; k--)
        hlen = hlen << 8 | b[k];
    if (hlen > ST_MAX_HEADER)
        return bad(why, cap, "header length %llu is above the format's limit of %u bytes",
                   (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > size - 8)
        return bad(why, cap, "truncated: header length %llu, but only %zu bytes follow",
                   (unsigned long long)hlen, size - 8);
    const char *js = (const char *)b + 8;
    const size_t n_js = (size_t)hlen;
    size_t bad_at = utf8_check(b + 8, n_js);
    if (bad_at != n_js)
        return bad(why, cap, "header is not UTF-8 text: byte 0x%02x at header offset %zu",
                   b[8 + bad_at], bad_at);
    jsmn_parser p;
    jsmn_init(&p);
    int n = jsmn_parse(&p, js, n_js, NULL, 0);
    if (n < 0)
        return bad(why, cap, "header is not valid JSON (%s near header offset %u)",
                   jsmn_error(n), p.pos);
    if (n == 0)
        return bad(why, cap, "header is empty (a JSON object is required)");
    if (!(t = vkmha__alloc_with(a, (size_t)n * sizeof *t))) {
        snprintf(why, cap, "out of host memory");
        return VKMHA_ERROR_OUT_OF_HOST_MEMORY;
    }
    jsmn_init(&p);
    n = jsmn_parse(&p, js, n_js, t, (unsigned)n);
    if (n < 0) {
        st = bad(why, cap, "header is not valid JSON (%s near header offset %u)",
                 jsmn_error(n), p.pos);
        goto fail;
    }
    if (!(stack = vkmha__alloc_with(a, 2 * (size_t)n * sizeof *stack))) {
        st = VKMHA_ERROR_OUT_OF_HOST_MEMORY;
        goto fail;
    }
    long bad_json = check_grammar(js, t, n, stack, stack + n);
    if (bad_json >= 0) {
        st = bad(why, cap, "header is not valid JSON (near header offset %ld)", bad_json);
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
        st = bad(why, cap, "header is not one JSON object");
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
            st = bad(why, cap, "header: entry %d has no string key", k);
            goto fail;
        }
        if (tok_is(js, &t[j], "__metadata__")) {
            if (have_metadata) {
                st = bad(why, cap, "__metadata__ appears twice");
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
            st = bad(why, cap, "header is not one JSON object");
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

/* ---- the layer ------------------------------------------------------------ */

typedef struct finder {
    const st_file *f;
    const char *prefix;
    char *why;
    size_t cap;
} finder;

/* Checks t (may be NULL: absent, fine) as a float tensor of `rank` dims;
 * want[r] 0 = any. `meaning` describes the expected shape in a message. */
static vkmha_status check_shape(const finder *fd, const st_tensor *t, uint32_t rank,
                                uint64_t want0, uint64_t want1, const char *meaning)
{
    if (!t)
        return VKMHA_SUCCESS;
    const shown nm = show_tensor(t);
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return bad(fd->why, fd->cap, "tensor '%s': dtype %s (F32, F16 or BF16 expected)",
                   nm.s, dtypes[t->dtype].name);
    const uint64_t want[2] = {want0, want1};
    bool ok = t->rank == rank;
    for (uint32_t r = 0; ok && r < rank; r++)
        ok = t->dims[r] >= 1 && t->dims[r] <= UINT32_MAX && (want[r] == 0 || t->dims[r] == want[r]);
    if (ok)
        return VKMHA_SUCCESS;
    char got[64] = "", exp[64] = "";
    size_t g = 0, e = 0;
    for (uint32_t r = 0; r < t->rank && g < sizeof got; r++)
        g += (size_t)snprintf(got + g, sizeof got - g, "%s%llu", r ? ", " : "",
                              (unsigned long long)t->dims[r]);
    for (uint32_t r = 0; r < rank && e < sizeof exp; r++) {
        if (want[r])
            e += (size_t)snprintf(exp + e, sizeof exp - e, "%s%llu", r ? ", " : "",
                                  (unsigned long long)want[r]);
        else
            e += (size_t)snprintf(exp + e, sizeof exp - e, "%sany", r ? ", " : "");
    }
    return bad(fd->why, fd->cap, "tensor '%s': shape [%s], expected %s = [%s]", nm.s, got,
               meaning, exp);
}

static const st_tensor *find(const finder *fd, const char *name)
{
    return st_find(fd->f, fd->prefix, name);
}

/* Of two alternative names, the one present (NULL if neither); both is an
 * error. */
static vkmha_status find_either(const finder *fd, const char *a, const char *b,
                                const st_tensor **out)
{
    const st_tensor *ta = find(fd, a), *tb = find(fd, b);
    if (ta && tb)
        return bad(fd->why, fd->cap, "both '%s%s' and '%s%s' are present: which one is meant?",
                   fd->prefix, a, fd->prefix, b);
    *out = ta ? ta : tb;
    return VKMHA_SUCCESS;
}

static st_slice whole(const st_tensor *t)
{
    st_slice s = {t, 0, t ? t->numel : 0};
    return s;
}

static st_slice part(const st_tensor *t, uint64_t first, uint64_t count)
{
    st_slice s = {t, first, count};
    return s;
}

vkmha_status st_find_layer(const st_file *f, const char *prefix, const char *norm_prefix,
                           uint32_t n_head, uint32_t n_kv_head, st_layer *L, char *why,
                           size_t cap)
{
    finder fd = {f, prefix ? prefix : "", why, cap};
    const char *P = fd.prefix;
    vkmha_status st;
    memset(L, 0, sizeof *L);
    if (n_head == 0)
        return bad(why, cap, "n_head is 0 (the file does not say how many heads; >= 1)");
    const uint32_t H = n_head, Hkv = n_kv_head ? n_kv_head : n_head;
    if (Hkv > H || H % Hkv != 0)
        return bad(why, cap, "n_head (%u) is not a multiple of n_kv_head (%u)", H, Hkv);
    const st_tensor *packed = find(&fd, "in_proj_weight");
    const st_tensor *sep = find(&fd, "q_proj_weight"), *lin = find(&fd, "q_proj.weight");
    if (!!packed + !!sep + !!lin > 1)
        return bad(why, cap, "two layouts under prefix '%s': both '%s' and '%s'", P,
                   show_tensor(packed ? packed : sep).s, show_tensor(lin ? lin : sep).s);
    if (!packed && !sep && !lin)
        return bad(why, cap,
                   "no attention weights under prefix '%s' (none of '%sin_proj_weight', "
                   "'%sq_proj_weight', '%sq_proj.weight')",
                   P, P, P, P);
    const st_tensor *bias_kv = find(&fd, "bias_k");
    if (bias_kv || (bias_kv = find(&fd, "bias_v"))) {
        snprintf(why, cap, "tensor '%s': add_bias_kv is not supported", show_tensor(bias_kv).s);
        return VKMHA_ERROR_UNSUPPORTED;
    }
    const st_tensor *wo = NULL, *bo = NULL;
    if ((st = find_either(&fd, "out_proj.weight", "o_proj.weight", &wo)) ||
        (st = find_either(&fd, "out_proj.bias", "o_proj.bias", &bo)))
        return st;
    if (!wo)
        return bad(why, cap, "missing tensor '%sout_proj.weight' (or '%so_proj.weight')", P, P);
    if ((st = check_shape(&fd, wo, 2, 0, 0, "[d_model, n_head * d_v]")))
        return st;
    const uint64_t E = wo->dims[0];
    if ((st = check_shape(&fd, bo, 1, E, 0, "[d_model]")))
        return st;
    const st_tensor *wq, *wk, *wv;
    uint64_t qr, kr, vr; /* rows of the projections: H * d_k, Hkv * d_k, Hkv * d_v */
    if (packed) {
        L->layout = "in_proj_weight";
        if (Hkv != H)
            return bad(why, cap,
                       "tensor '%s': a packed in_proj_weight has as many key/value heads as "
                       "query heads, but n_kv_head is %u and n_head %u",
                       show_tensor(packed).s, Hkv, H);
        if ((st = check_shape(&fd, packed, 2, 3 * E, E, "[3 * d_model, d_model]")))
            return st;
        if (E % H != 0)
            return bad(why, cap,
                       "tensor '%s': d_model (%llu) is not n_head (%u) heads of equal size",
                       show_tensor(packed).s, (unsigned long long)E, H);
        wq = wk = wv = packed;
        qr = kr = vr = E;
        L->w[ST_W_Q] = part(packed, 0, E * E);
        L->w[ST_W_K] = part(packed, E * E, E * E);
        L->w[ST_W_V] = part(packed, 2 * E * E, E * E);
    } else {
        const char *kname = sep ? "k_proj_weight" : "k_proj.weight";
        const char *vname = sep ? "v_proj_weight" : "v_proj.weight";
        L->layout = sep ? "q_proj_weight" : "q_proj.weight";
        wq = sep ? sep : lin;
        wk = find(&fd, kname);
        wv = find(&fd, vname);
        if (!wk || !wv)
            return bad(why, cap, "missing tensor '%s%s' ('%s' is present)", P,
                       !wk ? kname : vname, show_tensor(wq).s);
        if ((st = check_shape(&fd, wq, 2, 0, E, "[n_head * d_k, d_model]")))
            return st;
        qr = wq->dims[0];
        if (qr % H != 0)
            return bad(why, cap, "tensor '%s': %llu rows are not n_head (%u) heads of d_k each",
                       show_tensor(wq).s, (unsigned long long)qr, H);
        kr = qr / H * Hkv;
        if ((st = check_shape(&fd, wk, 2, kr, 0, "[n_kv_head * d_k, kdim]")) ||
            (st = check_shape(&fd, wv, 2, 0, 0, "[n_kv_head * d_v, vdim]")))
            return st;
        vr = wv->dims[0];
        if (vr % Hkv != 0)
            return bad(why, cap,
                       "tensor '%s': %llu rows are not n_kv_head (%u) heads of d_v each",
                       show_tensor(wv).s, (unsigned long long)vr, Hkv);
        L->w[ST_W_Q] = whole(wq);
        L->w[ST_W_K] = whole(wk);
        L->w[ST_W_V] = whole(wv);
    }
    if ((st = check_shape(&fd, wo, 2, E, vr / Hkv * H, "[d_model, n_head * d_v]")))
        return st;
    if (lin) {
        const char *names[3] = {"q_proj.bias", "k_proj.bias", "v_proj.bias"};
        const uint64_t rows[3] = {qr, kr, vr};
        for (int i = 0; i < 3; i++) {
            const st_tensor *b = find(&fd, names[i]);
            if ((st = check_shape(&fd, b, 1, rows[i], 0, "[rows of its weight]")))
                return st;
            L->w[ST_B_Q + i] = whole(b);
        }
    } else {
        const st_tensor *b = find(&fd, "in_proj_bias");
        if ((st = check_shape(&fd, b, 1, qr + kr + vr, 0,
                              "[rows of q, k and v projections]")))
            return st;
        if (b) {
            L->w[ST_B_Q] = part(b, 0, qr);
            L->w[ST_B_K] = part(b, qr, kr);
            L->w[ST_B_V] = part(b, qr + kr, vr);
        }
    }
    L->w[ST_W_O] = whole(wo);
    L->w[ST_B_O] = whole(bo);
    if (norm_prefix) {
        finder nf = {f, norm_prefix, why, cap};
        const st_tensor *g = find(&nf, "weight"), *be = find(&nf, "bias");
        if (!g)
            return bad(why, cap, "missing tensor '%sweight' (the LayerNorm's)", norm_prefix);
        if ((st = check_shape(&nf, g, 1, E, 0, "[d_model]")) ||
            (st = check_shape(&nf, be, 1, E, 0, "[d_model]")))
            return st;
        L->w[ST_GAMMA] = whole(g);
        L->w[ST_BETA] = whole(be);
    }
    L->d_model = (uint32_t)E;
    L->n_head = H;
    L->n_kv_head = Hkv;
    L->d_k = (uint32_t)(qr / H);
    L->d_v = (uint32_t)(vr / Hkv);
    L->kdim = (uint32_t)wk->dims[1];
    L->vdim = (uint32_t)wv->dims[1];
    return VKMHA_SUCCESS;
}

/* ---- conversion ------------------------------------------------------------ */

static bool little_endian(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

const float *st_slice_f32(const st_slice *s)
{
    const uint8_t *p = s->t->bytes + s->first * 4;
    if (s->t->dtype != ST_F32 || !little_endian() || (uintptr_t)p % sizeof(float) != 0)
        return NULL;
    return (const float *)(const void *)p;
}

void st_slice_to_f32(const st_slice *s, float *dst)
{
    const uint32_t size = dtypes[s->t->dtype].size;
    const uint8_t *p = s->t->bytes + s->first * size;
    for (uint64_t i = 0; i < s->count; i++, p += size) {
        if (s->t->dtype == ST_F32) {
            uint32_t bits = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                            (uint32_t)p[3] << 24;
            memcpy(&dst[i], &bits, sizeof bits);
        } else {
            uint16_t h = (uint16_t)(p[0] | p[1] << 8);
            dst[i] = s->t->dtype == ST_F16 ? vkmha__half_to_float(h) : vkmha__bf16_to_float(h);
        }
    }
}
