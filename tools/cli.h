/* The command-line parser of vkmha's tools and benchmarks (tools/, bench/):
 * one table of options gives both the parsing and the --help text; and the
 * tools' logger.
 * Numbers are parsed strictly: decimal digits only (no sign, no spaces, no
 * suffix), within the option's range; anything else is a message naming the
 * option and the value on stderr and exit status 2, as is an unknown option
 * or a missing value. --help (or -h) prints the usage and every option's
 * description on stdout and exits with status 0. Header-only (each program
 * is one file). */
#ifndef VKMHA_CLI_H
#define VKMHA_CLI_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkmha.h"

/* One option. Exactly one of flag, u32, str and list is set: "--name" sets
 * *flag; "--name VALUE" sets *u32 (a number in [min, max]; max 0 means
 * UINT32_MAX) or *str, or appends to list (a repeatable option: at most
 * list_cap values, their count in *list_n); a string is one of `choices`
 * when given (a NULL-terminated list). *given, when set, becomes true if the
 * option appears. */
typedef struct cli_opt {
    const char *name;    /* "--len" */
    const char *metavar; /* "N", "FILE", ...; NULL for a flag */
    const char *help;    /* what it does, its default */
    bool *flag;
    uint32_t *u32;
    const char **str;
    uint32_t min, max;
    const char *const *choices;
    bool *given;
    const char **list;
    size_t *list_n, list_cap;
} cli_opt;

/* Table rows: a flag, a number in [lo, hi] (hi 0: UINT32_MAX), any string,
 * one of a NULL-terminated list of strings. */
#define CLI_FLAG(name_, var, help_) {.name = name_, .help = help_, .flag = &(var)}
#define CLI_U32(name_, meta, var, lo, hi, help_) \
    {.name = name_, .metavar = meta, .help = help_, .u32 = &(var), .min = lo, .max = hi}
#define CLI_STR(name_, meta, var, help_) \
    {.name = name_, .metavar = meta, .help = help_, .str = &(var)}
#define CLI_CHOICE(name_, meta, var, list_, help_) \
    {.name = name_, .metavar = meta, .help = help_, .str = &(var), .choices = list_}
/* A repeatable choice: values into the array `arr`, their count into n. */
#define CLI_CHOICES(name_, meta, arr, n, list_, help_)                                   \
    {.name = name_, .metavar = meta, .help = help_, .choices = list_, .list = arr,     \
     .list_n = &(n), .list_cap = sizeof(arr) / sizeof((arr)[0])}

/* The program: its name, a one-paragraph description and its options. */
typedef struct cli_spec {
    const char *prog;
    const char *about;
    const cli_opt *opts;
    size_t n_opts;
} cli_spec;

static inline void cli_help(const cli_spec *s, FILE *f)
{
    fprintf(f, "usage: %s [options]\n\n%s\n\noptions:\n", s->prog, s->about);
    for (size_t i = 0; i < s->n_opts; i++) {
        const cli_opt *o = &s->opts[i];
        char head[64];
        snprintf(head, sizeof head, "%s%s%s", o->name, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
        fprintf(f, "  %-22s %s", head, o->help);
        if (o->u32)
            fprintf(f, " (%u to %u)", o->min, o->max ? o->max : UINT32_MAX);
        if (o->list)
            fprintf(f, " (repeatable)");
        if (o->choices) {
            fprintf(f, " (");
            for (const char *const *c = o->choices; *c; c++)
                fprintf(f, "%s%s", c == o->choices ? "" : ", ", *c);
            fprintf(f, ")");
        }
        fprintf(f, "\n");
    }
    fprintf(f, "  %-22s %s\n", "--help", "print this help and exit");
}

/* A usage error: the message, a pointer to --help, exit status 2. */
#if defined(__MINGW32__)
__attribute__((format(gnu_printf, 2, 3), noreturn))
#elif defined(__GNUC__)
__attribute__((format(printf, 2, 3), noreturn))
#endif
static inline void cli_fail(const cli_spec *s, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", s->prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(%s --help lists the options)\n", s->prog);
    exit(2);
}

/* Parses a whole decimal uint32_t in [min, max]; false on anything else. */
static inline bool cli_u32(const char *v, uint32_t min, uint32_t max, uint32_t *out)
{
    if (!v[0] || strspn(v, "0123456789") != strlen(v))
        return false;
    errno = 0;
    unsigned long long x = strtoull(v, NULL, 10);
    if (errno == ERANGE || x < min || x > max)
        return false;
    *out = (uint32_t)x;
    return true;
}

/* Parses argv; returns only when every argument was valid. */
static inline void cli_parse(const cli_spec *s, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const cli_opt *o = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_help(s, stdout);
            exit(0);
        }
        for (size_t k = 0; k < s->n_opts && !o; k++)
            if (!strcmp(a, s->opts[k].name))
                o = &s->opts[k];
        if (!o)
            cli_fail(s, "unknown option %s", a);
        if (o->given)
            *o->given = true;
        if (o->flag) {
            *o->flag = true;
            continue;
        }
        if (i + 1 >= argc)
            cli_fail(s, "%s needs a value (%s)", a, o->metavar);
        const char *v = argv[++i];
        if (o->u32) {
            const uint32_t max = o->max ? o->max : UINT32_MAX;
            if (!cli_u32(v, o->min, max, o->u32))
                cli_fail(s, "%s: \"%s\" is not a whole number from %u to %u", a, v, o->min, max);
            continue;
        }
        if (o->choices) {
            const char *const *c = o->choices;
            while (*c && strcmp(*c, v))
                c++;
            if (!*c) {
                char list[256] = "";
                for (c = o->choices; *c; c++)
                    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                             c == o->choices ? "" : ", ", *c);
                cli_fail(s, "%s: \"%s\" is not one of %s", a, v, list);
            }
        }
        if (o->list) {
            if (*o->list_n >= o->list_cap)
                cli_fail(s, "%s: more than %zu values", a, o->list_cap);
            o->list[(*o->list_n)++] = v;
            continue;
        }
        *o->str = v;
    }
}

/* Parses argv against the array `opts`: the whole program's command line.
 * `about` is the paragraph --help prints after the usage line. */
#define CLI_PARSE(prog, about, opts, argc, argv)                                     \
    do {                                                                         \
        const cli_spec cli_spec_ = {prog, about, opts, sizeof(opts) / sizeof((opts)[0])}; \
        cli_parse(&cli_spec_, argc, argv);                                       \
    } while (0)

/* A vkmha logger for the tools: vkmha's messages on stderr, named by level
 * ("vkmha: debug: ...", errors with their status). */
static inline void cli_log_stderr(void *user, vkmha_log_level level, vkmha_status status,
                                  const char *msg)
{
    static const char *const names[] = {"", "debug", "info", "warning", "error"};
    (void)user;
    if (level >= VKMHA_LOG_ERROR)
        fprintf(stderr, "vkmha: error (%s): %s\n", vkmha_status_string(status), msg);
    else
        fprintf(stderr, "vkmha: %s: %s\n", names[level <= VKMHA_LOG_WARN ? level : 0], msg);
}

#endif /* VKMHA_CLI_H */
