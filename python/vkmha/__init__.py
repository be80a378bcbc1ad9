"""vkmha from Python: multi-head attention on any Vulkan GPU (or vkmha's
reference backend), with numpy arrays and CPU torch tensors in and out.

    import torch, vkmha
    ctx = vkmha.Context()                        # Vulkan; Context("reference")
    mha = torch.nn.MultiheadAttention(512, 8, batch_first=True).eval()
    attn = vkmha.from_torch(mha, ctx)            # weights copied to the device once
    out, weights = attn(x, x, x, key_padding_mask=pad)   # as mha(x, x, x, ...)

PyTorch's own shapes: vkmha.nn.MultiheadAttention (the module itself,
state_dict and all) and vkmha.nn.convert(model); vkmha.functional.
scaled_dot_product_attention. Installed with `pip install .` (a wheel
holding the library; pyproject.toml).

Arrays: anything numpy can read (numpy arrays, CPU torch tensors, buffers).
Each call computes on one float dtype, fp32 or 16-bit storage (vkmha.h:
16-bit values are only stored in 16 bits, every sum is fp32):
  - float32 arrays and tensors: fp32; float64 and other float dtypes are
    converted to float32;
  - numpy.float16 / torch.float16: fp16;
  - torch.bfloat16: bf16. numpy has no bfloat16: a numpy.uint16 array is
    taken as bf16 bits when the call says dtype="bf16", and bf16 results
    come back as such uint16 arrays (torch.bfloat16 tensors when the input
    was one; convert(bits, "f32") widens them).
The dtype is that of the call's first array argument, or the call's
`dtype` argument ("f32", "f16", "bf16", a DTYPE_ value, or a numpy / torch
dtype); the other arrays are converted to it, narrowing as vkmha rounds its
own 16-bit results (convert()). Masks stay bool / uint8 and additive biases
fp32. Results have the call's dtype. C-contiguous arrays of the call's
dtype are passed as they are; other layouts are copied; integer (except
bf16 bits), bool (except masks), complex and GPU tensors raise TypeError.
Results are numpy arrays, or torch tensors when the (first) input was a
torch tensor.

Every failed vkmha call raises vkmha.Error (a subclass per status, e.g.
InvalidArgumentError, which is also a ValueError) carrying .status,
.status_name and .message, vkmha's message naming the argument.

One Context is used by one thread at a time (the binding holds the GIL
during each call).
"""
import numpy as _np

from . import _vkmha
from ._vkmha import (Error, InvalidArgumentError, UnsupportedError, NoDeviceError,
                     OutOfHostMemoryError, OutOfDeviceMemoryError, DeviceLostError,
                     VulkanError, enumerate_devices, status_string,
                     cooperative_matrix_built)

# Every constant of vkmha.h (VKMHA_X is vkmha.X), e.g. vkmha.DTYPE_F32.
for _name in dir(_vkmha):
    if _name.isupper():
        globals()[_name] = getattr(_vkmha, _name)

__version__ = "%d.%d.%d" % (_vkmha.version // 10000, _vkmha.version // 100 % 100,
                            _vkmha.version % 100)

# numpy dtype of each vkmha_dtype (a test checks that every DTYPE_ of the
# header is here). numpy has no bfloat16: _BF16 data is its uint16 bits.
DTYPES = {_vkmha.DTYPE_F32: _np.dtype(_np.float32), _vkmha.DTYPE_U8: _np.dtype(_np.uint8),
          _vkmha.DTYPE_F16: _np.dtype(_np.float16), _vkmha.DTYPE_BF16: _np.dtype(_np.uint16)}

_F32, _F16, _BF16 = _vkmha.DTYPE_F32, _vkmha.DTYPE_F16, _vkmha.DTYPE_BF16
_FLOAT_DTYPES = {"f32": _F32, "float32": _F32, "f16": _F16, "float16": _F16, "half": _F16,
                 "bf16": _BF16, "bfloat16": _BF16}

_BACKENDS = {"default": _vkmha.BACKEND_DEFAULT, "vulkan": _vkmha.BACKEND_VULKAN,
             "reference": _vkmha.BACKEND_REFERENCE}
_PATHS = {"auto": _vkmha.ATTENTION_PATH_AUTO, "fused": _vkmha.ATTENTION_PATH_FUSED,
          "unfused": _vkmha.ATTENTION_PATH_UNFUSED}


def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _f32(x, name):
    """x as a float32 C-contiguous numpy array (no copy when it is one)."""
    return _typed(x, name, _F32)[0]


def _u8(x, name):
    """A boolean or uint8 mask as a uint8 C-contiguous array."""
    if x is None:
        return None
    if _is_torch(x):
        x = x.detach().cpu().numpy()
    a = _np.asarray(x)
    if a.dtype != _np.bool_ and a.dtype != _np.uint8:
        raise TypeError("%s: a bool or uint8 mask is needed, got dtype %s" % (name, a.dtype))
    return _np.ascontiguousarray(a, dtype=_np.uint8)


def _dtype(dtype):
    """A float dtype argument as a vkmha_dtype value, None as None."""
    if dtype is None:
        return None
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        if dtype in (_F32, _F16, _BF16):
            return dtype
    else:
        name = str(dtype).replace("torch.", "")
        if name not in _FLOAT_DTYPES:
            try:
                name = _np.dtype(dtype).name
            except TypeError:
                pass
        if name in _FLOAT_DTYPES:
            return _FLOAT_DTYPES[name]
    raise ValueError("dtype: %r is not a float dtype of vkmha (\"f32\", \"f16\", \"bf16\", "
                     "DTYPE_F32, DTYPE_F16, DTYPE_BF16, or a numpy / torch float dtype)"
                     % (dtype,))


def _natural(x, name, bf16_bits):
    """x as (a C-contiguous numpy array, its vkmha dtype), with no rounding:
    float16 and bfloat16 data keep their dtype (bfloat16 as uint16 bits; a
    numpy.uint16 array is bf16 bits only if bf16_bits), other floats become
    float32."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise TypeError("%s: a torch tensor on %s; vkmha takes CPU tensors (x.cpu())"
                            % (name, x.device))
        x = x.detach()
        if x.dtype == _torch().bfloat16:
            return x.contiguous().view(_torch().int16).numpy().view(_np.uint16), _BF16
        if x.dtype == _torch().float16:
            return _np.ascontiguousarray(x.numpy()), _F16
        x = (x.float() if x.is_floating_point() else x).numpy()
    a = _np.asarray(x)
    if a.dtype == _np.float16:
        return _np.ascontiguousarray(a), _F16
    if a.dtype == _np.uint16 and bf16_bits:
        return _np.ascontiguousarray(a), _BF16
    if a.dtype.kind != "f":
        hint = " (bfloat16 bits as numpy.uint16 need dtype=\"bf16\")" \
            if a.dtype == _np.uint16 else ""
        raise TypeError("%s: floating-point data is needed, got dtype %s%s" % (name, a.dtype, hint))
    return _np.ascontiguousarray(a, dtype=_np.float32), _F32


def _to(a, dt, dtype):
    """a (a C-contiguous array of vkmha dtype dt) as vkmha dtype `dtype`."""
    if dt == dtype:
        return a
    out = _np.empty(a.shape, DTYPES[dtype])
    _vkmha.convert(a, dt, out, dtype)
    return out


def _typed(x, name, dtype):
    """x as a C-contiguous array of vkmha dtype `dtype` (None: x's own, see
    _natural), and that dtype. Narrowing rounds as vkmha does."""
    if x is None:
        return None, dtype
    a, dt = _natural(x, name, dtype == _BF16)
    return (a, dt) if dtype is None else (_to(a, dt, dtype), dtype)


def convert(x, dtype):
    """x (any float data: numpy or CPU torch, float32, float16, bfloat16;
    a numpy.uint16 array is bf16 bits) as a numpy array of vkmha dtype
    `dtype` ("f32", "f16", "bf16", ...): float32, float16, or bf16 bits as
    uint16. Widening is exact; narrowing rounds as vkmha stores its 16-bit
    results: to nearest even, a finite value beyond the format's largest
    saturates to it (+-65504 for fp16), Inf and NaN stay Inf and NaN."""
    a, dt = _natural(x, "x", True)
    return _to(a, dt, _dtype(dtype))


def _torch():
    import torch
    return torch


def _like(result, template, dtype=_F32):
    """result (a numpy array of vkmha dtype `dtype`) as a torch tensor when
    template is one (bf16 bits as torch.bfloat16)."""
    if result is None:
        return None
    if _is_torch(template):
        if dtype == _BF16:  # through int16: torch may have no uint16
            return _torch().from_numpy(result.view(_np.int16)).view(_torch().bfloat16)
        return _torch().from_numpy(result)
    return result


def _path(path):
    if isinstance(path, str):
        if path not in _PATHS:
            raise ValueError("path: one of %s" % ", ".join(_PATHS))
        return _PATHS[path]
    return int(path)


class Context(_vkmha.Context):
    """A vkmha context: Context(backend="vulkan" | "reference", device_index=None,
    validation=False, flags=0, fused_kernel=FUSED_KERNEL_AUTO, scratch_budget=0,
    no_native_16bit=False).
    flags: OR of CONTEXT_*; fused_kernel (for tests, vkmha_debug_options)
    forces one fused attention kernel; scratch_budget: the most bytes of
    scratch kept between calls (0: no budget); no_native_16bit (for tests)
    makes 16-bit data take the packed path of devices without 16-bit
    storage. info() returns vkmha_context_info as a dict (max_tensor_bytes:
    the largest Tensor, past maxMemoryAllocationSize where sparse_tensors;
    matrix_shapes: the device's VK_KHR_cooperative_matrix shapes as dicts
    m, n, k, a_type .. result_type; cooperative_matrix: the context runs
    fp16 matmuls and fused attention on them, which
    vkmha.cooperative_matrix_built() says the build can;
    cooperative_matrix2: fp16 matmuls also through VK_NV_cooperative_matrix2,
    whose workgroup sizes for fp16 matrices are matrix2_workgroup_sizes),
    kernels() the
    device kernels the context chose (vkmha_context_get_kernels) as a list
    of dicts (name, op, available, shader, workgroup_size, shared_bytes,
    params: {"WG": 64, "BM": 32, ...}; [] on the reference backend),
    profile() where the last call's device time went, with flags
    CONTEXT_PROFILE (vkmha_context_get_profile: a dict per step, name,
    workgroups, bytes, time_ns; [] without the flag), last_error the
    message of the last failed call.

    The ops take arrays (results are arrays of the call's dtype, see the
    module's doc) or Tensors (results are new Tensors of this context,
    computed without a host round trip, of the `dtype` argument or else of
    the first input tensor's dtype; the input tensors may each have their
    own float dtype)."""

    def __init__(self, backend="vulkan", device_index=None, validation=False, flags=0,
                 fused_kernel=_vkmha.FUSED_KERNEL_AUTO, scratch_budget=0,
                 no_native_16bit=False):
        if isinstance(backend, str):
            if backend not in _BACKENDS:
                raise ValueError("backend: one of %s" % ", ".join(_BACKENDS))
            backend = _BACKENDS[backend]
        super().__init__(backend, -1 if device_index is None else device_index,
                         bool(validation), flags, fused_kernel, scratch_budget,
                         bool(no_native_16bit))

    # A context is a handle on a device: copies of an object holding one
    # (copy.deepcopy of a torch model with vkmha.nn modules) share it.
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    # ---- tensors ----
    def tensor(self, array=None, shape=None, dtype=None):
        """A device tensor: of array's shape and contents (bool / uint8 arrays
        as DTYPE_U8, float ones in `dtype`, default their own: float32,
        float16, bfloat16), or empty of `shape` and `dtype` (default _F32;
        DTYPE_U8 too)."""
        if array is not None:
            a = _np_of(array)
            if getattr(a, "dtype", None) in (_np.bool_, _np.uint8):
                a, dtype = _u8(a, "array"), _vkmha.DTYPE_U8
            else:
                a, dtype = _typed(array, "array", _dtype(dtype))
            t = Tensor(self, a.shape, dtype)
            t.upload(a)
            return t
        if dtype != _vkmha.DTYPE_U8:
            dtype = _dtype(dtype) or _F32
        return Tensor(self, tuple(shape), dtype)

    def _inputs(self, dtype, *named):
        """The float inputs (x, name) of one call: Tensors as they are, with
        the output dtype (dtype, else the first tensor's); arrays as arrays
        of one dtype (dtype, else the first array's). Returns (list, dtype,
        tensor mode)."""
        dt = _dtype(dtype)
        if named and _is_tensor(named[0][0]):
            return [x for x, _ in named], dt if dt is not None else named[0][0].dtype, True
        out = []
        for x, name in named:
            if _is_tensor(x):  # the binding says: all arrays or all Tensors
                out.append(x)
                continue
            a, dt = _typed(x, name, dt)
            out.append(a)
        return out, dt, False

    def _new(self, tensors, shape, dtype):
        return self.tensor(shape=shape, dtype=dtype) if tensors else \
            _np.empty(shape, DTYPES[dtype])

    def matmul(self, a, b, bias=None, transpose_b=False, alpha=1.0, dtype=None):
        """alpha * a @ op(b) + bias: a [batch][m][k] or [m][k]; b [batch][k][n],
        or [k][n] (the same for every batch entry); op(b) = b^T when
        transpose_b (b then [.., n, k], a torch.nn.Linear weight). b may be a
        QuantizedMatrix (quantized()): [n][k] with transpose_b (groups along
        k), else [k][n] (groups along n), the same for every batch entry,
        dequantized by the kernels as they load it."""
        if isinstance(b, QuantizedMatrix):
            return self._matmul_quantized(a, b, bias, transpose_b, alpha, dtype)
        (A, B, bias_a), dt, tm = self._inputs(dtype, (a, "a"), (b, "b"), (bias, "bias"))
        ra, rb = len(A.shape), len(B.shape)
        if ra not in (2, 3) or rb not in (2, 3):
            raise ValueError("matmul: a and b must have 2 or 3 dims")
        batch = A.shape[0] if ra == 3 else (B.shape[0] if rb == 3 else 1)
        m, k = A.shape[-2:]
        n = B.shape[-2] if transpose_b else B.shape[-1]
        kb = B.shape[-1] if transpose_b else B.shape[-2]
        if kb != k:
            raise ValueError("matmul: a has k = %d columns, b has %d" % (k, kb))
        c = self._new(tm, (batch, m, n) if ra == 3 or rb == 3 else (m, n), dt)
        super().matmul(A, B, c, m, n, k, bias=bias_a, batch=batch, transpose_b=transpose_b,
                       alpha=alpha, broadcast_a=ra == 2, broadcast_b=rb == 2, dtype=dt)
        return _out(c, a, dt)

    def _matmul_quantized(self, a, q, bias, transpose_b, alpha, dtype):
        (A, bias_a), dt, tm = self._inputs(dtype, (a, "a"), (bias, "bias"))
        if tm != _is_tensor(q.data):
            raise TypeError("matmul: a quantized b's data must be a Tensor (of dtype u8) "
                            "exactly when a is one")
        ra = len(A.shape)
        if ra not in (2, 3):
            raise ValueError("matmul: a must have 2 or 3 dims")
        batch = A.shape[0] if ra == 3 else 1
        m, k = A.shape[-2:]
        n, kb = q.shape if transpose_b else q.shape[::-1]
        if kb != k:
            raise ValueError("matmul: a has k = %d columns, b has %d" % (k, kb))
        c = self._new(tm, (batch, m, n) if ra == 3 else (m, n), dt)
        super().matmul(A, q.data, c, m, n, k, bias=bias_a, batch=batch,
                       transpose_b=transpose_b, alpha=alpha, broadcast_a=False,
                       broadcast_b=True, dtype=dt, b_quant=q.qtype, b_group_size=q.group_size)
        return _out(c, a, dt)

    def softmax(self, x, scale=1.0, key_padding=None, full=None, causal=False, bias=None,
                dtype=None, causal_offset=0, window=0, softcap=0.0, alibi=None, sinks=None):
        """softmax over the last axis of x [batch][heads][len_q][len_k] (or
        fewer leading dims) with vkmha's masks (uint8 / bool, 0 = masked;
        bias fp32; causal: query i sees keys j <= i + causal_offset, so
        causal_offset = len_k - len_q aligns it bottom-right) and score
        rules (vkmha.h, "Masks"; see rules()): window (keys within `window`
        positions of the query's, behind it with causal), softcap (cap *
        tanh(s / cap)), alibi ([heads] slopes, or True for the standard
        ones), sinks ([heads] sink logits)."""
        (X,), dt, tm = self._inputs(dtype, (x, "x"))
        shape4 = (1,) * (4 - len(X.shape)) + tuple(X.shape)
        y = self._new(tm, tuple(X.shape), dt)
        bias_a = _in(bias, "bias")
        super().softmax(X, y, shape4[2], shape4[3], batch=shape4[0], heads=shape4[1],
                        scale=scale, key_padding=_mask_in(key_padding, "key_padding"),
                        full=_mask_in(full, "full"), causal=causal, bias=bias_a,
                        dtype=dt, causal_offset=causal_offset, **_bias_dims(bias_a),
                        **rules(shape4[1], window, softcap, alibi, sinks))
        return _out(y, x, dt)

    def split_heads(self, x, heads, dtype=None):
        """[batch][len][heads * head_dim] -> [batch][heads][len][head_dim]."""
        (X,), dt, tm = self._inputs(dtype, (x, "x"))
        b, n, f = X.shape
        if f % heads:
            raise ValueError("split_heads: %d features are not %d heads" % (f, heads))
        y = self._new(tm, (b, heads, n, f // heads), dt)
        super().split_heads(X, y, n, heads, f // heads, batch=b, dtype=dt)
        return _out(y, x, dt)

    def merge_heads(self, x, dtype=None):
        """[batch][heads][len][head_dim] -> [batch][len][heads * head_dim]."""
        (X,), dt, tm = self._inputs(dtype, (x, "x"))
        b, h, n, d = X.shape
        y = self._new(tm, (b, n, h * d), dt)
        super().merge_heads(X, y, n, h, d, batch=b, dtype=dt)
        return _out(y, x, dt)

    def attention(self, q, k, v, scale=0.0, need_weights=False, path="auto", kv_splits=0,
                  key_padding=None, full=None, causal=False, bias=None, dtype=None,
                  causal_offset=0, window=0, softcap=0.0, alibi=None, sinks=None):
        """Scaled dot-product attention on split heads: q [batch][H][len_q][d_k],
        k [batch][Hkv][len_k][d_k], v [batch][Hkv][len_k][d_v] ->
        out [batch][H][len_q][d_v] (and weights [batch][H][len_q][len_k]);
        causal_offset and the score rules as in softmax."""
        (Q, K, V), dt, tm = self._inputs(dtype, (q, "q"), (k, "k"), (v, "v"))
        b, h, lq, dk = Q.shape
        hkv, lk, dv = K.shape[1], K.shape[2], V.shape[3]
        out = self._new(tm, (b, h, lq, dv), dt)
        w = self._new(tm, (b, h, lq, lk), dt) if need_weights else None
        bias_a = _in(bias, "bias")
        super().attention(Q, K, V, out, h, lq, lk, dk, dv, batch=b, kv_heads=hkv, scale=scale,
                          weights=w, path=_path(path), kv_splits=kv_splits,
                          key_padding=_mask_in(key_padding, "key_padding"),
                          full=_mask_in(full, "full"), causal=causal, bias=bias_a,
                          dtype=dt, causal_offset=causal_offset, **_bias_dims(bias_a),
                          **rules(h, window, softcap, alibi, sinks))
        return (_out(out, q, dt), _out(w, q, dt)) if need_weights else _out(out, q, dt)


def alibi_slopes(heads):
    """The standard ALiBi slopes of `heads` heads (vkmha_alibi_slopes; BLOOM's
    get_slopes), a float32 array."""
    return _np.asarray(_vkmha.alibi_slopes(heads), _np.float32)


def rules(heads, window=0, softcap=0.0, alibi=None, sinks=None):
    """The score rules' keyword arguments of the C calls: window (int, 0:
    none), softcap (float, 0: none), alibi ([heads] slopes, or True: the
    standard ones of `heads` heads), sinks ([heads] logits); alibi and sinks
    are host arrays also for Tensor calls."""
    kw = {"window": int(window), "softcap": float(softcap)}
    if alibi is True:
        alibi = alibi_slopes(heads)
    if alibi is not None and alibi is not False:
        kw["alibi"] = _f32(alibi, "alibi")
    if sinks is not None:
        kw["sinks"] = _f32(sinks, "sinks")
    return kw


def _is_tensor(x):
    return isinstance(x, _vkmha.Tensor)


def _in(x, name):
    """A float32 input (the masks' bias): a Tensor as it is, anything else
    as a float32 array."""
    return x if _is_tensor(x) else _f32(x, name)


def _mask_in(x, name):
    return x if _is_tensor(x) else _u8(x, name)


def _out(result, template, dtype):
    """A Tensor as it is; an array as a torch tensor when template is one."""
    return result if _is_tensor(result) else _like(result, template, dtype)


def _bias_dims(bias):
    """bias_batch / bias_heads of a bias [bias_batch][bias_heads][len_q][len_k]."""
    if bias is None:
        return {}
    if len(bias.shape) != 4:
        raise ValueError("bias: [bias_batch][bias_heads][len_q][len_k] is needed")
    return {"bias_batch": bias.shape[0], "bias_heads": bias.shape[1]}


class Tensor(_vkmha.Tensor):
    """A vkmha tensor (device memory on Vulkan). Tensor(context, shape,
    dtype=DTYPE_F32), dtype a DTYPE_ value or "f32", "f16", "bf16";
    context.tensor(array) makes one from an array. upload(array) (its bytes),
    numpy() / download(out), shape, dtype (the DTYPE_ value), nbytes.
    numpy() gives a _BF16 tensor's bits as uint16 (convert(t.numpy(), "f32")
    widens them)."""

    def __init__(self, context, shape, dtype=_vkmha.DTYPE_F32):
        if dtype != _vkmha.DTYPE_U8:
            dtype = _dtype(dtype)
        super().__init__(context, shape, dtype)
        self.context = context

    @property
    def dtype(self):
        return self.desc[0]

    @property
    def shape(self):
        return self.desc[1]

    def numpy(self):
        out = _np.empty(self.shape, DTYPES[self.dtype])
        self.download(out)
        return out


class MHA(_vkmha.MHA):
    """The layer, vkmha's conventions (batch-first arrays, vkmha masks):
    MHA(context, d_model, n_head, w_q, w_k, w_v, w_o, n_kv_head=0, d_k=0,
    d_v=0, kdim=0, vdim=0, scale=0, b_q=None, b_k=None, b_v=None, b_o=None,
    post_norm=False, norm_gamma=None, norm_beta=None, norm_eps=0,
    weight_dtype=None, storage_dtype=None, heads=None), weights in
    torch.nn.Linear layout,
    all of one dtype: weight_dtype, default w_q's (float32, float16,
    bfloat16; the others are converted to it). storage_dtype: the dtype the
    layer keeps its weights in on the device, default weight_dtype (a 16-bit
    one halves their memory; vkmha_mha_desc.storage_dtype).
    heads=(h0, h1): a head shard for tensor parallelism (the whole layer's
    weights; the layer computes heads h0 .. h1 - 1 and their part of the
    output projection, without b_o and the post-norm, for an all-reduce;
    vkmha_mha_desc.head_begin / head_end).
    weight_quant="q8" | "q4" | "q4z" (or a QUANT_ value), weight_group_size
    (default 32): the layer keeps w_q .. w_o quantized, quantized at
    creation (vkmha_mha_desc.weight_quant; the biases stay in storage_dtype).
    w_q .. w_o may instead be QuantizedMatrix objects of one qtype and group
    size (quantized(), or bytes written by hand or read from a checkpoint):
    taken as they are (vkmha_mha_desc.weights_quantized); weight_dtype then
    describes the biases.
    MHA.from_safetensors(context, n_head, path=... or data=..., prefix=...)
    loads them from a safetensors file. For PyTorch's conventions, see
    from_torch and MultiheadAttention. desc: vkmha_mha_get_desc as a dict."""

    def __init__(self, context, d_model, n_head, w_q, w_k, w_v, w_o, weight_dtype=None,
                 storage_dtype=None, heads=None, weight_quant=None, weight_group_size=None,
                 **kw):
        if heads is not None:
            kw["head_begin"], kw["head_end"] = (int(h) for h in heads)
        ws, wdt = [], _dtype(weight_dtype)
        named = ((w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v"), (w_o, "w_o"))
        given = [isinstance(x, QuantizedMatrix) for x, _ in named]
        if any(given):
            if not all(given) or len({(x.qtype, x.group_size) for x, _ in named}) != 1:
                raise ValueError("MHA: w_q, w_k, w_v and w_o must all be QuantizedMatrix "
                                 "objects of one qtype and group size, or none")
            if weight_quant is not None or weight_group_size is not None:
                raise ValueError("MHA: weight_quant / weight_group_size come from the "
                                 "QuantizedMatrix weights")
            ws = [x.data for x, _ in named]
            weight_quant, weight_group_size = w_q.qtype, w_q.group_size
            kw["weights_quantized"] = True
            wdt = _vkmha.DTYPE_F32 if wdt is None else wdt
        else:
            for x, name in named:
                a, wdt = _typed(x, name, wdt)
                ws.append(a)
        if weight_quant is not None:
            kw["weight_quant"] = _quant_shape(weight_quant, (0, 0))[0]
            kw["weight_group_size"] = 32 if weight_group_size is None else int(weight_group_size)
        elif weight_group_size is not None:
            kw["weight_group_size"] = int(weight_group_size)
        for name in ("b_q", "b_k", "b_v", "b_o", "norm_gamma", "norm_beta"):
            if name in kw:
                kw[name] = _typed(kw[name], name, wdt)[0]
        sdt = wdt if storage_dtype is None else _dtype(storage_dtype)
        super().__init__(context, d_model, n_head, *ws, weight_dtype=wdt, storage_dtype=sdt,
                         **kw)

    def kv_cache(self, capacity, batch=1, dtype="f32"):
        """A KVCache of this layer: `batch` entries of `capacity` positions
        (vkmha_kv_cache_create) of dtype "f32", "f16", "bf16", or "q8": int8
        codes with an fp16 scale per row (vkmha_kv_cache_desc.quant)."""
        return KVCache(self, capacity, batch=batch, dtype=dtype)

    def __call__(self, query, key=None, value=None, need_weights=False, path="auto",
                 kv_splits=0, key_padding=None, full=None, causal=False, bias=None,
                 dtype=None, kv_cache=None, kv_entry=0, causal_offset=0, window=0,
                 softcap=0.0, alibi=None, sinks=None, positions=None, entry_tokens=None,
                 cu_seqlens=None):
        """out [batch][len_q][d_model] (and attn_weights [batch][H][len_q][len_k]
        when need_weights) for query [batch][len_q][d_model], key
        [batch][len_k][kdim] and value [batch][len_k][vdim] (None: query), of
        the dtype `dtype` (default query's; key and value are converted to
        it), which the layer's activations use too; or Tensors of one float
        dtype (then returns the output Tensors, of that dtype).
        With kv_cache (a KVCache of this layer; entries kv_entry ..
        kv_entry + batch - 1): key and value (None: query) are projected and
        appended, then the queries attend over each entry's positions, the
        causal mask aligned to each entry's end; kv_cache with key=False
        appends nothing (a cross-attention's later steps). Masks and weights
        then have the longest entry's length as their key axis. The score
        rules (window, softcap, alibi, sinks) as in Context.softmax, per
        call: a model's layers pass theirs (Mistral's window, Gemma 2's
        softcap=50, gpt-oss's sinks, BLOOM's alibi=True). positions: with
        RoPE (MHA(..., rope_dims=, rope_theta=, rope_scale=, rope_layout=)),
        the tokens' positions [batch][len_q] (default: each cache entry's
        length before the call + t, or t without a cache).
        A mixed batch (continuous batching, with kv_cache): entry_tokens,
        the new tokens of each entry [batch] (a prompt for one, 1 for a
        decode step), or cu_seqlens, their cumulative offsets [batch + 1]
        from 0 (flash-attn's varlen form); query (and key, value) are then
        packed [total][d_model], entry after entry, and so is the output
        (positions: [total]). Each entry appends its tokens and attends with
        its causal mask aligned to its own end, as one call per entry would;
        key_padding, full, bias and need_weights are refused (no packed
        shape)."""
        tokens = _entry_tokens(entry_tokens, cu_seqlens)
        if tokens is not None:
            if kv_cache is None:
                raise ValueError("entry_tokens / cu_seqlens need kv_cache (a mixed batch's "
                                 "entries are a KV cache's)")
            if len(query.shape) != 2:
                raise ValueError("query: a mixed batch is packed [total][d_model], got shape "
                                 "%s" % (tuple(query.shape),))
            return self._mixed(query, key, value, tokens, path, kv_splits, causal, dtype,
                               kv_cache, kv_entry, causal_offset, window, softcap, alibi,
                               sinks, positions, need_weights, key_padding, full, bias)
        if kv_cache is not None and key is False:
            key = value = None
        else:
            key = query if key is None else key
            value = key if value is None else value
        d = self.desc
        if kv_cache is not None:
            lengths = kv_cache.lengths()[kv_entry:kv_entry + len(query)]
            new = 0 if key is None else key.shape[1]
            cache_lk = max(lengths, default=0) + new
        if alibi is True and d["head_end"]:
            raise ValueError("alibi=True: a head shard's standard slopes are the whole "
                             "layer's alibi_slopes(n)[head_begin:head_end]; pass those")
        extra = {"kv_cache": kv_cache, "kv_entry": kv_entry, "causal_offset": causal_offset,
                 **rules(d["n_head"], window, softcap, alibi, sinks)}
        if positions is not None:
            extra["positions"] = _u32_array(positions, "positions")
        if isinstance(query, _vkmha.Tensor):
            b, lq = query.shape[0], query.shape[1]
            lk = key.shape[1] if key is not None else 0
            wk = cache_lk if kv_cache is not None else lk
            ctx = query.context
            out = ctx.tensor(shape=(b, lq, d["d_model"]), dtype=query.dtype)
            w = ctx.tensor(shape=(b, d["n_head"], lq, wk), dtype=query.dtype) \
                if need_weights else None
            kw = {}
            if bias is not None:
                kw = {"bias_batch": bias.shape[0], "bias_heads": bias.shape[1]}
            self.forward(query, key, value, out, lq, lk, batch=b, attn_weights=w,
                         path=_path(path), kv_splits=kv_splits, key_padding=key_padding,
                         full=full, causal=causal, bias=bias, **kw, **extra)
            return (out, w) if need_weights else out
        Q, K, V, dt = _typed_qkv(query, key, value, dtype)
        b, lq = Q.shape[0], Q.shape[1]
        lk = K.shape[1] if K is not None else 0
        wk = cache_lk if kv_cache is not None else lk
        out = _np.empty((b, lq, d["d_model"]), DTYPES[dt])
        w = _np.empty((b, d["n_head"], lq, wk), DTYPES[dt]) if need_weights else None
        bias_a = _f32(bias, "bias")
        self.forward(Q, K, V, out, lq, lk, batch=b, attn_weights=w, path=_path(path),
                     kv_splits=kv_splits, key_padding=_u8(key_padding, "key_padding"),
                     full=_u8(full, "full"), causal=causal, bias=bias_a, dtype=dt,
                     **_bias_dims(bias_a), **extra)
        return (_like(out, query, dt), _like(w, query, dt)) if need_weights \
            else _like(out, query, dt)

    def _mixed(self, query, key, value, tokens, path, kv_splits, causal, dtype, kv_cache,
               kv_entry, causal_offset, window, softcap, alibi, sinks, positions,
               need_weights, key_padding, full, bias):
        """__call__'s mixed batch: packed [total][d_model] rows, tokens [batch]."""
        for name, v in (("need_weights", need_weights), ("key_padding", key_padding),
                        ("full", full), ("bias", bias)):
            if v is not None and v is not False:
                raise ValueError("%s: a mixed batch (entry_tokens) has no [batch][...] "
                                 "shape for it" % name)
        d = self.desc
        if key is False:
            key = value = None
        else:
            key = query if key is None else key
            value = key if value is None else value
        total = query.shape[0]
        extra = {"kv_cache": kv_cache, "kv_entry": kv_entry, "causal_offset": causal_offset,
                 "entry_tokens": tokens, **rules(d["n_head"], window, softcap, alibi, sinks)}
        if positions is not None:
            extra["positions"] = _u32_array(positions, "positions")
        lk = 0 if key is None else total
        if isinstance(query, _vkmha.Tensor):
            out = query.context.tensor(shape=(total, d["d_model"]), dtype=query.dtype)
            self.forward(query, key, value, out, total, lk, batch=len(tokens),
                         path=_path(path), kv_splits=kv_splits, causal=causal, **extra)
            return out
        Q, K, V, dt = _typed_qkv(query, key, value, dtype)
        out = _np.empty((total, d["d_model"]), DTYPES[dt])
        self.forward(Q, K, V, out, total, lk, batch=len(tokens), path=_path(path),
                     kv_splits=kv_splits, causal=causal, dtype=dt, **extra)
        return _like(out, query, dt)


def _typed_qkv(query, key, value, dtype):
    """query, key and value as arrays of one dtype (dtype, default query's):
    (Q, K, V, dtype); an argument given twice is converted once, key None
    gives K = V = None."""
    Q, dt = _typed(query, "query", _dtype(dtype))
    if key is None:
        return Q, None, None, dt
    K = Q if key is query else _typed(key, "key", dt)[0]
    V = K if value is key else (Q if value is query else _typed(value, "value", dt)[0])
    return Q, K, V, dt


def _u32_array(v, name):
    """An array of integers in [0, 2^31 - 1] as contiguous uint32 (numpy or torch)."""
    if _is_torch(v):
        v = v.detach().cpu().numpy()
    p = _np.asarray(v)
    if p.dtype.kind not in "iu":
        raise TypeError("%s: integers are needed, got %s" % (name, p.dtype))
    if p.size and (p.min() < 0 or p.max() > 2**31 - 1):
        raise ValueError("%s: each must be in [0, 2^31 - 1]" % name)
    return _np.ascontiguousarray(p, dtype=_np.uint32)


def _entry_tokens(entry_tokens, cu_seqlens):
    """A mixed batch's counts [batch] from entry_tokens or cu_seqlens [batch + 1]
    (None: not a mixed batch)."""
    if entry_tokens is not None and cu_seqlens is not None:
        raise ValueError("entry_tokens and cu_seqlens: give one")
    if cu_seqlens is not None:
        cu = _u32_array(cu_seqlens, "cu_seqlens").astype(_np.int64)
        if cu.ndim != 1 or len(cu) < 2 or cu[0] != 0:
            raise ValueError("cu_seqlens: [batch + 1] offsets from 0 are needed")
        if (_np.diff(cu) < 0).any():
            raise ValueError("cu_seqlens: the offsets must not decrease")
        return _np.ascontiguousarray(_np.diff(cu), dtype=_np.uint32)
    if entry_tokens is None:
        return None
    t = _u32_array(entry_tokens, "entry_tokens")
    if t.ndim != 1:
        raise ValueError("entry_tokens: [batch] counts are needed")
    return t


class KVCache(_vkmha.KVCache):
    """A layer's cache of projected keys and values (vkmha_kv_cache): `batch`
    entries of `capacity` positions in `dtype` ("q8": 8-bit); pass it to the
    layer's call as kv_cache=. Made by MHA.kv_cache(capacity, batch, dtype)."""

    def __init__(self, mha, capacity, batch=1, dtype="f32"):
        q8 = isinstance(dtype, str) and dtype.lower() == "q8"
        super().__init__(mha, capacity, batch, _F32 if q8 else _dtype(dtype),
                         _vkmha.QUANT_Q8 if q8 else 0)
        d = mha.desc
        self._dims = (d["d_k"], d["d_v"])

    def keys(self):
        """The keys [batch][n_kv_head][capacity][d_k] as a numpy array (zeros
        past each entry's length; bf16 as uint16 bits; a q8 cache's
        dequantized, scale * code, in float32)."""
        return self._array(False)

    def values(self):
        """The values [batch][n_kv_head][capacity][d_v], as keys()."""
        return self._array(True)

    def raw(self, values=False):
        """The keys' (or values') bytes as stored, a uint8 array
        [batch][n_kv_head][capacity][row bytes]: for a q8 cache each row is
        R = 4 + d rounded up to 4 bytes: its fp16 scale, 2 zero bytes, d
        int8 codes, zeros."""
        d = self.desc
        return _np.frombuffer(self._read(values), _np.uint8).reshape(
            d["batch"], -1, d["capacity"], self._row(values))

    def _row(self, values):
        dim = self._dims[values]
        return 4 + (dim + 3) // 4 * 4 if self.desc["quant"] else dim * \
            _np.dtype(DTYPES[self.desc["dtype"]]).itemsize

    def _array(self, values):
        d = self.desc
        if d["quant"]:
            rows = _np.frombuffer(self._read(values), _np.uint8).reshape(-1, self._row(values))
            dim = self._dims[values]
            scale = rows[:, :2].copy().view(_np.float16).astype(_np.float32)
            codes = rows[:, 4:4 + dim].view(_np.int8).astype(_np.float32)
            return (scale * codes).reshape(d["batch"], -1, d["capacity"], dim)
        raw = _np.frombuffer(self._read(values), DTYPES[d["dtype"]])
        return raw.reshape(d["batch"], -1, d["capacity"], self._dims[values])


class MultiheadAttention:
    """torch.nn.MultiheadAttention's forward on vkmha: made by from_torch.
    Called as the module is: attn(query, key, value, key_padding_mask=None,
    need_weights=True, attn_mask=None, average_attn_weights=True) returns
    (attn_output, attn_output_weights or None), in the module's batch_first
    layout, unbatched inputs too. float16 / bfloat16 inputs compute with
    16-bit storage and give outputs of their dtype (key and value are
    converted to query's); averaged weights are averaged in fp32, then
    rounded.

    Masks as PyTorch users write them:
      key_padding_mask [batch][len_k]: bool, True = ignore that key; or float,
        added to the scores.
      attn_mask [len_q][len_k] or [batch * num_heads][len_q][len_k]: bool,
        True = not allowed; or float, added (-inf allowed).
    A bool key_padding_mask and a 2-D bool attn_mask become vkmha's key
    padding and full masks (O(batch * len) memory, not a score-sized bias);
    a 3-D bool attn_mask becomes an additive -inf bias; float masks are
    summed into vkmha's additive bias. A query row that the masks leave
    without any key (where PyTorch 1.13 returns NaN) gets what
    include/vkmha.h defines: zero weights and zero attention output when
    every key is -inf (float masks, 3-D bool attn_mask; as PyTorch >= 2.5),
    uniform weights when every key is masked by a key_padding_mask or 2-D
    bool attn_mask (vkmha's masked_fill(-1e9) semantics). causal=True adds
    vkmha's causal mask (query i sees keys j <= i). Inference only:
    dropout is not applied. vkmha.nn.MultiheadAttention is the
    torch.nn.Module form."""

    def __init__(self, layer, num_heads, batch_first, embed_dim):
        self.layer = layer
        self.num_heads = num_heads
        self.batch_first = batch_first
        self.embed_dim = embed_dim

    def __call__(self, query, key, value, key_padding_mask=None, need_weights=True,
                 attn_mask=None, average_attn_weights=True, path="auto", causal=False):
        template = query
        Q, dt = _typed(query, "query", None)
        K, V = _typed(key, "key", dt)[0], _typed(value, "value", dt)[0]
        unbatched = Q.ndim == 2
        if unbatched:
            Q, K, V = Q[None], K[None], V[None]
            if key_padding_mask is not None:
                key_padding_mask = _np.asarray(_np_of(key_padding_mask))[None]
        elif not self.batch_first:
            Q, K, V = (_np.ascontiguousarray(t.transpose(1, 0, 2)) for t in (Q, K, V))
        b, lq, lk, h = Q.shape[0], Q.shape[1], K.shape[1], self.num_heads
        masks = _torch_masks(key_padding_mask, attn_mask, b, h, lq, lk)
        masks["causal"] = bool(causal)
        out, w = self.layer(Q, K, V, need_weights=True, path=path, dtype=dt, **masks) \
            if need_weights else (self.layer(Q, K, V, path=path, dtype=dt, **masks), None)
        if w is not None and average_attn_weights:
            w = _to(_np.ascontiguousarray(_to(w, dt, _F32).mean(axis=1)), _F32, dt)
        if unbatched:
            out = out[0]
            w = None if w is None else w[0]
        elif not self.batch_first:
            out = _np.ascontiguousarray(out.transpose(1, 0, 2))
        return _like(out, template, dt), (None if w is None else
                                           _like(_np.ascontiguousarray(w), template, dt))


def _np_of(x):
    """x as numpy (a torch.bfloat16 mask as float32: numpy has no bf16)."""
    if not _is_torch(x):
        return x
    x = x.detach().cpu()
    return (x.float() if x.dtype == _torch().bfloat16 else x).numpy()


def _torch_masks(key_padding_mask, attn_mask, b, h, lq, lk):
    """PyTorch's key_padding_mask / attn_mask as vkmha's mask arguments."""
    kw, bias = {}, None
    if key_padding_mask is not None:
        kpm = _np.asarray(_np_of(key_padding_mask))
        if kpm.shape != (b, lk):
            raise ValueError("key_padding_mask: shape %s, expected (%d, %d)" % (kpm.shape, b, lk))
        if kpm.dtype == _np.bool_:
            kw["key_padding"] = _np.ascontiguousarray(~kpm, dtype=_np.uint8)
        elif kpm.dtype.kind == "f":
            bias = _np.broadcast_to(kpm.astype(_np.float32)[:, None, None, :], (b, 1, lq, lk))
        else:
            raise TypeError("key_padding_mask: bool or float is needed, got %s" % kpm.dtype)
    if attn_mask is not None:
        am = _np.asarray(_np_of(attn_mask))
        if am.shape not in ((lq, lk), (b * h, lq, lk)):
            raise ValueError("attn_mask: shape %s, expected (%d, %d) or (%d, %d, %d)"
                             % (am.shape, lq, lk, b * h, lq, lk))
        if am.dtype == _np.bool_ and am.ndim == 2:
            kw["full"] = _np.ascontiguousarray(_np.broadcast_to(~am, (b, lq, lk)),
                                               dtype=_np.uint8)
        else:
            if am.dtype == _np.bool_:
                add = _np.where(am, _np.float32(-_np.inf), _np.float32(0))
            elif am.dtype.kind == "f":
                add = am.astype(_np.float32)
            else:
                raise TypeError("attn_mask: bool or float is needed, got %s" % am.dtype)
            add = add[None, None] if add.ndim == 2 else add.reshape(b, h, lq, lk)
            bias = add if bias is None else bias + add
    if bias is not None:
        bias = _np.ascontiguousarray(bias, dtype=_np.float32)
        kw["bias"] = bias
    return kw


def from_torch(module, context=None, storage_dtype=None, heads=None, weight_dtype=None,
               group_size=32):
    """A MultiheadAttention computing module's forward on vkmha (context:
    a Context, default default_context()). Reads the module's weights once:
    packed (in_proj_weight) or separate (q/k/v_proj_weight, kdim / vdim)
    in-projections, with or without biases; batch_first either way; in the
    module's dtype (float32, float16, bfloat16), kept on the device in
    storage_dtype (default the module's dtype).
    heads=(h0, h1): a head shard (see MHA): the call returns the shard's
    partial output (out_proj.bias not added) and its heads' weights; a 3-D
    attn_mask must then hold the shard's heads.
    weight_dtype="q8" | "q4" | "q4z": the projection weights kept quantized
    (groups of group_size along their inputs; MHA's weight_quant), the
    biases in storage_dtype.
    add_bias_kv and add_zero_attn raise NotImplementedError."""
    import torch
    if not isinstance(module, torch.nn.MultiheadAttention):
        raise TypeError("from_torch: a torch.nn.MultiheadAttention is needed, got %s"
                        % type(module).__name__)
    if module.bias_k is not None or module.bias_v is not None:
        raise NotImplementedError("from_torch: add_bias_kv is not supported by vkmha")
    if module.add_zero_attn:
        raise NotImplementedError("from_torch: add_zero_attn is not supported by vkmha")
    ctx = default_context() if context is None else context
    layer = _layer_of(module, ctx, storage_dtype, heads, weight_dtype, group_size)
    return MultiheadAttention(layer, layer.desc["n_head"], bool(module.batch_first),
                              module.embed_dim)


def _layer_of(module, ctx, storage_dtype=None, heads=None, weight_quant=None, group_size=32):
    """The MHA holding a torch.nn.MultiheadAttention's weights (from_torch,
    vkmha.nn.MultiheadAttention)."""
    import torch
    E, H = module.embed_dim, module.num_heads
    with torch.no_grad():
        if module._qkv_same_embed_dim:
            w_q, w_k, w_v = module.in_proj_weight.detach().cpu().chunk(3)
        else:
            w_q, w_k, w_v = (module.q_proj_weight.detach().cpu(),
                             module.k_proj_weight.detach().cpu(),
                             module.v_proj_weight.detach().cpu())
        biases = {}
        if module.in_proj_bias is not None:
            b_q, b_k, b_v = module.in_proj_bias.detach().cpu().chunk(3)
            biases = {"b_q": b_q, "b_k": b_k, "b_v": b_v}
        if module.out_proj.bias is not None:
            biases["b_o"] = module.out_proj.bias.detach().cpu()
        return MHA(ctx, E, H, w_q, w_k, w_v, module.out_proj.weight.detach().cpu(),
                   kdim=module.kdim, vdim=module.vdim, storage_dtype=storage_dtype,
                   heads=heads, weight_quant=weight_quant,
                   weight_group_size=group_size if weight_quant is not None else None,
                   **biases)


_QUANT_TYPES = {"q8": _vkmha.QUANT_Q8, "q4": _vkmha.QUANT_Q4, "q4z": _vkmha.QUANT_Q4Z}


def _quant_shape(qtype, shape):
    """(type code, rows, cols) of a quantized matrix's arguments."""
    if isinstance(qtype, str):
        if qtype.lower() not in _QUANT_TYPES:
            raise ValueError("qtype: one of %s, got %r" % (", ".join(_QUANT_TYPES), qtype))
        qtype = _QUANT_TYPES[qtype.lower()]
    shape = tuple(int(n) for n in shape)
    if len(shape) != 2:
        raise ValueError("a quantized matrix is 2-D ([rows][cols]), got shape %s" % (shape,))
    return int(qtype), shape[0], shape[1]


def _quant(qtype, shape, group_size, context):
    """(type code, rows, cols, group size, context) of a quantized matrix's arguments."""
    ctx = default_context() if context is None else context
    return _quant_shape(qtype, shape) + (int(group_size), ctx)


def quant_layout(qtype, shape, group_size=32, context=None):
    """Where the parts of a quantized [rows][cols] matrix lie in its bytes
    (vkmha_quant_layout_of): a dict of scales_offset, zeros_offset (0 but
    for "q4z") and bytes. qtype: "q8", "q4", "q4z" (or a QUANT_ value);
    include/vkmha.h ("Quantized weights") documents the layout."""
    t, rows, cols, g, ctx = _quant(qtype, shape, group_size, context)
    return ctx._quant_layout(t, g, rows, cols)


def quantize(w, qtype="q8", group_size=32, context=None):
    """w [rows][cols] (a torch.nn.Linear weight: groups of group_size along
    each row; float32, float16 or bfloat16, as every vkmha array) quantized
    as vkmha_quantize does: a numpy uint8 array of the layout's bytes
    (quant_layout). NaN / Inf, or a scale past fp16's range, raise
    InvalidArgumentError naming the row and group."""
    W, dt = _typed(w, "w", None)
    t, rows, cols, g, ctx = _quant(qtype, W.shape, group_size, context)
    out = _np.zeros(ctx._quant_layout(t, g, rows, cols)["bytes"], _np.uint8)
    ctx._quantize(t, g, rows, cols, W, dt, out)
    return out


class QuantizedMatrix:
    """A quantized [rows][cols] matrix as the ops take it (Context.matmul's
    b): data, its bytes in vkmha's layout (a numpy uint8 array, anything
    numpy reads as bytes, or a Tensor of dtype u8 for the tensor form);
    qtype ("q8", "q4", "q4z" or a QUANT_ value), shape (rows, cols) and
    group_size, its groups running along each row."""

    __slots__ = ("data", "qtype", "shape", "group_size")

    def __init__(self, data, qtype, shape, group_size=32):
        self.qtype, rows, cols = _quant_shape(qtype, shape)
        self.shape, self.group_size = (rows, cols), int(group_size)
        self.data = data if _is_tensor(data) else \
            _np.ascontiguousarray(_np_of(data)).view(_np.uint8).reshape(-1)

    def __repr__(self):
        name = {v: k for k, v in _QUANT_TYPES.items()}.get(self.qtype, self.qtype)
        return "QuantizedMatrix(%s, shape=%s, group_size=%d)" % (name, self.shape,
                                                                self.group_size)


def quantized(w, qtype="q8", group_size=32, context=None):
    """quantize(w, ...) as a QuantizedMatrix of w's shape (for
    Context.matmul's b)."""
    return QuantizedMatrix(quantize(w, qtype, group_size, context), qtype, tuple(w.shape),
                           group_size)


def dequantize(data, qtype, shape, group_size=32, dtype="f32", context=None):
    """The [rows][cols] values (scale * q, or scale * (q - zero)) of a
    quantized matrix's bytes (vkmha_dequantize), as a numpy array of dtype
    ("f32", "f16", or "bf16" as uint16 bits)."""
    t, rows, cols, g, ctx = _quant(qtype, shape, group_size, context)
    dt = _dtype(dtype)
    out = _np.empty((rows, cols), DTYPES[dt])
    ctx._dequantize(t, g, rows, cols, out, dt,
                    _np.ascontiguousarray(_np_of(data), dtype=_np.uint8))
    return out


_DEFAULT_CONTEXT = []


def default_context():
    """The process's shared Vulkan Context, created at the first call: what
    from_torch, load_safetensors, vkmha.nn and vkmha.functional use when no
    context is given. Like every Context, one thread at a time (each call
    holds the GIL)."""
    if not _DEFAULT_CONTEXT:
        _DEFAULT_CONTEXT.append(Context())
    return _DEFAULT_CONTEXT[0]


def load_safetensors(path_or_bytes, n_head, context=None, prefix=None, storage_dtype=None,
                     heads=None, weight_quant=None, group_size=32, **kw):
    """An MHA from a safetensors file (a path, or the file's bytes):
    vkmha_mha_create_from_safetensors, see include/vkmha.h for the names it
    looks for under prefix (float projections, GPTQ's 4-bit packing or
    vkmha's quantized layout). storage_dtype: the dtype the layer keeps the
    weights in, whatever the file's (_F32, _F16, _BF16 tensors, may be mixed),
    default _F32. weight_quant="q8" | "q4" | "q4z", group_size: a float
    file's projections quantized as the layer is created. heads=(h0, h1): a
    head shard (see MHA). kw: n_kv_head, scale, post_norm, norm_prefix,
    norm_eps. context: default default_context()."""
    ctx = default_context() if context is None else context
    if heads is not None:
        kw["head_begin"], kw["head_end"] = (int(h) for h in heads)
    if weight_quant is not None:
        kw["weight_quant"] = _quant_shape(weight_quant, (0, 0))[0]
        kw["weight_group_size"] = int(group_size)
    kw["storage_dtype"] = _dtype(storage_dtype) or _F32
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return MHA.from_safetensors(ctx, n_head, data=path_or_bytes, prefix=prefix, **kw)
    return MHA.from_safetensors(ctx, n_head, path=path_or_bytes, prefix=prefix, **kw)
