"""The Python tests against the package as a user installs it: builds the
wheel from the source tree (python3 -m build --wheel --no-isolation, the
route pyproject.toml documents; meson-python), checks what it holds and
links, installs it into a fresh `python3 -m venv --system-site-packages`
(numpy and torch come from the system), runs each test file there (not on
the build tree: PYTHONPATH unset, run from outside the source tree), then
uninstalls it and checks that nothing of it is left.

    installed.py --source DIR --work DIR --version X.Y.Z TEST.py...

Prints TAP: a case per step, then each test file's cases prefixed with its
name. Run by meson (suite python); --work is emptied first."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import zipfile

ap = argparse.ArgumentParser()
ap.add_argument("--source", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--version", required=True)
ap.add_argument("tests", nargs="+")
args = ap.parse_args()

n = 0
failed = False


def case(ok, what, detail=""):
    global n, failed
    n += 1
    failed |= not ok
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
    for line in (detail.rstrip().splitlines() if not ok else []):
        print("# " + line)
    sys.stdout.flush()
    return ok


def finish():
    print("1..%d" % n)
    sys.exit(1 if failed else 0)


def run(cmd, log, **kw):
    """cmd's exit status; its output in log (the last lines are printed
    with a failure)."""
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, **kw)
    return r.returncode


def tail(log, lines=30):
    with open(log, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


work = os.path.abspath(args.work)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
dist, venv = os.path.join(work, "dist"), os.path.join(work, "venv")
env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

# 1. The wheel, built as a user builds it.
log = os.path.join(work, "build.log")
rc = run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist,
          args.source], log, cwd=args.source, env=env)
wheels = [w for w in os.listdir(dist) if w.endswith(".whl")] if rc == 0 else []
if not case(rc == 0 and len(wheels) == 1,
            "python3 -m build --wheel --no-isolation makes one wheel",
            tail(log) + "\n(needs python3-build, python3-mesonpy, patchelf: tools/install-deps)"):
    finish()
wheel = os.path.join(dist, wheels[0])
case(wheels[0].startswith("vkmha-%s-" % args.version), "the wheel's version is the library's %s"
     % args.version, wheels[0])

with zipfile.ZipFile(wheel) as z:
    names = sorted(z.namelist())
    info = "vkmha-%s.dist-info/" % args.version
    meta = z.read(info + "METADATA").decode() if info + "METADATA" in names else ""
data = "vkmha-%s.data/scripts/" % args.version
want = {"vkmha/__init__.py", "vkmha/nn.py", "vkmha/functional.py",
        data + "vkmha-info", data + "vkmha-demo",
        info + "METADATA", info + "WHEEL", info + "RECORD"}
ext = [x for x in names if re.fullmatch(r"vkmha/_vkmha\..*\.so", x)]
case(len(ext) == 1 and set(names) - set(ext) == want,
     "the wheel holds the package, its extension and the tools, nothing else",
     "holds: %s\nwanted: %s + vkmha/_vkmha.*.so" % (names, sorted(want)))
fields = {}
for line in meta.splitlines():
    k, _, v = line.partition(": ")
    fields.setdefault(k, []).append(v)
case(fields.get("Name") == ["vkmha"] and fields.get("Version") == [args.version]
     and fields.get("License") == ["MIT"] and "numpy" in fields.get("Requires-Dist", [])
     and "torch" in fields.get("Provides-Extra", [])
     and any(d.startswith("torch") and "extra" in d for d in fields.get("Requires-Dist", [])),
     "METADATA: name, version, license, numpy required, torch optional",
     "\n".join(line for line in meta.splitlines()[:20]))

# The library is inside the extension: it needs neither libvkmha nor the
# Vulkan loader (opened at run time).
with zipfile.ZipFile(wheel) as z:
    z.extract(ext[0], os.path.join(work, "unpacked"))
dyn = subprocess.run(["readelf", "-d", os.path.join(work, "unpacked", ext[0])],
                     capture_output=True, text=True)
needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn.stdout)
case(dyn.returncode == 0 and not any("vkmha" in x or "vulkan" in x for x in needed),
     "the extension links neither libvkmha nor libvulkan", "NEEDED: %s %s" % (needed, dyn.stderr))

# 2. A fresh virtual environment, the wheel installed into it.
log = os.path.join(work, "venv.log")
rc = run([sys.executable, "-m", "venv", "--system-site-packages", venv], log, env=env)
py = os.path.join(venv, "bin", "python")
if rc == 0:
    rc = run([py, "-m", "pip", "install", "--no-index", wheel], log, env=env)
if not case(rc == 0, "pip install of the wheel into a fresh venv", tail(log)):
    finish()
site = subprocess.run([py, "-c", "import vkmha, sys; print(vkmha.__file__)"],
                      capture_output=True, text=True, cwd=work, env=env)
case(site.returncode == 0 and site.stdout.strip().startswith(venv + os.sep),
     "import vkmha finds the installed copy", site.stdout + site.stderr)
tool = subprocess.run([os.path.join(venv, "bin", "vkmha-info")], capture_output=True,
                      text=True, env=env)
case(tool.returncode == 0 and "vkmha %s" % args.version in tool.stdout,
     "the installed vkmha-info runs", tool.stdout[-2000:] + tool.stderr[-2000:])

# 3. The tests, on the installed package.
for test in args.tests:
    name = os.path.splitext(os.path.basename(test))[0]
    r = subprocess.run([py, os.path.abspath(test)], capture_output=True, text=True, cwd=work,
                       env=env)
    cases = 0
    for line in r.stdout.splitlines():
        m = re.match(r"(not ok|ok) \d+ - (.*)", line)
        if m:
            cases += 1
            case(m.group(1) == "ok", "%s: %s" % (name, m.group(2)))
        elif line.startswith("#"):
            print(line)
    plan = re.search(r"^1\.\.(\d+)$", r.stdout, re.M)
    case(r.returncode == 0 and plan is not None and int(plan.group(1)) == cases and cases > 0,
         "%s ran to its end (exit %d, %d cases)" % (name, r.returncode, cases),
         r.stderr[-3000:])

# 4. Uninstall leaves nothing of vkmha in the venv.
log = os.path.join(work, "uninstall.log")
rc = run([py, "-m", "pip", "uninstall", "-y", "vkmha"], log, env=env)
left = [os.path.join(d, f) for d, dirs, files in os.walk(venv) for f in files + dirs
        if "vkmha" in f]
case(rc == 0 and not left, "pip uninstall leaves nothing behind", tail(log) + "\n".join(left))
finish()
