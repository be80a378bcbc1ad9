"""What the Python tests share: TAP output (unittest: one line per test
method, a failure's traceback as comments, a skip counted as a failure: no
test skips; run(module) runs every TestCase of a module and exits 0 only if
all passed) and assert_close, the element-by-element comparison."""
import sys
import traceback
import unittest

# numpy and torch are required: without them a test file fails (never
# skips) with a message naming the packages.
try:
    import numpy as np
    import torch
except ImportError as e:  # pragma: no cover - the message is the point
    print("1..1")
    print("not ok 1 - cannot import numpy and torch (%s): install python3-numpy and "
          "python3-torch (tools/install-deps) for %s" % (e, sys.executable))
    sys.exit(1)

ATOL, RTOL = 2e-5, 1e-4


def assert_close(tc, got, want, what, atol=ATOL, rtol=RTOL, rows=None):
    """Element by element; NaN / Inf must match. rows: a boolean mask of the
    elements to compare (the others are not defined by the oracle)."""
    got = np.asarray(got.detach() if torch.is_tensor(got) else got, dtype=np.float64)
    want = np.asarray(want.detach() if torch.is_tensor(want) else want, dtype=np.float64)
    tc.assertEqual(got.shape, want.shape, "%s: shape" % what)
    if rows is not None:
        got, want = got[rows], want[rows]
    fin = np.isfinite(want)
    tc.assertTrue(np.array_equal(fin, np.isfinite(got)),
                  "%s: non-finite elements differ (%d vs %d)" % (what, (~np.isfinite(got)).sum(),
                                                                  (~fin).sum()))
    err = np.abs(got[fin] - want[fin])
    bound = atol + rtol * np.abs(want[fin])
    if err.size and (err > bound).any():
        i = int(np.argmax(err - bound))
        tc.fail("%s: element %d: %r vs %r, |diff| %.3g > %.3g (max |diff| %.3g over %d)"
                % (what, i, got[fin][i], want[fin][i], err[i], bound[i], err.max(), err.size))


def layer_weights(g, E, H, HKV, DK, DV, scale, bias_scale=None):
    """A layer's projection weights (torch.nn.Linear layout, float32) drawn
    from numpy Generator g: w_q [H*DK][E], w_k [HKV*DK][E], w_v [HKV*DV][E],
    w_o [E][H*DV] times scale, and with bias_scale their biases, as MHA's
    keyword arguments."""
    f = np.float32
    shapes = {"w_q": (H * DK, E), "w_k": (HKV * DK, E), "w_v": (HKV * DV, E),
              "w_o": (E, H * DV)}
    if bias_scale is not None:
        shapes.update({"b_q": (H * DK,), "b_k": (HKV * DK,), "b_v": (HKV * DV,), "b_o": (E,)})
    return {k: g.standard_normal(s).astype(f) * f(bias_scale if k[0] == "b" else scale)
            for k, s in shapes.items()}


_CONTEXTS = {}


def context(backend="vulkan"):
    """One context per backend for the whole run of a test file (validation
    on for Vulkan: TestZValidation checks it stayed silent)."""
    import vkmha
    if backend not in _CONTEXTS:
        _CONTEXTS[backend] = vkmha.Context(backend, validation=backend == "vulkan")
    return _CONTEXTS[backend]


class TestZValidation(unittest.TestCase):
    """Last (by name): the validation layer sent nothing to the file's
    Vulkan context over the whole run."""

    def test_validation_layer_silent(self):
        info = context("vulkan").info()
        self.assertTrue(info["validation_enabled"])
        self.assertEqual(info["validation_messages"], 0)


class TapResult(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.n = 0

    def report(self, test, ok, detail=None):
        self.n += 1
        print("%s %d - %s" % ("ok" if ok else "not ok", self.n, test.id()))
        if detail:
            for line in detail.rstrip().splitlines():
                print("# " + line)
        sys.stdout.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self.report(test, True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.report(test, False, "".join(traceback.format_exception(*err)))

    def addError(self, test, err):
        super().addError(test, err)
        self.report(test, False, "".join(traceback.format_exception(*err)))

    def addSkip(self, test, reason):  # no test skips; treat one as a failure
        super().addSkip(test, reason)
        self.report(test, False, "skipped: " + reason)


def run(module_name):
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[module_name])
    result = TapResult()
    suite.run(result)
    print("1..%d" % result.n)
    sys.exit(0 if result.wasSuccessful() and not result.skipped else 1)
