"""Tests of vkmha.nn (torch.nn.MultiheadAttention's drop-in, convert) and
vkmha.functional (scaled_dot_product_attention), printed as TAP (checks.py),
run by tests/python/installed.py against the installed wheel (suite python).

nn.MultiheadAttention against torch.nn.MultiheadAttention with the same
state dict (Debian's torch 1.13, fp32 on the CPU), element by element within
checks.ATOL + RTOL * |torch| (2e-5, 1e-4: both fp32, sums reordered), on
shapes that are multiples of no tile size (embed_dim 20, 4 heads, lengths
17 and 13, batch 3). 16-bit modules against the fp32 module holding the
same 16-bit weights, on the same 16-bit inputs (tolerances at test_vkmha's
test_layer_in_16bit). Rows that the masks leave without any key are checked
against vkmha's rule (torch 1.13 gives NaN there).

scaled_dot_product_attention against the formula computed in double
(numpy float64: broadcasting, GQA by repeating key/value heads, bool masks
as -inf, a row without any allowed key = zeros as PyTorch >= 2.5), fp32
within ATOL / RTOL, fp16 and bf16 inputs (rounded first, so the formula
sees the same values) within one output rounding and a few of the sums'
(4e-3 and 3e-2 relative, 1e-3 / 8e-3 absolute).

Each Vulkan context runs with the validation layer; none may report."""
import copy
import io
import pickle
import unittest

import checks  # first: fails the run, naming them, without numpy and torch

import numpy as np
import torch

import vkmha
import vkmha.functional as VF
import vkmha.nn

from checks import TestZValidation, assert_close  # noqa: F401 (a test)
from checks import context as ctx

torch.manual_seed(1)
TOL16 = {torch.float16: (1e-3, 4e-3), torch.bfloat16: (8e-3, 3e-2)}


def pair(backend="vulkan", **kw):
    """A torch.nn.MultiheadAttention and a vkmha.nn.MultiheadAttention with
    its state dict, both in eval mode."""
    kw.setdefault("batch_first", True)
    ref = torch.nn.MultiheadAttention(20, 4, **kw).eval()
    m = vkmha.nn.MultiheadAttention(20, 4, context=ctx(backend), **kw).eval()
    m.load_state_dict(ref.state_dict())
    return ref, m


def both(ref, m, *args, **kw):
    with torch.no_grad():
        return ref(*args, **kw), m(*args, **kw)


class TestModule(unittest.TestCase):
    """vkmha.nn.MultiheadAttention against torch.nn.MultiheadAttention."""

    def check(self, ref, m, args, what, **kw):
        (want, want_w), (got, got_w) = both(ref, m, *args, **kw)
        self.assertEqual(got.dtype, want.dtype, what)
        assert_close(self, got, want, what)
        if want_w is None:
            self.assertIsNone(got_w, what)
        else:
            assert_close(self, got_w, want_w, what + " weights")

    def test_state_dict_both_ways(self):
        for kw in ({}, {"bias": False}, {"kdim": 7, "vdim": 11}):
            ref = torch.nn.MultiheadAttention(20, 4, **kw)
            m = vkmha.nn.MultiheadAttention(20, 4, **kw)
            self.assertEqual(list(m.state_dict()), list(ref.state_dict()), kw)
            m.load_state_dict(ref.state_dict())
            back = torch.nn.MultiheadAttention(20, 4, **kw)
            back.load_state_dict(m.state_dict())
            for k, v in ref.state_dict().items():
                self.assertTrue(torch.equal(back.state_dict()[k], v), "%s %s" % (kw, k))
            self.assertIsInstance(m, torch.nn.MultiheadAttention)

    def test_layouts_and_options(self):
        x, y = torch.randn(3, 17, 20), torch.randn(3, 13, 20)
        for be in ("vulkan", "reference"):
            for kw in ({}, {"bias": False}, {"batch_first": False}):
                ref, m = pair(be, **kw)
                xx, yy = (x, y) if kw.get("batch_first", True) else \
                    (x.transpose(0, 1), y.transpose(0, 1))
                what = "%s %s" % (be, kw)
                self.check(ref, m, (xx, yy, yy), what)
                self.check(ref, m, (xx, yy, yy), what + " per head", average_attn_weights=False)
                self.check(ref, m, (xx, yy, yy), what + " no weights", need_weights=False)
                self.check(ref, m, (x[0], y[0], y[0]), what + " unbatched")
            ref, m = pair(be, kdim=7, vdim=11)
            self.check(ref, m, (x, torch.randn(3, 13, 7), torch.randn(3, 13, 11)),
                       be + " kdim vdim")

    def test_masks(self):
        x = torch.randn(3, 17, 20)
        ref, m = pair()
        kp = torch.rand(3, 17) < 0.3
        kp[:, 0] = False
        am = torch.rand(17, 17) < 0.3
        am.fill_diagonal_(False)
        am3 = torch.rand(12, 17, 17) < 0.3
        for i in range(17):
            am3[:, i, i] = False
        fm = torch.randn(17, 17)
        fm[am] = float("-inf")
        for what, kw in (("key_padding bool", {"key_padding_mask": kp}),
                         # 0 where allowed: torch 1.13's fused path reads a
                         # float key_padding_mask as bool (nonzero = masked)
                         ("key_padding float", {"key_padding_mask": torch.where(
                             kp, torch.tensor(float("-inf")), torch.tensor(0.0))}),
                         ("attn_mask 2-D bool", {"attn_mask": am}),
                         ("attn_mask 3-D bool", {"attn_mask": am3}),
                         ("attn_mask float -inf", {"attn_mask": fm}),
                         ("both", {"attn_mask": fm, "key_padding_mask": kp})):
            self.check(ref, m, (x, x, x), what, average_attn_weights=False, **kw)

    def test_is_causal(self):
        """is_causal=True with the causal mask (PyTorch 2.x's hint): vkmha's
        causal mask, equal to torch with that mask; without attn_mask it is
        refused, as PyTorch does."""
        x = torch.randn(3, 17, 20)
        ref, m = pair()
        causal = torch.ones(17, 17, dtype=torch.bool).triu(1)
        with torch.no_grad():
            want, want_w = ref(x, x, x, attn_mask=causal)
            got, got_w = m(x, x, x, attn_mask=causal, is_causal=True)
        assert_close(self, got, want, "is_causal")
        assert_close(self, got_w, want_w, "is_causal weights")
        with self.assertRaisesRegex(ValueError, "is_causal needs attn_mask"):
            with torch.no_grad():
                m(x, x, x, is_causal=True)

    def test_fully_masked_rows(self):
        """A query row with every key -inf: zero attention, so the output is
        out_proj.bias (torch 1.13: NaN); other rows as torch."""
        x = torch.randn(2, 9, 20)
        ref, m = pair()
        fm = torch.zeros(9, 9)
        fm[4] = float("-inf")
        with torch.no_grad():
            got, w = m(x, x, x, attn_mask=fm)
            want, _ = ref(x, x, x, attn_mask=fm)
        rows = np.ones((2, 9, 20), bool)
        rows[:, 4] = False
        assert_close(self, got, want, "other rows", rows=rows)
        assert_close(self, got[:, 4], m.out_proj.bias.detach().expand(2, 20), "masked row")
        self.assertTrue(torch.equal(w[:, 4], torch.zeros(2, 9)))

    def test_16bit(self):
        """.half(), .bfloat16() and .to(dtype): the device copy follows, the
        outputs have the dtype and match the fp32 module with the same
        16-bit weights."""
        x = torch.randn(3, 17, 20)
        for conv in ("half", "bfloat16", "to"):
            ref, m = pair()
            first, _ = both(ref, m, x, x, x)
            dt = {"half": torch.float16, "bfloat16": torch.bfloat16, "to": torch.float16}[conv]
            m = m.half() if conv == "half" else m.bfloat16() if conv == "bfloat16" else m.to(dt)
            ref.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
            xd = x.to(dt)
            with torch.no_grad():
                want, want_w = ref(xd.float(), xd.float(), xd.float())
                got, got_w = m(xd, xd, xd)
            self.assertEqual((got.dtype, got_w.dtype), (dt, dt))
            assert_close(self, got.float(), want, conv, *TOL16[dt])
            assert_close(self, got_w.float(), want_w, conv + " weights", *TOL16[dt])

    def test_weights_follow_the_parameters(self):
        """The device copy is made once and remade only when a parameter
        changes: in place (load_state_dict, an optimizer's step) or
        replaced."""
        x = torch.randn(3, 13, 20)
        ref, m = pair()
        both(ref, m, x, x, x)
        layer = m._vkmha_forward
        both(ref, m, x, x, x)
        self.assertIs(m._vkmha_forward, layer, "no parameter changed: same device copy")
        other = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval()
        ref.load_state_dict(other.state_dict())
        m.load_state_dict(other.state_dict())
        self.check(ref, m, (x, x, x), "after load_state_dict")
        self.assertIsNot(m._vkmha_forward, layer)
        with torch.no_grad():
            ref.out_proj.weight.mul_(2)
            m.out_proj.weight.mul_(2)
        self.check(ref, m, (x, x, x), "after an in-place change")
        m.in_proj_bias = torch.nn.Parameter(torch.randn(60))
        ref.in_proj_bias = torch.nn.Parameter(m.in_proj_bias.detach().clone())
        self.check(ref, m, (x, x, x), "after a replaced parameter")

    def test_not_supported(self):
        x = torch.randn(2, 5, 8)
        for kw, name in (({"add_bias_kv": True}, "add_bias_kv"),
                         ({"add_zero_attn": True}, "add_zero_attn"),
                         ({"device": "meta"}, "device")):
            with self.assertRaisesRegex(NotImplementedError, name):
                vkmha.nn.MultiheadAttention(8, 2, **kw)
        m = vkmha.nn.MultiheadAttention(8, 2, dropout=0.1, batch_first=True, context=ctx())
        with self.assertRaisesRegex(NotImplementedError, "dropout"):
            m(x, x, x)
        m.eval()
        with self.assertRaisesRegex(NotImplementedError, "query requires grad"):
            m(x.requires_grad_(), x, x)
        x = x.detach()
        out, _ = m(x, x, x)  # eval, grad enabled, parameters requiring grad: inference
        self.assertFalse(out.requires_grad)
        m = vkmha.nn.MultiheadAttention(8, 2, batch_first=True, context=ctx())
        with self.assertRaisesRegex(NotImplementedError, "training mode"):
            m(x, x, x)
        with torch.no_grad():
            m(x, x, x)  # training mode without gradients: dropout 0, fine

    def test_convert(self):
        """A two-layer nn.TransformerEncoder (batch_first, eval, no_grad: the
        conditions of PyTorch's fused fast path) converted: its attention
        runs on vkmha (a forward hook counts the calls) and its output stays
        within tolerance of the original's."""
        for norm_first in (False, True):
            layer = torch.nn.TransformerEncoderLayer(20, 4, 40, batch_first=True,
                                                     norm_first=norm_first)
            model = torch.nn.TransformerEncoder(layer, 2).eval()
            x = torch.randn(3, 17, 20)
            kp = torch.rand(3, 17) < 0.2
            kp[:, 0] = False
            with torch.no_grad():
                want = model(x, src_key_padding_mask=kp)
                conv = vkmha.nn.convert(copy.deepcopy(model), context=ctx())
                calls = []
                for lay in conv.layers:
                    self.assertIsInstance(lay.self_attn, vkmha.nn.MultiheadAttention)
                    lay.self_attn.register_forward_hook(lambda *a: calls.append(1))
                got = conv(x, src_key_padding_mask=kp)
            self.assertEqual(len(calls), 2, "each layer's attention ran on vkmha")
            assert_close(self, got, want, "encoder norm_first=%s" % norm_first, 1e-4, 1e-3)
            self.assertTrue(all(a.requires_grad for a in conv.parameters()))
            self.assertFalse(conv.training)
        single = vkmha.nn.convert(torch.nn.MultiheadAttention(20, 4))
        self.assertIsInstance(single, vkmha.nn.MultiheadAttention)
        bad = torch.nn.Sequential(torch.nn.MultiheadAttention(20, 4),
                                  torch.nn.MultiheadAttention(20, 4, add_bias_kv=True))
        with self.assertRaisesRegex(NotImplementedError, "add_bias_kv"):
            vkmha.nn.convert(bad)
        self.assertIs(type(bad[0]), torch.nn.MultiheadAttention, "nothing changed")

    def test_copy_and_pickle(self):
        """deepcopy and torch.save / torch.load of a module that ran: the copy
        rebuilds its device copy (sharing the context) and gives the same
        output."""
        x = torch.randn(2, 9, 20)
        _, m = pair()
        with torch.no_grad():
            want, _ = m(x, x, x)
            dup = copy.deepcopy(m)
            self.assertIs(dup.vkmha_context, m.vkmha_context)
            assert_close(self, dup(x, x, x)[0], want, "deepcopy", 0, 0)
            plain = vkmha.nn.MultiheadAttention(20, 4, batch_first=True).eval()
            plain.load_state_dict(m.state_dict())
            buf = io.BytesIO()
            torch.save(plain, buf, pickle_protocol=pickle.HIGHEST_PROTOCOL)
            buf.seek(0)
            back = torch.load(buf)
            assert_close(self, back(x, x, x)[0], want, "pickled", 1e-6, 1e-6)


def sdpa64(q, k, v, mask=None, causal=False, scale=None, gqa=False):
    """The formula in double: softmax(q k^T * scale + bias) v, with PyTorch
    2.x's broadcasting and GQA; a row without any allowed key gives 0."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    if gqa and k.shape[-3] != q.shape[-3]:
        r = q.shape[-3] // k.shape[-3]
        k, v = np.repeat(k, r, axis=-3), np.repeat(v, r, axis=-3)
    s = (q @ np.swapaxes(k, -1, -2)) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    L, S = s.shape[-2:]
    if causal:
        s = s + np.where(np.tril(np.ones((L, S), bool)), 0.0, -np.inf)
    if mask is not None:
        mask = np.asarray(mask)
        s = s + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask.astype(np.float64))
    mx = s.max(axis=-1, keepdims=True)
    none = ~np.isfinite(mx)
    e = np.exp(s - np.where(none, 0, mx))
    e = np.where(none, 0, e)
    p = e / np.where(none, 1, e.sum(axis=-1, keepdims=True))
    return p @ v


class TestSDPA(unittest.TestCase):
    """vkmha.functional.scaled_dot_product_attention against sdpa64."""

    def check(self, what, q, k, v, atol=checks.ATOL, rtol=checks.RTOL, **kw):
        gqa = kw.get("enable_gqa", False)
        want = sdpa64(q, k, v, kw.get("attn_mask"), kw.get("is_causal", False),
                      kw.get("scale"), gqa)
        for be in ("vulkan", "reference"):
            got = VF.scaled_dot_product_attention(q, k, v, context=ctx(be), **kw)
            self.assertEqual(type(got), type(q), what)
            g = got.float() if torch.is_tensor(got) else got
            assert_close(self, g, want, "%s %s" % (be, what), atol, rtol)

    def test_shapes(self):
        r = torch.randn
        self.check("4-D", r(2, 3, 17, 8), r(2, 3, 13, 8), r(2, 3, 13, 5))
        self.check("3-D", r(3, 17, 8), r(3, 13, 8), r(3, 13, 5))
        self.check("2-D", r(17, 8), r(13, 8), r(13, 5))
        self.check("5-D", r(2, 2, 3, 7, 8), r(2, 2, 3, 9, 8), r(2, 2, 3, 9, 8))
        self.check("broadcast batch", r(2, 3, 17, 8), r(1, 3, 13, 8), r(1, 3, 13, 5))
        self.check("broadcast query", r(1, 1, 17, 8), r(2, 3, 13, 8), r(2, 3, 13, 5))
        self.check("numpy", np.random.randn(2, 3, 11, 8).astype(np.float32),
                   np.random.randn(2, 3, 9, 8).astype(np.float32),
                   np.random.randn(2, 3, 9, 8).astype(np.float32))
        self.check("scale", r(2, 3, 17, 8), r(2, 3, 13, 8), r(2, 3, 13, 5), scale=0.3)
        self.check("huge logits", 60 * r(2, 3, 17, 8), 60 * r(2, 3, 13, 8), r(2, 3, 13, 5),
                   atol=1e-4)

    def test_gqa(self):
        r = torch.randn
        self.check("gqa 6/2", r(2, 6, 17, 8), r(2, 2, 13, 8), r(2, 2, 13, 5), enable_gqa=True)
        self.check("gqa 6/1", r(2, 6, 17, 8), r(2, 1, 13, 8), r(2, 1, 13, 5), enable_gqa=True)
        self.check("multi-query by broadcast", r(2, 6, 17, 8), r(2, 1, 13, 8), r(2, 1, 13, 5))
        self.check("gqa, equal heads", r(2, 3, 17, 8), r(2, 3, 13, 8), r(2, 3, 13, 5),
                   enable_gqa=True)

    def test_masks(self):
        r = torch.randn
        q, k, v = r(2, 3, 17, 8), r(2, 3, 13, 8), r(2, 3, 13, 5)
        b2 = torch.rand(17, 13) < 0.7
        b4 = torch.rand(2, 1, 17, 13) < 0.7
        bh = torch.rand(1, 3, 17, 13) < 0.7
        full = torch.rand(2, 3, 17, 13) < 0.7
        f = r(17, 13)
        f[torch.rand(17, 13) < 0.3] = float("-inf")
        f[5] = float("-inf")  # a row without any key: zeros
        b2[3] = False
        for what, m in (("bool [L,S]", b2), ("bool [B,1,L,S]", b4), ("bool [1,H,L,S]", bh),
                        ("bool [B,H,L,S]", full), ("float -inf [L,S]", f),
                        ("bool [S]", torch.rand(13) < 0.5)):
            self.check(what, q, k, v, attn_mask=m)
        self.check("gqa with a per-head mask", r(2, 6, 17, 8), r(2, 2, 13, 8), r(2, 2, 13, 5),
                   enable_gqa=True, attn_mask=torch.rand(2, 6, 17, 13) < 0.7)
        for lq, lk in ((17, 13), (13, 17), (9, 9)):
            self.check("causal %dx%d" % (lq, lk), r(2, 3, lq, 8), r(2, 3, lk, 8),
                       r(2, 3, lk, 5), is_causal=True)

    def test_16bit(self):
        for dt in (torch.float16, torch.bfloat16):
            q, k, v = (torch.randn(2, 3, n, 8).to(dt) for n in (17, 13, 13))
            m = torch.rand(17, 13) < 0.7
            m[:, 0] = True
            got = VF.scaled_dot_product_attention(q, k, v, attn_mask=m, context=ctx())
            self.assertEqual(got.dtype, dt)
            assert_close(self, got.float(), sdpa64(q.float(), k.float(), v.float(), m),
                         str(dt), *TOL16[dt])

    def test_errors(self):
        r = torch.randn
        q, k, v = r(2, 3, 7, 8), r(2, 3, 9, 8), r(2, 3, 9, 8)
        for kw, exc, text in (({"dropout_p": 0.1}, NotImplementedError, "dropout_p"),
                              ({"scale": 0.0}, NotImplementedError, "scale=0"),
                              ({"is_causal": True, "attn_mask": torch.ones(7, 9, dtype=bool)},
                               ValueError, "attn_mask and is_causal"),
                              ({"attn_mask": torch.ones(7, 9, dtype=torch.int32)}, TypeError,
                               "attn_mask"),
                              ({"attn_mask": torch.ones(5, 7, 9, dtype=bool)}, ValueError,
                               "attn_mask"),
                              ({"attn_mask": torch.ones(4, 3, 7, 9, dtype=bool)}, ValueError,
                               "do not broadcast")):
            with self.assertRaisesRegex(exc, text):
                VF.scaled_dot_product_attention(q, k, v, context=ctx(), **kw)
        with self.assertRaisesRegex(ValueError, "does not broadcast to the scores"):
            # it broadcasts, but would widen the result's batch (1 -> 4)
            VF.scaled_dot_product_attention(r(1, 3, 7, 8), r(1, 3, 9, 8), r(1, 3, 9, 8),
                                            attn_mask=torch.ones(4, 3, 7, 9, dtype=bool),
                                            context=ctx())
        with self.assertRaisesRegex(ValueError, "not a multiple"):
            VF.scaled_dot_product_attention(r(2, 3, 7, 8), r(2, 2, 9, 8), r(2, 2, 9, 8),
                                            enable_gqa=True, context=ctx())
        with self.assertRaisesRegex(ValueError, "do not broadcast"):
            VF.scaled_dot_product_attention(r(2, 3, 7, 8), r(2, 2, 9, 8), r(2, 2, 9, 8),
                                            context=ctx())
        with self.assertRaisesRegex(ValueError, "key has 6 features"):
            VF.scaled_dot_product_attention(q, r(2, 3, 9, 6), v, context=ctx())
        with self.assertRaisesRegex(NotImplementedError, "requires grad"):
            VF.scaled_dot_product_attention(q.requires_grad_(), k, v, context=ctx())
        out = VF.scaled_dot_product_attention(q.detach(), k, v, context=ctx())
        self.assertEqual(tuple(out.shape), (2, 3, 7, 8), "the context works after errors")


if __name__ == "__main__":
    checks.run(__name__)
