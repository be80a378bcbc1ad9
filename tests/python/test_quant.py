"""vkmha.quantize / vkmha.dequantize (vkmha_quantize, vkmha_dequantize) bit
for bit against an independent numpy transcription of include/vkmha.h's
"Quantized weights" (the layout and the formulas, every step in float32
with numpy's round-to-nearest-even: np.rint, float32 -> float16 casts), on
random matrices of every type and group size from float32, float16 and
bfloat16 sources, and on the edge groups the header names: all zeros,
fp32 subnormals (the scale underflows fp16), scales that are fp16
subnormals, one value far above the rest, values on half steps (ties to
even), constant groups, the largest quantizable values; NaN, +-Inf and
scales past 65504 raise InvalidArgumentError naming the row and group.
The quantized matmul, layer and GPTQ / vkmha-layout checkpoints; the 8-bit
KV cache's rows against a transcription of its rule, its reads against
float64 attention (TestKVCacheQ8).
Printed as TAP (checks.py); run on the installed wheel (installed.py)."""
import unittest

import checks  # first: fails the run, naming them, without numpy and torch

import numpy as np
import torch

import vkmha

from checks import TestZValidation  # noqa: F401 (a test)
from checks import assert_close, layer_weights
from checks import context as ctx

GROUPS = (32, 64, 128)
TYPES = ("q8", "q4", "q4z")
RNG = np.random.default_rng(5)


def round16(n):
    return (n + 15) // 16 * 16


def transcribe(w, qtype, g):
    """The header's quantization of float32 w [rows][cols], as bytes."""
    w = np.asarray(w, np.float32)
    rows, cols = w.shape
    ng = cols // g
    x = w.reshape(rows, ng, g)
    f32 = np.float32
    if qtype == "q4z":
        lo = np.minimum(x.min(axis=2), f32(0))
        hi = np.maximum(x.max(axis=2), f32(0))
        flat = lo == hi
        lo[flat], hi[flat] = f32(-1), f32(1)
        quotient = (hi - lo) / f32(15)
    else:
        quotient = np.abs(x).max(axis=2) / f32(127 if qtype == "q8" else 7)
    assert (quotient <= f32(65504)).all()
    d16 = quotient.astype(np.float16)
    d = d16.astype(np.float32)[:, :, None]
    live = d != 0
    safe = np.where(live, d, f32(1))
    q = np.rint(x / safe)
    zero = np.zeros((rows, ng), np.uint8)
    if qtype == "q4z":
        z = np.clip(np.rint(-lo[:, :, None] / safe), 0, 15)
        z = np.where(live, z, 0)
        codes = np.where(live, np.clip(q + z, 0, 15), 0).astype(np.uint8)
        zero = z[:, :, 0].astype(np.uint8)
    elif qtype == "q8":
        codes = np.where(live, np.clip(q, -127, 127), 0).astype(np.int8).view(np.uint8)
    else:
        codes = (np.where(live, np.clip(q, -8, 7), 0) + 8).astype(np.uint8)
    codes = codes.reshape(rows, cols)
    if qtype == "q8":
        values = codes.reshape(-1)
    else:
        values = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
    scales = d16.reshape(-1).astype("<f2").view(np.uint8)
    end = values.size + scales.size
    out = [values, scales]
    if qtype == "q4z":
        zeros_at = round16(end)
        out += [np.zeros(zeros_at - end, np.uint8), zero.reshape(-1)]
        end = zeros_at + zero.size
    out.append(np.zeros(round16(end) - end, np.uint8))
    return np.concatenate(out)


def values_of(b, qtype, shape, g):
    """The transcription's decoding: scale * q, scale * (q - zero), float32."""
    rows, cols = shape
    ng = cols // g
    nv = rows * cols if qtype == "q8" else rows * cols // 2
    if qtype == "q8":
        q = b[:nv].view(np.int8).astype(np.float32).reshape(rows, cols)
    else:
        v = b[:nv].reshape(rows, cols // 2)
        q = np.empty((rows, cols), np.float32)
        q[:, 0::2], q[:, 1::2] = v & 15, v >> 4
        if qtype == "q4":
            q -= 8
    s = b[nv:nv + 2 * rows * ng].view("<f2").astype(np.float32).reshape(rows, ng)
    if qtype == "q4z":
        zat = round16(nv + 2 * rows * ng)
        q = q - np.repeat(b[zat:zat + rows * ng].reshape(rows, ng), g, axis=1).astype(np.float32)
    return np.repeat(s, g, axis=1) * q


def edge_matrix(g):
    """Rows of the header's edge cases, [8][2 g]."""
    rows = []
    rows.append(np.zeros(2 * g))                                   # all zeros
    rows.append(np.tile([1e-40, -3e-41], g))                      # fp32 subnormals
    rows.append(np.linspace(-2e-5, 3e-5, 2 * g))                  # fp16-subnormal scales
    far = RNG.uniform(-0.1, 0.1, 2 * g)
    far[3], far[g + 5] = 1e4, -2e4                                 # one far value per group
    rows.append(far)
    rows.append(np.concatenate([0.125 * (np.arange(g) % 8 + 0.5),  # half steps (ties)
                                (np.arange(g) % 16 + 0.5)]))
    rows.append(np.concatenate([np.full(g, 0.75), np.full(g, -3.0)]))  # constant groups
    big = np.full(2 * g, 1.0)
    big[0], big[g] = 65504 * 7, -65504 * 7                         # the largest Q4 values
    rows.append(big)
    rows.append(RNG.standard_normal(2 * g) * 10.0 ** RNG.integers(-6, 4, 2 * g))
    return np.asarray(rows, np.float32)


class TestQuantize(unittest.TestCase):
    def check(self, w, qtype, g, what, source=None):
        """vkmha's bytes and values equal the transcription's, both backends."""
        want = transcribe(w, qtype, g)
        lay = vkmha.quant_layout(qtype, w.shape, g, context=ctx("reference"))
        self.assertEqual(lay["bytes"], want.size, what)
        vals = values_of(want, qtype, w.shape, g)
        for be in ("reference", "vulkan"):
            got = vkmha.quantize(w if source is None else source, qtype, g, context=ctx(be))
            self.assertEqual(got.dtype, np.uint8)
            self.assertTrue(np.array_equal(got, want), "%s %s: bytes differ at %s" % (
                be, what, np.flatnonzero(got != want)[:8]))
            back = vkmha.dequantize(got, qtype, w.shape, g, context=ctx(be))
            self.assertTrue(np.array_equal(back, vals), "%s %s: values" % (be, what))
            h = vkmha.dequantize(got, qtype, w.shape, g, dtype="f16", context=ctx(be))
            # fp16: nearest even, saturating at 65504 (vkmha's conversions)
            want16 = np.clip(vals, -65504, 65504).astype(np.float16)
            self.assertTrue(np.array_equal(h, want16), "%s %s f16" % (be, what))

    def test_random(self):
        for qtype in TYPES:
            for g in GROUPS:
                w = RNG.standard_normal((7, 3 * g)).astype(np.float32)
                self.check(w, qtype, g, "%s g%d" % (qtype, g))

    def test_16bit_sources(self):
        for qtype in TYPES:
            w = RNG.standard_normal((5, 128)).astype(np.float32)
            h = w.astype(np.float16)
            self.check(h.astype(np.float32), qtype, 64, qtype + " from float16", source=h)
            b = torch.from_numpy(w).to(torch.bfloat16)
            self.check(b.float().numpy(), qtype, 32, qtype + " from bfloat16", source=b)

    def test_edge_groups(self):
        for qtype in TYPES:
            for g in GROUPS:
                w = edge_matrix(g)
                if qtype == "q8":  # its scale stays far below fp16's largest
                    w[6] = np.clip(w[6], -1e6, 1e6)
                if qtype == "q4z":  # (hi - lo) / 15 must stay within fp16
                    w[6] = np.clip(w[6], -65504 * 7, 65504 * 7) / 2
                self.check(w, qtype, g, "%s g%d edges" % (qtype, g))

    def test_ties_round_to_even(self):
        """A group whose step is exactly 1/8: x = (k + 1/2) / 8 quantizes to
        the even neighbour (a round-half-away rule fails here)."""
        x = np.zeros((1, 32), np.float32)
        x[0, 0] = 127 / 8
        x[0, 1:] = (np.arange(1, 32) % 8 + 0.5) / 8
        got = vkmha.dequantize(vkmha.quantize(x, "q8", 32, context=ctx("vulkan")), "q8",
                               x.shape, 32, context=ctx("vulkan"))[0, 1:]
        k = np.arange(1, 32) % 8
        self.assertTrue(np.array_equal(got, (k + (k % 2)) / 8.0))

    def test_unquantizable_groups(self):
        for qtype, v, why in (("q8", np.nan, "NaN"), ("q4", np.inf, "infinity"),
                              ("q4z", -np.inf, "infinity"), ("q8", 1e7, "65504"),
                              ("q4", 1e6, "65504"), ("q4z", 2e6, "65504")):
            w = RNG.standard_normal((3, 64)).astype(np.float32)
            w[2, 40] = v
            for be in ("reference", "vulkan"):
                with self.assertRaises(vkmha.InvalidArgumentError) as cm:
                    vkmha.quantize(w, qtype, 32, context=ctx(be))
                msg = str(cm.exception.message)
                self.assertIn("row 2, group 1", msg)
                self.assertIn(why, msg)

    def test_bad_arguments(self):
        w = np.zeros((2, 64), np.float32)
        for kw, text in (({"group_size": 48}, "group_size"), ({"qtype": "q3"}, "qtype")):
            args = {"qtype": "q8", "group_size": 32}
            args.update(kw)
            with self.assertRaisesRegex((vkmha.InvalidArgumentError, ValueError), text):
                vkmha.quantize(w, args["qtype"], args["group_size"], context=ctx("vulkan"))
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "cols"):
            vkmha.quantize(np.zeros((2, 48), np.float32), "q4", 32, context=ctx("vulkan"))
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "src_bytes"):
            vkmha.dequantize(np.zeros(8, np.uint8), "q4", (2, 64), 32, context=ctx("vulkan"))


class TestQuantizedMatmul(unittest.TestCase):
    """Context.matmul with a QuantizedMatrix b against numpy in float64 on
    the transcription's values (values_of), both backends, both ops, every
    type and group size, f32 / f16 / bf16 activations, a batch over one b,
    and the tensor form; its error against the unquantized product is
    printed, not a gate."""

    def product(self, x, vals, transpose_b, bias, alpha):
        w = vals.astype(np.float64)
        y = alpha * (x.astype(np.float64) @ (w.T if transpose_b else w))
        return y + (0 if bias is None else bias.astype(np.float64))

    def test_ops(self):
        for qtype in TYPES:
            for g, dt in zip(GROUPS, ("f32", "f16", "bf16")):
                for transpose_b in (True, False):
                    # op T: b [n][k] (groups along k); op N: b [k][n] (along n)
                    m, n, k = (5, 37, 2 * g) if transpose_b else (6, 2 * g, 29)
                    shape = (n, k) if transpose_b else (k, n)
                    w = RNG.uniform(-1, 1, shape).astype(np.float32)
                    q = vkmha.quantized(w, qtype, g, context=ctx("reference"))
                    self.assertTrue(np.array_equal(q.data, transcribe(w, qtype, g)))
                    vals = values_of(q.data, qtype, shape, g)
                    x = torch.from_numpy(RNG.uniform(-1, 1, (m, k)).astype(np.float32))
                    bias = RNG.uniform(-1, 1, n).astype(np.float32)
                    xt = {"f32": x, "f16": x.half(), "bf16": x.bfloat16()}[dt]
                    want = self.product(xt.float().numpy(), vals, transpose_b,
                                        torch.from_numpy(bias).to(xt.dtype).float().numpy(),
                                        0.5)
                    unit = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}[dt]
                    for be in ("reference", "vulkan"):
                        got = ctx(be).matmul(xt, q, bias=torch.from_numpy(bias).to(xt.dtype),
                                             transpose_b=transpose_b, alpha=0.5)
                        self.assertEqual(got.dtype, xt.dtype)
                        err = np.abs(got.float().numpy() - want)
                        tol = 4e-6 * np.sqrt(k) + 2 * unit * np.abs(want)
                        what = "%s %s g%d op %s %s" % (be, qtype, g, "T" if transpose_b
                                                       else "N", dt)
                        self.assertTrue((err <= tol).all(), "%s: max error %g" % (
                            what, err.max()))
                    exact = self.product(x.numpy(), w, transpose_b, bias, 0.5)
                    print("# %s g%d op %s: max |error| against the unquantized "
                                "weights %.3g (not a gate)" % (qtype, g, "T" if transpose_b
                                                               else "N", np.abs(
                                    got.float().numpy() - exact).max()))

    def test_batch_and_tensors(self):
        w = RNG.uniform(-1, 1, (21, 128)).astype(np.float32)
        q = vkmha.quantized(w, "q4z", 64, context=ctx("vulkan"))
        vals = values_of(q.data, "q4z", w.shape, 64)
        x = RNG.uniform(-1, 1, (3, 4, 128)).astype(np.float32)
        want = self.product(x, vals, True, None, 1.0)
        got = ctx("vulkan").matmul(x, q, transpose_b=True)
        self.assertEqual(got.shape, (3, 4, 21))
        self.assertTrue(np.allclose(got, want, rtol=1e-5, atol=1e-4))
        c = ctx("vulkan")
        ta = c.tensor(x.reshape(12, 128))
        tq = vkmha.QuantizedMatrix(c.tensor(q.data), "q4z", w.shape, 64)
        tc = c.matmul(ta, tq, transpose_b=True)
        self.assertTrue(np.allclose(tc.numpy(), want.reshape(12, 21), rtol=1e-5, atol=1e-4))
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "b_group_size"):
            c.matmul(x, vkmha.QuantizedMatrix(q.data, "q4z", w.shape, 48), transpose_b=True)
        with self.assertRaisesRegex(TypeError, "Tensor"):
            c.matmul(ta, q, transpose_b=True)


class TestQuantizedLayer(unittest.TestCase):
    """from_torch(module, weight_dtype="q8" | "q4" | "q4z") against PyTorch
    in float64 on a copy of the module whose weights are the
    transcription's values of their quantization, both backends."""

    def test_from_torch(self):
        import copy
        E = 128
        for qtype, g in (("q8", 32), ("q4", 64), ("q4z", 128)):
            torch.manual_seed(3)
            m = torch.nn.MultiheadAttention(E, 4, batch_first=True).eval()
            x = torch.randn(2, 6, E)
            ref = copy.deepcopy(m).double()
            with torch.no_grad():
                for p in (ref.in_proj_weight, ref.out_proj.weight):
                    w = p.detach().float().numpy()
                    for r0 in range(0, w.shape[0], E):  # each of w_q, w_k, w_v, w_o
                        part = w[r0:r0 + E]
                        vals = values_of(transcribe(part, qtype, g), qtype, part.shape, g)
                        p[r0:r0 + E] = torch.from_numpy(vals).double()
                want = ref(x.double(), x.double(), x.double(), need_weights=False)[0].numpy()
            for be in ("reference", "vulkan"):
                attn = vkmha.from_torch(m, ctx(be), weight_dtype=qtype, group_size=g)
                self.assertEqual(attn.layer.desc["weight_quant"],
                                 getattr(vkmha, "QUANT_" + qtype.upper()))
                got = attn(x, x, x, need_weights=False)[0].numpy()
                err = np.abs(got - want).max()
                self.assertLess(err, 1e-4, "%s %s g%d: %g" % (be, qtype, g, err))
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "weight_group_size"):
            vkmha.from_torch(m, ctx("vulkan"), weight_dtype="q4", group_size=48)

    def test_given_quantized(self):
        """MHA with QuantizedMatrix weights (the transcription's bytes, a
        head shard cut from them) equals the layer quantizing the same float
        weights at creation, bit for bit; bad bytes are named."""
        E, H = 128, 4
        w = [RNG.uniform(-0.2, 0.2, (E, E)).astype(np.float32) for _ in range(4)]
        x = RNG.uniform(-1, 1, (1, 5, E)).astype(np.float32)
        for qtype, g, heads in (("q8", 32, None), ("q4", 64, (2, 4)), ("q4z", 32, (1, 3))):
            q = [vkmha.QuantizedMatrix(transcribe(m, qtype, g), qtype, m.shape, g) for m in w]
            for be in ("reference", "vulkan"):
                a = vkmha.MHA(ctx(be), E, H, *q, heads=heads)
                self.assertTrue(a.desc["weights_quantized"])
                b = vkmha.MHA(ctx(be), E, H, *w, weight_quant=qtype, weight_group_size=g,
                              heads=heads)
                ya, yb = a(x, x, x), b(x, x, x)
                self.assertTrue(np.array_equal(ya, yb), "%s %s g%d heads %s" % (
                    be, qtype, g, heads))
        bad = transcribe(w[3], "q4z", 32)
        zat = round16(E * E // 2 + 2 * E * (E // 32))
        bad[zat + 4 * 7 + 2] = 16  # row 7, group 2
        q = [vkmha.QuantizedMatrix(transcribe(m, "q4z", 32), "q4z", m.shape, 32) for m in w[:3]]
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "w_o row 7, group 2"):
            vkmha.MHA(ctx("vulkan"), E, H, *q, vkmha.QuantizedMatrix(bad, "q4z", (E, E), 32))


def gptq_pack(w, g, sym):
    """AutoGPTQ's 4-bit quantization and packing of a torch.nn.Linear weight
    w [N][K] (float64) in groups of g inputs, as its "gptq" checkpoints hold
    it: (qweight I32 [K/8][N], qzeros I32 [K/g][N/8] holding zero - 1,
    scales F16 [K/g][N]), the values from its quantizer's rules (scale =
    (max - min) / 15 over a group including 0, zero = round(-min / scale),
    symmetric: zero 8)."""
    n, k = w.shape
    x = w.reshape(n, k // g, g)
    if sym:
        amax = np.maximum(np.abs(x).max(axis=2), 1e-8)
        scale, zero = 2 * amax / 15, np.full((n, k // g), 8.0)
    else:
        lo, hi = np.minimum(x.min(axis=2), 0), np.maximum(x.max(axis=2), 0)
        scale = np.maximum(hi - lo, 1e-8) / 15
        zero = np.clip(np.round(-lo / scale), 1, 15)  # stored zero - 1 >= 0, below 15
    scale = scale.astype(np.float16)
    s64 = scale.astype(np.float64)[:, :, None]
    q = np.clip(np.round(x / s64 + zero[:, :, None]), 0, 15).astype(np.uint32).reshape(n, k)
    qweight = np.zeros((k // 8, n), np.uint32)
    for j in range(8):
        qweight |= q[:, j::8].T << (4 * j)
    stored = (zero - 1).astype(np.uint32).T  # [groups][N]
    qzeros = np.zeros((k // g, n // 8), np.uint32)
    for j in range(8):
        qzeros |= stored[:, j::8] << (4 * j)
    return qweight.view(np.int32), qzeros.view(np.int32), scale.T.copy()


def gptq_weight(qweight, qzeros, scales, g):
    """The weight a GPTQ checkpoint stands for, float64 [N][K]: AutoGPTQ's
    dequantization, scales[g][n] * (q - (stored zero + 1)), unpacked here
    from the packed tensors independently of gptq_pack."""
    qw, qz = qweight.view(np.uint32), qzeros.view(np.uint32)
    k, n = qw.shape[0] * 8, qw.shape[1]
    q = np.zeros((k, n))
    for j in range(8):
        q[j::8] = (qw >> (4 * j)) & 15
    z = np.zeros((qz.shape[0], n))
    for j in range(8):
        z[:, j::8] = (qz >> (4 * j)) & 15
    rows = np.arange(k) // g
    return (scales.astype(np.float64)[rows] * (q - (z[rows] + 1))).T


def safetensors_bytes(tensors):
    """name -> numpy array (int32, float16, float32) as a safetensors file."""
    import json
    import struct
    names = {np.dtype(np.int32): "I32", np.dtype(np.float16): "F16",
             np.dtype(np.float32): "F32", np.dtype(np.int8): "I8", np.dtype(np.uint8): "U8"}
    header, data = {}, b""
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


class TestGPTQ(unittest.TestCase):
    """vkmha_mha_create_from_safetensors on GPTQ-packed projections (written
    here by AutoGPTQ's packing) against PyTorch in float64 on the weights
    AutoGPTQ's dequantization gives; the layouts it refuses, named."""

    E, H, HKV = 128, 4, 2

    def layer(self, g, sym, bias=True):
        rng = np.random.default_rng(7 + g)
        E, d = self.E, self.E // self.H
        shapes = {"q_proj": (E, E), "k_proj": (self.HKV * d, E), "v_proj": (self.HKV * d, E),
                  "o_proj": (E, E)}
        tensors, weights, biases = {}, {}, {}
        for name, shape in shapes.items():
            w = rng.uniform(-0.3, 0.3, shape)
            qw, qz, sc = gptq_pack(w, g, sym)
            tensors.update({"attn." + name + ".qweight": qw, "attn." + name + ".qzeros": qz,
                            "attn." + name + ".scales": sc,
                            "attn." + name + ".g_idx": (np.arange(shape[1]) // g).astype(np.int32)})
            weights[name] = gptq_weight(qw, qz, sc, g)
            if bias:
                b = rng.uniform(-0.1, 0.1, shape[0]).astype(np.float16)
                tensors["attn." + name + ".bias"] = b
                biases[name] = b.astype(np.float64)
        return tensors, weights, biases

    def reference(self, x, weights, biases):
        """GQA attention in float64 from the formula (4 query heads over 2)."""
        E, H, d = self.E, self.H, self.E // self.H
        b = lambda n: biases.get(n, 0.0)  # noqa: E731
        q = x @ weights["q_proj"].T + b("q_proj")
        k = x @ weights["k_proj"].T + b("k_proj")
        v = x @ weights["v_proj"].T + b("v_proj")
        L = x.shape[1]
        q = q.reshape(-1, L, H, d).transpose(0, 2, 1, 3)
        k = np.repeat(k.reshape(-1, L, self.HKV, d).transpose(0, 2, 1, 3), H // self.HKV, 1)
        v = np.repeat(v.reshape(-1, L, self.HKV, d).transpose(0, 2, 1, 3), H // self.HKV, 1)
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        o = (p @ v).transpose(0, 2, 1, 3).reshape(-1, L, E)
        return o @ weights["o_proj"].T + b("o_proj")

    def test_layers(self):
        x = np.random.default_rng(3).uniform(-1, 1, (2, 6, self.E)).astype(np.float32)
        for g, sym in ((32, False), (64, True), (128, False)):
            tensors, weights, biases = self.layer(g, sym)
            want = self.reference(x.astype(np.float64), weights, biases)
            blob = safetensors_bytes(tensors)
            for be in ("reference", "vulkan"):
                m = vkmha.load_safetensors(blob, self.H, ctx(be), prefix="attn.",
                                           n_kv_head=self.HKV)
                self.assertEqual((m.desc["weight_quant"], m.desc["weight_group_size"]),
                                 (vkmha.QUANT_Q4Z, g))
                got = m(x, x, x)
                self.assertEqual(got.shape, want.shape)
                err = np.abs(got - want).max()
                self.assertLess(err, 2e-4, "%s g%d sym %s: %g" % (be, g, sym, err))

    def test_vkmha_layout(self):
        """The same projections in vkmha's own layout (a tensor per plane,
        include/vkmha.h): the layer equals MHA given the same bytes as
        QuantizedMatrix weights, bit for bit; a zero point of 16 is named."""
        E, d = self.E, self.E // self.H
        rng = np.random.default_rng(11)
        shapes = {"q_proj": (E, E), "k_proj": (self.HKV * d, E), "v_proj": (self.HKV * d, E),
                  "out_proj": (E, E)}
        x = rng.uniform(-1, 1, (1, 5, E)).astype(np.float32)
        for qtype, g in (("q8", 64), ("q4", 32), ("q4z", 128)):
            tensors, mats = {}, []
            for name, shape in shapes.items():
                w = rng.uniform(-0.3, 0.3, shape).astype(np.float32)
                b = transcribe(w, qtype, g)
                lay = vkmha.quant_layout(qtype, shape, g, context=ctx("reference"))
                n, groups = shape[0], shape[0] * (shape[1] // g)
                values = b[:lay["scales_offset"]]
                tensors[name + ".qvalues"] = (values.view(np.int8) if qtype == "q8"
                                              else values).reshape(n, -1)
                tensors[name + ".qscales"] = b[lay["scales_offset"]:][:2 * groups].view(
                    np.float16).reshape(n, -1)
                if qtype == "q4z":
                    tensors[name + ".qzero_points"] = b[lay["zeros_offset"]:][:groups].reshape(
                        n, -1)
                mats.append(vkmha.QuantizedMatrix(b, qtype, shape, g))
            blob = safetensors_bytes(tensors)
            for be in ("reference", "vulkan"):
                m = vkmha.load_safetensors(blob, self.H, ctx(be), n_kv_head=self.HKV)
                want = vkmha.MHA(ctx(be), E, self.H, *mats, n_kv_head=self.HKV)
                self.assertTrue(np.array_equal(m(x, x, x), want(x, x, x)), "%s %s" % (be, qtype))
        t = dict(tensors)
        z = t["k_proj.qzero_points"].copy()
        z[3, 0] = 16
        t["k_proj.qzero_points"] = z
        with self.assertRaisesRegex(vkmha.InvalidArgumentError,
                                    "k_proj.qzero_points.*row 3, group 0"):
            vkmha.load_safetensors(safetensors_bytes(t), self.H, ctx("vulkan"), n_kv_head=self.HKV)
        # A plane of the wrong dtype is named, whatever the others (here
        # qvalues as float32 beside Q4Z's qzero_points).
        t = dict(tensors)
        t["v_proj.qvalues"] = t["v_proj.qvalues"].astype(np.float32)
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "v_proj.qvalues.*dtype F32"):
            vkmha.load_safetensors(safetensors_bytes(t), self.H, ctx("vulkan"), n_kv_head=self.HKV)

    def test_float_file_quantized_at_load(self):
        """A float checkpoint with weight_quant: the layer MHA quantizing the
        same weights at creation makes, bit for bit; a GPTQ file with
        another weight_quant is refused naming it."""
        E, d = self.E, self.E // self.H
        rng = np.random.default_rng(5)
        w = {n: rng.uniform(-0.3, 0.3, s).astype(np.float32) for n, s in (
            ("q_proj", (E, E)), ("k_proj", (self.HKV * d, E)), ("v_proj", (self.HKV * d, E)),
            ("o_proj", (E, E)))}
        blob = safetensors_bytes({n + ".weight": a for n, a in w.items()})
        x = rng.uniform(-1, 1, (1, 4, E)).astype(np.float32)
        for be in ("reference", "vulkan"):
            m = vkmha.load_safetensors(blob, self.H, ctx(be), n_kv_head=self.HKV,
                                       weight_quant="q4", group_size=64)
            want = vkmha.MHA(ctx(be), E, self.H, w["q_proj"], w["k_proj"], w["v_proj"],
                             w["o_proj"], n_kv_head=self.HKV, weight_quant="q4",
                             weight_group_size=64)
            self.assertTrue(np.array_equal(m(x, x, x), want(x, x, x)), be)
        tensors, _, _ = self.layer(32, False, bias=False)
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "weight_quant"):
            vkmha.load_safetensors(safetensors_bytes(tensors), self.H, ctx("vulkan"),
                                   prefix="attn.", n_kv_head=self.HKV, weight_quant="q8")

    def test_refused(self):
        tensors, _, _ = self.layer(32, False, bias=False)
        cases = []
        t = dict(tensors)
        t["attn.k_proj.g_idx"] = t["attn.k_proj.g_idx"][::-1].copy()
        cases.append((t, "k_proj.g_idx", "act-order"))
        t = dict(tensors)  # 8-bit: qzeros of N / 4 columns
        t["attn.v_proj.qzeros"] = np.zeros((4, 16), np.int32)
        cases.append((t, "v_proj.qzeros", "4-bit"))
        t = dict(tensors)
        qz = t["attn.o_proj.qzeros"].view(np.uint32).copy()
        qz[1, 2] |= np.uint32(15 << 12)  # output 19, group 1: stored 15
        t["attn.o_proj.qzeros"] = qz.view(np.int32)
        cases.append((t, "o_proj.qzeros", "output 19, group 1"))
        t = dict(tensors)
        t["attn.q_proj.weight"] = np.zeros((self.E, self.E), np.float32)
        cases.append((t, "q_proj.weight", "two layouts"))
        t = {k: v for k, v in tensors.items() if not k.startswith("attn.v_proj.scales")}
        cases.append((t, "v_proj.scales", "missing"))
        for t, name, why in cases:
            with self.assertRaises(vkmha.InvalidArgumentError) as cm:
                vkmha.load_safetensors(safetensors_bytes(t), self.H, ctx("vulkan"),
                                       prefix="attn.", n_kv_head=self.HKV)
            msg = str(cm.exception.message)
            self.assertIn(name, msg)
            self.assertIn(why, msg)


def transcribe_kv_rows(x):
    """include/vkmha.h's Q8 KV cache rows of float32 x [..][d]: the fp16
    scale fp16(max|x| / 127), 2 zero bytes, the codes clip(rint(x / s),
    -127, 127) as int8, zeros up to a multiple of 4 bytes; every step in
    float32 (finite rows whose scale stays below 65504)."""
    x = np.asarray(x, np.float32)
    d = x.shape[-1]
    flat = x.reshape(-1, d)
    s16 = (np.abs(flat).max(axis=1) / np.float32(127)).astype(np.float16)
    s = s16.astype(np.float32)[:, None]
    q = np.where(s != 0, np.clip(np.rint(flat / np.where(s != 0, s, 1)), -127, 127), 0)
    rows = np.zeros((flat.shape[0], 4 + (d + 3) // 4 * 4), np.uint8)
    rows[:, :2] = s16.view(np.uint8).reshape(-1, 2)
    rows[:, 4:4 + d] = q.astype(np.int8).view(np.uint8)
    return rows.reshape(x.shape[:-1] + (rows.shape[1],))


class TestKVCacheQ8(unittest.TestCase):
    """The 8-bit KV cache (MHA.kv_cache(dtype="q8")) on both backends: a
    prompt then steps, causal, grouped-query heads, head dims 6 and 10 (rows
    padded): the stored rows against transcribe_kv_rows of the keys and
    values projected in float64 by torch (scales within one fp16 step,
    codes within one, nearly all equal), and each step's output against
    torch's attention in float64 over the cache's own dequantized keys and
    values (scale * code) with the projections' queries, at fp32's
    tolerance; the error against unquantized float64 attention is
    printed, not a gate."""
    E, H, HKV, DK, DV, B, T, P = 24, 4, 2, 6, 10, 2, 9, 5

    def setUp(self):
        g = np.random.default_rng(11)
        E, H, HKV, DK, DV = self.E, self.H, self.HKV, self.DK, self.DV
        f = np.float32
        self.w = layer_weights(g, E, H, HKV, DK, DV, 0.3, 0.1)
        self.x = g.standard_normal((self.B, self.T, E)).astype(f)

    def proj(self, name, x):
        w = torch.tensor(self.w["w_" + name], dtype=torch.float64)
        b = torch.tensor(self.w["b_" + name], dtype=torch.float64)
        return torch.tensor(x, dtype=torch.float64) @ w.T + b

    def oracle(self, kh, vh, x, t0):
        """Causal attention in float64 of x's rows t0.. over heads kh, vh
        [B][HKV][L][d] (L >= t0 + len), then the output projection."""
        H, HKV, DK, DV = self.H, self.HKV, self.DK, self.DV
        b, n = x.shape[0], x.shape[1]
        q = self.proj("q", x).reshape(b, n, H, DK).transpose(1, 2)
        k = torch.as_tensor(kh, dtype=torch.float64).repeat_interleave(H // HKV, dim=1)
        v = torch.as_tensor(vh, dtype=torch.float64).repeat_interleave(H // HKV, dim=1)
        L = t0 + n
        k, v = k[:, :, :L], v[:, :, :L]
        s = q @ k.transpose(-1, -2) / DK ** 0.5
        keep = torch.arange(L)[None, :] <= (t0 + torch.arange(n))[:, None]
        s = s.masked_fill(~keep, -1e9)
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, n, H * DV)
        return (o @ torch.tensor(self.w["w_o"], dtype=torch.float64).T +
                torch.tensor(self.w["b_o"], dtype=torch.float64)).numpy()

    def run_backend(self, backend, path):
        E, H, HKV, DK, DV, B, T, P = (self.E, self.H, self.HKV, self.DK, self.DV, self.B,
                                      self.T, self.P)
        m = vkmha.MHA(ctx(backend), E, H, n_kv_head=HKV, d_k=DK, d_v=DV, **self.w)
        cache = m.kv_cache(T + 2, batch=B, dtype="q8")
        self.assertEqual(cache.desc["quant"], vkmha.QUANT_Q8)
        self.assertEqual(cache.desc["bytes"],
                         B * HKV * (T + 2) * ((4 + 8) + (4 + 12)) + 4 * B)
        t0 = 0
        worst_q = 0.0
        while t0 < T:
            n = P if t0 == 0 else 1
            x = self.x[:, t0:t0 + n]
            out = m(x, causal=True, kv_cache=cache, path=path)
            kh, vh = cache.keys(), cache.values()
            assert_close(self, out, self.oracle(kh, vh, x, t0),
                         "%s %s: step at %d over the cache's values" % (backend, path, t0),
                         atol=5e-5, rtol=1e-4)
            kx = self.proj("k", self.x[:, :t0 + n]).reshape(B, t0 + n, HKV, DK).transpose(1, 2)
            vx = self.proj("v", self.x[:, :t0 + n]).reshape(B, t0 + n, HKV, DV).transpose(1, 2)
            exact = self.oracle(kx.numpy(), vx.numpy(), x, t0)
            worst_q = max(worst_q, float(np.abs(out - exact).max()))
            t0 += n
        # The rows: the cache's against the transcription of the float64
        # projections rounded to float32.
        for name, d, raw in (("k", DK, cache.raw(False)), ("v", DV, cache.raw(True))):
            proj = self.proj(name, self.x).reshape(B, T, HKV, d).transpose(1, 2)
            want = transcribe_kv_rows(proj.numpy().astype(np.float32))
            got = raw[:, :, :T]
            self.assertTrue((raw[:, :, T:] == 0).all(), "%s: rows past the length" % name)
            sg = got[..., :2].copy().view(np.uint16).astype(np.int64)
            sw = want[..., :2].copy().view(np.uint16).astype(np.int64)
            self.assertLessEqual(int(np.abs(sg - sw).max()), 1, "%s: scales" % name)
            cg = got[..., 4:4 + d].view(np.int8).astype(np.int64)
            cw = want[..., 4:4 + d].view(np.int8).astype(np.int64)
            self.assertLessEqual(int(np.abs(cg - cw).max()), 1, "%s: codes" % name)
            self.assertLessEqual(int((cg != cw).sum()) * 50, cg.size, "%s: codes" % name)
            self.assertTrue((got[..., 2:4] == 0).all() and (got[..., 4 + d:] == 0).all(),
                            "%s: padding" % name)
        print("# %s %s: q8 cache, largest |out - float64 over unquantized keys and values|:"
              " %.3g" % (backend, path, worst_q))
        self.assertLess(worst_q, 0.1)

    def test_reference(self):
        self.run_backend("reference", "auto")

    def test_vulkan_paths(self):
        for path in ("auto", "fused", "unfused"):
            self.run_backend("vulkan", path)


if __name__ == "__main__":
    checks.run(__name__)
