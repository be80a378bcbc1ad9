"""Tests of the Python package vkmha (python/), printed as TAP (one line per
test method, checks.py), run by `meson test` (suite python: tests/python/
installed.py runs it in a virtual environment where the package's wheel is
installed) with VKMHA_HEADER pointing at include/vkmha.h; by hand,
PYTHONPATH=build/python runs it on the build directory's package.

Against torch.nn.MultiheadAttention (Debian's python3-torch, fp32 on the
CPU), element by element: |vkmha - torch| <= ATOL + RTOL * |torch|, ATOL
2e-5, RTOL 1e-4 (both compute in fp32; vkmha's projections, softmax and
LayerNorm reorder the sums, a few ulps per stage over five chained stages of
sums of at most 24 terms), on shapes that are multiples of no tile size
(d_model 20, 4 heads, lengths 17 and 13, batch 3). Each Vulkan context runs
with the validation layer (synchronization validation included) and must end
with no message. The reference backend runs the same cases.

numpy and torch are required: without them this fails (never skips) with a
message naming the packages."""
import json
import math
import os
import struct
import tempfile
import unittest

import checks  # first: fails the run, naming them, without numpy and torch

import numpy as np
import torch

import vkmha

from checks import TestZValidation, assert_close, context  # noqa: F401 (a test)

torch.manual_seed(0)
BACKENDS = ("vulkan", "reference")


def context_with_env(name, value):
    """A Vulkan context created with environment variable `name` set to
    `value` (read at creation), the environment restored after."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        return vkmha.Context("vulkan", validation=True)
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def torch_mha(module, q, k, v, **kw):
    with torch.no_grad():
        return module(q, k, v, need_weights=True, average_attn_weights=False, **kw)


class TestEnums(unittest.TestCase):
    """The binding against include/vkmha.h: every enum constant, every dtype,
    every error status and every public function."""

    @classmethod
    def setUpClass(cls):
        with open(os.environ["VKMHA_HEADER"]) as f:
            cls.header = f.read()

    def enum_constants(self):
        import re
        out = {}
        for body in re.findall(r"typedef enum \w+ \{(.*?)\}", self.header, re.S):
            body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
            for name, value in re.findall(r"VKMHA_(\w+)\s*=\s*([^,\n]+)", body):
                out[name] = value.strip()
        for name in re.findall(r"#define VKMHA_(\w+) ", self.header):
            # VKMHA_ZERO: a field declarator (C++ default member initializer),
            # not a value.
            if name not in ("API", "H", "VERSION_MAJOR", "VERSION_MINOR", "VERSION_PATCH",
                            "ZERO"):
                out[name] = None
        return out

    def test_every_constant_is_exported_with_its_value(self):
        consts = self.enum_constants()
        self.assertGreater(len(consts), 40)
        missing = [n for n in consts if not hasattr(vkmha, n)]
        self.assertEqual(missing, [], "constants of vkmha.h missing from the binding")
        for name, value in consts.items():
            if value is None:
                continue
            v = value.replace("u << ", " << ").replace("u", "")
            self.assertEqual(getattr(vkmha, name), eval(v), name)

    def test_every_dtype_has_a_numpy_dtype(self):
        dtypes = [n for n in self.enum_constants() if n.startswith("DTYPE_")]
        self.assertIn("DTYPE_F32", dtypes)
        for name in dtypes:
            self.assertIn(getattr(vkmha, name), vkmha.DTYPES, "%s has no numpy dtype" % name)

    def test_every_error_status_has_an_exception_class(self):
        for name in self.enum_constants():
            if name.startswith("ERROR_"):
                status = getattr(vkmha, name)
                classes = [c for c in vars(vkmha).values() if isinstance(c, type)
                           and issubclass(c, vkmha.Error) and c is not vkmha.Error]
                self.assertEqual(vkmha.status_string(status), "VKMHA_" + name)
                # The class raised for it: the one whose name matches.
                want = "".join(w.title() for w in name[len("ERROR_"):].split("_")) + "Error"
                self.assertIn(want, [c.__name__ for c in classes], name)

    def test_every_public_function_is_bound(self):
        import re
        funcs = set(re.findall(r"VKMHA_API [^;]*?\b(vkmha_\w+)\(", self.header))
        src = os.path.join(os.path.dirname(os.environ["VKMHA_HEADER"]), "..", "python",
                           "vkmha", "_vkmha.c")
        with open(src) as f:
            binding = f.read()
        # Not bound, on purpose: the binding manages lifetimes itself and
        # offers no asynchronous submissions or pipeline-cache files (yet).
        unbound = {"vkmha_mha_destroy", "vkmha_mha_submit", "vkmha_submission_poll",
                   "vkmha_submission_wait", "vkmha_submission_destroy", "vkmha_context_trim",
                   "vkmha_context_get_pipeline_cache", "vkmha_context_save_pipeline_cache"}
        missing = sorted(f for f in funcs - unbound if f + "(" not in binding)
        self.assertEqual(missing, [], "public functions the binding does not call")


class TestFromTorch(unittest.TestCase):
    """from_torch for every module variant, against the module."""

    E, H, B, LQ, LK = 20, 4, 3, 17, 13

    def check(self, backend, module, masks=None, unbatched=False, rows=None):
        module.eval()
        bf = module.batch_first
        kd, vd = module.kdim, module.vdim
        if unbatched:
            q, k, v = (torch.randn(self.LQ, self.E), torch.randn(self.LK, kd),
                       torch.randn(self.LK, vd))
        elif bf:
            q, k, v = (torch.randn(self.B, self.LQ, self.E), torch.randn(self.B, self.LK, kd),
                       torch.randn(self.B, self.LK, vd))
        else:
            q, k, v = (torch.randn(self.LQ, self.B, self.E), torch.randn(self.LK, self.B, kd),
                       torch.randn(self.LK, self.B, vd))
        masks = masks or {}
        want, want_w = torch_mha(module, q, k, v, **masks)
        attn = vkmha.from_torch(module, context(backend))
        got, got_w = attn(q, k, v, average_attn_weights=False, **masks)
        self.assertTrue(torch.is_tensor(got), "torch in, torch out")
        r = None if rows is None else rows
        assert_close(self, got, want, "%s out" % backend,
                     rows=None if r is None else r["out"])
        assert_close(self, got_w, want_w, "%s attn weights" % backend,
                     rows=None if r is None else r["w"])
        got2, avg = attn(q, k, v, **masks)
        assert_close(self, got2, want, "%s out (again)" % backend,
                     rows=None if r is None else r["out"])
        if r is None:
            assert_close(self, avg, want_w.mean(dim=-3), "%s averaged weights" % backend)
        out3, none = attn(q, k, v, need_weights=False, **masks)
        self.assertIsNone(none)
        assert_close(self, out3, want, "%s out without weights" % backend,
                     rows=None if r is None else r["out"])

    def test_packed_with_biases_batch_first(self):
        for b in BACKENDS:
            self.check(b, torch.nn.MultiheadAttention(self.E, self.H, batch_first=True))

    def test_packed_seq_first(self):
        for b in BACKENDS:
            self.check(b, torch.nn.MultiheadAttention(self.E, self.H, batch_first=False))

    def test_no_biases(self):
        for b in BACKENDS:
            self.check(b, torch.nn.MultiheadAttention(self.E, self.H, bias=False,
                                                      batch_first=True))

    def test_separate_projections_kdim_vdim(self):
        for b in BACKENDS:
            for bf in (True, False):
                self.check(b, torch.nn.MultiheadAttention(self.E, self.H, kdim=7, vdim=11,
                                                          batch_first=bf))

    def test_each_fused_kernel(self):
        """Both fused attention kernels (forced through Context(fused_kernel=...)),
        with a mask, against the module."""
        m = torch.nn.MultiheadAttention(self.E, self.H, batch_first=True).eval()
        x = torch.randn(self.B, self.LQ, self.E)
        am = torch.randn(self.LQ, self.LQ)
        want, want_w = torch_mha(m, x, x, x, attn_mask=am)
        for kernel in (vkmha.FUSED_KERNEL_SHARED, vkmha.FUSED_KERNEL_REGISTER):
            ctx = vkmha.Context("vulkan", validation=True, fused_kernel=kernel)
            got, w = vkmha.from_torch(m, ctx)(x, x, x, attn_mask=am, average_attn_weights=False)
            assert_close(self, got, want, "fused kernel %d: out" % kernel)
            assert_close(self, w, want_w, "fused kernel %d: weights" % kernel)
            self.assertEqual(ctx.info()["validation_messages"], 0)

    def test_unbatched(self):
        for b in BACKENDS:
            self.check(b, torch.nn.MultiheadAttention(self.E, self.H, batch_first=True),
                       unbatched=True)

    def test_numpy_in_numpy_out(self):
        m = torch.nn.MultiheadAttention(self.E, self.H, batch_first=True).eval()
        x = np.random.default_rng(1).standard_normal((2, 5, self.E)).astype(np.float64)
        want, _ = torch_mha(m, *(torch.from_numpy(x.astype(np.float32)),) * 3)
        out, w = vkmha.from_torch(m, context("vulkan"))(x, x, x)
        self.assertIsInstance(out, np.ndarray)
        self.assertEqual(out.dtype, np.float32)
        assert_close(self, out, want, "float64 numpy in")

    def test_unsupported_modules_raise(self):
        with self.assertRaisesRegex(NotImplementedError, "add_bias_kv"):
            vkmha.from_torch(torch.nn.MultiheadAttention(8, 2, add_bias_kv=True),
                             context("reference"))
        with self.assertRaisesRegex(NotImplementedError, "add_zero_attn"):
            vkmha.from_torch(torch.nn.MultiheadAttention(8, 2, add_zero_attn=True),
                             context("reference"))
        with self.assertRaisesRegex(TypeError, "MultiheadAttention"):
            vkmha.from_torch(torch.nn.Linear(3, 3), context("reference"))


class TestMasks(unittest.TestCase):
    """PyTorch's mask conventions, against the module."""

    E, H, B, LQ, LK = 20, 4, 3, 17, 13

    def setUp(self):
        self.m = torch.nn.MultiheadAttention(self.E, self.H, batch_first=True, kdim=9,
                                             vdim=9).eval()
        self.g = torch.Generator().manual_seed(5)

    def run_case(self, masks, rows=None):
        TestFromTorch.check(self, "vulkan", self.m, masks, rows=rows)
        TestFromTorch.check(self, "reference", self.m, masks, rows=rows)

    def kpm(self):
        kpm = torch.rand(self.B, self.LK, generator=self.g) < 0.3
        kpm[:, 0] = False  # every row keeps a key: torch defines every row
        return kpm

    def test_key_padding_bool(self):
        self.run_case({"key_padding_mask": self.kpm()})

    def test_key_padding_float_added(self):
        self.run_case({"key_padding_mask": torch.randn(self.B, self.LK, generator=self.g)})

    def test_attn_mask_bool_2d(self):
        am = torch.rand(self.LQ, self.LK, generator=self.g) < 0.4
        am[:, 0] = False
        self.run_case({"attn_mask": am})

    def test_attn_mask_bool_3d(self):
        am = torch.rand(self.B * self.H, self.LQ, self.LK, generator=self.g) < 0.4
        am[:, :, 1] = False
        self.run_case({"attn_mask": am})

    def test_attn_mask_causal_bool(self):
        am = torch.ones(self.LQ, self.LK, dtype=torch.bool).triu(1)
        self.run_case({"attn_mask": am})

    def test_attn_mask_float_2d_with_minus_inf(self):
        am = torch.randn(self.LQ, self.LK, generator=self.g)
        am[torch.rand(self.LQ, self.LK, generator=self.g) < 0.3] = float("-inf")
        am[:, 2] = 0.5
        self.run_case({"attn_mask": am})

    def test_attn_mask_float_3d(self):
        self.run_case({"attn_mask": torch.randn(self.B * self.H, self.LQ, self.LK,
                                                generator=self.g)})

    def test_key_padding_bool_and_attn_mask_float_3d(self):
        am = torch.randn(self.B * self.H, self.LQ, self.LK, generator=self.g)
        self.run_case({"key_padding_mask": self.kpm(), "attn_mask": am})

    def test_key_padding_and_attn_mask_bool(self):
        am = torch.rand(self.LQ, self.LK, generator=self.g) < 0.3
        am[:, 0] = False
        self.run_case({"key_padding_mask": self.kpm(), "attn_mask": am})

    def test_fully_masked_rows(self):
        """Rows that -inf masks entirely: torch 1.13 gives NaN there, so only
        the other rows are compared with torch; the masked rows are compared
        between Vulkan and vkmha's reference backend (NaN parity included)."""
        am = torch.randn(self.B * self.H, self.LQ, self.LK, generator=self.g)
        am[:, 3, :] = float("-inf")        # query 3 of every batch entry and head
        am[5, 7, :] = float("-inf")        # one (batch, head) row
        rows_out = np.ones((self.B, self.LQ, self.E), bool)
        rows_out[:, 3, :] = False
        rows_out[5 // self.H, 7, :] = False
        rows_w = np.ones((self.B, self.H, self.LQ, self.LK), bool)
        rows_w[:, :, 3, :] = False
        rows_w[5 // self.H, 5 % self.H, 7, :] = False
        rows_w[5 // self.H, :, 7, :] = False
        self.run_case({"attn_mask": am}, rows={"out": rows_out, "w": rows_w})
        q = torch.randn(self.B, self.LQ, self.E, generator=self.g)
        kv = torch.randn(self.B, self.LK, 9, generator=self.g)
        res = {}
        for b in BACKENDS:
            res[b] = vkmha.from_torch(self.m, context(b))(q, kv, kv, attn_mask=am,
                                                          average_attn_weights=False)
        assert_close(self, res["vulkan"][0], res["reference"][0], "fully masked rows: out")
        assert_close(self, res["vulkan"][1], res["reference"][1], "fully masked rows: weights",
                     atol=1e-6, rtol=1e-5)
        # What include/vkmha.h defines for a row of -inf scores: zero weights
        # and zero attention output, so the layer's output row is out_proj's bias.
        w = res["vulkan"][1]
        self.assertTrue(bool((w[:, :, 3, :] == 0).all()) and bool((w[1, 1, 7, :] == 0).all()))
        assert_close(self, res["vulkan"][0][:, 3, :],
                     self.m.out_proj.bias.detach().expand(self.B, self.E),
                     "fully masked rows: out = out_proj.bias")

    def test_bad_masks_raise(self):
        attn = vkmha.from_torch(self.m, context("reference"))
        q, kv = torch.randn(self.B, self.LQ, self.E), torch.randn(self.B, self.LK, 9)
        with self.assertRaisesRegex(ValueError, "key_padding_mask: shape"):
            attn(q, kv, kv, key_padding_mask=torch.zeros(self.B, self.LK + 1, dtype=torch.bool))
        with self.assertRaisesRegex(ValueError, "attn_mask: shape"):
            attn(q, kv, kv, attn_mask=torch.zeros(self.LQ, 2))
        with self.assertRaisesRegex(TypeError, "attn_mask: bool or float"):
            attn(q, kv, kv, attn_mask=torch.zeros(self.LQ, self.LK, dtype=torch.int32))


class TestSafetensors(unittest.TestCase):
    """A torch module's state_dict written as safetensors by this test and
    loaded by vkmha_mha_create_from_safetensors (C)."""

    def write(self, tensors, path=None):
        """tensors: name -> torch tensor (any of float32, float16, bfloat16)."""
        header, data = {"__metadata__": {"format": "pt"}}, b""
        names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
        for name, t in tensors.items():
            t = t.detach().contiguous()
            raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
            header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                            "data_offsets": [len(data), len(data) + len(raw)]}
            data += raw
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        blob = struct.pack("<Q", len(h)) + h + data
        if path:
            with open(path, "wb") as f:
                f.write(blob)
        return blob

    def test_module_state_dict_each_dtype(self):
        m = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval()
        x = torch.randn(2, 11, 20)
        with tempfile.TemporaryDirectory() as d:
            for dt in (torch.float32, torch.float16, torch.bfloat16):
                sd = {"encoder.attn." + k: v.to(dt) for k, v in m.state_dict().items()}
                path = os.path.join(d, "m.safetensors")
                self.write(sd, path)
                # The oracle: the module with its weights rounded to dt.
                ref = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval()
                ref.load_state_dict({k: v.to(dt).float() for k, v in m.state_dict().items()})
                want, _ = torch_mha(ref, x, x, x)
                for b in BACKENDS:
                    layer = vkmha.load_safetensors(path, 4, context(b), prefix="encoder.attn.")
                    self.assertEqual(layer.desc["d_model"], 20)
                    assert_close(self, layer(x), want, "%s %s from a path" % (b, dt))
                    layer2 = vkmha.load_safetensors(open(path, "rb").read(), 4, context(b),
                                                    prefix="encoder.attn.")
                    assert_close(self, layer2(x), want, "%s %s from bytes" % (b, dt))

    def test_kdim_vdim_module(self):
        m = torch.nn.MultiheadAttention(12, 3, kdim=5, vdim=7, batch_first=True).eval()
        q, k, v = torch.randn(2, 6, 12), torch.randn(2, 9, 5), torch.randn(2, 9, 7)
        want, _ = torch_mha(m, q, k, v)
        blob = self.write(m.state_dict())
        for b in BACKENDS:
            layer = vkmha.load_safetensors(blob, 3, context(b))
            assert_close(self, layer(q, k, v), want, "%s q/k/v_proj_weight" % b)

    def test_q_k_v_o_proj_layout(self):
        """Hugging Face style names from Linear layers, same math as the module."""
        m = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
        wq, wk, wv = m.in_proj_weight.chunk(3)
        bq, bk, bv = m.in_proj_bias.chunk(3)
        sd = {"layers.0.self_attn.q_proj.weight": wq, "layers.0.self_attn.q_proj.bias": bq,
              "layers.0.self_attn.k_proj.weight": wk, "layers.0.self_attn.k_proj.bias": bk,
              "layers.0.self_attn.v_proj.weight": wv, "layers.0.self_attn.v_proj.bias": bv,
              "layers.0.self_attn.o_proj.weight": m.out_proj.weight,
              "layers.0.self_attn.o_proj.bias": m.out_proj.bias,
              "layers.0.mlp.weight": torch.randn(3, 3)}
        x = torch.randn(3, 10, 16)
        want, _ = torch_mha(m, x, x, x)
        for b in BACKENDS:
            layer = vkmha.load_safetensors(self.write(sd), 4, context(b),
                                           prefix="layers.0.self_attn.")
            assert_close(self, layer(x), want, "%s q/k/v/o_proj" % b)

    def test_post_norm_from_layer_norm(self):
        m = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
        ln = torch.nn.LayerNorm(16)
        with torch.no_grad():
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
        sd = {"attn." + k: v for k, v in m.state_dict().items()}
        sd.update({"norm1." + k: v for k, v in ln.state_dict().items()})
        x = torch.randn(2, 7, 16)
        with torch.no_grad():
            want = ln(x + torch_mha(m, x, x, x)[0])
        for b in BACKENDS:
            layer = vkmha.load_safetensors(self.write(sd), 2, context(b), prefix="attn.",
                                           post_norm=True, norm_prefix="norm1.", norm_eps=1e-5)
            assert_close(self, layer(x), want, "%s post-norm" % b)

    def test_json_validity_agrees_with_python(self):
        """vkmha's header parser (jsmn plus its grammar check) calls a header
        invalid JSON exactly when Python's json module does."""
        t = '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
        extras = ['', ',"x":{}', ',"x":{"y":[1,-2.5e+3,true,false,null,{"z":[]},"s\\"\\u00e9"]}',
                  ' "x":{}', ',"x":{},', ',"x"::{}', ',"x":[1,]', ',"x":[,1]', ',"x":[1 2]',
                  ',"x":tru', ',"x":-', ',"x":01', ',"x":1.', ',"x":.5', ',"x":1e', ',"x":+1',
                  ',"x":"\\q"', ',"x":"\\u12"', ',"x":"a\tb"', ',"x"', ',"x":[1:2]',
                  ',"x":{"y" 1}', ',"x":[[[[]]]]', ',"x":"\u00e9"', ',"x":nul', ',"x":TRUE',
                  ', "x" : { "y" : [ 0 , 1e5 , -0.0E-2 ] } ']
        ctx = context("reference")
        for extra in extras:
            header = ("{" + t + extra + "}").encode()
            try:
                json.loads(header)
                valid = True
            except ValueError:
                valid = False
            blob = struct.pack("<Q", len(header)) + header + bytes(4)
            with self.assertRaises(vkmha.InvalidArgumentError) as cm:
                vkmha.load_safetensors(blob, 1, ctx)  # never a layer: no weights
            says_invalid = "not valid JSON" in str(cm.exception)
            self.assertEqual(says_invalid, not valid, "%r: %s" % (header, cm.exception))

    def test_malformed_files_raise(self):
        m = torch.nn.MultiheadAttention(8, 2).eval()
        blob = self.write(m.state_dict())
        ctx = context("reference")
        cases = [
            (blob[:50], "truncated"),
            (blob[:-4], "out of the data"),
            (struct.pack("<Q", 3) + b"{\"a", "not valid JSON"),
            (blob.replace(b"\"F32\"", b"\"F99\"", 1), "unknown dtype 'F99'"),
            (self.write({k: v for k, v in m.state_dict().items() if k != "out_proj.weight"}),
             "out_proj.weight"),
        ]
        for data, words in cases:
            with self.assertRaises(vkmha.InvalidArgumentError) as cm:
                vkmha.load_safetensors(data, 2, ctx)
            e = cm.exception
            self.assertIn(words, str(e))
            self.assertEqual(e.status, vkmha.ERROR_INVALID_ARGUMENT)
            self.assertEqual(e.status_name, "VKMHA_ERROR_INVALID_ARGUMENT")
            self.assertIn("vkmha_mha_create_from_safetensors", e.message)
            self.assertIsInstance(e, ValueError)
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "No such file"):
            vkmha.load_safetensors("/nonexistent.safetensors", 2, ctx)
        # Still usable.
        layer = vkmha.load_safetensors(blob, 2, ctx)
        self.assertEqual(layer.desc["n_head"], 2)


class TestOps(unittest.TestCase):
    """The ops on arrays and on tensors, against torch."""

    def test_matmul(self):
        a, b, bias = torch.randn(3, 7, 5), torch.randn(3, 5, 9), torch.randn(9)
        for be in BACKENDS:
            ctx = context(be)
            assert_close(self, ctx.matmul(a, b, bias), a @ b + bias, "%s matmul" % be)
            w = torch.randn(9, 5)
            assert_close(self, ctx.matmul(a, w, transpose_b=True, alpha=0.5),
                         0.5 * a @ w.T, "%s matmul broadcast B^T" % be)
            assert_close(self, ctx.matmul(a[0], b[0]), a[0] @ b[0], "%s matmul 2-D" % be)

    def test_softmax_with_masks(self):
        x = torch.randn(2, 3, 5, 7)
        kp = torch.rand(2, 7) > 0.3
        kp[:, 0] = True
        for be in BACKENDS:
            ctx = context(be)
            assert_close(self, ctx.softmax(x, scale=0.5), torch.softmax(0.5 * x, -1),
                         "%s softmax" % be, atol=1e-6, rtol=1e-5)
            want = torch.softmax(x.masked_fill(~kp[:, None, None, :], -1e9), -1)
            assert_close(self, ctx.softmax(x, key_padding=kp), want,
                         "%s softmax key padding" % be, atol=1e-6, rtol=1e-5)
            causal = torch.ones(5, 7, dtype=torch.bool).tril()
            want = torch.softmax(x.masked_fill(~causal, -1e9), -1)
            assert_close(self, ctx.softmax(x, causal=True), want, "%s softmax causal" % be,
                         atol=1e-6, rtol=1e-5)
            bias = torch.randn(1, 3, 5, 7)
            assert_close(self, ctx.softmax(x, bias=bias), torch.softmax(x + bias, -1),
                         "%s softmax bias" % be, atol=1e-6, rtol=1e-5)

    def test_split_merge_heads(self):
        x = torch.randn(2, 5, 12)
        for be in BACKENDS:
            ctx = context(be)
            s = ctx.split_heads(x, 3)
            self.assertTrue(torch.equal(s, x.view(2, 5, 3, 4).transpose(1, 2)))
            self.assertTrue(torch.equal(ctx.merge_heads(s), x))

    def test_attention_gqa(self):
        q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 9, 8), torch.randn(2, 2, 9, 5)
        kk, vv = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
        w = torch.softmax(q @ kk.transpose(-1, -2) / math.sqrt(8), -1)
        for be in BACKENDS:
            for path in ("fused", "unfused"):
                out, got_w = context(be).attention(q, k, v, need_weights=True, path=path)
                assert_close(self, out, w @ vv, "%s attention %s" % (be, path))
                assert_close(self, got_w, w, "%s attention weights %s" % (be, path),
                             atol=1e-6, rtol=1e-5)

    def test_tensors(self):
        """Tensors: upload / download round trip; ops and the layer on tensors
        equal the same calls on arrays."""
        for be in BACKENDS:
            ctx = context(be)
            a = np.random.default_rng(2).standard_normal((3, 7, 5)).astype(np.float32)
            t = ctx.tensor(a)
            self.assertEqual(t.shape, (3, 7, 5))
            self.assertEqual(t.dtype, vkmha.DTYPE_F32)
            self.assertEqual(t.nbytes, a.nbytes)
            self.assertTrue(np.array_equal(t.numpy(), a))
            m = ctx.tensor(np.array([[True, False, True]]))
            self.assertEqual(m.dtype, vkmha.DTYPE_U8)
            self.assertTrue(np.array_equal(m.numpy(), [[1, 0, 1]]))
            b = np.random.default_rng(3).standard_normal((3, 5, 4)).astype(np.float32)
            c = ctx.matmul(t, ctx.tensor(b))
            self.assertIsInstance(c, vkmha.Tensor)
            assert_close(self, c.numpy(), ctx.matmul(a, b), "%s matmul on tensors" % be,
                         atol=0, rtol=0)
            x4 = np.random.default_rng(5).standard_normal((2, 3, 5, 7)).astype(np.float32)
            kp = np.random.default_rng(6).random((2, 7)) > 0.3
            assert_close(self, ctx.softmax(ctx.tensor(x4), key_padding=ctx.tensor(kp)).numpy(),
                         ctx.softmax(x4, key_padding=kp), "%s softmax on tensors" % be,
                         atol=0, rtol=0)
            s = ctx.split_heads(ctx.tensor(a[:, :, :4]), 2)
            self.assertTrue(np.array_equal(s.numpy(), ctx.split_heads(a[:, :, :4], 2)))
            self.assertTrue(np.array_equal(ctx.merge_heads(s).numpy(), a[:, :, :4]))
            q4, k4 = x4[:, :, :, :4], x4[:, :1, :, 2:]
            got = ctx.attention(ctx.tensor(q4), ctx.tensor(k4), ctx.tensor(k4), need_weights=True)
            want = ctx.attention(q4, k4, k4, need_weights=True)
            for g, w_, what in zip(got, want, ("out", "weights")):
                assert_close(self, g.numpy(), w_, "%s attention %s on tensors" % (be, what),
                             atol=0, rtol=0)
            mod = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval()
            layer = vkmha.from_torch(mod, ctx).layer
            x = np.random.default_rng(4).standard_normal((2, 9, 20)).astype(np.float32)
            kp = np.ones((2, 9), np.uint8)
            kp[1, 3:] = 0
            out, w = layer(ctx.tensor(x), need_weights=True, key_padding=ctx.tensor(kp))
            want, want_w = layer(x, need_weights=True, key_padding=kp)
            assert_close(self, out.numpy(), want, "%s layer on tensors" % be, atol=0, rtol=0)
            assert_close(self, w.numpy(), want_w, "%s weights on tensors" % be, atol=0, rtol=0)


# ---- 16-bit storage ----------------------------------------------------------

# The attention paths the 16-bit tests run, on both backends.
VULKAN_16BIT_PATHS = ("fused", "unfused", "auto")
HALF = {"f16": (vkmha.DTYPE_F16, 10, -14), "bf16": (vkmha.DTYPE_BF16, 7, -126)}


def paths_16bit(backend):
    return VULKAN_16BIT_PATHS if backend == "vulkan" else ("fused", "unfused", "auto")


def widen(x):
    """16-bit (or fp32) results as float64: float16, bf16 bits (uint16) or
    torch.bfloat16."""
    if torch.is_tensor(x):
        return x.detach().double().numpy()
    return vkmha.convert(x, "f32").astype(np.float64)


def assert_ulps(tc, got, want, dt, what, ulps=1.0, extra=0.0):
    """got (16-bit) within `ulps` units in the last place of the 16-bit
    format at want (float64, the exact result of the rounded inputs), plus
    `extra` (absolute): a correctly rounded result is within 0.5; fp32
    accumulation in another order moves want by far less than another
    half."""
    _, mant, emin = HALF[dt]
    g = widen(got)
    tc.assertEqual(g.shape, want.shape, "%s: shape" % what)
    e = np.maximum(np.floor(np.log2(np.maximum(np.abs(want), 1e-300))), emin)
    err, bound = np.abs(g - want), ulps * np.exp2(e - mant) + extra
    if (~(err <= bound)).any():
        i = int(np.argmax(np.where(np.isnan(err), np.inf, err - bound)))
        tc.fail("%s: element %d: %r vs %r, |diff| %.3g > %.3g (%s ulps)"
                % (what, i, g.flat[i], want.flat[i], err.flat[i], bound.flat[i], ulps))


def rounded(shape, dt, seed, scale=1.0):
    """Random values already rounded to dt: (the array to pass: numpy float16
    for f16, torch.bfloat16 for bf16, so both input kinds are covered; their
    values as float64)."""
    x = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
    if dt == "f16":
        a = vkmha.convert(x, "f16")
    else:
        a = torch.from_numpy(x).bfloat16()
    return a, widen(a)


def softmax64(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


class TestHalf(unittest.TestCase):
    """fp16 and bf16 arrays, tensors and layers: every op on both backends
    against float64 on the same rounded inputs (within one 16-bit ulp), the
    layer against torch with tolerances of a few 16-bit roundings, and
    convert() against torch's rounding."""

    def test_convert_rounds_as_torch_and_saturates(self):
        g = np.random.default_rng(7)
        # Every magnitude of both formats, plus exact ties between fp16
        # neighbours (h + half an ulp: representable in fp32).
        x = (g.standard_normal(200000) * np.exp2(g.integers(-30, 20, 200000))).astype(np.float32)
        h = g.standard_normal(50000).astype(np.float16)
        h = h[np.isfinite(h) & (h != 0)]
        ties = (h.astype(np.float32) + np.spacing(h).astype(np.float32) / 2).astype(np.float32)
        x = np.concatenate([x, ties, [0.0, -0.0, 65504, 65519.99, 65520, 1e30, -1e30,
                                      np.inf, -np.inf, np.nan]]).astype(np.float32)
        t = torch.from_numpy(x)
        got16 = vkmha.convert(x, "f16")
        want16 = t.half().numpy()
        fin = np.isfinite(want16)
        self.assertTrue(np.array_equal(got16[fin].view(np.uint16), want16[fin].view(np.uint16)),
                        "fp16: differs from torch's rounding")
        big = np.isinf(want16) & np.isfinite(x)
        self.assertTrue(big.sum() > 2)
        self.assertTrue(np.array_equal(got16[big], np.where(x[big] > 0, 65504, -65504)),
                        "fp16: finite values beyond 65504 saturate")
        self.assertTrue(np.array_equal(np.isinf(got16), np.isinf(x)))
        self.assertTrue(np.array_equal(np.isnan(got16), np.isnan(x)))
        gotb = vkmha.convert(x, "bf16")
        wantb = t.bfloat16().view(torch.int16).numpy().view(np.uint16)
        finb = np.isfinite(t.bfloat16().float().numpy())
        self.assertTrue(np.array_equal(gotb[finb], wantb[finb]), "bf16: differs from torch")
        self.assertEqual(vkmha.convert(np.float32(3.4e38), "bf16"), 0x7f7f)
        # Widening: exact for every 16-bit pattern.
        bits = np.arange(65536, dtype=np.uint16)
        f16 = bits.view(np.float16)
        w = vkmha.convert(f16, "f32")
        ok = ~np.isnan(f16)
        self.assertTrue(np.array_equal(w[ok], f16[ok].astype(np.float32)))
        self.assertTrue(np.array_equal(np.isnan(w), ~ok))
        self.assertTrue(np.array_equal(vkmha.convert(bits, "f32").view(np.uint32),
                                       bits.astype(np.uint32) << 16))
        bnan = ((bits & 0x7f80) == 0x7f80) & ((bits & 0x7f) != 0)
        back = vkmha.convert(vkmha.convert(bits, "f32"), "bf16")
        self.assertTrue(np.array_equal(back[~bnan], bits[~bnan]), "bf16 round trip")
        self.assertTrue(np.array_equal(back[bnan], bits[bnan] | 0x40), "bf16 NaN quieted")

    def test_ops_each_dtype(self):
        for be in BACKENDS:
            ctx = context(be)
            for dt in HALF:
                what = "%s %s" % (be, dt)
                a, a64 = rounded((3, 7, 5), dt, 1)
                b, b64 = rounded((3, 5, 9), dt, 2)
                bias, bias64 = rounded((9,), dt, 3)
                c = ctx.matmul(a, b, bias)
                if dt == "f16":
                    self.assertEqual(c.dtype, np.float16)
                else:
                    self.assertEqual(c.dtype, torch.bfloat16, "torch.bfloat16 in and out")
                assert_ulps(self, c, a64 @ b64 + bias64, dt, what + " matmul")
                w, w64 = rounded((9, 5), dt, 4)
                assert_ulps(self, ctx.matmul(a, w, transpose_b=True, alpha=0.5),
                            0.5 * a64 @ w64.T, dt, what + " matmul broadcast B^T")
                x, x64 = rounded((2, 5, 12), dt, 5)
                s = ctx.split_heads(x, 3)
                self.assertTrue(np.array_equal(widen(s), x64.reshape(2, 5, 3, 4)
                                               .transpose(0, 2, 1, 3)), what + " split_heads")
                self.assertTrue(np.array_equal(widen(ctx.merge_heads(s)), x64),
                                what + " merge_heads")
                q, q64 = rounded((2, 4, 6, 8), dt, 6)
                k, k64 = rounded((2, 2, 9, 8), dt, 7)
                v, v64 = rounded((2, 2, 9, 5), dt, 8)
                p = softmax64(q64 @ np.repeat(k64, 2, 1).transpose(0, 1, 3, 2) / math.sqrt(8))
                vv = np.repeat(v64, 2, 1)
                for path in paths_16bit(be):
                    out = ctx.attention(q, k, v, path=path)
                    assert_ulps(self, out, p @ vv, dt, "%s attention %s" % (what, path))
                    out, got_w = ctx.attention(q, k, v, need_weights=True, path=path)
                    assert_ulps(self, got_w, p, dt, "%s attention weights %s" % (what, path))
                    # Every path rounds the output once (the unfused one
                    # multiplies V by its fp32 weights, then rounds them).
                    assert_ulps(self, out, p @ vv, dt, "%s attention %s with weights"
                                % (what, path))
                if be == "reference" or "unfused" in VULKAN_16BIT_PATHS:
                    z, z64 = rounded((2, 3, 5, 7), dt, 9, scale=3.0)
                    assert_ulps(self, ctx.softmax(z, scale=0.5), softmax64(0.5 * z64), dt,
                                what + " softmax")

    def test_explicit_dtype_and_bf16_bits(self):
        for be in BACKENDS:
            ctx = context(be)
            a32 = np.array([[1e6, 1.0], [3.0, -1e6]], np.float32)
            eye = np.eye(2, dtype=np.float32)
            # float32 data narrowed by vkmha's rounding: 1e6 saturates.
            c = ctx.matmul(a32, eye, dtype="f16")
            self.assertEqual(c.dtype, np.float16)
            self.assertEqual(c.tolist(), [[65504, 1], [3, -65504]])
            bits = vkmha.convert(a32, "bf16")
            self.assertEqual(bits.dtype, np.uint16)
            c = ctx.matmul(bits, vkmha.convert(eye, "bf16"), dtype="bf16")
            self.assertEqual(c.dtype, np.uint16)
            self.assertTrue(np.array_equal(c, bits), "bf16 bits in and out (%s)" % be)
            # The first array sets the dtype; the others are converted to it.
            c = ctx.matmul(a32.astype(np.float16), eye)
            self.assertEqual(c.dtype, np.float16)
            for spelling in (vkmha.DTYPE_F16, np.float16, torch.float16, "float16"):
                self.assertEqual(ctx.matmul(eye, eye, dtype=spelling).dtype, np.float16)
        ctx = context("reference")
        with self.assertRaisesRegex(TypeError, 'dtype="bf16"'):
            ctx.matmul(np.eye(2, dtype=np.uint16), np.eye(2, dtype=np.float32))
        with self.assertRaisesRegex(ValueError, "not a float dtype"):
            ctx.matmul(np.eye(2), np.eye(2), dtype="f8")
        with self.assertRaisesRegex(ValueError, "not a float dtype"):
            ctx.matmul(np.eye(2), np.eye(2), dtype=vkmha.DTYPE_U8)
        f32 = np.eye(2, dtype=np.float32)
        with self.assertRaisesRegex(TypeError, "float16 elements"):
            vkmha._vkmha.Context.matmul(ctx, f32, f32, f32, 2, 2, 2, dtype=vkmha.DTYPE_F16)
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "dtype \\(1\\)"):
            vkmha._vkmha.Context.matmul(ctx, f32, f32, f32, 2, 2, 2, dtype=vkmha.DTYPE_U8)
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "storage_dtype \\(7\\)"):
            vkmha._vkmha.MHA(ctx, 2, 1, f32, f32, f32, f32, storage_dtype=7)

    def test_vulkan_native_and_packed_16bit_agree(self):
        native = context("vulkan")
        packed = vkmha.Context("vulkan", validation=True, no_native_16bit=True)
        try:
            self.assertFalse(packed.info()["native_16bit_storage"])
            mod = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval()
            for dt in HALF:
                # Odd sizes: a row of 16-bit values that ends mid-word.
                a, _ = rounded((3, 7, 5), dt, 11)
                b, _ = rounded((3, 5, 9), dt, 12)
                self.assertTrue(np.array_equal(widen(native.matmul(a, b)),
                                               widen(packed.matmul(a, b))), dt + " matmul")
                x, _ = rounded((2, 5, 6), dt, 13)
                self.assertTrue(np.array_equal(widen(native.split_heads(x, 3)),
                                               widen(packed.split_heads(x, 3))), dt + " heads")
                q, _ = rounded((2, 4, 7, 8), dt, 14)
                for path in VULKAN_16BIT_PATHS:
                    for g, w in zip(native.attention(q, q, q, need_weights=True, path=path),
                                    packed.attention(q, q, q, need_weights=True, path=path)):
                        self.assertTrue(np.array_equal(widen(g), widen(w)),
                                        "%s attention %s" % (dt, path))
                    xm, _ = rounded((2, 9, 20), dt, 15)
                    outs = [vkmha.from_torch(mod, c, storage_dtype=dt).layer(
                        xm, need_weights=True, path=path) for c in (native, packed)]
                    for g, w in zip(*outs):
                        self.assertTrue(np.array_equal(widen(g), widen(w)),
                                        "%s layer %s" % (dt, path))
            self.assertEqual(packed.info()["validation_messages"], 0)
        finally:
            packed.close()

    def test_tensors_16bit(self):
        for be in BACKENDS:
            ctx = context(be)
            for dt in HALF:
                code = HALF[dt][0]
                a, a64 = rounded((3, 7, 5), dt, 21)
                t = ctx.tensor(a)
                self.assertEqual(t.dtype, code)
                self.assertEqual(t.nbytes, 2 * 3 * 7 * 5)
                self.assertTrue(np.array_equal(widen(t.numpy()), a64), "%s %s upload" % (be, dt))
                self.assertEqual(vkmha.Tensor(ctx, (2, 3), dt).dtype, code)
                b, b64 = rounded((3, 5, 4), dt, 22)
                c = ctx.matmul(t, ctx.tensor(b))
                self.assertEqual(c.dtype, code)
                self.assertTrue(np.array_equal(widen(c.numpy()), widen(ctx.matmul(a, b))),
                                "%s %s matmul on tensors" % (be, dt))
                # Mixed: a 16-bit tensor times an fp32 one, fp32 out.
                b32 = np.random.default_rng(23).standard_normal((3, 5, 4)).astype(np.float32)
                m = ctx.matmul(t, ctx.tensor(b32), dtype="f32")
                self.assertEqual(m.dtype, vkmha.DTYPE_F32)
                assert_close(self, m.numpy(), a64 @ b32, "%s %s x f32 tensors" % (be, dt),
                             atol=1e-6, rtol=1e-6)
                s = ctx.split_heads(ctx.tensor(a[:, :, :4]), 2)
                self.assertTrue(np.array_equal(widen(s.numpy()),
                                               widen(ctx.split_heads(a[:, :, :4], 2))))
                q, _ = rounded((2, 3, 5, 4), dt, 24)
                for path in paths_16bit(be):
                    got = ctx.attention(ctx.tensor(q), ctx.tensor(q), ctx.tensor(q),
                                        need_weights=True, path=path)
                    want = ctx.attention(q, q, q, need_weights=True, path=path)
                    for g, w in zip(got, want):
                        self.assertEqual(g.dtype, code)
                        self.assertTrue(np.array_equal(widen(g.numpy()), widen(w)),
                                        "%s %s attention %s on tensors" % (be, dt, path))

    def test_layer_in_16bit(self):
        """from_torch on a float16 / bfloat16 module: outputs of its dtype,
        against the fp32 module with the same (16-bit) weights and inputs.
        Tolerance: the layer stores the projections and the attention output
        in 16 bits (a relative rounding of 2^-11, fp16, or 2^-8, bf16, each),
        which the next stage carries: a few roundings at the output's scale
        (|out| < 1 here)."""
        tol = {"f16": (1e-3, 4e-3), "bf16": (8e-3, 3e-2)}
        for dt, tdt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
            m = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval().to(tdt)
            ref = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval()
            ref.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
            x = torch.randn(3, 17, 20).to(tdt)
            kp = torch.rand(3, 17) < 0.2
            kp[:, 0] = False
            want, want_w = torch_mha(ref, x.float(), x.float(), x.float(), key_padding_mask=kp)
            for be in BACKENDS:
                attn = vkmha.from_torch(m, context(be))
                d = attn.layer.desc
                self.assertEqual((d["weight_dtype"], d["storage_dtype"]), (HALF[dt][0],) * 2)
                for path in paths_16bit(be):
                    got, w = attn(x, x, x, key_padding_mask=kp, average_attn_weights=False,
                                  path=path)
                    self.assertEqual((got.dtype, w.dtype), (tdt, tdt))
                    what = "%s %s layer %s" % (be, dt, path)
                    assert_close(self, got.float(), want, what, *tol[dt])
                    assert_close(self, w.float(), want_w, what + " weights", *tol[dt])
                    _, avg = attn(x, x, x, key_padding_mask=kp, path=path)
                    self.assertEqual(avg.dtype, tdt)
                    assert_close(self, avg.float(), want_w.mean(dim=1), what + " averaged",
                                 *tol[dt])
                    alone, none = attn(x, x, x, key_padding_mask=kp, need_weights=False,
                                       path=path)
                    self.assertIsNone(none)
                    assert_close(self, alone.float(), want, what + " without weights", *tol[dt])

    def test_storage_dtype_with_fp32_activations(self):
        """An fp32 module kept in 16 bits on the device (storage_dtype; from
        a safetensors file too): fp32 outputs, equal to the module with its
        weights rounded to that dtype within fp32 tolerances."""
        m = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval()
        x = torch.randn(3, 13, 20)
        blob = TestSafetensors().write({"a." + k: v for k, v in m.state_dict().items()})
        for dt, tdt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
            ref = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval()
            ref.load_state_dict({k: v.to(tdt).float() for k, v in m.state_dict().items()})
            want, want_w = torch_mha(ref, x, x, x)
            for be in BACKENDS:
                attn = vkmha.from_torch(m, context(be), storage_dtype=dt)
                d = attn.layer.desc
                self.assertEqual((d["weight_dtype"], d["storage_dtype"]),
                                 (vkmha.DTYPE_F32, HALF[dt][0]))
                got, w = attn(x, x, x, average_attn_weights=False)
                self.assertEqual(got.dtype, torch.float32)
                assert_close(self, got, want, "%s %s storage" % (be, dt))
                assert_close(self, w, want_w, "%s %s storage weights" % (be, dt))
                layer = vkmha.load_safetensors(blob, 4, context(be), prefix="a.",
                                               storage_dtype=dt)
                self.assertEqual(layer.desc["storage_dtype"], HALF[dt][0])
                assert_close(self, layer(x), want, "%s %s safetensors storage" % (be, dt))


class TestErrors(unittest.TestCase):
    """Errors raise with vkmha's message; the context stays usable."""

    def test_invalid_argument_carries_the_message(self):
        ctx = context("vulkan")
        w = np.zeros((6, 6), np.float32)
        with self.assertRaises(vkmha.InvalidArgumentError) as cm:
            vkmha.MHA(ctx, 6, 4, w, w, w, w)  # 6 is not divisible by 4 heads
        e = cm.exception
        self.assertIn("desc->d_model", str(e))
        self.assertEqual(e.status, vkmha.ERROR_INVALID_ARGUMENT)
        self.assertEqual(ctx.last_error, e.message)
        self.assertIn("vkmha_mha_create", e.message)
        # A later call succeeds and clears it.
        self.assertEqual(context("vulkan").matmul(np.eye(2, dtype=np.float32),
                                                  np.eye(2, dtype=np.float32)).shape, (2, 2))
        self.assertEqual(ctx.last_error, "")

    def test_binding_checks_sizes(self):
        ctx = context("reference")
        w = np.zeros((8, 8), np.float32)
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "w_k has 8 elements"):
            vkmha.MHA(ctx, 8, 2, w, w[0], w, w)
        layer = vkmha.MHA(ctx, 8, 2, w, w, w, w)
        out = np.empty((1, 3, 8), np.float32)
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "query has 16 elements"):
            layer.forward(np.zeros((2, 8), np.float32), np.zeros((3, 8), np.float32),
                          np.zeros((3, 8), np.float32), out, 3, 3)
        with self.assertRaisesRegex(TypeError, "writable"):
            x = np.zeros((3, 8), np.float32)
            ro = np.zeros((3, 8), np.float32)
            ro.flags.writeable = False
            layer.forward(x, x, x, ro, 3, 3)

    def test_dtypes_convert_or_raise(self):
        ctx = context("reference")
        self.assertEqual(ctx.matmul(np.eye(2), np.eye(2)).dtype, np.float32)  # float64 converted
        f = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
        self.assertTrue(np.array_equal(ctx.matmul(f, np.eye(3, dtype=np.float32)), f))
        with self.assertRaisesRegex(TypeError, "floating-point"):
            ctx.matmul(np.eye(2, dtype=np.int32), np.eye(2))
        with self.assertRaisesRegex(TypeError, "float32"):
            vkmha._vkmha.Context.matmul(ctx, np.eye(2), np.eye(2), np.eye(2), 2, 2, 2)
        with self.assertRaisesRegex(TypeError, "bool or uint8"):
            ctx.softmax(np.zeros((1, 1, 2, 2)), key_padding=np.zeros((1, 2), np.float32))

    def test_tensor_errors(self):
        ctx, other = context("reference"), vkmha.Context("reference")
        t = ctx.tensor(np.zeros((2, 2), np.float32))
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "another Context"):
            vkmha._vkmha.Context.matmul(other, t, t, t, 2, 2, 2)
        with self.assertRaises(vkmha.InvalidArgumentError) as cm:
            t.upload(np.zeros(5, np.float32))
        self.assertIn("vkmha_tensor_upload", str(cm.exception))
        with self.assertRaisesRegex(TypeError, "Tensor among arrays"):
            vkmha._vkmha.Context.matmul(ctx, np.eye(2, dtype=np.float32), t, t, 2, 2, 2)
        with self.assertRaisesRegex(vkmha.InvalidArgumentError, "still alive"):
            ctx.close()

    def test_no_such_device(self):
        with self.assertRaises(vkmha.Error) as cm:
            vkmha.Context("vulkan", device_index=999)
        self.assertIn("cannot create a context", str(cm.exception))
        self.assertIn("999", str(cm.exception))

    def test_info(self):
        info = context("vulkan").info()
        self.assertEqual(info["backend"], vkmha.BACKEND_VULKAN)
        self.assertTrue(info["device"]["name"])
        self.assertTrue(info["validation_enabled"])
        self.assertEqual(context("reference").info()["backend"], vkmha.BACKEND_REFERENCE)
        self.assertIsInstance(info["native_16bit_storage"], bool)
        self.assertFalse(context("reference").info()["native_16bit_storage"])
        self.assertGreaterEqual(len(vkmha.enumerate_devices()), 1)
        self.assertEqual(info["disabled_path_names"], [])
        # Vulkan guarantees 4; vkmha refuses devices with fewer than the
        # softmax's 7 (test_limits lowers it).
        self.assertGreaterEqual(info["device"]["max_storage_buffers_per_stage"], 7)
        # The largest Tensor: one allocation, or sparse buffers past it.
        alloc = info["device"]["max_allocation_size"]
        self.assertIsInstance(info["sparse_tensors"], bool)
        if info["sparse_tensors"]:
            # Sparse tensors reach past maxMemoryAllocationSize where the
            # device's sparse address space and maxBufferSize do (Mesa 25's
            # lavapipe: all three are 2 GiB, so no further).
            self.assertGreaterEqual(info["max_tensor_bytes"], alloc)
        else:
            self.assertEqual(info["max_tensor_bytes"], alloc)
        ref = context("reference").info()
        self.assertEqual((ref["sparse_tensors"], ref["max_tensor_bytes"]), (False, 0))
        # Matrix units: the device's shapes (none on Debian 12's lavapipe),
        # and whether the context uses them (never without shapes).
        self.assertIsInstance(info["matrix_shapes"], list)
        for s in info["matrix_shapes"]:
            self.assertGreater(s["m"] * s["n"] * s["k"], 0)
            self.assertIn(s["a_type"], ("f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8",
                                        "u16", "u32", "u64", "bf16", "e4m3", "e5m2", "?"))
        self.assertIsInstance(info["cooperative_matrix"], bool)
        if not info["matrix_shapes"]:
            self.assertFalse(info["cooperative_matrix"])
        # VK_NV_cooperative_matrix2 only on top of them, with workgroup sizes.
        self.assertIsInstance(info["cooperative_matrix2"], bool)
        self.assertEqual(info["cooperative_matrix2"],
                         info["cooperative_matrix2"] and info["cooperative_matrix"])
        self.assertEqual(bool(info["matrix2_workgroup_sizes"]), info["cooperative_matrix2"])
        self.assertIsInstance(vkmha.cooperative_matrix_built(), bool)
        self.assertEqual((ref["matrix_shapes"], ref["cooperative_matrix"]), ([], False))

    def test_disabled_path_names(self):
        # VKMHA_DISABLE_PATHS (read at creation): the bits and their names.
        ctx = context_with_env("VKMHA_DISABLE_PATHS", "gemv,subgroup")
        try:
            info = ctx.info()
            self.assertEqual(info["disabled_paths"],
                             vkmha.PATH_SUBGROUP | vkmha.PATH_MATMUL_GEMV)
            self.assertEqual(info["disabled_path_names"], ["subgroup", "gemv"])
            self.assertFalse(info["subgroup_ops_used"])
        finally:
            ctx.close()

    def test_single_thread_context(self):
        # CONTEXT_SINGLE_THREAD: pipelines on the calling thread only; the
        # same self-check (lazy: the first call checks its paths) and the
        # same results.
        ctx = vkmha.Context("vulkan", validation=True, flags=vkmha.CONTEXT_SINGLE_THREAD)
        try:
            self.assertEqual(ctx.info()["self_check_us"], 0)
            q, k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 7, 8), torch.randn(1, 2, 7, 8)
            w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(8), -1)
            out = ctx.attention(q, k, v)
            assert_close(self, out, w @ v, "single-thread context attention")
            info = ctx.info()
            self.assertGreater(info["self_check_us"], 0)
            self.assertEqual(info["disabled_path_names"], [])
        finally:
            ctx.close()

    def test_kernels(self):
        kernels = context("vulkan").kernels()
        names = [k["name"] for k in kernels]
        self.assertEqual(len(names), len(set(names)))
        by_name = {k["name"]: k for k in kernels}
        for name in ("matmul_large", "softmax", "layernorm", "heads", "flash_d64"):
            k = by_name[name]
            self.assertTrue(k["available"], name)
            self.assertTrue(k["shader"], name)
            self.assertEqual(k["params"]["WG"], k["workgroup_size"], name)
            self.assertLessEqual(len(k["params"]), vkmha.KERNEL_MAX_PARAMS)
        self.assertEqual(by_name["flash_d64"]["op"], "attention")
        self.assertEqual(by_name["flash_d64"]["params"]["D4"], 16)
        for k in kernels:
            if not k["available"]:
                self.assertEqual((k["shader"], k["workgroup_size"], k["params"]), ("", 0, {}))
        self.assertEqual(context("reference").kernels(), [])
        # desc->matmul_tile through VKMHA_MATMUL_TILE: the tile shows up.
        ctx = context_with_env("VKMHA_MATMUL_TILE", "shared:16,16,8,4,4")
        try:
            k = {k["name"]: k for k in ctx.kernels()}["matmul_small"]
            self.assertEqual(k["shader"], "matmul")
            self.assertEqual(k["params"], {"WG": 16, "BM": 16, "BN": 16, "BK": 8, "TM": 4,
                                           "TN": 4, "VEC": 0})
            self.assertEqual(k["shared_bytes"], (16 + 16) * 8 * 4)
            self.assertEqual(ctx.info()["validation_messages"], 0)
        finally:
            ctx.close()

    def test_profile(self):
        # flags CONTEXT_PROFILE: the steps of the last call, a matmul among them,
        # within the call's device time.
        ctx = vkmha.Context("vulkan", validation=True, flags=vkmha.CONTEXT_PROFILE)
        try:
            a, b = torch.randn(70, 33), torch.randn(33, 45)
            assert_close(self, ctx.matmul(a, b), a @ b, "profiled matmul")
            steps, info = ctx.profile(), ctx.info()
            self.assertGreaterEqual(len(steps), 1)
            self.assertLessEqual(len(steps), vkmha.MAX_PROFILE_STEPS)
            self.assertTrue(any(s["name"].startswith("matmul") for s in steps), steps)
            names = {k["name"] for k in ctx.kernels() if k["available"]}
            for s in steps:
                if s["bytes"] == 0:
                    self.assertIn(s["name"], names)
                    self.assertGreater(s["workgroups"][0], 0)
            if info["gpu_timing"]:
                self.assertLessEqual(sum(s["time_ns"] for s in steps), info["last_gpu_time_ns"])
        finally:
            ctx.close()
        self.assertEqual(context("vulkan").profile(), [])
        self.assertEqual(context("reference").profile(), [])

    def test_scratch_budget(self):
        ctx = vkmha.Context("vulkan", validation=True, scratch_budget=1 << 16)
        try:
            q = np.random.default_rng(3).standard_normal((1, 4, 200, 32), dtype=np.float32)
            want = context("vulkan").attention(q, q, q)
            assert_close(self, ctx.attention(q, q, q), want, "attention within a budget")
            info = ctx.info()
            self.assertEqual(info["scratch_budget"], 1 << 16)
            self.assertLessEqual(info["scratch_bytes"], 1 << 16)
            self.assertEqual(info["validation_messages"], 0)
        finally:
            ctx.close()


class TestKVCache(unittest.TestCase):
    """A decoder through vkmha's KV cache, token by token and in chunks,
    against torch.nn.MultiheadAttention's causal forward over the whole
    sequence; cross-attention reuse; the cache's operations."""

    def layer(self, backend):
        mha = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval()
        return mha, vkmha.from_torch(mha, context(backend))

    def test_decode_matches_causal_forward(self):
        for backend in BACKENDS:
            mha, attn = self.layer(backend)
            x = torch.randn(2, 13, 20)
            causal = torch.triu(torch.ones(13, 13, dtype=torch.bool), 1)
            with torch.no_grad():
                want = mha(x, x, x, attn_mask=causal, need_weights=False)[0].numpy()
            for chunks in ((5,) + (1,) * 8, (4, 4, 5)):
                cache = attn.layer.kv_cache(16, batch=2)
                got, t = [], 0
                for n in chunks:
                    xs = x[:, t:t + n].numpy()
                    got.append(attn.layer(xs, kv_cache=cache, causal=True))
                    t += n
                self.assertEqual(cache.lengths(), [13, 13])
                assert_close(self, np.concatenate(got, 1), want,
                             "%s, chunks %s" % (backend, chunks))

    def test_cross_attention_reuses_encoder(self):
        for backend in BACKENDS:
            _, attn = self.layer(backend)
            enc = np.random.rand(2, 7, 20).astype(np.float32)
            cache = attn.layer.kv_cache(7, batch=2, dtype="f16")
            for step in range(3):
                q = np.random.rand(2, 1, 20).astype(np.float32)
                want = attn.layer(q, enc, enc)
                got = attn.layer(q, enc if step == 0 else False, kv_cache=cache)
                assert_close(self, got, want, "%s step %d" % (backend, step), atol=3e-3)
            self.assertEqual(cache.lengths(), [7, 7])
            self.assertEqual(cache.keys().shape, (2, 4, 7, 5))

    def test_operations_and_errors(self):
        _, attn = self.layer("vulkan")
        cache = attn.layer.kv_cache(4, batch=2)
        x = np.random.rand(2, 3, 20).astype(np.float32)
        attn.layer(x, kv_cache=cache)
        cache.truncate(1, entry=1)
        self.assertEqual(cache.lengths(), [3, 1])
        self.assertTrue(np.all(cache.values()[1, :, 1:] == 0))
        cache.reorder([1, 1])
        self.assertEqual(cache.lengths(), [1, 1])
        with self.assertRaises(vkmha.InvalidArgumentError) as e:
            attn.layer(np.random.rand(2, 4, 20).astype(np.float32), kv_cache=cache)
        self.assertIn("capacity", str(e.exception))
        self.assertEqual(cache.lengths(), [1, 1])
        cache.set_length(2)
        self.assertEqual(cache.lengths(), [2, 2])
        cache.reset()
        self.assertEqual(cache.lengths(), [0, 0])
        self.assertEqual(cache.desc["bytes"], 2 * 4 * 4 * (5 + 5) * 4 + 8)

    def test_causal_offset_op(self):
        ctx = context("vulkan")
        q = np.random.rand(1, 2, 3, 8).astype(np.float32)
        k = np.random.rand(1, 2, 7, 8).astype(np.float32)
        got = ctx.attention(q, k, k, causal=True, causal_offset=4)
        # Query i sees keys j <= i + 4 (torch's causal_lower_right for 3 x 7).
        hidden = ~torch.ones(3, 7, dtype=torch.bool).tril(4)
        tq, tk = torch.from_numpy(q).double(), torch.from_numpy(k).double()
        s = (tq @ tk.transpose(-1, -2) / math.sqrt(8)).masked_fill(hidden, float("-inf"))
        want = torch.softmax(s, -1) @ tk
        assert_close(self, got, want, "bottom-right causal attention")


class TestShards(unittest.TestCase):
    """Head shards (heads=(h0, h1)) on from_torch, MHA and load_safetensors:
    the shards' outputs sum, with out_proj.bias, to the whole module's."""

    def test_shards_sum_to_the_layer(self):
        for backend in BACKENDS:
            mha = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval()
            x = torch.randn(2, 7, 20)
            with torch.no_grad():
                want = mha(x, x, x, need_weights=False)[0]
            parts = [vkmha.from_torch(mha, context(backend), heads=(h, h + 2))(
                x, x, x, need_weights=False)[0] for h in (0, 2)]
            got = parts[0] + parts[1] + mha.out_proj.bias.detach()
            assert_close(self, got, want, "%s: 2 shards" % backend)
            self.assertEqual(vkmha.from_torch(mha, context(backend), heads=(2, 4)).layer
                             .desc["n_head"], 2)

    def test_bad_range_names_the_field(self):
        mha = torch.nn.MultiheadAttention(20, 4, batch_first=True).eval()
        with self.assertRaises(vkmha.InvalidArgumentError) as e:
            vkmha.from_torch(mha, context("vulkan"), heads=(3, 2))
        self.assertIn("head_begin", str(e.exception))


if __name__ == "__main__":
    checks.run(__name__)
