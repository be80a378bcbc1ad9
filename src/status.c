/* Status names, the per-context last error, and logging. */
#include "internal.h"

#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#endif

#include <stdio.h>
#include <string.h>

/* One list generates both the names and the switch below. */
#define VKMHA_STATUS_LIST(X)                \
    X(VKMHA_NOT_READY)                      \
    X(VKMHA_SUCCESS)                        \
    X(VKMHA_ERROR_INVALID_ARGUMENT)         \
    X(VKMHA_ERROR_UNSUPPORTED)              \
    X(VKMHA_ERROR_NO_DEVICE)                \
    X(VKMHA_ERROR_OUT_OF_HOST_MEMORY)       \
    X(VKMHA_ERROR_OUT_OF_DEVICE_MEMORY)     \
    X(VKMHA_ERROR_DEVICE_LOST)              \
    X(VKMHA_ERROR_VULKAN)

VKMHA_API const char *vkmha_status_string(vkmha_status status)
{
    switch (status) {
#define X(name)                                                                         \
    case name:                                                                          \
        return #name;
        VKMHA_STATUS_LIST(X)
#undef X
    }
    return "VKMHA_ERROR_UNKNOWN_STATUS";
}

VKMHA_API uint32_t vkmha_version(void)
{
    return VKMHA_VERSION_NUMBER;
}

bool vkmha__log_enabled(const vkmha_context *ctx, vkmha_log_level level)
{
    return ctx->log && level >= ctx->log_level;
}

void vkmha__log(const vkmha_context *ctx, vkmha_log_level level, vkmha_status status,
                const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    if (!vkmha__log_enabled(ctx, level))
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->log(ctx->log_user, level, status, msg);
}

/* The calling thread's last creation error: vkmha_context_create and
 * vkmha_enumerate_devices fail without a context to keep their message in.
 * Thread-local, so threads creating contexts at once never see each other's
 * messages (the header promises no shared state between contexts). */
#if defined(_MSC_VER) && !defined(__clang__)
static __declspec(thread) char creation_error[512];
#else
static _Thread_local char creation_error[512];
#endif

void vkmha__set_creation_error(const char *message)
{
    snprintf(creation_error, sizeof creation_error, "%s", message);
}

vkmha_status vkmha__creation_fail(vkmha_log_fn log, void *user, vkmha_status status,
                                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(creation_error, sizeof creation_error, fmt, ap);
    va_end(ap);
    if (log)
        log(user, VKMHA_LOG_ERROR, status, creation_error);
    return status;
}

vkmha_status vkmha__vfail(vkmha_context *ctx, vkmha_status status, const char *fmt,
                          va_list ap)
{
    if (!ctx)
        return status;
    vsnprintf(ctx->last_error, sizeof ctx->last_error, fmt, ap);
    if (ctx->log)
        ctx->log(ctx->log_user, VKMHA_LOG_ERROR, status, ctx->last_error);
    return status;
}

vkmha_status vkmha__fail(vkmha_context *ctx, vkmha_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vkmha__vfail(ctx, status, fmt, ap);
    va_end(ap);
    return status;
}

void vkmha__begin_call(vkmha_context *ctx, const char *fn)
{
    ctx->last_error[0] = '\0';
    ctx->call = fn;
    ctx->tensor_call = false;
}

VKMHA_API const char *vkmha_context_last_error(const vkmha_context *ctx)
{
    return ctx ? ctx->last_error : creation_error;
}

bool vkmha__mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    *out = a * b;
    return true;
}

const char *vkmha__error_text(int err, char *buf, size_t cap)
{
#if defined(_WIN32)
    if (strerror_s(buf, cap, err) != 0) /* the C runtime's thread-safe form */
#else
    if (strerror_r(err, buf, cap) != 0)
#endif
        snprintf(buf, cap, "error %d", err);
    return buf;
}

#ifdef _WIN32
const char *vkmha__win_error_text(unsigned long err, char *buf, size_t cap)
{
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL,
                             (DWORD)err, 0, buf, (DWORD)cap, NULL);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == '.'))
        buf[--n] = '\0';
    if (n == 0)
        snprintf(buf, cap, "Windows error %lu", err);
    return buf;
}
#endif
