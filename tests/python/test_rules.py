"""The score rules of today's decoders (include/vkmha.h, "Masks": window,
ALiBi, soft cap, sinks) against PyTorch transcriptions of the published
formulas, computed in float64 and independently of vkmha's reference:
  - Mistral's sliding window as Hugging Face's masks write it (key j seen
    from query i iff j <= i and i - j < W), and symmetric local attention;
  - BLOOM's ALiBi: build_alibi_tensor (its get_slopes, including head
    counts that are not powers of two) added to the scaled scores;
  - Gemma 2's soft cap: tanh(scores / cap) * cap, before the mask;
  - gpt-oss's sinks: eager_attention_forward's concatenated sink logit,
    max-subtracted softmax, sink column dropped;
  - RoPE: Hugging Face's apply_rotary_pos_emb with rotate_half (Llama's
    inv_freq, GPT-NeoX's partial rotary, linear scaling) and GPT-J's
    rotate_every_two, in the layer.
Each through Context.attention (weights too) on both backends and every
Vulkan path, Context.softmax, and the layer decoding step by step through a
KV cache against a float64 transcription of the whole layer (projections,
rules with each entry's positions, output projection). Bad arguments raise.
Printed as TAP (checks.py); run on the installed wheel (installed.py)."""
import math
import unittest

import checks  # first: fails the run, naming them, without numpy and torch

import numpy as np
import torch

import vkmha

from checks import TestZValidation  # noqa: F401 (a test)
from checks import assert_close, layer_weights
from checks import context as ctx

F64 = torch.float64
RUNS = (("reference", "auto", 0), ("vulkan", "auto", 0), ("vulkan", "fused", 3),
        ("vulkan", "unfused", 0))


def bloom_alibi(num_heads, seq_length):
    """BLOOM's build_alibi_tensor (transformers' modeling_bloom) for an
    all-ones attention mask: [num_heads][seq_length], slope_h * j."""
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=F64)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))),
                                  dtype=F64)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    attention_mask = torch.ones(1, seq_length, dtype=F64)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    return (slopes[..., None] * arange_tensor)[0], slopes


def alibi_distance(slopes, lq, lk, offset):
    """The issue's and the header's form, -slope_h * (pos_i - j) with query i at
    key position i + offset: [H][Lq][Lk]. Without sinks it differs from
    BLOOM's slope_h * j by a constant per row, which no softmax sees; a sink
    logit does see it, so rows with sinks take this form."""
    d = (torch.arange(lq)[:, None] + offset) - torch.arange(lk)[None, :]
    return -slopes[:, None, None] * d[None].to(F64)


def attend(q, k, v, scores_fn):
    """float64 attention of q [B][H][Lq][d], k, v [B][Hkv][Lk][d] (GQA by
    repeat_interleave) whose scaled scores go through scores_fn(s) ->
    (logits, sink logits or None) as gpt-oss's eager_attention_forward
    combines them."""
    q, k, v = (torch.as_tensor(np.asarray(a), dtype=F64) for a in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s, sinks = scores_fn(s)
    if sinks is not None:
        sinks = sinks.reshape(1, -1, 1, 1).expand(q.shape[0], -1, q.shape[-2], -1)
        combined_logits = torch.cat([s, sinks], dim=-1)
        combined_logits = combined_logits - combined_logits.max(dim=-1, keepdim=True).values
        probs = torch.softmax(combined_logits, dim=-1)
        w = probs[..., :-1]
    else:
        w = torch.softmax(s, dim=-1)
    return (w @ v).numpy(), w.numpy()


def rope_cos_sin(positions, dim, base, factor, interleaved):
    """Llama's rotary embedding (transformers' LlamaRotaryEmbedding,
    LinearScalingRotaryEmbedding) in float64: cos, sin [..][dim] of each
    position; GPT-J's duplicate_interleave for the interleaved pairs."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=F64) / dim))
    t = torch.as_tensor(positions, dtype=F64) / factor
    freqs = t[..., None] * inv_freq
    if interleaved:
        emb = freqs.repeat_interleave(2, dim=-1)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def apply_rotary_pos_emb(x, cos, sin, rot, interleaved):
    """x [B][H][L][d], cos / sin [B][L][rot]: the first rot dims rotated
    (GPT-NeoX's partial rotary: q_rot, q_pass), the rest passed."""
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    cos, sin = cos[:, None], sin[:, None]
    turn = rotate_every_two if interleaved else rotate_half
    return torch.cat(((x_rot * cos) + (turn(x_rot) * sin), x_pass), dim=-1)


def window_keep(lq, lk, offset, w, causal):
    """Mistral's (causal) or local (symmetric) window: [Lq][Lk] booleans,
    query i at key position i + offset."""
    pos = torch.arange(lq)[:, None] + offset
    d = pos - torch.arange(lk)[None, :]
    return (d >= 0) & (d < w) if causal else d.abs() < w


class TestRulesOps(unittest.TestCase):
    B, H, HKV, LQ, LK, D = 2, 6, 3, 7, 19, 12

    def setUp(self):
        g = np.random.default_rng(29)
        f = np.float32
        self.q = g.standard_normal((self.B, self.H, self.LQ, self.D)).astype(f)
        self.k = g.standard_normal((self.B, self.HKV, self.LK, self.D)).astype(f)
        self.v = g.standard_normal((self.B, self.HKV, self.LK, self.D)).astype(f)
        self.sinks = g.uniform(-2, 2, self.H).astype(f)

    def check(self, what, want, scale_qk=1.0, **rules):
        q, k = self.q * np.float32(scale_qk), self.k * np.float32(scale_qk)
        o_want, w_want = attend(q, k, self.v, want)
        for be, path, splits in RUNS:
            o, w = ctx(be).attention(q, k, self.v, need_weights=True, path=path,
                                     kv_splits=splits, **rules)
            tag = "%s: %s %s splits %d" % (what, be, path, splits)
            assert_close(self, o, o_want, tag + ": out")
            assert_close(self, w, w_want, tag + ": weights", atol=2e-6)

    def test_mistral_window(self):
        off, W = self.LK - self.LQ, 5
        keep = window_keep(self.LQ, self.LK, off, W, True)
        self.check("causal window 5", lambda s: (s.masked_fill(~keep, float("-inf")), None),
                   causal=True, causal_offset=off, window=W)

    def test_local_window(self):
        keep = window_keep(self.LQ, self.LK, 6, 4, False)
        self.check("symmetric window 4", lambda s: (s.masked_fill(~keep, float("-inf")), None),
                   causal_offset=6, window=4)

    def test_bloom_alibi(self):
        alibi, slopes = bloom_alibi(self.H, self.LK)
        np.testing.assert_array_equal(vkmha.alibi_slopes(self.H), slopes.float().numpy())
        np.testing.assert_array_equal(vkmha.alibi_slopes(8), bloom_alibi(8, 1)[1].float().numpy())
        off = self.LK - self.LQ
        keep = window_keep(self.LQ, self.LK, off, self.LK + 1, True)
        self.check("BLOOM ALiBi, causal",
                   lambda s: ((s + alibi[None, :, None, :]).masked_fill(~keep, float("-inf")),
                              None),
                   causal=True, causal_offset=off, alibi=True)

    def test_gemma2_softcap(self):
        for cap, amp in ((50.0, 8.0), (5.0, 1.0)):
            def capped(s, cap=cap):
                s = s / cap
                s = torch.tanh(s)
                return s * cap, None
            self.check("soft cap %g" % cap, capped, scale_qk=amp, softcap=cap)

    def test_gptoss_sinks_window(self):
        sinks = torch.tensor(self.sinks, dtype=F64)
        off = self.LK - self.LQ
        keep = window_keep(self.LQ, self.LK, off, 4, True)
        self.check("gpt-oss sinks + window 4",
                   lambda s: (s.masked_fill(~keep, float("-inf")), sinks),
                   causal=True, causal_offset=off, window=4, sinks=self.sinks)

    def test_mla_head_sizes(self):
        """DeepSeek's MLA, absorbed: 8 query heads of d_k 576 over one key
        head, values of d_v 512 (the d576 fused kernels), with gpt-oss's
        sinks and a causal window 9 (the cache's bottom-right offset)."""
        g = np.random.default_rng(576)
        f = np.float32
        q = g.standard_normal((1, 8, 5, 576)).astype(f)
        k = g.standard_normal((1, 1, 37, 576)).astype(f)
        v = g.standard_normal((1, 1, 37, 512)).astype(f)
        sinks = g.uniform(-2, 2, 8).astype(f)
        keep = window_keep(5, 37, 32, 9, True)
        want, w_want = attend(q, k, v, lambda s: (s.masked_fill(~keep, float("-inf")),
                                                  torch.tensor(sinks, dtype=F64)))
        for be, path, splits in RUNS:
            o, w = ctx(be).attention(q, k, v, need_weights=True, path=path, kv_splits=splits,
                                     causal=True, causal_offset=32, window=9, sinks=sinks)
            tag = "MLA 576/512: %s %s splits %d" % (be, path, splits)
            self.assertEqual(o.shape, (1, 8, 5, 512))
            assert_close(self, o, want, tag + ": out")
            assert_close(self, w, w_want, tag + ": weights", atol=2e-6)

    def test_softmax(self):
        g = np.random.default_rng(3)
        x = (g.standard_normal((self.B, self.H, self.LQ, 20)) * 30).astype(np.float32)
        keep = window_keep(self.LQ, 20, 13, 6, True)
        sinks = torch.tensor(self.sinks, dtype=F64)
        alibi = alibi_distance(bloom_alibi(self.H, 1)[1], self.LQ, 20, 13)
        s = torch.tensor(x, dtype=F64) * 0.5
        s = torch.tanh(s / 7.0) * 7.0 + alibi[None]
        s = s.masked_fill(~keep, float("-inf"))
        combined = torch.cat([s, sinks.reshape(1, -1, 1, 1).expand(self.B, -1, self.LQ, 1)], -1)
        want = torch.softmax(combined - combined.max(-1, keepdim=True).values, -1)[..., :-1]
        for be in ("reference", "vulkan"):
            got = ctx(be).softmax(x, scale=0.5, causal=True, causal_offset=13, window=6,
                                  softcap=7.0, alibi=True, sinks=self.sinks)
            assert_close(self, got, want.numpy(), "softmax with every rule: " + be, atol=2e-6)

    def test_bad_arguments(self):
        c = ctx("vulkan")
        for kw, err in (({"softcap": -1.0}, vkmha.InvalidArgumentError),
                        ({"softcap": float("nan")}, vkmha.InvalidArgumentError),
                        ({"sinks": np.full(self.H, np.nan, np.float32)},
                         vkmha.InvalidArgumentError),
                        ({"alibi": np.ones(self.H - 1, np.float32)}, ValueError),
                        ({"window": -1}, vkmha.InvalidArgumentError)):
            with self.assertRaises(err, msg=str(kw)):
                c.attention(self.q, self.k, self.v, **kw)
        o = c.attention(self.q, self.k, self.v)  # the context still works
        self.assertTrue(np.isfinite(o).all())


class TestRulesLayer(unittest.TestCase):
    """A GQA layer with window 4, ALiBi, cap and sinks: a prompt of 5 then
    single tokens through a KV cache, each step against the layer
    transcribed in float64 (queries at their positions in the cache)."""
    E, H, HKV, D, T, P, W, CAP = 24, 6, 2, 4, 11, 5, 4, 2.5
    ROT, THETA = 4, 100.0

    def setUp(self):
        g = np.random.default_rng(17)
        E, H, HKV, D = self.E, self.H, self.HKV, self.D
        f = np.float32
        self.w = layer_weights(g, E, H, HKV, D, D, 0.4, 0.1)
        self.x = g.standard_normal((2, self.T, E)).astype(f)
        self.sinks = g.uniform(-1, 1, H).astype(f)

    def proj(self, name, x):
        w = torch.tensor(self.w["w_" + name], dtype=F64)
        return torch.tensor(x, dtype=F64) @ w.T + torch.tensor(self.w["b_" + name], dtype=F64)

    def oracle(self, t0, n):
        H, HKV, D, L = self.H, self.HKV, self.D, t0 + n
        b = self.x.shape[0]
        q = self.proj("q", self.x[:, t0:L]).reshape(b, n, H, D).transpose(1, 2)
        k = self.proj("k", self.x[:, :L]).reshape(b, L, HKV, D).transpose(1, 2)
        pos = torch.arange(L)[None].expand(b, L)
        cos, sin = rope_cos_sin(pos, self.ROT, self.THETA, 1.0, False)
        q = apply_rotary_pos_emb(q, cos[:, t0:], sin[:, t0:], self.ROT, False)
        k = apply_rotary_pos_emb(k, cos, sin, self.ROT, False)
        v = self.proj("v", self.x[:, :L]).reshape(b, L, HKV, D).transpose(1, 2)
        alibi = alibi_distance(bloom_alibi(H, 1)[1], n, L, t0)
        keep = window_keep(n, L, t0, self.W, True)
        sinks = torch.tensor(self.sinks, dtype=F64)

        def rules(s):
            s = torch.tanh(s / self.CAP) * self.CAP + alibi[None]
            return s.masked_fill(~keep, float("-inf")), sinks
        o, _ = attend(q, k, v, rules)
        o = torch.tensor(o).transpose(1, 2).reshape(b, n, H * D)
        return (o @ torch.tensor(self.w["w_o"], dtype=F64).T +
                torch.tensor(self.w["b_o"], dtype=F64)).numpy()

    def test_decode(self):
        """RoPE (rotate_half, theta 100) + window + ALiBi + cap + sinks + GQA."""
        for be, path, splits in RUNS:
            m = vkmha.MHA(ctx(be), self.E, self.H, n_kv_head=self.HKV, rope_dims=self.ROT,
                          rope_theta=self.THETA, **self.w)
            cache = m.kv_cache(self.T, batch=2)
            t0 = 0
            while t0 < self.T:
                n = self.P if t0 == 0 else 1
                out = m(self.x[:, t0:t0 + n], causal=True, kv_cache=cache, path=path,
                        kv_splits=splits, window=self.W, softcap=self.CAP, alibi=True,
                        sinks=self.sinks)
                assert_close(self, out, self.oracle(t0, n),
                             "%s %s splits %d: step at %d" % (be, path, splits, t0))
                t0 += n


class TestMixedBatch(unittest.TestCase):
    """Continuous batching (entry_tokens / cu_seqlens): four cache entries
    step by step, each step one call whose entries bring different counts
    (prompts of 5, 3, 1 and 7 tokens; then decodes beside a chunk of 4 of a
    prompt; then a decode each), with RoPE (rotate_half, 4 of 4 dims,
    theta 100) + a causal window of 5 + gpt-oss sinks + GQA; each entry's
    rows against its own sequence's layer transcribed in float64 (its
    causal mask and RoPE positions from its own length), every backend and
    path, host arrays and Tensors."""
    E, H, HKV, D, W, ROT, THETA = 24, 6, 2, 4, 5, 4, 100.0
    STEPS = ((5, 3, 1, 7), (1, 1, 4, 1), (1, 1, 1, 1))

    def setUp(self):
        g = np.random.default_rng(29)
        self.w = layer_weights(g, self.E, self.H, self.HKV, self.D, self.D, 0.4, 0.1)
        self.T = np.sum(self.STEPS, axis=0)
        self.x = [g.standard_normal((t, self.E)).astype(np.float32) for t in self.T]
        self.sinks = g.uniform(-1, 1, self.H).astype(np.float32)

    def oracle(self, x, t0, n):
        """One entry's rows t0 .. t0 + n - 1 of sequence x, all before them cached."""
        H, HKV, D, L = self.H, self.HKV, self.D, t0 + n
        w = {k: torch.tensor(v, dtype=F64) for k, v in self.w.items()}
        xx = torch.tensor(x[None, :L], dtype=F64)
        q = (xx[:, t0:] @ w["w_q"].T + w["b_q"]).reshape(1, n, H, D).transpose(1, 2)
        k = (xx @ w["w_k"].T + w["b_k"]).reshape(1, L, HKV, D).transpose(1, 2)
        v = (xx @ w["w_v"].T + w["b_v"]).reshape(1, L, HKV, D).transpose(1, 2)
        cos, sin = rope_cos_sin(torch.arange(L)[None], self.ROT, self.THETA, 1.0, False)
        q = apply_rotary_pos_emb(q, cos[:, t0:], sin[:, t0:], self.ROT, False)
        k = apply_rotary_pos_emb(k, cos, sin, self.ROT, False)
        keep = window_keep(n, L, t0, self.W, True)
        sinks = torch.tensor(self.sinks, dtype=F64)
        o, _ = attend(q, k, v, lambda s: (s.masked_fill(~keep, float("-inf")), sinks))
        o = torch.tensor(o).transpose(1, 2).reshape(n, H * D)
        return (o @ w["w_o"].T + w["b_o"]).numpy()

    def test_steps(self):
        for be, path, splits in RUNS:
            for tensors in ((False, True) if be == "vulkan" and path == "auto" else (False,)):
                c = ctx(be)
                m = vkmha.MHA(c, self.E, self.H, n_kv_head=self.HKV, rope_dims=self.ROT,
                              rope_theta=self.THETA, **self.w)
                cache = m.kv_cache(int(self.T.max()) + 1, batch=len(self.T))
                t0 = np.zeros(len(self.T), dtype=int)
                for i, counts in enumerate(self.STEPS):
                    packed = np.concatenate([x[a:a + n] for x, a, n in zip(self.x, t0, counts)])
                    form = {"cu_seqlens": np.concatenate([[0], np.cumsum(counts)])} if i == 1 \
                        else {"entry_tokens": counts}
                    q = c.tensor(packed) if tensors else packed
                    out = m(q, causal=True, kv_cache=cache, path=path, kv_splits=splits,
                            window=self.W, sinks=self.sinks, **form)
                    out = out.numpy() if tensors else out
                    want = np.concatenate([self.oracle(x, a, n)
                                           for x, a, n in zip(self.x, t0, counts)])
                    assert_close(self, out, want, "%s %s splits %d%s: step %d %s" % (
                        be, path, splits, " tensors" if tensors else "", i, counts))
                    t0 += counts
                    self.assertEqual(list(cache.lengths()), list(t0))

    def test_bad_arguments(self):
        c = ctx("vulkan")
        m = vkmha.MHA(c, self.E, self.H, n_kv_head=self.HKV, **self.w)
        cache = m.kv_cache(8, batch=3)
        x = self.x[3][:6]
        for kw in ({"entry_tokens": [2, 2, 1]}, {"entry_tokens": [3, 0, 3]},
                   {"entry_tokens": [2, 2, 7]}, {"cu_seqlens": [0, 2, 4, 5]},
                   {"entry_tokens": [2, 2, 2], "key_padding": np.ones((3, 2), bool)}):
            with self.assertRaises((vkmha.InvalidArgumentError, ValueError), msg=str(kw)):
                m(x, causal=True, kv_cache=cache, **kw)
        with self.assertRaises(ValueError):
            m(x, causal=True, entry_tokens=[2, 2, 2])  # no cache
        with self.assertRaises(ValueError):
            m(x, causal=True, kv_cache=cache, entry_tokens=[2, 2, 2], need_weights=True)
        self.assertEqual(list(cache.lengths()), [0, 0, 0])  # nothing appended
        out = m(x, causal=True, kv_cache=cache, entry_tokens=[2, 3, 1])  # still works
        self.assertTrue(np.isfinite(out).all())
        self.assertEqual(list(cache.lengths()), [2, 3, 1])


class TestRoPE(unittest.TestCase):
    """RoPE alone: both pair layouts, partial rotary (6 of 8 dims), linear
    scaling, explicit positions (entry 1 left-padded: positions from 0 at
    its third token), whole prompt then decode steps through a KV cache of
    16-bit values, against the layer transcribed in float64."""
    E, H, HKV, D, T = 32, 4, 2, 8, 9

    def setUp(self):
        g = np.random.default_rng(23)
        f = np.float32
        E, H, HKV, D = self.E, self.H, self.HKV, self.D
        self.w = layer_weights(g, E, H, HKV, D, D, 0.3)
        self.x = g.standard_normal((2, self.T, E)).astype(f)
        self.pos = np.stack([np.arange(self.T) + 40, np.maximum(np.arange(self.T) - 2, 0)])

    def oracle(self, rot, base, factor, interleaved, t0, n):
        H, HKV, D, L, b = self.H, self.HKV, self.D, t0 + n, 2
        w = {k: torch.tensor(v, dtype=F64) for k, v in self.w.items()}
        xx = torch.tensor(self.x, dtype=F64)
        q = (xx[:, t0:L] @ w["w_q"].T).reshape(b, n, H, D).transpose(1, 2)
        k = (xx[:, :L] @ w["w_k"].T).reshape(b, L, HKV, D).transpose(1, 2)
        v = (xx[:, :L] @ w["w_v"].T).reshape(b, L, HKV, D).transpose(1, 2)
        cos, sin = rope_cos_sin(self.pos[:, :L], rot, base, factor, interleaved)
        q = apply_rotary_pos_emb(q, cos[:, t0:], sin[:, t0:], rot, interleaved)
        k = apply_rotary_pos_emb(k, cos, sin, rot, interleaved)
        keep = window_keep(n, L, t0, L + 1, True)
        o, _ = attend(q, k, v, lambda s: (s.masked_fill(~keep, float("-inf")), None))
        o = torch.tensor(o).transpose(1, 2).reshape(b, n, H * D)
        return (o @ w["w_o"].T).numpy()

    def test_layouts(self):
        for rot, base, factor, layout in ((8, 10000.0, 1.0, 0), (6, 500.0, 4.0, 0),
                                          (8, 10000.0, 1.0, 1), (6, 50.0, 2.0, 1)):
            for be, path, splits in RUNS:
                m = vkmha.MHA(ctx(be), self.E, self.H, n_kv_head=self.HKV, rope_dims=rot,
                              rope_theta=base, rope_scale=factor, rope_layout=layout, **self.w)
                self.assertEqual(m.desc["rope_dims"], rot)
                tag = "%s %s splits %d: rope %d/%d base %g factor %g" % (
                    be, path, splits, rot, self.D, base, factor)
                whole = m(self.x, causal=True, path=path, kv_splits=splits,
                          positions=self.pos)
                assert_close(self, whole, self.oracle(rot, base, factor, layout, 0, self.T),
                             tag + ": whole prompt")
                cache = m.kv_cache(self.T, batch=2, dtype="f16")
                t0 = 0
                while t0 < self.T:
                    n = 4 if t0 == 0 else 1
                    out = m(self.x[:, t0:t0 + n], causal=True, kv_cache=cache, path=path,
                            kv_splits=splits, positions=self.pos[:, t0:t0 + n])
                    assert_close(self, out, self.oracle(rot, base, factor, layout, t0, n),
                                 tag + ": step at %d (f16 cache)" % t0, atol=3e-3, rtol=3e-3)
                    t0 += n

    def test_bad_arguments(self):
        c = ctx("vulkan")
        for kw in ({"rope_dims": 7}, {"rope_dims": 10}, {"rope_dims": 4, "rope_theta": -1.0},
                   {"rope_dims": 4, "rope_scale": float("inf")}, {"rope_dims": 4, "rope_layout": 2},
                   {"rope_theta": 100.0}):
            with self.assertRaises(vkmha.InvalidArgumentError, msg=str(kw)):
                vkmha.MHA(c, self.E, self.H, n_kv_head=self.HKV, **kw, **self.w)
        m = vkmha.MHA(c, self.E, self.H, n_kv_head=self.HKV, rope_dims=4, **self.w)
        with self.assertRaises(vkmha.InvalidArgumentError):
            m(self.x, self.x[:, :5], self.x[:, :5])  # new keys that are not the queries' tokens
        with self.assertRaises(ValueError):
            m(self.x, positions=np.full((2, self.T), 2**31))
        plain = vkmha.MHA(c, self.E, self.H, n_kv_head=self.HKV, **self.w)
        with self.assertRaises(vkmha.InvalidArgumentError):
            plain(self.x, positions=self.pos)
        self.assertTrue(np.isfinite(m(self.x)).all())  # still works


if __name__ == "__main__":
    checks.run(__name__)
