/* VKMHA_PRINTF(f, a): argument f of a function is a printf format whose
 * arguments start at a (checked by GCC and Clang). Shared by internal.h and
 * the parsers' headers, which include no other private header. */
#ifndef VKMHA_PRINTF_ATTR_H
#define VKMHA_PRINTF_ATTR_H

#if defined(__MINGW32__) /* C99 printf (__USE_MINGW_ANSI_STDIO) */
#define VKMHA_PRINTF(f, a) __attribute__((format(gnu_printf, f, a)))
#elif defined(__GNUC__)
#define VKMHA_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define VKMHA_PRINTF(f, a)
#endif

#endif
