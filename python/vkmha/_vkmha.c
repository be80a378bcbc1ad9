/* vkmha._vkmha: the C extension under the Python package. It fills vkmha's
 * descs from keyword arguments with the header itself (so no struct layout
 * is mirrored anywhere), takes arrays through the buffer protocol (of the
 * call's dtype: float32, float16, bfloat16 as uint16 bits, or uint8 masks;
 * C-contiguous, checked against the element count each call reads or
 * writes) or vkmha tensors, and turns every failed status into an
 * exception carrying vkmha's message. convert() rounds between the float
 * dtypes with src/half.c, compiled in: the same rounding as vkmha's stores.
 * The friendlier API (numpy and torch in and out, PyTorch's masks,
 * from_torch) is python/vkmha/__init__.py.
 *
 * Objects: Context, MHA, Tensor. An MHA or Tensor keeps its Context alive.
 * The GIL is held during every vkmha call, so a Context is never used by
 * two threads at once (vkmha's rule for a context). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "half.h"
#include "vkmha.h"

/* ---- errors ------------------------------------------------------------- */

static PyObject *Error;
/* One exception class per error status, indexed by -status. */
#define N_ERRORS 8
static PyObject *errors[N_ERRORS];

static const struct {
    vkmha_status status;
    const char *name; /* class name */
    PyObject **base2; /* a builtin it also derives from, or NULL */
} error_classes[] = {
    {VKMHA_ERROR_INVALID_ARGUMENT, "InvalidArgumentError", &PyExc_ValueError},
    {VKMHA_ERROR_UNSUPPORTED, "UnsupportedError", NULL},
    {VKMHA_ERROR_NO_DEVICE, "NoDeviceError", NULL},
    {VKMHA_ERROR_OUT_OF_HOST_MEMORY, "OutOfHostMemoryError", &PyExc_MemoryError},
    {VKMHA_ERROR_OUT_OF_DEVICE_MEMORY, "OutOfDeviceMemoryError", &PyExc_MemoryError},
    {VKMHA_ERROR_DEVICE_LOST, "DeviceLostError", NULL},
    {VKMHA_ERROR_VULKAN, "VulkanError", NULL},
};

/* Raises the exception of `status` with `message`; returns NULL. */
static PyObject *raise_status(vkmha_status status, const char *message)
{
    PyObject *cls = status < 0 && -status < N_ERRORS && errors[-status] ? errors[-status] : Error;
    PyObject *exc = PyObject_CallFunction(cls, "s", message);
    if (!exc)
        return NULL;
    PyObject *st = PyLong_FromLong(status);
    PyObject *name = PyUnicode_FromString(vkmha_status_string(status));
    PyObject *msg = PyUnicode_FromString(message);
    if (st && name && msg && PyObject_SetAttrString(exc, "status", st) == 0 &&
        PyObject_SetAttrString(exc, "status_name", name) == 0 &&
        PyObject_SetAttrString(exc, "message", msg) == 0)
        PyErr_SetObject(cls, exc);
    Py_XDECREF(st);
    Py_XDECREF(name);
    Py_XDECREF(msg);
    Py_DECREF(exc);
    return NULL;
}

/* An argument the binding itself rejects (before vkmha sees it), as vkmha
 * would: InvalidArgumentError naming it. */
static PyObject *invalid(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return raise_status(VKMHA_ERROR_INVALID_ARGUMENT, msg);
}

/* ---- Context -------------------------------------------------------------- */

typedef struct ContextObject {
    PyObject_HEAD
    vkmha_context *ctx;
    Py_ssize_t children; /* live MHA and Tensor objects */
} ContextObject;

static PyTypeObject ContextType, MHAType, TensorType, KVCacheType;

static PyObject *context_fail(ContextObject *c, vkmha_status st)
{
    return raise_status(st, vkmha_context_last_error(c->ctx));
}

static int check_open(ContextObject *c)
{
    if (!c->ctx) {
        PyErr_SetString(PyExc_RuntimeError, "vkmha: the context is closed");
        return -1;
    }
    return 0;
}

/* A Py_ssize_t as a uint32_t field named `name`. */
static int to_u32(Py_ssize_t v, const char *name, uint32_t *out)
{
    if (v < 0 || (uint64_t)v > UINT32_MAX) {
        invalid("%s (%zd) is out of range (0 to 4294967295)", name, v);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int context_init(ContextObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"backend", "device_index", "validation", "flags", "fused_kernel",
                             "scratch_budget", "no_native_16bit", NULL};
    int backend = 0, validation = 0, fused_kernel = 0, no_native16 = 0;
    Py_ssize_t device_index = -1, flags = 0;
    unsigned long long scratch_budget = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|inpniKp", kwlist, &backend, &device_index,
                                     &validation, &flags, &fused_kernel, &scratch_budget,
                                     &no_native16))
        return -1;
    if (self->ctx) {
        PyErr_SetString(PyExc_RuntimeError, "vkmha: Context.__init__ called twice");
        return -1;
    }
    vkmha_context_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.backend = (vkmha_backend)backend;
    if (device_index >= 0) {
        cd.use_device_index = true;
        if (to_u32(device_index, "device_index", &cd.device_index))
            return -1;
    }
    cd.enable_validation = validation != 0;
    cd.scratch_budget = scratch_budget;
    if (to_u32(flags, "flags", &cd.flags))
        return -1;
    /* For tests (vkmha_debug_options): the fused attention kernel, and the
     * packed path for 16-bit data on a device that has 16-bit storage. */
    vkmha_debug_options debug;
    memset(&debug, 0, sizeof debug);
    debug.fused_kernel = (vkmha_fused_kernel)fused_kernel;
    debug.no_native_16bit = no_native16 != 0;
    if (fused_kernel || no_native16)
        cd.debug = &debug;
    vkmha_context *ctx = NULL;
    vkmha_status st = vkmha_context_create(&cd, &ctx);
    if (st != VKMHA_SUCCESS) {
        /* No context to ask: the calling thread's creation error. */
        char msg[600];
        snprintf(msg, sizeof msg, "cannot create a context: %s",
                 vkmha_context_last_error(NULL));
        raise_status(st, msg);
        return -1;
    }
    self->ctx = ctx;
    return 0;
}

static void context_dealloc(ContextObject *self)
{
    vkmha_context_destroy(self->ctx); /* children hold references: none is alive */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *context_close(ContextObject *self, PyObject *unused)
{
    (void)unused;
    if (self->children > 0)
        return invalid("Context.close: %zd layers or tensors of this context are still alive",
                       self->children);
    vkmha_context_destroy(self->ctx);
    self->ctx = NULL;
    Py_RETURN_NONE;
}

static PyObject *context_last_error(ContextObject *self, void *unused)
{
    (void)unused;
    if (check_open(self))
        return NULL;
    return PyUnicode_FromString(vkmha_context_last_error(self->ctx));
}

/* Adds key: value (a new reference, may be NULL on error) to d. */
static int put(PyObject *d, const char *key, PyObject *value)
{
    if (!value)
        return -1;
    int r = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return r;
}

static PyObject *device_dict(const vkmha_device_info *di)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    if (put(d, "name", PyUnicode_FromString(di->name)) ||
        put(d, "type", PyLong_FromLong(di->type)) ||
        put(d, "vendor_id", PyLong_FromUnsignedLong(di->vendor_id)) ||
        put(d, "device_id", PyLong_FromUnsignedLong(di->device_id)) ||
        put(d, "api_version", PyLong_FromUnsignedLong(di->api_version)) ||
        put(d, "driver_version", PyLong_FromUnsignedLong(di->driver_version)) ||
        put(d, "driver_name", PyUnicode_FromString(di->driver_name)) ||
        put(d, "driver_info", PyUnicode_FromString(di->driver_info)) ||
        put(d, "device_uuid", PyBytes_FromStringAndSize((const char *)di->device_uuid, 16)) ||
        put(d, "has_compute_queue", PyBool_FromLong(di->has_compute_queue)) ||
        put(d, "subgroup_size", PyLong_FromUnsignedLong(di->subgroup_size)) ||
        put(d, "subgroup_arithmetic", PyBool_FromLong(di->subgroup_arithmetic)) ||
        put(d, "max_storage_buffer_range",
            PyLong_FromUnsignedLongLong(di->max_storage_buffer_range)) ||
        put(d, "max_allocation_size", PyLong_FromUnsignedLongLong(di->max_allocation_size)) ||
        put(d, "max_storage_buffers_per_stage",
            PyLong_FromUnsignedLong(di->max_storage_buffers_per_stage)) ||
        put(d, "device_local_memory", PyLong_FromUnsignedLongLong(di->device_local_memory)) ||
        put(d, "unified_memory", PyBool_FromLong(di->unified_memory))) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* vkmha_context_info.matrix2_workgroup_sizes without its zeros, as a list. */
static PyObject *matrix2_workgroup_sizes(const vkmha_context_info *info)
{
    PyObject *l = PyList_New(0);
    for (size_t i = 0; l && i < sizeof info->matrix2_workgroup_sizes / sizeof(uint32_t); i++) {
        if (!info->matrix2_workgroup_sizes[i])
            continue;
        PyObject *v = PyLong_FromUnsignedLong(info->matrix2_workgroup_sizes[i]);
        if (!v || PyList_Append(l, v)) {
            Py_XDECREF(v);
            Py_DECREF(l);
            return NULL;
        }
        Py_DECREF(v);
    }
    return l;
}

/* The names of the vkmha_path bits in `paths` (vkmha_path_name), as a list. */
static PyObject *path_names(uint32_t paths)
{
    PyObject *list = PyList_New(0);
    for (uint32_t i = 0; list && i < 32; i++) {
        const char *name = vkmha_path_name(paths & (1u << i));
        if (!name)
            continue;
        PyObject *str = PyUnicode_FromString(name);
        const int bad = !str || PyList_Append(list, str);
        Py_XDECREF(str);
        if (bad)
            Py_CLEAR(list);
    }
    return list;
}

/* vkmha_context_info's matrix shapes: a list of dicts (m, n, k and the
 * types' names, a_type .. result_type, saturating). */
static PyObject *matrix_shapes(const vkmha_context_info *info)
{
    PyObject *list = PyList_New(0);
    for (uint32_t i = 0; list && i < info->matrix_shape_count && i < VKMHA_MAX_MATRIX_SHAPES;
         i++) {
        const vkmha_matrix_shape *s = &info->matrix_shapes[i];
        PyObject *d = PyDict_New();
        const int bad = !d || put(d, "m", PyLong_FromUnsignedLong(s->m)) ||
                        put(d, "n", PyLong_FromUnsignedLong(s->n)) ||
                        put(d, "k", PyLong_FromUnsignedLong(s->k)) ||
                        put(d, "a_type", PyUnicode_FromString(vkmha_matrix_type_name(s->a_type))) ||
                        put(d, "b_type", PyUnicode_FromString(vkmha_matrix_type_name(s->b_type))) ||
                        put(d, "c_type", PyUnicode_FromString(vkmha_matrix_type_name(s->c_type))) ||
                        put(d, "result_type",
                            PyUnicode_FromString(vkmha_matrix_type_name(s->result_type))) ||
                        put(d, "saturating", PyBool_FromLong(s->saturating)) ||
                        PyList_Append(list, d);
        Py_XDECREF(d);
        if (bad)
            Py_CLEAR(list);
    }
    return list;
}

static PyObject *context_info(ContextObject *self, PyObject *unused)
{
    (void)unused;
    vkmha_context_info info;
    if (check_open(self))
        return NULL;
    vkmha_status st = vkmha_context_get_info(self->ctx, &info);
    if (st)
        return context_fail(self, st);
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    if (put(d, "backend", PyLong_FromLong(info.backend)) ||
        put(d, "device", device_dict(&info.device)) ||
        put(d, "device_index", PyLong_FromUnsignedLong(info.device_index)) ||
        put(d, "validation_enabled", PyBool_FromLong(info.validation_enabled)) ||
        put(d, "validation_messages", PyLong_FromUnsignedLongLong(info.validation_messages)) ||
        put(d, "disabled_paths", PyLong_FromUnsignedLong(info.disabled_paths)) ||
        put(d, "disabled_path_names", path_names(info.disabled_paths)) ||
        put(d, "self_check_us", PyLong_FromUnsignedLong(info.self_check_us)) ||
        put(d, "subgroup_ops_used", PyBool_FromLong(info.subgroup_ops_used)) ||
        put(d, "device_memory_bytes", PyLong_FromUnsignedLongLong(info.device_memory_bytes)) ||
        put(d, "device_memory_peak_bytes",
            PyLong_FromUnsignedLongLong(info.device_memory_peak_bytes)) ||
        put(d, "gpu_timing", PyBool_FromLong(info.gpu_timing)) ||
        put(d, "last_gpu_time_ns", PyLong_FromUnsignedLongLong(info.last_gpu_time_ns)) ||
        put(d, "external_device", PyBool_FromLong(info.external_device)) ||
        put(d, "push_descriptors", PyBool_FromLong(info.push_descriptors)) ||
        put(d, "pipelines_created", PyLong_FromUnsignedLong(info.pipelines_created)) ||
        put(d, "submissions_created", PyLong_FromUnsignedLongLong(info.submissions_created)) ||
        put(d, "scratch_bytes", PyLong_FromUnsignedLongLong(info.scratch_bytes)) ||
        put(d, "scratch_budget", PyLong_FromUnsignedLongLong(info.scratch_budget)) ||
        put(d, "native_16bit_storage", PyBool_FromLong(info.native_16bit_storage)) ||
        put(d, "sparse_tensors", PyBool_FromLong(info.sparse_tensors)) ||
        put(d, "max_tensor_bytes", PyLong_FromUnsignedLongLong(info.max_tensor_bytes)) ||
        put(d, "matrix_shapes", matrix_shapes(&info)) ||
        put(d, "cooperative_matrix", PyBool_FromLong(info.cooperative_matrix)) ||
        put(d, "cooperative_matrix2", PyBool_FromLong(info.cooperative_matrix2)) ||
        put(d, "matrix2_workgroup_sizes", matrix2_workgroup_sizes(&info))) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* One vkmha_kernel_info as a dict; its parameters a dict name: value in
 * constant_id order. */
static PyObject *kernel_dict(const vkmha_kernel_info *k)
{
    PyObject *d = PyDict_New(), *params = PyDict_New();
    if (!d || !params)
        goto fail;
    for (uint32_t i = 0; i < k->param_count && i < VKMHA_KERNEL_MAX_PARAMS; i++)
        if (put(params, k->params[i].name, PyLong_FromUnsignedLong(k->params[i].value)))
            goto fail;
    if (put(d, "name", PyUnicode_FromString(k->name)) ||
        put(d, "op", PyUnicode_FromString(k->op)) ||
        put(d, "available", PyBool_FromLong(k->available)) ||
        put(d, "shader", PyUnicode_FromString(k->shader)) ||
        put(d, "workgroup_size", PyLong_FromUnsignedLong(k->workgroup_size)) ||
        put(d, "shared_bytes", PyLong_FromUnsignedLong(k->shared_bytes)) ||
        PyDict_SetItemString(d, "params", params))
        goto fail;
    Py_DECREF(params);
    return d;
fail:
    Py_XDECREF(d);
    Py_XDECREF(params);
    return NULL;
}

static PyObject *context_kernels(ContextObject *self, PyObject *unused)
{
    (void)unused;
    if (check_open(self))
        return NULL;
    uint32_t count = 0;
    vkmha_status st = vkmha_context_get_kernels(self->ctx, &count, NULL);
    if (st)
        return context_fail(self, st);
    vkmha_kernel_info *k = PyMem_Calloc(count ? count : 1, sizeof *k);
    if (!k)
        return PyErr_NoMemory();
    st = vkmha_context_get_kernels(self->ctx, &count, k);
    PyObject *list = st ? NULL : PyList_New(0);
    for (uint32_t i = 0; list && i < count; i++) {
        PyObject *d = kernel_dict(&k[i]);
        if (!d || PyList_Append(list, d))
            Py_CLEAR(list);
        Py_XDECREF(d);
    }
    PyMem_Free(k);
    return st ? context_fail(self, st) : list;
}

static PyObject *context_profile(ContextObject *self, PyObject *unused)
{
    (void)unused;
    if (check_open(self))
        return NULL;
    static vkmha_profile_step steps[VKMHA_MAX_PROFILE_STEPS]; /* the GIL is held */
    uint32_t count = VKMHA_MAX_PROFILE_STEPS;
    vkmha_status st = vkmha_context_get_profile(self->ctx, &count, steps);
    if (st)
        return context_fail(self, st);
    PyObject *list = PyList_New(0);
    for (uint32_t i = 0; list && i < count && i < VKMHA_MAX_PROFILE_STEPS; i++) {
        const vkmha_profile_step *p = &steps[i];
        PyObject *d = Py_BuildValue("{s:s,s:(III),s:K,s:K}", "name", p->name, "workgroups",
                                    p->workgroups[0], p->workgroups[1], p->workgroups[2],
                                    "bytes", (unsigned long long)p->bytes, "time_ns",
                                    (unsigned long long)p->time_ns);
        if (!d || PyList_Append(list, d))
            Py_CLEAR(list);
        Py_XDECREF(d);
    }
    return list;
}

static PyObject *enumerate_devices(PyObject *mod, PyObject *unused)
{
    (void)mod, (void)unused;
    uint32_t count = 0;
    vkmha_status st = vkmha_enumerate_devices(&count, NULL);
    if (st)
        return raise_status(st, "vkmha_enumerate_devices: no Vulkan loader or instance");
    vkmha_device_info *infos = PyMem_Calloc(count ? count : 1, sizeof *infos);
    if (!infos)
        return PyErr_NoMemory();
    st = vkmha_enumerate_devices(&count, infos);
    PyObject *list = st ? NULL : PyList_New(0);
    for (uint32_t i = 0; list && i < count; i++) {
        PyObject *d = device_dict(&infos[i]);
        if (!d || PyList_Append(list, d)) {
            Py_XDECREF(d);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(d);
    }
    PyMem_Free(infos);
    if (st)
        return raise_status(st, "vkmha_enumerate_devices failed");
    return list;
}

/* ---- arguments: arrays or tensors ----------------------------------------- */

typedef struct TensorObject {
    PyObject_HEAD
    ContextObject *ctx;
    vkmha_tensor *t;
} TensorObject;

/* The buffer formats (struct module codes) of each vkmha_dtype's arrays;
 * bfloat16, which Python has no code for, as its uint16 (or int16) bits. */
static const struct {
    const char *formats; /* accepted codes, one character each */
    Py_ssize_t itemsize;
    const char *name;
} dtype_formats[] = {
    [VKMHA_DTYPE_F32] = {"f", 4, "float32"},
    [VKMHA_DTYPE_U8] = {"B?b", 1, "uint8 (or bool)"},
    [VKMHA_DTYPE_F16] = {"e", 2, "float16"},
    [VKMHA_DTYPE_BF16] = {"Hh", 2, "bfloat16 (uint16 bits)"},
    [VKMHA_DTYPE_BF16 + 1] = {"IL", 4, "uint32"}, /* ARG_U32: RoPE's positions */
};
#define N_DTYPES (VKMHA_DTYPE_BF16 + 1) /* vkmha_dtype's */
#define ARG_U32 (VKMHA_DTYPE_BF16 + 1)

/* A dtype argument: one of vkmha_dtype's values (F32, F16, BF16 and, where
 * u8_ok, U8). */
static int check_dtype(int dtype, const char *name, bool u8_ok)
{
    if (dtype < 0 || (size_t)dtype >= N_DTYPES || (dtype == VKMHA_DTYPE_U8 && !u8_ok)) {
        invalid("%s (%d) is not a %svkmha_dtype (DTYPE_F32, DTYPE_F16, DTYPE_BF16%s)", name,
                dtype, u8_ok ? "" : "float ", u8_ok ? ", DTYPE_U8" : "");
        return -1;
    }
    return 0;
}

/* One array argument: a buffer (host mode) or a Tensor (tensor mode), or
 * None. */
typedef struct arg {
    Py_buffer view;
    bool has_view;
    vkmha_tensor *t;
    void *p; /* host mode: the buffer's memory, NULL for None */
} arg;

static bool is_tensor(PyObject *o)
{
    return PyObject_TypeCheck(o, &TensorType);
}

/* o as argument `name` of vkmha_dtype `dtype` (checked by the caller),
 * `need` elements at least (host mode); tensor mode wants a Tensor of ctx
 * (vkmha checks its dtype and size). */
static int arg_get(PyObject *o, const char *name, uint32_t dtype, bool writable, uint64_t need,
                   bool tensor_mode, ContextObject *ctx, arg *a)
{
    memset(a, 0, sizeof *a);
    if (!o || o == Py_None)
        return 0;
    if (tensor_mode) {
        if (!is_tensor(o)) {
            PyErr_Format(PyExc_TypeError,
                         "%s: a vkmha Tensor is needed (the call's first array is a Tensor)",
                         name);
            return -1;
        }
        TensorObject *t = (TensorObject *)o;
        if (t->ctx != ctx) {
            invalid("%s: a Tensor of another Context", name);
            return -1;
        }
        if (!t->t) {
            invalid("%s: the Tensor was released", name);
            return -1;
        }
        a->t = t->t;
        return 0;
    }
    if (is_tensor(o)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a Tensor among arrays (pass all arrays or all Tensors)", name);
        return -1;
    }
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, &a->view, flags) != 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: a C-contiguous%s %s buffer is needed (got %s)", name,
                     writable ? ", writable" : "", dtype_formats[dtype].name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    a->has_view = true;
    const char *f = a->view.format ? a->view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    bool ok = f[0] && !f[1] && strchr(dtype_formats[dtype].formats, f[0]) &&
              a->view.itemsize == dtype_formats[dtype].itemsize;
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: %s elements are needed, got format '%s'", name,
                     dtype_formats[dtype].name, a->view.format);
        PyBuffer_Release(&a->view);
        a->has_view = false;
        return -1;
    }
    uint64_t have = (uint64_t)a->view.len / (uint64_t)a->view.itemsize;
    if (have < need) {
        invalid("%s has %llu elements, the call needs %llu", name, (unsigned long long)have,
                (unsigned long long)need);
        PyBuffer_Release(&a->view);
        a->has_view = false;
        return -1;
    }
    a->p = a->view.buf;
    return 0;
}

static void args_release(arg *a, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].has_view) {
            PyBuffer_Release(&a[i].view);
            a[i].has_view = false;
        }
}

/* Overflow-checked product of n factors; UINT64_MAX on overflow (no buffer
 * is that large, so the size check then fails). */
static uint64_t prod(int n, ...)
{
    va_list ap;
    uint64_t r = 1;
    bool over = false;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        uint64_t f = va_arg(ap, uint64_t);
        if (f != 0 && r > UINT64_MAX / f)
            over = true;
        r *= f;
    }
    va_end(ap);
    return over ? UINT64_MAX : r;
}
#define PROD2(a, b) prod(2, (uint64_t)(a), (uint64_t)(b))
#define PROD3(a, b, c) prod(3, (uint64_t)(a), (uint64_t)(b), (uint64_t)(c))
#define PROD4(a, b, c, d) prod(4, (uint64_t)(a), (uint64_t)(b), (uint64_t)(c), (uint64_t)(d))

/* The mask arguments of softmax, attention and the layer, and the arrays
 * they take. */
#define MASK_ARGS 5
typedef struct mask_args {
    PyObject *key_padding, *full, *bias;
    int causal;
    Py_ssize_t bias_batch, bias_heads, causal_offset, window;
    float softcap;
    PyObject *alibi, *sinks; /* [heads] float32 host arrays in both modes */
} mask_args;

/* Fills a vkmha_mask (host mode) or vkmha_tensor_mask; returns whether there
 * is a mask. margs: MASK_ARGS args for key_padding, full, bias, alibi, sinks. */
static int mask_get(const mask_args *m, uint32_t B, uint32_t H, uint32_t Lq, uint32_t Lk,
                    bool tensor_mode, ContextObject *ctx, arg margs[MASK_ARGS], vkmha_mask *hm,
                    vkmha_tensor_mask *tm, bool *present)
{
    uint32_t bb, bh, co, win;
    if (to_u32(m->bias_batch, "bias_batch", &bb) || to_u32(m->bias_heads, "bias_heads", &bh) ||
        to_u32(m->causal_offset, "causal_offset", &co) ||
        to_u32(m->window, "window", &win) ||
        arg_get(m->alibi, "alibi", VKMHA_DTYPE_F32, false, H, false, ctx, &margs[3]) ||
        arg_get(m->sinks, "sinks", VKMHA_DTYPE_F32, false, H, false, ctx, &margs[4]))
        return -1;
    if (arg_get(m->key_padding, "key_padding", VKMHA_DTYPE_U8, false, PROD2(B, Lk), tensor_mode,
                ctx, &margs[0]) ||
        arg_get(m->full, "full", VKMHA_DTYPE_U8, false, PROD3(B, Lq, Lk), tensor_mode, ctx,
                &margs[1]) ||
        arg_get(m->bias, "bias", VKMHA_DTYPE_F32, false,
                PROD4(bb ? bb : B, bh ? bh : H, Lq, Lk), tensor_mode, ctx, &margs[2]))
        return -1;
    uint32_t kinds = (m->key_padding && m->key_padding != Py_None ? VKMHA_MASK_KEY_PADDING : 0) |
                     (m->full && m->full != Py_None ? VKMHA_MASK_FULL : 0) |
                     (m->causal ? VKMHA_MASK_CAUSAL : 0) |
                     (m->bias && m->bias != Py_None ? VKMHA_MASK_BIAS : 0) |
                     (win ? VKMHA_MASK_WINDOW : 0) |
                     (m->softcap != 0.0f ? VKMHA_MASK_SOFTCAP : 0) |
                     (margs[3].p ? VKMHA_MASK_ALIBI : 0) | (margs[4].p ? VKMHA_MASK_SINKS : 0);
    memset(hm, 0, sizeof *hm);
    memset(tm, 0, sizeof *tm);
    hm->kinds = tm->kinds = kinds;
    hm->key_padding = margs[0].p;
    hm->full = margs[1].p;
    hm->bias = margs[2].p;
    tm->key_padding = margs[0].t;
    tm->full = margs[1].t;
    tm->bias = margs[2].t;
    hm->bias_batch = tm->bias_batch = bb;
    hm->bias_heads = tm->bias_heads = bh;
    hm->causal_offset = tm->causal_offset = co;
    hm->window = tm->window = win;
    hm->softcap = tm->softcap = m->softcap;
    hm->alibi = tm->alibi = margs[3].p;
    hm->sinks = tm->sinks = margs[4].p;
    *present = kinds != 0 || co != 0;
    return 0;
}

#define MASK_KWLIST                                                                        \
    "key_padding", "full", "causal", "bias", "bias_batch", "bias_heads", "causal_offset",     \
        "window", "softcap", "alibi", "sinks"
#define MASK_FORMAT "OOpOnnnnfOO"
#define MASK_REFS(m) &(m).key_padding, &(m).full, &(m).causal, &(m).bias, &(m).bias_batch, \
                     &(m).bias_heads, &(m).causal_offset, &(m).window, &(m).softcap,       \
                     &(m).alibi, &(m).sinks

/* ---- ops -------------------------------------------------------------------- */

static PyObject *context_matmul(ContextObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"a", "b", "c", "m", "n", "k", "bias", "batch", "transpose_b",
                             "alpha", "broadcast_a", "broadcast_b", "dtype", "b_quant",
                             "b_group_size", NULL};
    PyObject *a_o, *b_o, *c_o, *bias_o = Py_None;
    Py_ssize_t m_, n_, k_, batch_ = 1;
    int trans = 0, bc_a = 0, bc_b = 0, dt = VKMHA_DTYPE_F32;
    unsigned int b_quant = 0, b_group = 0;
    float alpha = 1.0f;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOnnn|OnpfppiII", kwlist, &a_o, &b_o, &c_o,
                                     &m_, &n_, &k_, &bias_o, &batch_, &trans, &alpha, &bc_a,
                                     &bc_b, &dt, &b_quant, &b_group) ||
        check_open(self) || check_dtype(dt, "dtype", false))
        return NULL;
    vkmha_matmul_desc d;
    memset(&d, 0, sizeof d);
    if (to_u32(m_, "m", &d.m) || to_u32(n_, "n", &d.n) || to_u32(k_, "k", &d.k) ||
        to_u32(batch_, "batch", &d.batch))
        return NULL;
    d.op_b = trans ? VKMHA_OP_T : VKMHA_OP_N;
    d.dtype = (uint32_t)dt;
    d.alpha = alpha;
    d.stride_a = bc_a ? VKMHA_BROADCAST : 0;
    d.stride_b = bc_b ? VKMHA_BROADCAST : 0;
    d.b_quant = b_quant;
    d.b_group_size = b_group;
    const uint64_t B = d.batch ? d.batch : 1;
    /* A quantized b: its bytes (vkmha checks the desc; a bad one leaves 0
     * and vkmha_matmul names the field). */
    uint64_t nb = PROD3(bc_b ? 1 : B, d.k, d.n);
    if (b_quant) {
        const vkmha_quant_desc q = {b_quant, b_group, trans ? d.n : d.k, trans ? d.k : d.n};
        vkmha_quant_layout l = {0};
        nb = vkmha_quant_layout_of(self->ctx, &q, &l) ? 0 : l.bytes;
    }
    bool tm = is_tensor(a_o);
    arg a[4];
    memset(a, 0, sizeof a);
    vkmha_status st;
    if (arg_get(a_o, "a", d.dtype, false, PROD3(bc_a ? 1 : B, d.m, d.k), tm, self, &a[0]) ||
        arg_get(b_o, "b", b_quant ? VKMHA_DTYPE_U8 : d.dtype, false, nb, tm, self, &a[1]) ||
        arg_get(bias_o, "bias", d.dtype, false, d.n, tm, self, &a[2]) ||
        arg_get(c_o, "c", d.dtype, true, PROD3(B, d.m, d.n), tm, self, &a[3])) {
        args_release(a, 4);
        return NULL;
    }
    if (tm)
        st = vkmha_matmul_tensor(self->ctx, &d, a[0].t, a[1].t, a[2].t, a[3].t);
    else
        st = vkmha_matmul(self->ctx, &d, a[0].p, a[1].p, a[2].p, a[3].p);
    args_release(a, 4);
    if (st)
        return context_fail(self, st);
    Py_RETURN_NONE;
}

static PyObject *context_softmax(ContextObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"x", "y", "len_q", "len_k", "batch", "heads", "scale",
                             MASK_KWLIST, "dtype", NULL};
    PyObject *x_o, *y_o;
    Py_ssize_t lq, lk, batch = 1, heads = 1;
    float scale = 0.0f;
    int dt = VKMHA_DTYPE_F32;
    mask_args m = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOnn|nnf" MASK_FORMAT "i", kwlist, &x_o, &y_o,
                                     &lq, &lk, &batch, &heads, &scale, MASK_REFS(m), &dt) ||
        check_open(self) || check_dtype(dt, "dtype", false))
        return NULL;
    vkmha_softmax_desc d;
    memset(&d, 0, sizeof d);
    if (to_u32(lq, "len_q", &d.len_q) || to_u32(lk, "len_k", &d.len_k) ||
        to_u32(batch, "batch", &d.batch) || to_u32(heads, "heads", &d.heads))
        return NULL;
    d.scale = scale;
    d.dtype = (uint32_t)dt;
    const uint32_t B = d.batch ? d.batch : 1, H = d.heads ? d.heads : 1;
    const uint64_t n = PROD4(B, H, d.len_q, d.len_k);
    bool tm = is_tensor(x_o), present;
    arg a[2 + MASK_ARGS];
    memset(a, 0, sizeof a);
    vkmha_mask hm;
    vkmha_tensor_mask tmk;
    vkmha_status st;
    if (arg_get(x_o, "x", d.dtype, false, n, tm, self, &a[0]) ||
        arg_get(y_o, "y", d.dtype, true, n, tm, self, &a[1]) ||
        mask_get(&m, B, H, d.len_q, d.len_k, tm, self, a + 2, &hm, &tmk, &present)) {
        args_release(a, 2 + MASK_ARGS);
        return NULL;
    }
    if (tm)
        st = vkmha_softmax_tensor(self->ctx, &d, a[0].t, present ? &tmk : NULL, a[1].t);
    else
        st = vkmha_softmax(self->ctx, &d, a[0].p, present ? &hm : NULL, a[1].p);
    args_release(a, 2 + MASK_ARGS);
    if (st)
        return context_fail(self, st);
    Py_RETURN_NONE;
}

static PyObject *heads_op(ContextObject *self, PyObject *args, PyObject *kw, bool split)
{
    static char *kwlist[] = {"x", "y", "len", "heads", "head_dim", "batch", "dtype", NULL};
    PyObject *x_o, *y_o;
    Py_ssize_t len, heads, hd, batch = 1;
    int dt = VKMHA_DTYPE_F32;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOnnn|ni", kwlist, &x_o, &y_o, &len, &heads, &hd,
                                     &batch, &dt) ||
        check_open(self) || check_dtype(dt, "dtype", false))
        return NULL;
    vkmha_heads_desc d;
    memset(&d, 0, sizeof d);
    if (to_u32(len, "len", &d.len) || to_u32(heads, "heads", &d.heads) ||
        to_u32(hd, "head_dim", &d.head_dim) || to_u32(batch, "batch", &d.batch))
        return NULL;
    d.dtype = (uint32_t)dt;
    const uint64_t n = PROD4(d.batch ? d.batch : 1, d.len, d.heads, d.head_dim);
    bool tm = is_tensor(x_o);
    arg a[2];
    vkmha_status st;
    memset(a, 0, sizeof a);
    if (arg_get(x_o, "x", d.dtype, false, n, tm, self, &a[0]) ||
        arg_get(y_o, "y", d.dtype, true, n, tm, self, &a[1])) {
        args_release(a, 2);
        return NULL;
    }
    if (tm)
        st = split ? vkmha_split_heads_tensor(self->ctx, &d, a[0].t, a[1].t)
                   : vkmha_merge_heads_tensor(self->ctx, &d, a[0].t, a[1].t);
    else
        st = split ? vkmha_split_heads(self->ctx, &d, a[0].p, a[1].p)
                   : vkmha_merge_heads(self->ctx, &d, a[0].p, a[1].p);
    args_release(a, 2);
    if (st)
        return context_fail(self, st);
    Py_RETURN_NONE;
}

static PyObject *context_split_heads(ContextObject *self, PyObject *args, PyObject *kw)
{
    return heads_op(self, args, kw, true);
}

static PyObject *context_merge_heads(ContextObject *self, PyObject *args, PyObject *kw)
{
    return heads_op(self, args, kw, false);
}

static PyObject *context_attention(ContextObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"q", "k", "v", "out", "heads", "len_q", "len_k", "d_k", "d_v",
                             "batch", "kv_heads", "scale", "weights", "path", "kv_splits",
                             MASK_KWLIST, "dtype", NULL};
    PyObject *q_o, *k_o, *v_o, *out_o, *w_o = Py_None;
    Py_ssize_t heads, lq, lk, dk, dv, batch = 1, kvh = 0, kv_splits = 0;
    int path = 0, dt = VKMHA_DTYPE_F32;
    float scale = 0.0f;
    mask_args m = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOnnnnn|nnfOin" MASK_FORMAT "i", kwlist, &q_o,
                                     &k_o, &v_o, &out_o, &heads, &lq, &lk, &dk, &dv, &batch,
                                     &kvh, &scale, &w_o, &path, &kv_splits, MASK_REFS(m), &dt) ||
        check_open(self) || check_dtype(dt, "dtype", false))
        return NULL;
    vkmha_attention_desc d;
    memset(&d, 0, sizeof d);
    if (to_u32(heads, "heads", &d.heads) || to_u32(lq, "len_q", &d.len_q) ||
        to_u32(lk, "len_k", &d.len_k) || to_u32(dk, "d_k", &d.d_k) ||
        to_u32(dv, "d_v", &d.d_v) || to_u32(batch, "batch", &d.batch) ||
        to_u32(kvh, "kv_heads", &d.kv_heads) || to_u32(kv_splits, "kv_splits", &d.kv_splits))
        return NULL;
    d.scale = scale;
    d.path = (vkmha_attention_path)path;
    d.dtype = (uint32_t)dt;
    const uint32_t B = d.batch ? d.batch : 1, Hkv = d.kv_heads ? d.kv_heads : d.heads;
    bool tm = is_tensor(q_o), present;
    arg a[5 + MASK_ARGS];
    memset(a, 0, sizeof a);
    vkmha_mask hm;
    vkmha_tensor_mask tmk;
    vkmha_status st;
    if (arg_get(q_o, "q", d.dtype, false, PROD4(B, d.heads, d.len_q, d.d_k), tm, self,
                &a[0]) ||
        arg_get(k_o, "k", d.dtype, false, PROD4(B, Hkv, d.len_k, d.d_k), tm, self, &a[1]) ||
        arg_get(v_o, "v", d.dtype, false, PROD4(B, Hkv, d.len_k, d.d_v), tm, self, &a[2]) ||
        arg_get(out_o, "out", d.dtype, true, PROD4(B, d.heads, d.len_q, d.d_v), tm, self,
                &a[3]) ||
        arg_get(w_o, "weights", d.dtype, true, PROD4(B, d.heads, d.len_q, d.len_k), tm, self,
                &a[4]) ||
        mask_get(&m, B, d.heads, d.len_q, d.len_k, tm, self, a + 5, &hm, &tmk, &present)) {
        args_release(a, 5 + MASK_ARGS);
        return NULL;
    }
    if (tm)
        st = vkmha_attention_tensor(self->ctx, &d, a[0].t, a[1].t, a[2].t,
                                    present ? &tmk : NULL, a[3].t, a[4].t);
    else
        st = vkmha_attention(self->ctx, &d, a[0].p, a[1].p, a[2].p, present ? &hm : NULL,
                             a[3].p, a[4].p);
    args_release(a, 5 + MASK_ARGS);
    if (st)
        return context_fail(self, st);
    Py_RETURN_NONE;
}

/* ---- Tensor ------------------------------------------------------------------ */

static int tensor_init(TensorObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"context", "shape", "dtype", NULL};
    ContextObject *ctx;
    PyObject *shape;
    int dtype = VKMHA_DTYPE_F32;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O|i", kwlist, &ContextType, &ctx, &shape,
                                     &dtype) ||
        check_open(ctx))
        return -1;
    if (self->ctx) {
        PyErr_SetString(PyExc_RuntimeError, "vkmha: Tensor.__init__ called twice");
        return -1;
    }
    vkmha_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = (vkmha_dtype)dtype;
    PyObject *seq = PySequence_Fast(shape, "shape must be a sequence of ints");
    if (!seq)
        return -1;
    Py_ssize_t rank = PySequence_Fast_GET_SIZE(seq);
    if (rank < 1 || rank > VKMHA_MAX_DIMS) {
        Py_DECREF(seq);
        invalid("shape has %zd dims (1 to %d)", rank, VKMHA_MAX_DIMS);
        return -1;
    }
    d.rank = (uint32_t)rank;
    for (Py_ssize_t i = 0; i < rank; i++) {
        Py_ssize_t v = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i), PyExc_OverflowError);
        if ((v == -1 && PyErr_Occurred()) || to_u32(v, "shape[i]", &d.dims[i])) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    vkmha_tensor *t = NULL;
    vkmha_status st = vkmha_tensor_create(ctx->ctx, &d, &t);
    if (st) {
        context_fail(ctx, st);
        return -1;
    }
    Py_INCREF(ctx);
    self->ctx = ctx;
    self->t = t;
    ctx->children++;
    return 0;
}

/* A layer or tensor lets go of its context. */
static void context_drop(ContextObject **ctx)
{
    if (*ctx) {
        (*ctx)->children--;
        Py_CLEAR(*ctx);
    }
}

/* RuntimeError unless the object's vkmha handle exists. */
static int live(const void *handle, const char *what)
{
    if (!handle) {
        PyErr_Format(PyExc_RuntimeError, "vkmha: the %s was released or never initialized",
                     what);
        return -1;
    }
    return 0;
}

static void tensor_release(TensorObject *self)
{
    vkmha_tensor_destroy(self->t);
    self->t = NULL;
    context_drop(&self->ctx);
}

static void tensor_dealloc(TensorObject *self)
{
    tensor_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tensor_release_m(TensorObject *self, PyObject *unused)
{
    (void)unused;
    tensor_release(self);
    Py_RETURN_NONE;
}

static PyObject *tensor_desc(TensorObject *self, void *unused)
{
    (void)unused;
    vkmha_tensor_desc d;
    if (live(self->t, "Tensor"))
        return NULL;
    vkmha_status st = vkmha_tensor_get_desc(self->t, &d);
    if (st)
        return context_fail(self->ctx, st);
    PyObject *shape = PyTuple_New(d.rank);
    if (!shape)
        return NULL;
    for (uint32_t i = 0; i < d.rank; i++)
        PyTuple_SET_ITEM(shape, i, PyLong_FromUnsignedLong(d.dims[i]));
    return Py_BuildValue("(iN)", (int)d.dtype, shape);
}

static PyObject *tensor_nbytes(TensorObject *self, void *unused)
{
    (void)unused;
    if (live(self->t, "Tensor"))
        return NULL;
    return PyLong_FromUnsignedLongLong(vkmha_tensor_bytes(self->t));
}

static PyObject *tensor_copy(TensorObject *self, PyObject *args, bool up)
{
    PyObject *o;
    unsigned long long offset = 0;
    Py_buffer v;
    if (!PyArg_ParseTuple(args, "O|K", &o, &offset) || live(self->t, "Tensor"))
        return NULL;
    if (PyObject_GetBuffer(o, &v, PyBUF_C_CONTIGUOUS | (up ? 0 : PyBUF_WRITABLE)) != 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: a C-contiguous%s buffer is needed (got %s)",
                     up ? "src" : "dst", up ? "" : ", writable", Py_TYPE(o)->tp_name);
        return NULL;
    }
    vkmha_status st = up ? vkmha_tensor_upload(self->t, offset, v.buf, (uint64_t)v.len)
                         : vkmha_tensor_download(self->t, offset, v.buf, (uint64_t)v.len);
    PyBuffer_Release(&v);
    if (st)
        return context_fail(self->ctx, st);
    Py_RETURN_NONE;
}

static PyObject *tensor_upload(TensorObject *self, PyObject *args)
{
    return tensor_copy(self, args, true);
}

static PyObject *tensor_download(TensorObject *self, PyObject *args)
{
    return tensor_copy(self, args, false);
}

/* ---- MHA ------------------------------------------------------------------- */

typedef struct MHAObject {
    PyObject_HEAD
    ContextObject *ctx;
    vkmha_mha *mha;
    vkmha_mha_desc d; /* resolved (vkmha_mha_get_desc) */
} MHAObject;

/* A KV cache; holds its layer (and so the context) alive. */
typedef struct KVCacheObject {
    PyObject_HEAD
    MHAObject *mha;
    vkmha_kv_cache *cache;
} KVCacheObject;

/* The key axis of a forward on entries entry .. entry + B - 1 appending
 * `append` positions: their longest length after it (0 if the range is bad:
 * vkmha's own checks then name it). */
static uint32_t cache_len_kv(vkmha_kv_cache *c, uint32_t entry, uint32_t B, uint32_t append)
{
    uint32_t most = 0, len;
    for (uint32_t b = 0; b < B; b++) {
        if (vkmha_kv_cache_get_lengths(c, entry + b, 1, &len))
            return 0;
        most = len + append > most ? len + append : most;
    }
    return most;
}

static int mha_adopt(MHAObject *self, ContextObject *ctx, vkmha_mha *mha)
{
    vkmha_status st = vkmha_mha_get_desc(mha, &self->d);
    if (st) {
        vkmha_mha_destroy(mha);
        context_fail(ctx, st);
        return -1;
    }
    Py_INCREF(ctx);
    self->ctx = ctx;
    self->mha = mha;
    ctx->children++;
    return 0;
}

static int mha_init(MHAObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"context", "d_model", "n_head", "w_q", "w_k", "w_v", "w_o",
                             "n_kv_head", "d_k", "d_v", "kdim", "vdim", "scale", "b_q", "b_k",
                             "b_v", "b_o", "post_norm", "norm_gamma", "norm_beta", "norm_eps",
                             "weight_dtype", "storage_dtype", "head_begin", "head_end",
                             "weight_quant", "weight_group_size", "weights_quantized", "rope_dims",
                             "rope_theta", "rope_scale", "rope_layout", NULL};
    ContextObject *ctx;
    Py_ssize_t dm, nh, nkv = 0, dk = 0, dv = 0, kdim = 0, vdim = 0, h0 = 0, h1 = 0;
    unsigned int wq = 0, wg = 0;
    int given_quantized = 0;
    PyObject *w[4], *b[4] = {Py_None, Py_None, Py_None, Py_None}, *gamma = Py_None,
                    *beta = Py_None;
    float scale = 0.0f, eps = 0.0f, rope_theta = 0.0f, rope_scale = 0.0f;
    unsigned int rope_dims = 0, rope_layout = 0;
    int post_norm = 0, wdt = VKMHA_DTYPE_F32, sdt = VKMHA_DTYPE_F32;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!nnOOOO|nnnnnfOOOOpOOfiinnIIpIffI", kwlist,
                                     &ContextType, &ctx, &dm, &nh, &w[0], &w[1], &w[2], &w[3],
                                     &nkv, &dk, &dv, &kdim, &vdim, &scale, &b[0], &b[1], &b[2],
                                     &b[3], &post_norm, &gamma, &beta, &eps, &wdt, &sdt, &h0,
                                     &h1, &wq, &wg, &given_quantized, &rope_dims, &rope_theta,
                                     &rope_scale, &rope_layout) ||
        check_open(ctx) || check_dtype(wdt, "weight_dtype", false) ||
        check_dtype(sdt, "storage_dtype", false))
        return -1;
    if (self->mha) {
        PyErr_SetString(PyExc_RuntimeError, "vkmha: MHA.__init__ called twice");
        return -1;
    }
    vkmha_mha_desc d;
    memset(&d, 0, sizeof d);
    if (to_u32(dm, "d_model", &d.d_model) || to_u32(nh, "n_head", &d.n_head) ||
        to_u32(nkv, "n_kv_head", &d.n_kv_head) || to_u32(dk, "d_k", &d.d_k) ||
        to_u32(dv, "d_v", &d.d_v) || to_u32(kdim, "kdim", &d.kdim) ||
        to_u32(vdim, "vdim", &d.vdim) || to_u32(h0, "head_begin", &d.head_begin) ||
        to_u32(h1, "head_end", &d.head_end))
        return -1;
    d.scale = scale;
    d.post_norm = post_norm != 0;
    d.norm_eps = eps;
    d.weight_dtype = (uint32_t)wdt;
    d.storage_dtype = (uint32_t)sdt;
    d.weight_quant = wq;
    d.weight_group_size = wg;
    d.weights_quantized = given_quantized != 0;
    d.rope_dims = rope_dims;
    d.rope_theta = rope_theta;
    d.rope_scale = rope_scale;
    d.rope_layout = rope_layout;
    /* The sizes the weights must have; where a default cannot be resolved
     * vkmha_mha_create rejects the desc before reading any weight. */
    const uint64_t H = d.n_head, Hkv = d.n_kv_head ? d.n_kv_head : d.n_head;
    const uint64_t per = d.n_head && d.d_model % d.n_head == 0 ? d.d_model / d.n_head : 0;
    const uint64_t d_k = d.d_k ? d.d_k : per, d_v = d.d_v ? d.d_v : per;
    const uint64_t kd = d.kdim ? d.kdim : d.d_model, vd = d.vdim ? d.vdim : d.d_model;
    uint64_t need[10] = {PROD3(H, d_k, d.d_model), PROD3(Hkv, d_k, kd),
                         PROD3(Hkv, d_v, vd), PROD3(d.d_model, H, d_v),
                         H * d_k, Hkv * d_k, Hkv * d_v, d.d_model, d.d_model, d.d_model};
    /* Weights given quantized: their layouts' bytes (a bad desc leaves 0,
     * and vkmha_mha_create names the field). */
    const uint64_t rows[4] = {H * d_k, Hkv * d_k, Hkv * d_v, d.d_model},
                   cols[4] = {d.d_model, kd, vd, H * d_v};
    for (int i = 0; i < 4 && d.weights_quantized; i++) {
        const vkmha_quant_desc q = {wq, wg, (uint32_t)rows[i], (uint32_t)cols[i]};
        vkmha_quant_layout l = {0};
        need[i] = rows[i] <= UINT32_MAX && cols[i] <= UINT32_MAX &&
                          !vkmha_quant_layout_of(ctx->ctx, &q, &l)
                      ? l.bytes
                      : 0;
    }
    static const char *const names[10] = {"w_q", "w_k", "w_v", "w_o", "b_q",
                                          "b_k", "b_v", "b_o", "norm_gamma", "norm_beta"};
    PyObject *objs[10] = {w[0], w[1], w[2], w[3], b[0], b[1], b[2], b[3], gamma, beta};
    arg a[10];
    memset(a, 0, sizeof a);
    for (int i = 0; i < 10; i++)
        if (arg_get(objs[i], names[i],
                    i < 4 && d.weights_quantized ? VKMHA_DTYPE_U8 : d.weight_dtype, false,
                    need[i], false, ctx, &a[i])) {
            args_release(a, 10);
            return -1;
        }
    d.w_q = a[0].p, d.w_k = a[1].p, d.w_v = a[2].p, d.w_o = a[3].p;
    d.b_q = a[4].p, d.b_k = a[5].p, d.b_v = a[6].p, d.b_o = a[7].p;
    d.norm_gamma = a[8].p, d.norm_beta = a[9].p;
    vkmha_mha *mha = NULL;
    vkmha_status st = vkmha_mha_create(ctx->ctx, &d, &mha);
    args_release(a, 10);
    if (st) {
        context_fail(ctx, st);
        return -1;
    }
    return mha_adopt(self, ctx, mha);
}

static PyObject *mha_from_safetensors(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"context", "n_head", "path", "data", "prefix", "n_kv_head",
                             "scale", "post_norm", "norm_prefix", "norm_eps", "storage_dtype",
                             "head_begin", "head_end", "weight_quant", "weight_group_size",
                             NULL};
    ContextObject *ctx;
    Py_ssize_t nh, nkv = 0, h0 = 0, h1 = 0;
    PyObject *path = Py_None, *data = Py_None;
    const char *prefix = NULL, *norm_prefix = NULL;
    float scale = 0.0f, eps = 0.0f;
    int post_norm = 0, sdt = VKMHA_DTYPE_F32;
    unsigned int wq = 0, wg = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!n|OOznfpzfinnII", kwlist, &ContextType, &ctx,
                                     &nh, &path, &data, &prefix, &nkv, &scale, &post_norm,
                                     &norm_prefix, &eps, &sdt, &h0, &h1, &wq, &wg) ||
        check_open(ctx) || check_dtype(sdt, "storage_dtype", false))
        return NULL;
    vkmha_safetensors_desc sd;
    memset(&sd, 0, sizeof sd);
    if (to_u32(nh, "n_head", &sd.n_head) || to_u32(nkv, "n_kv_head", &sd.n_kv_head) ||
        to_u32(h0, "head_begin", &sd.head_begin) || to_u32(h1, "head_end", &sd.head_end))
        return NULL;
    sd.prefix = prefix;
    sd.scale = scale;
    sd.post_norm = post_norm != 0;
    sd.norm_prefix = norm_prefix;
    sd.norm_eps = eps;
    sd.storage_dtype = (uint32_t)sdt;
    sd.weight_quant = wq;
    sd.weight_group_size = wg;
    PyObject *path_bytes = NULL;
    Py_buffer v;
    bool have_view = false;
    if (path != Py_None) {
        if (!PyUnicode_FSConverter(path, &path_bytes))
            return NULL;
        sd.path = PyBytes_AS_STRING(path_bytes);
    }
    if (data != Py_None) {
        if (PyObject_GetBuffer(data, &v, PyBUF_C_CONTIGUOUS) != 0) {
            Py_XDECREF(path_bytes);
            return NULL;
        }
        have_view = true;
        sd.data = v.buf;
        sd.size = (size_t)v.len;
    }
    vkmha_mha *mha = NULL;
    vkmha_status st = vkmha_mha_create_from_safetensors(ctx->ctx, &sd, &mha);
    if (have_view)
        PyBuffer_Release(&v);
    Py_XDECREF(path_bytes);
    if (st)
        return context_fail(ctx, st);
    MHAObject *self = (MHAObject *)((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0);
    if (!self) {
        vkmha_mha_destroy(mha);
        return NULL;
    }
    if (mha_adopt(self, ctx, mha)) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void mha_dealloc(MHAObject *self)
{
    vkmha_mha_destroy(self->mha);
    context_drop(&self->ctx);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *mha_desc(MHAObject *self, void *unused)
{
    (void)unused;
    const vkmha_mha_desc *d = &self->d;
    if (live(self->mha, "MHA"))
        return NULL;
    return Py_BuildValue("{sIsIsIsIsIsIsIsfsOsfsIsIsIsIsIsIsOsIsfsfsI}", "d_model", d->d_model,
                         "n_head",
                         d->n_head, "n_kv_head", d->n_kv_head, "d_k", d->d_k, "d_v", d->d_v,
                         "kdim", d->kdim, "vdim", d->vdim, "scale", (double)d->scale,
                         "post_norm", d->post_norm ? Py_True : Py_False, "norm_eps",
                         (double)d->norm_eps, "weight_dtype", d->weight_dtype,
                         "storage_dtype", d->storage_dtype, "head_begin", d->head_begin,
                         "head_end", d->head_end, "weight_quant", d->weight_quant,
                         "weight_group_size", d->weight_group_size, "weights_quantized",
                         d->weights_quantized ? Py_True : Py_False, "rope_dims", d->rope_dims,
                         "rope_theta", (double)d->rope_theta, "rope_scale",
                         (double)d->rope_scale, "rope_layout", d->rope_layout);
}

static PyObject *mha_forward(MHAObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"query", "key", "value", "out", "len_q", "len_k", "batch",
                             "attn_weights", "path", "kv_splits", MASK_KWLIST, "dtype",
                             "kv_cache", "kv_entry", "positions", "entry_tokens", NULL};
    PyObject *q_o, *k_o, *v_o, *out_o, *w_o = Py_None, *cache_o = Py_None, *pos_o = Py_None,
             *tok_o = Py_None;
    Py_ssize_t lq, lk, batch = 1, kv_splits = 0, kv_entry = 0;
    int path = 0, dt = VKMHA_DTYPE_F32;
    mask_args m = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOnn|nOin" MASK_FORMAT "iOnOO", kwlist, &q_o,
                                     &k_o, &v_o, &out_o, &lq, &lk, &batch, &w_o, &path,
                                     &kv_splits, MASK_REFS(m), &dt, &cache_o, &kv_entry,
                                     &pos_o, &tok_o) ||
        live(self->mha, "MHA") || check_open(self->ctx) || check_dtype(dt, "dtype", false))
        return NULL;
    const vkmha_mha_desc *d = &self->d;
    uint32_t Lq, Lk, B, splits, entry;
    if (to_u32(lq, "len_q", &Lq) || to_u32(lk, "len_k", &Lk) || to_u32(batch, "batch", &B) ||
        to_u32(kv_splits, "kv_splits", &splits) || to_u32(kv_entry, "kv_entry", &entry))
        return NULL;
    vkmha_kv_cache *cache = NULL;
    if (cache_o != Py_None) {
        if (!PyObject_TypeCheck(cache_o, &KVCacheType)) {
            PyErr_SetString(PyExc_TypeError, "kv_cache: a vkmha KVCache is needed");
            return NULL;
        }
        if (live(cache = ((KVCacheObject *)cache_o)->cache, "KVCache"))
            return NULL;
    }
    const uint32_t Bn = B ? B : 1;
    /* The attention's key axis: with a cache, its longest entry after the
     * append (vkmha checks the entries; a bad range sizes nothing here). */
    uint32_t Lkn = Lk ? Lk : Lq;
    if (cache)
        Lkn = cache_len_kv(cache, entry, Bn, k_o != Py_None ? Lkn : 0);
    bool tm = is_tensor(q_o), present;
    arg a[7 + MASK_ARGS];
    memset(a, 0, sizeof a);
    vkmha_mask hm;
    vkmha_tensor_mask tmk;
    vkmha_status st;
    const uint32_t adt = (uint32_t)dt;
    /* A mixed batch's rows are packed: len_q of them in all. */
    const uint32_t Bq = tok_o != Py_None ? 1 : Bn;
    if (arg_get(tok_o, "entry_tokens", ARG_U32, false, Bn, false, self->ctx,
                &a[6 + MASK_ARGS]) ||
        arg_get(pos_o, "positions", ARG_U32, false, PROD2(Bq, Lq), false, self->ctx,
                &a[5 + MASK_ARGS])) {
        args_release(a, 7 + MASK_ARGS);
        return NULL;
    }
    if (arg_get(q_o, "query", adt, false, PROD3(Bq, Lq, d->d_model), tm, self->ctx, &a[0]) ||
        arg_get(k_o, "key", adt, false, PROD3(Bq, Lk ? Lk : Lq, d->kdim), tm, self->ctx,
                &a[1]) ||
        arg_get(v_o, "value", adt, false, PROD3(Bq, Lk ? Lk : Lq, d->vdim), tm, self->ctx,
                &a[2]) ||
        arg_get(out_o, "out", adt, true, PROD3(Bq, Lq, d->d_model), tm, self->ctx, &a[3]) ||
        arg_get(w_o, "attn_weights", adt, true, PROD4(Bn, d->n_head, Lq, Lkn), tm, self->ctx,
                &a[4]) ||
        mask_get(&m, Bn, d->n_head, Lq, Lkn, tm, self->ctx, a + 5, &hm, &tmk, &present)) {
        args_release(a, 7 + MASK_ARGS);
        return NULL;
    }
    /* vkmha_mha_io and vkmha_mha_tensors have the same fields: arrays (.p)
     * or tensors (.t). */
#define FILL_IO(io, member, m_)                                                  \
    do {                                                                           \
        memset(&io, 0, sizeof io);                                                 \
        io.batch = B, io.len_q = Lq, io.len_k = Lk;                                \
        io.query = a[0].member, io.key = a[1].member, io.value = a[2].member;      \
        io.mask = present ? &m_ : NULL;                                            \
        io.out = a[3].member, io.attn_weights = a[4].member;                       \
        io.attention_path = (vkmha_attention_path)path;                            \
        io.kv_splits = splits;                                                     \
        io.kv_cache = cache, io.kv_entry = entry;                                  \
        io.positions = a[5 + MASK_ARGS].p;                                         \
        io.entry_tokens = a[6 + MASK_ARGS].p;                                      \
    } while (0)
    /* vkmha_mha_tensors has no dtype: its tensors carry theirs. */
    if (tm) {
        vkmha_mha_tensors io;
        FILL_IO(io, t, tmk);
        st = vkmha_mha_forward_tensor(self->mha, &io);
    } else {
        vkmha_mha_io io;
        FILL_IO(io, p, hm);
        io.dtype = adt;
        st = vkmha_mha_forward(self->mha, &io);
    }
#undef FILL_IO
    args_release(a, 7 + MASK_ARGS);
    if (st)
        return context_fail(self->ctx, st);
    Py_RETURN_NONE;
}

/* ---- KV caches ---------------------------------------------------------------- */

static int kv_init(KVCacheObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"mha", "capacity", "batch", "dtype", "quant", NULL};
    MHAObject *mha;
    Py_ssize_t cap, batch = 1;
    int dt = VKMHA_DTYPE_F32;
    unsigned int quant = VKMHA_QUANT_NONE;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!n|niI", kwlist, &MHAType, &mha, &cap, &batch,
                                     &dt, &quant) ||
        live(mha->mha, "MHA") || check_open(mha->ctx) || check_dtype(dt, "dtype", false))
        return -1;
    if (self->cache) {
        PyErr_SetString(PyExc_RuntimeError, "vkmha: KVCache.__init__ called twice");
        return -1;
    }
    vkmha_kv_cache_desc d;
    memset(&d, 0, sizeof d);
    if (to_u32(cap, "capacity", &d.capacity) || to_u32(batch, "batch", &d.batch))
        return -1;
    d.dtype = (uint32_t)dt;
    d.quant = quant;
    vkmha_status st = vkmha_kv_cache_create(mha->mha, &d, &self->cache);
    if (st) {
        context_fail(mha->ctx, st);
        return -1;
    }
    Py_INCREF(mha);
    self->mha = mha;
    return 0;
}

static void kv_dealloc(KVCacheObject *self)
{
    vkmha_kv_cache_destroy(self->cache);
    Py_CLEAR(self->mha);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *kv_fail(KVCacheObject *self, vkmha_status st)
{
    return context_fail(self->mha->ctx, st);
}

static PyObject *kv_lengths(KVCacheObject *self, PyObject *unused)
{
    (void)unused;
    vkmha_kv_cache_desc d;
    if (live(self->cache, "KVCache"))
        return NULL;
    vkmha_kv_cache_get_desc(self->cache, &d);
    PyObject *list = PyList_New(d.batch);
    for (uint32_t e = 0; list && e < d.batch; e++) {
        uint32_t len = 0;
        vkmha_kv_cache_get_lengths(self->cache, e, 1, &len);
        PyList_SET_ITEM(list, e, PyLong_FromUnsignedLong(len));
    }
    return list;
}

static PyObject *kv_reset(KVCacheObject *self, PyObject *unused)
{
    (void)unused;
    vkmha_status st;
    if (live(self->cache, "KVCache"))
        return NULL;
    if ((st = vkmha_kv_cache_reset(self->cache)))
        return kv_fail(self, st);
    Py_RETURN_NONE;
}

/* truncate / set_length (set) (length, entry=-1): an entry, -1 every entry. */
static PyObject *kv_length_op(KVCacheObject *self, PyObject *args, PyObject *kw, bool set)
{
    static char *kwlist[] = {"length", "entry", NULL};
    Py_ssize_t length, entry = -1;
    uint32_t len, e = VKMHA_ALL_ENTRIES;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n|n", kwlist, &length, &entry) ||
        live(self->cache, "KVCache") || to_u32(length, "length", &len) ||
        (entry != -1 && to_u32(entry, "entry", &e)))
        return NULL;
    vkmha_status st = set ? vkmha_kv_cache_set_length(self->cache, e, len)
                          : vkmha_kv_cache_truncate(self->cache, e, len);
    if (st)
        return kv_fail(self, st);
    Py_RETURN_NONE;
}

static PyObject *kv_truncate(KVCacheObject *self, PyObject *args, PyObject *kw)
{
    return kv_length_op(self, args, kw, false);
}

static PyObject *kv_set_length(KVCacheObject *self, PyObject *args, PyObject *kw)
{
    return kv_length_op(self, args, kw, true);
}

static PyObject *kv_reorder(KVCacheObject *self, PyObject *arg)
{
    vkmha_kv_cache_desc d;
    if (live(self->cache, "KVCache"))
        return NULL;
    vkmha_kv_cache_get_desc(self->cache, &d);
    PyObject *seq = PySequence_Fast(arg, "reorder: a sequence of entry indices is needed");
    if (!seq)
        return NULL;
    if ((uint64_t)PySequence_Fast_GET_SIZE(seq) != d.batch) {
        Py_DECREF(seq);
        return invalid("reorder: %zd indices for a cache of %u entries",
                       PySequence_Fast_GET_SIZE(seq), d.batch);
    }
    uint32_t *src = PyMem_Malloc(sizeof *src * d.batch);
    int bad = !src;
    for (uint32_t e = 0; !bad && e < d.batch; e++) {
        Py_ssize_t v = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, e));
        bad = (v == -1 && PyErr_Occurred()) || to_u32(v, "src", &src[e]);
    }
    Py_DECREF(seq);
    vkmha_status st = bad ? VKMHA_SUCCESS : vkmha_kv_cache_reorder(self->cache, src);
    PyMem_Free(src);
    if (bad)
        return src ? NULL : PyErr_NoMemory();
    if (st)
        return kv_fail(self, st);
    Py_RETURN_NONE;
}

/* _read(values): the keys (False) or values (True) tensor's bytes. */
static PyObject *kv_read(KVCacheObject *self, PyObject *arg)
{
    vkmha_tensor *t[2];
    if (live(self->cache, "KVCache"))
        return NULL;
    vkmha_kv_cache_get_tensors(self->cache, &t[0], &t[1]);
    const int which = PyObject_IsTrue(arg);
    if (which < 0)
        return NULL;
    const uint64_t n = vkmha_tensor_bytes(t[which]);
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (!b)
        return NULL;
    vkmha_status st = vkmha_tensor_download(t[which], 0, PyBytes_AS_STRING(b), n);
    if (st) {
        Py_DECREF(b);
        return kv_fail(self, st);
    }
    return b;
}

static PyObject *kv_desc(KVCacheObject *self, void *unused)
{
    (void)unused;
    vkmha_kv_cache_desc d;
    if (live(self->cache, "KVCache"))
        return NULL;
    vkmha_kv_cache_get_desc(self->cache, &d);
    return Py_BuildValue("{sIsIsIsIsK}", "batch", d.batch, "capacity", d.capacity, "dtype",
                         d.dtype, "quant", d.quant, "bytes",
                         (unsigned long long)vkmha_kv_cache_bytes(self->cache));
}

/* ---- types and module -------------------------------------------------------- */

/* A type of this module: its object struct, doc, init, dealloc, methods and
 * properties; instances made by Python (tp_new) and initialized by init. */
#define TYPE(name, obj, doc, init, dealloc, methods, getset)                 \
    {                                                                          \
        PyVarObject_HEAD_INIT(NULL, 0)                                         \
        .tp_name = "vkmha._vkmha." #name,                                      \
        .tp_basicsize = sizeof(obj),                                           \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,                  \
        .tp_doc = doc,                                                         \
        .tp_new = PyType_GenericNew,                                           \
        .tp_init = (initproc)init,                                             \
        .tp_dealloc = (destructor)dealloc,                                     \
        .tp_methods = methods,                                                 \
        .tp_getset = getset,                                                   \
    }

/* ---- quantized weights ---------------------------------------------------- */

/* The vkmha_quant_desc of (type, group_size, rows, cols). */
static int quant_desc(Py_ssize_t type, Py_ssize_t group, Py_ssize_t rows, Py_ssize_t cols,
                      vkmha_quant_desc *d)
{
    memset(d, 0, sizeof *d);
    return to_u32(type, "type", &d->type) || to_u32(group, "group_size", &d->group_size) ||
           to_u32(rows, "rows", &d->rows) || to_u32(cols, "cols", &d->cols);
}

static PyObject *context_quant_layout(ContextObject *self, PyObject *args)
{
    Py_ssize_t type, group, rows, cols;
    vkmha_quant_desc d;
    vkmha_quant_layout l;
    if (!PyArg_ParseTuple(args, "nnnn", &type, &group, &rows, &cols) || check_open(self) ||
        quant_desc(type, group, rows, cols, &d))
        return NULL;
    vkmha_status st = vkmha_quant_layout_of(self->ctx, &d, &l);
    if (st)
        return context_fail(self, st);
    return Py_BuildValue("{s:K,s:K,s:K}", "scales_offset", (unsigned long long)l.scales_offset,
                         "zeros_offset", (unsigned long long)l.zeros_offset, "bytes",
                         (unsigned long long)l.bytes);
}

/* _quantize and _dequantize(type, group_size, rows, cols, values, dtype,
 * data): vkmha_quantize of values (rows * cols of dtype) into the writable
 * buffer data, or vkmha_dequantize of data's bytes into values. */
static PyObject *quant_convert(ContextObject *self, PyObject *args, bool quantize)
{
    Py_ssize_t type, group, rows, cols;
    int dt;
    PyObject *values_o, *data_o;
    vkmha_quant_desc d;
    const char *values_name = quantize ? "src" : "dst";
    if (!PyArg_ParseTuple(args, "nnnnOiO", &type, &group, &rows, &cols, &values_o, &dt,
                          &data_o) ||
        check_open(self) || check_dtype(dt, quantize ? "src_dtype" : "dst_dtype", false) ||
        quant_desc(type, group, rows, cols, &d))
        return NULL;
    arg a[1];
    memset(a, 0, sizeof a);
    if (arg_get(values_o, values_name, (uint32_t)dt, !quantize, PROD2(d.rows, d.cols), false,
                self, &a[0]))
        return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(data_o, &data, PyBUF_C_CONTIGUOUS | (quantize ? PyBUF_WRITABLE : 0))) {
        args_release(a, 1);
        return NULL;
    }
    vkmha_status st =
        quantize ? vkmha_quantize(self->ctx, &d, (uint32_t)dt, a[0].p, data.buf, (uint64_t)data.len)
                 : vkmha_dequantize(self->ctx, &d, data.buf, (uint64_t)data.len, (uint32_t)dt,
                                    a[0].p);
    PyBuffer_Release(&data);
    args_release(a, 1);
    if (st)
        return context_fail(self, st);
    Py_RETURN_NONE;
}

static PyObject *context_quantize(ContextObject *self, PyObject *args)
{
    return quant_convert(self, args, true);
}

static PyObject *context_dequantize(ContextObject *self, PyObject *args)
{
    return quant_convert(self, args, false);
}

static PyMethodDef context_methods[] = {
    {"close", (PyCFunction)context_close, METH_NOARGS,
     "Destroys the context now (every layer and tensor of it must be gone)."},
    {"info", (PyCFunction)context_info, METH_NOARGS, "vkmha_context_get_info as a dict."},
    {"kernels", (PyCFunction)context_kernels, METH_NOARGS,
     "vkmha_context_get_kernels as a list of dicts (name, op, available, shader, "
     "workgroup_size, shared_bytes, params: {name: value}); [] on the reference backend."},
    {"profile", (PyCFunction)context_profile, METH_NOARGS,
     "vkmha_context_get_profile: the steps of the last profiled call (flags CONTEXT_PROFILE) "
     "as a list of dicts (name, workgroups, bytes, time_ns); [] without one."},
    {"matmul", (PyCFunction)(void (*)(void))context_matmul, METH_VARARGS | METH_KEYWORDS,
     "vkmha_matmul / vkmha_matmul_tensor on packed arrays or tensors."},
    {"softmax", (PyCFunction)(void (*)(void))context_softmax, METH_VARARGS | METH_KEYWORDS,
     "vkmha_softmax / vkmha_softmax_tensor."},
    {"split_heads", (PyCFunction)(void (*)(void))context_split_heads,
     METH_VARARGS | METH_KEYWORDS, "vkmha_split_heads / _tensor."},
    {"merge_heads", (PyCFunction)(void (*)(void))context_merge_heads,
     METH_VARARGS | METH_KEYWORDS, "vkmha_merge_heads / _tensor."},
    {"attention", (PyCFunction)(void (*)(void))context_attention, METH_VARARGS | METH_KEYWORDS,
     "vkmha_attention / vkmha_attention_tensor."},
    {"_quant_layout", (PyCFunction)context_quant_layout, METH_VARARGS,
     "vkmha_quant_layout_of(type, group_size, rows, cols) as a dict."},
    {"_quantize", (PyCFunction)context_quantize, METH_VARARGS,
     "vkmha_quantize(type, group_size, rows, cols, src, src_dtype, dst)."},
    {"_dequantize", (PyCFunction)context_dequantize, METH_VARARGS,
     "vkmha_dequantize(type, group_size, rows, cols, dst, dst_dtype, src)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef context_getset[] = {
    {"last_error", (getter)context_last_error, NULL,
     "vkmha_context_last_error: the message of the last failed call", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ContextType = TYPE(Context, ContextObject, "Context(backend=0, device_index=-1, validation=False, flags=0, fused_kernel=0, scratch_budget=0, no_native_16bit=False): a "
    "vkmha_context.",
    context_init, context_dealloc, context_methods, context_getset);

static PyMethodDef tensor_methods[] = {
    {"upload", (PyCFunction)tensor_upload, METH_VARARGS,
     "upload(src, offset=0): vkmha_tensor_upload of src's bytes."},
    {"download", (PyCFunction)tensor_download, METH_VARARGS,
     "download(dst, offset=0): vkmha_tensor_download into dst's bytes."},
    {"release", (PyCFunction)tensor_release_m, METH_NOARGS, "vkmha_tensor_destroy, now."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tensor_getset[] = {
    {"desc", (getter)tensor_desc, NULL, "(dtype, shape)", NULL},
    {"nbytes", (getter)tensor_nbytes, NULL, "vkmha_tensor_bytes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TensorType = TYPE(Tensor, TensorObject, "Tensor(context, shape, dtype=DTYPE_F32): a vkmha_tensor.",
    tensor_init, tensor_dealloc, tensor_methods, tensor_getset);

static PyMethodDef mha_methods[] = {
    {"forward", (PyCFunction)(void (*)(void))mha_forward, METH_VARARGS | METH_KEYWORDS,
     "vkmha_mha_forward / vkmha_mha_forward_tensor."},
    {"from_safetensors", (PyCFunction)(void (*)(void))mha_from_safetensors,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, "vkmha_mha_create_from_safetensors."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef mha_getset[] = {
    {"desc", (getter)mha_desc, NULL, "vkmha_mha_get_desc as a dict (sizes, scale, norm)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject MHAType = TYPE(MHA, MHAObject, "MHA(context, d_model, n_head, w_q, w_k, w_v, w_o, ...): a vkmha_mha.",
    mha_init, mha_dealloc, mha_methods, mha_getset);

static PyMethodDef kv_methods[] = {
    {"lengths", (PyCFunction)kv_lengths, METH_NOARGS, "vkmha_kv_cache_get_lengths of every entry."},
    {"reset", (PyCFunction)kv_reset, METH_NOARGS, "vkmha_kv_cache_reset."},
    {"truncate", (PyCFunction)(void (*)(void))kv_truncate, METH_VARARGS | METH_KEYWORDS,
     "truncate(length, entry=-1): vkmha_kv_cache_truncate (-1: every entry)."},
    {"set_length", (PyCFunction)(void (*)(void))kv_set_length, METH_VARARGS | METH_KEYWORDS,
     "set_length(length, entry=-1): vkmha_kv_cache_set_length (-1: every entry)."},
    {"reorder", (PyCFunction)kv_reorder, METH_O, "reorder(src): vkmha_kv_cache_reorder."},
    {"_read", (PyCFunction)kv_read, METH_O, "_read(values): the keys' or values' bytes."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kv_getset[] = {
    {"desc", (getter)kv_desc, NULL, "batch, capacity, dtype and bytes, as a dict", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject KVCacheType = TYPE(KVCache, KVCacheObject,
    "KVCache(mha, capacity, batch=1, dtype=DTYPE_F32): a vkmha_kv_cache.",
    kv_init, kv_dealloc, kv_methods, kv_getset);

static PyObject *status_string(PyObject *mod, PyObject *arg)
{
    (void)mod;
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(vkmha_status_string((vkmha_status)v));
}

/* convert(src, src_dtype, dst, dst_dtype): src's elements into dst (a
 * new array, at least as long), between F32, F16 and BF16: widening
 * exactly, narrowing as vkmha stores 16-bit results (src/half.c: round to
 * nearest even, saturating, NaN quieted). */
static PyObject *convert(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *src_o, *dst_o;
    int sdt, ddt;
    if (!PyArg_ParseTuple(args, "OiOi", &src_o, &sdt, &dst_o, &ddt) ||
        check_dtype(sdt, "src_dtype", false) || check_dtype(ddt, "dst_dtype", false))
        return NULL;
    arg a[2];
    memset(a, 0, sizeof a);
    if (arg_get(src_o, "src", (uint32_t)sdt, false, 0, false, NULL, &a[0]))
        return NULL;
    const size_t n = (size_t)(a[0].view.len / a[0].view.itemsize);
    if (arg_get(dst_o, "dst", (uint32_t)ddt, true, n, false, NULL, &a[1])) {
        args_release(a, 2);
        return NULL;
    }
    float *tmp = NULL;
    if (sdt == ddt) {
        memcpy(a[1].p, a[0].p, n * vkmha__dtype_size((uint32_t)sdt));
    } else if (sdt == VKMHA_DTYPE_F32) {
        vkmha__from_f32((uint32_t)ddt, a[0].p, n, a[1].p);
    } else if (ddt == VKMHA_DTYPE_F32) {
        vkmha__to_f32((uint32_t)sdt, a[0].p, n, a[1].p);
    } else if ((tmp = PyMem_Malloc(n ? n * sizeof *tmp : 1))) {
        vkmha__to_f32((uint32_t)sdt, a[0].p, n, tmp);
        vkmha__from_f32((uint32_t)ddt, tmp, n, a[1].p);
        PyMem_Free(tmp);
    } else {
        args_release(a, 2);
        return PyErr_NoMemory();
    }
    args_release(a, 2);
    Py_RETURN_NONE;
}

static PyObject *cooperative_matrix_built(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyBool_FromLong(vkmha_cooperative_matrix_built());
}

static PyObject *alibi_slopes(PyObject *self, PyObject *arg)
{
    (void)self;
    const Py_ssize_t heads = PyLong_AsSsize_t(arg);
    uint32_t h;
    if ((heads == -1 && PyErr_Occurred()) || to_u32(heads, "heads", &h))
        return NULL;
    float *s = PyMem_Malloc(h ? h * sizeof *s : 1);
    if (!s)
        return PyErr_NoMemory();
    const vkmha_status st = vkmha_alibi_slopes(h, s);
    PyObject *list = st ? NULL : PyList_New(h);
    for (uint32_t i = 0; list && i < h; i++)
        PyList_SET_ITEM(list, i, PyFloat_FromDouble(s[i]));
    PyMem_Free(s);
    if (st)
        PyErr_Format(PyExc_ValueError, "alibi_slopes: heads must be >= 1, got %u", h);
    return list;
}

static PyMethodDef module_methods[] = {
    {"alibi_slopes", alibi_slopes, METH_O,
     "vkmha_alibi_slopes(heads): the standard ALiBi slopes, a list of floats."},
    {"cooperative_matrix_built", cooperative_matrix_built, METH_NOARGS,
     "vkmha_cooperative_matrix_built: whether this build has the matrix-unit kernels."},
    {"enumerate_devices", enumerate_devices, METH_NOARGS,
     "vkmha_enumerate_devices: a list of device dicts."},
    {"status_string", status_string, METH_O, "vkmha_status_string."},
    {"convert", convert, METH_VARARGS,
     "convert(src, src_dtype, dst, dst_dtype): between DTYPE_F32, DTYPE_F16 and DTYPE_BF16 "
     "arrays, rounding as vkmha's 16-bit stores."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_vkmha", "vkmha's C API (see the vkmha package).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

/* Every enum constant of vkmha.h, under its name without "VKMHA_"
 * (tests/python checks this list against the header). */
#define CONSTANT(name) {#name, VKMHA_##name}
static const struct {
    const char *name;
    long value;
} constants[] = {
    CONSTANT(NOT_READY), CONSTANT(SUCCESS), CONSTANT(ERROR_INVALID_ARGUMENT),
    CONSTANT(ERROR_UNSUPPORTED), CONSTANT(ERROR_NO_DEVICE), CONSTANT(ERROR_OUT_OF_HOST_MEMORY),
    CONSTANT(ERROR_OUT_OF_DEVICE_MEMORY), CONSTANT(ERROR_DEVICE_LOST), CONSTANT(ERROR_VULKAN),
    CONSTANT(BACKEND_DEFAULT), CONSTANT(BACKEND_VULKAN), CONSTANT(BACKEND_REFERENCE),
    CONSTANT(DEVICE_TYPE_OTHER), CONSTANT(DEVICE_TYPE_INTEGRATED_GPU),
    CONSTANT(DEVICE_TYPE_DISCRETE_GPU), CONSTANT(DEVICE_TYPE_VIRTUAL_GPU),
    CONSTANT(DEVICE_TYPE_CPU), CONSTANT(LOG_DEFAULT), CONSTANT(LOG_DEBUG), CONSTANT(LOG_INFO), CONSTANT(LOG_WARN),
    CONSTANT(LOG_ERROR), CONSTANT(CONTEXT_NO_SUBGROUP_OPS), CONSTANT(CONTEXT_PROFILE),
    CONSTANT(CONTEXT_EAGER_PIPELINES), CONSTANT(MATMUL_VARIANT_AUTO),
    CONSTANT(MATMUL_VARIANT_SHARED), CONSTANT(MATMUL_VARIANT_REGISTER),
    CONSTANT(MATMUL_VARIANT_COOPERATIVE), CONSTANT(MATMUL_VARIANT_COOPERATIVE2),
    CONSTANT(FUSED_KERNEL_COOPERATIVE),
    CONSTANT(FUSED_KERNEL_AUTO), CONSTANT(FUSED_KERNEL_SHARED), CONSTANT(FUSED_KERNEL_REGISTER),
    CONSTANT(FUSED_KERNEL_SHARED_GPU_BLOCKS),
    CONSTANT(MASK_NONE),
    CONSTANT(MASK_KEY_PADDING), CONSTANT(MASK_FULL), CONSTANT(MASK_CAUSAL), CONSTANT(MASK_BIAS),
    CONSTANT(MASK_WINDOW), CONSTANT(MASK_ALIBI), CONSTANT(MASK_SOFTCAP), CONSTANT(MASK_SINKS),
    CONSTANT(ROPE_HALF), CONSTANT(ROPE_INTERLEAVED),
    CONSTANT(OP_N), CONSTANT(OP_T), CONSTANT(ATTENTION_PATH_AUTO), CONSTANT(ATTENTION_PATH_FUSED),
    CONSTANT(ATTENTION_PATH_UNFUSED), CONSTANT(DTYPE_F32), CONSTANT(DTYPE_U8), CONSTANT(DTYPE_F16), CONSTANT(DTYPE_BF16),
    CONSTANT(BROADCAST), CONSTANT(MAX_DIMS), CONSTANT(MAX_KV_SPLITS), CONSTANT(VERSION_NUMBER),
    CONSTANT(KERNEL_MAX_PARAMS), CONSTANT(MAX_MATRIX_SHAPES), CONSTANT(MAX_PROFILE_STEPS), CONSTANT(ALL_ENTRIES), CONSTANT(CONTEXT_NO_SELF_CHECK),
    CONSTANT(CONTEXT_SINGLE_THREAD),
    CONSTANT(PATH_FUSED_D32), CONSTANT(PATH_FUSED_D64), CONSTANT(PATH_FUSED_D128),
    CONSTANT(PATH_FUSED_D256), CONSTANT(PATH_FUSED_CPU_D32), CONSTANT(PATH_FUSED_CPU_D64),
    CONSTANT(PATH_FUSED_CPU_D128), CONSTANT(PATH_FUSED_CPU_D256), CONSTANT(PATH_SUBGROUP),
    CONSTANT(PATH_NATIVE_16BIT), CONSTANT(PATH_MATMUL_GEMV), CONSTANT(PATH_SPARSE),
    CONSTANT(PATH_COOPMAT_MATMUL), CONSTANT(PATH_COOPMAT_FUSED_D32),
    CONSTANT(PATH_COOPMAT_FUSED_D64), CONSTANT(PATH_COOPMAT_FUSED_D128),
    CONSTANT(PATH_COOPMAT_FUSED_D256), CONSTANT(PATH_COOPMAT2_MATMUL),
    CONSTANT(PATH_FUSED_D576), CONSTANT(PATH_FUSED_CPU_D576), CONSTANT(PATH_COOPMAT_FUSED_D576),
    CONSTANT(DEBUG_PROFILE_NONE), CONSTANT(DEBUG_PROFILE_MOBILE),
    CONSTANT(QUANT_NONE), CONSTANT(QUANT_Q8), CONSTANT(QUANT_Q4), CONSTANT(QUANT_Q4Z),
};

PyMODINIT_FUNC PyInit__vkmha(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    PyTypeObject *types[4] = {&ContextType, &TensorType, &MHAType, &KVCacheType};
    const char *type_names[4] = {"Context", "Tensor", "MHA", "KVCache"};
    for (int i = 0; i < 4; i++) {
        if (PyType_Ready(types[i]) < 0)
            goto fail;
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, type_names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            goto fail;
        }
    }
    Error = PyErr_NewExceptionWithDoc(
        "vkmha._vkmha.Error",
        "A vkmha call failed: .status (the vkmha_status), .status_name, .message (vkmha's "
        "last-error message, which names the argument).",
        PyExc_RuntimeError, NULL);
    if (!Error || PyModule_AddObject(m, "Error", Error) < 0)
        goto fail;
    Py_INCREF(Error);
    for (size_t i = 0; i < sizeof error_classes / sizeof error_classes[0]; i++) {
        char qual[96];
        snprintf(qual, sizeof qual, "vkmha._vkmha.%s", error_classes[i].name);
        PyObject *bases = error_classes[i].base2
                              ? PyTuple_Pack(2, Error, *error_classes[i].base2)
                              : PyTuple_Pack(1, Error);
        if (!bases)
            goto fail;
        PyObject *cls = PyErr_NewException(qual, bases, NULL);
        Py_DECREF(bases);
        if (!cls)
            goto fail;
        errors[-error_classes[i].status] = cls;
        Py_INCREF(cls);
        if (PyModule_AddObject(m, error_classes[i].name, cls) < 0) {
            Py_DECREF(cls);
            goto fail;
        }
    }
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
        if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0)
            goto fail;
    if (PyModule_AddIntConstant(m, "version", (long)vkmha_version()) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
