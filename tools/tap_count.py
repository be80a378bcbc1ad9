"""Counting a test's TAP output, shared by tools/tap-summary (Meson's logs)
and tools/run-built-tests (tests it runs itself)."""
import re


def count(out, exited_ok):
    """(passed, failed, validation messages, contexts reported) of one test's
    output. A test that did not exit cleanly without a "not ok" line (a crash,
    a bail-out), or that reported fewer cases than its "1..N" plan, adds
    failed cases, so nothing is silently lost. The validation figures are the
    sum and count of the "validation layer messages: N" lines the Vulkan
    tests print (one per context they checked)."""
    ok = len(re.findall(r"^ok \d+", out, re.M))
    not_ok = len(re.findall(r"^not ok \d+", out, re.M))
    plan = re.search(r"^1\.\.(\d+)", out, re.M)
    missing = int(plan.group(1)) - ok - not_ok if plan else 0
    if not exited_ok and not_ok == 0:
        missing = max(missing, 1)
    reports = [int(n) for n in re.findall(r"^#.*validation layer messages: (\d+)", out, re.M)]
    return ok, not_ok + max(missing, 0), sum(reports), len(reports)
