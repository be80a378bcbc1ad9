#!/usr/bin/env python3
"""The command-line tools as a user meets them (TAP, one line per case).

    test_tools.py VKMHA_INFO VKMHA_DEMO VKMHA_OCCUPANCY BENCH...

--help describes every flag (exit 0); bad numbers (letters, a sign, zero
where 1 is the least, overflow), unknown options, missing values and bad
choices get a message naming the option and exit status 2 (tools/cli.h);
vkmha-info without a driver says what to install (exit 1); the demo prints
only its report unless --verbose asks for vkmha's debug lines, and never a
"VKMHA_SUCCESS" line.
"""
import os
import subprocess
import sys

cases = 0
failed = 0


def report(ok, what, detail=""):
    global cases, failed
    cases += 1
    failed += not ok
    print("%s %d - %s" % ("ok" if ok else "not ok", cases, what))
    if not ok and detail:
        for line in detail.splitlines()[:20]:
            print("# " + line)
    sys.stdout.flush()


def run(exe, args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=e, timeout=300, universal_newlines=True)
    return p.returncode, p.stdout, p.stderr


def name_of(exe):
    return os.path.basename(exe)


def check_help(exe, flags):
    rc, out, err = run(exe, ["--help"])
    missing = [f for f in flags + ["--help"] if f not in out]
    report(rc == 0 and out.startswith("usage: ") and not missing and err == "",
           "%s --help: exit 0, describes %s" % (name_of(exe), ", ".join(flags)),
           "rc %d, missing %s\n%s%s" % (rc, missing, out, err))


def check_bad(exe, args, words):
    rc, out, err = run(exe, args)
    prog = name_of(exe)
    ok = rc == 2 and err.startswith(prog + ": ") and all(w in err for w in words)
    report(ok, "%s %s: exit 2, \"%s\"" % (prog, " ".join(args),
                                          err.splitlines()[0] if err else ""),
           "rc %d, expected the words %s\nstdout: %s\nstderr: %s" % (rc, words, out, err))


def main():
    info, demo, occupancy, benches = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    check_help(info, ["--device", "--no-subgroup-ops", "--validation", "--verbose"])
    check_help(demo, ["--d-model", "--heads", "--kv-heads", "--len", "--len-k", "--batch",
                      "--mask", "--bias", "--post-norm", "--path", "--reps", "--validation",
                      "--device", "--verbose"])
    check_help(occupancy, ["--family", "--icd", "--csv", "--tap", "--validate"])
    for b in benches:
        check_help(b, ["--reps"])

    # Strict numbers, through the shared parser (tools/cli.h) of every tool.
    for args, words in [
            (["--len", "abc"], ["--len", '"abc"', "whole number"]),
            (["--len", "-5"], ["--len", '"-5"']),
            (["--len", "+5"], ["--len", '"+5"']),
            (["--len", " 5"], ["--len"]),
            (["--len", "5x"], ["--len", '"5x"']),
            (["--len", ""], ["--len"]),
            (["--batch", "0"], ["--batch", '"0"', "from 1"]),
            (["--len", "4294967296"], ["--len", "4294967296"]),
            (["--reps", "99999999999999999999999"], ["--reps"]),
            (["--heads", "3", "--d-model", "64"], ["--d-model", "--heads"]),
            (["--mask", "sometimes"], ["--mask", "causal"]),
            (["--path"], ["--path", "needs a value"]),
            (["--frobnicate"], ["unknown option --frobnicate"])]:
        check_bad(demo, args, words)
    check_bad(info, ["--device", "first"], ["--device", '"first"'])
    check_bad(info, ["--device"], ["--device", "needs a value"])
    check_bad(info, ["extra"], ["unknown option extra"])
    check_bad(occupancy, ["--family", "navi99"], ["--family", '"navi99"', "navi21"])
    check_bad(occupancy, ["--family"], ["--family", "needs a value"])
    for b in benches:
        check_bad(b, ["--reps", "-1"], ["--reps", '"-1"'])
        check_bad(b, ["--reps", "0"], ["--reps", '"0"'])
        check_bad(b, ["--csv"], ["--csv", "needs a value"])

    # No driver: the reason and what to do, on stderr.
    rc, out, err = run(info, [], {"VK_ICD_FILENAMES": "/nonexistent-vkmha/icd.json"})
    report(rc == 1 and "mesa-vulkan-drivers" in err and "VK_ICD_FILENAMES" in err,
           "vkmha-info without a driver: exit 1, says to install mesa-vulkan-drivers and "
           "names VK_ICD_FILENAMES", "rc %d\nstdout: %s\nstderr: %s" % (rc, out, err))

    # The context's largest tensor; a path disabled by VKMHA_DISABLE_PATHS.
    rc, out, err = run(info, [], {"VKMHA_DISABLE_PATHS": "sparse"})
    lines = out.splitlines()
    report(rc == 0 and any(l.split()[:3] == ["tensors", "up", "to"] and
                           "one allocation each" in l for l in lines) and
           any(l.split()[:2] == ["disabled", "paths"] and "sparse" in l.split() for l in lines),
           "vkmha-info with VKMHA_DISABLE_PATHS=sparse: tensors up to one allocation each, "
           "sparse among the disabled paths", "rc %d\nstdout: %s\nstderr: %s" % (rc, out, err))

    # The demo's output: the report only; debug lines only with --verbose.
    small = ["--d-model", "32", "--heads", "4", "--len", "9", "--batch", "2", "--reps", "1"]
    rc, out, err = run(demo, small)
    report(rc == 0 and "PASS" in out and err == "" and "VKMHA_SUCCESS" not in out + err,
           "vkmha-demo: PASS, nothing on stderr, no VKMHA_SUCCESS line",
           "rc %d\nstdout: %s\nstderr: %s" % (rc, out, err))
    rc, out, err = run(demo, small + ["--verbose"])
    debug = [l for l in err.splitlines() if l.startswith("vkmha: debug: ")]
    report(rc == 0 and "PASS" in out and any("attention" in l for l in debug) and
           "VKMHA_SUCCESS" not in out + err,
           "vkmha-demo --verbose: each forward's plan as 'vkmha: debug:' lines (%d)" % len(debug),
           "rc %d\nstdout: %s\nstderr: %s" % (rc, out, err))
    rc, out, err = run(demo, small + ["--device", "99"])
    report(rc == 1 and "device_index" in err and "error" in err,
           "vkmha-demo --device 99: exit 1, the reason on stderr",
           "rc %d\nstdout: %s\nstderr: %s" % (rc, out, err))

    print("1..%d" % cases)
    print("# %d passed, %d failed" % (cases - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
