#!/usr/bin/env python3
"""Makes a static libvkmha.a whose only global symbols are the public API.

    localize_static.py OBJCOPY AR INPUT.a OUTPUT.a CC...

An archive keeps every object's global symbols, and visibility means nothing
to a static link: vkmha's internal functions (vk_create, vk_fail,
ref_matmul, ...) would clash with a program's own functions of the same
names. So the library's objects (INPUT.a, compiled with hidden visibility,
only the VKMHA_API functions default) are linked into one relocatable object
(CC -r), whose hidden symbols objcopy --localize-hidden makes local; the
archive holds that one object. volk's symbols are renamed as well, in every
build (src/volk_rename.py), so they stay private also where this step does
not run (non-ELF platforms, no objcopy: meson.build).
"""
import os
import subprocess
import sys


def main():
    objcopy, ar, inp, out = sys.argv[1:5]
    cc = sys.argv[5:]
    obj = out + ".o"
    subprocess.check_call(cc + ["-r", "-nostdlib", "-o", obj, "-Wl,--whole-archive", inp,
                                "-Wl,--no-whole-archive"])
    subprocess.check_call([objcopy, "--localize-hidden", obj])
    if os.path.exists(out):
        os.remove(out)
    subprocess.check_call([ar, "rcs", out, obj])
    os.remove(obj)


if __name__ == "__main__":
    main()
