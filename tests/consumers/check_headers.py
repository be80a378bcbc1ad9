#!/usr/bin/env python3
"""The public headers keep `desc = {0}` valid and warning-free in C++ (TAP).

    check_headers.py HEADER...

For every struct of every header: each field is declared with VKMHA_ZERO
(a default member initializer in C++, so `{0}` leaves no field without an
initializer under -Wextra), and no field has an enum type (an enumerator or
0 must assign to it in C++ too: enum-valued fields are uint32_t). The C++
consumer (cxx_consumer.cpp) compiles the idiom for the structs it knows;
this catches a struct or field added later.
"""
import re
import sys

cases = failed = 0


def report(ok, what, details):
    global cases, failed
    cases += 1
    failed += not ok
    print("%s %d - %s" % ("ok" if ok else "not ok", cases, what))
    for d in details[:20]:
        print("# " + d)


def declarators(body):
    """The declarators of a struct body, comments removed, split at top-level commas."""
    for decl in body.split(";"):
        depth, cur = 0, ""
        for ch in decl:
            depth += ch in "([{"
            depth -= ch in ")]}"
            if ch == "," and depth == 0:
                yield decl, cur.strip()
                cur = ""
            else:
                cur += ch
        if cur.strip():
            yield decl, cur.strip()


def main():
    for path in sys.argv[1:]:
        text = re.sub(r"/\*.*?\*/", "", open(path, encoding="utf-8").read(), flags=re.S)
        enums = set(re.findall(r"\}\s*(vkmha_\w+)\s*;", text)) & set(
            re.findall(r"typedef enum (vkmha_\w+)", text))
        structs = re.findall(r"typedef struct (\w+) \{(.*?)\} \1;", text, re.S)
        missing, enum_fields = [], []
        for name, body in structs:
            for decl, d in declarators(body):
                if not d.endswith("VKMHA_ZERO"):
                    missing.append("%s: %s" % (name, d))
                first = decl.strip().split()[0:2]
                if any(t in enums for t in first):
                    enum_fields.append("%s: %s" % (name, decl.strip()))
        short = path.split("/")[-1]
        report(structs and not missing,
               "%s: every field of its %d structs has VKMHA_ZERO" % (short, len(structs)), missing)
        report(not enum_fields, "%s: no struct field has an enum type" % short, enum_fields)
    print("1..%d" % cases)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
