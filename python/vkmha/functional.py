"""PyTorch-shaped functions computing on vkmha.

    import vkmha.functional as VF
    out = VF.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=False)

Arrays: CPU torch tensors (results are torch tensors) or numpy arrays, as
everywhere in vkmha (float32, float16, bfloat16: see vkmha's module doc)."""
import math

import numpy as _np

from . import _is_torch, _like, _np_of, _typed, default_context

__all__ = ["scaled_dot_product_attention"]


def _broadcast(shapes, what):
    try:
        return _np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError("scaled_dot_product_attention: %s: shapes %s do not broadcast"
                         % (what, ", ".join(str(tuple(s)) for s in shapes))) from None


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False, *,
                                 context=None, path="auto"):
    """torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x) on vkmha:

        softmax(query @ key^T * scale + bias) @ value

    query [..., Hq, L, E], key [..., Hk, S, E], value [..., Hk, S, Ev] ->
    [..., Hq, L, Ev] (at least 2 dims each; the leading dims broadcast).
    attn_mask, broadcastable to [..., Hq, L, S]: bool (True = the key takes
    part, False = -inf) or float (added; -inf allowed). is_causal: query i
    sees keys j <= i (top-left aligned, PyTorch's tril; not with attn_mask).
    scale: default 1 / sqrt(E). enable_gqa: key and value may have Hk heads
    dividing Hq (query head h reads key/value head h // (Hq / Hk)).
    A query row without any allowed key gives zeros, as PyTorch >= 2.5's
    math backend (_safe_softmax); earlier PyTorch returns NaN there.
    Inference only: dropout_p > 0 raises NotImplementedError; so does
    scale=0 (vkmha reads 0 as "the default scale").
    key and value are converted to query's dtype; the result has it, as a
    torch tensor when query is one. context: a vkmha.Context (default
    vkmha.default_context()); path: "auto", "fused" or "unfused"."""
    if dropout_p:
        raise NotImplementedError("scaled_dot_product_attention: dropout_p=%g: vkmha runs "
                                  "inference only" % dropout_p)
    if scale is not None and float(scale) == 0.0:
        raise NotImplementedError("scaled_dot_product_attention: scale=0 is not supported "
                                  "(vkmha's 0 means 1 / sqrt(E))")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: attn_mask and is_causal both given "
                         "(as PyTorch: one or the other)")
    for x, name in ((query, "query"), (key, "key"), (value, "value")):
        if _is_torch(x) and x.requires_grad:
            import torch
            if torch.is_grad_enabled():
                raise NotImplementedError("scaled_dot_product_attention: %s requires grad: "
                                          "vkmha computes no gradients (run under "
                                          "torch.no_grad())" % name)
    template = query
    Q, dt = _typed(query, "query", None)
    K, V = _typed(key, "key", dt)[0], _typed(value, "value", dt)[0]
    for a, name in ((Q, "query"), (K, "key"), (V, "value")):
        if a.ndim < 2:
            raise ValueError("scaled_dot_product_attention: %s has %d dims, at least 2 are "
                             "needed ([..., len, features])" % (name, a.ndim))
    L, E = Q.shape[-2:]
    S, Ev = V.shape[-2:]
    if K.shape[-1] != E:
        raise ValueError("scaled_dot_product_attention: key has %d features, query %d"
                         % (K.shape[-1], E))
    if K.shape[-2] != S:
        raise ValueError("scaled_dot_product_attention: key has %d positions, value %d"
                         % (K.shape[-2], S))
    lq, lk, lv = Q.shape[:-2], K.shape[:-2], V.shape[:-2]
    # The head axis (-3): vkmha's kv_heads serves grouped and multi-query
    # key/value heads without copies; everything before it is the batch.
    hq = lq[-1] if lq else 1
    hk = lk[-1] if lk else 1
    if (lv[-1] if lv else 1) != hk:
        raise ValueError("scaled_dot_product_attention: key has %d heads, value %d"
                         % (hk, lv[-1] if lv else 1))
    if enable_gqa and hq % hk:
        raise ValueError("scaled_dot_product_attention: enable_gqa: query's %d heads are not "
                         "a multiple of key's %d" % (hq, hk))
    grouped = hk != hq and (enable_gqa or hk == 1)
    if grouped:
        batch = _broadcast([lq[:-1], lk[:-1], lv[:-1]], "query, key and value")
        heads, kv_heads = hq, hk
        Q = _np.broadcast_to(Q, batch + (hq, L, E))
        K = _np.broadcast_to(K, batch + (hk, S, E))
        V = _np.broadcast_to(V, batch + (hk, S, Ev))
    else:
        lead = _broadcast([lq, lk, lv], "query, key and value")
        batch, heads = lead[:-1], (lead[-1] if lead else 1)
        kv_heads = heads
        Q = _np.broadcast_to(Q, lead + (L, E))
        K = _np.broadcast_to(K, lead + (S, E))
        V = _np.broadcast_to(V, lead + (S, Ev))
    b = int(_np.prod(batch, dtype=_np.int64))
    Q = _np.ascontiguousarray(Q).reshape(b, heads, L, E)
    K = _np.ascontiguousarray(K).reshape(b, kv_heads, S, E)
    V = _np.ascontiguousarray(V).reshape(b, kv_heads, S, Ev)
    kw = {}
    if attn_mask is not None:
        m = _np.asarray(_np_of(attn_mask))
        if m.dtype == _np.bool_:
            m = _np.where(m, _np.float32(0), _np.float32(-_np.inf))
        elif m.dtype.kind == "f":
            m = m.astype(_np.float32)
        else:
            raise TypeError("scaled_dot_product_attention: attn_mask: bool or float is "
                            "needed, got %s" % m.dtype)
        full = batch + (heads, L, S)
        if m.ndim > len(full) or _broadcast([m.shape, full], "attn_mask") != full:
            raise ValueError("scaled_dot_product_attention: attn_mask of shape %s does not "
                             "broadcast to the scores' %s" % (m.shape, full))
        m = m.reshape((1,) * (len(full) - m.ndim) + m.shape)
        # vkmha's bias is [1 or batch][1 or heads][L][S]: broadcast only the
        # axes the mask varies along.
        mb = 1 if all(n == 1 for n in m.shape[:-3]) else b
        mh = m.shape[-3]
        m = _np.broadcast_to(m, (batch if mb > 1 else (1,) * len(batch)) + (mh, L, S))
        kw = {"bias": _np.ascontiguousarray(m).reshape(mb, mh, L, S)}
    ctx = default_context() if context is None else context
    s = 1.0 / math.sqrt(E) if scale is None else float(scale)
    out = ctx.attention(Q, K, V, scale=s, path=path, causal=bool(is_causal), dtype=dt, **kw)
    lead = batch + (heads,) if (lq or lk or lv) else ()
    return _like(_np.ascontiguousarray(out).reshape(lead + (L, Ev)), template, dt)
