#!/usr/bin/env python3
"""The files of src/ call each other without a cycle.

    check_layers.py SRC_DIR

Reads every SRC_DIR/*.c (comments and string literals removed), takes the
functions each file defines with external linkage, and draws an edge from
file A to file B wherever A names a function B defines (a call, or its
address in a table). The graph must have no cycle: then every file has a
layer (one above the highest file it calls) and a change can be read from
the bottom up. Prints TAP: one case for the cycles (each cycle with the
functions behind its edges), one for the layers found (each file's layer,
as diagnostics). Exit status 1 if there is a cycle.

The Vulkan backend's private headers are stated in HEADERS, bottom-up, each
including the one before. Two more cases hold them to the files: every
src/vk_*.c includes exactly one of them, the one that declares its own
functions (so it sees no declaration above its group, and a call up does
not compile); and no file calls a file whose header is above its own.
"""
import os
import re
import sys


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"'(\\.|[^'\\])'", "' '", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


# A definition at the start of a line, not static: type, name, parameters, body.
DEFINITION = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;{)]*\)\s*\{",
                        re.M)
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def graph(src):
    files = sorted(f for f in os.listdir(src) if f.endswith(".c"))
    texts = {f: strip(open(os.path.join(src, f), encoding="utf-8").read()) for f in files}
    defined = {}
    for f, t in texts.items():
        for m in DEFINITION.finditer(t):
            defined.setdefault(m.group(1), f)
    edges = {f: {} for f in files}
    for f, t in texts.items():
        for name in set(IDENT.findall(t)):
            g = defined.get(name)
            if g and g != f:
                edges[f].setdefault(g, []).append(name)
    return files, edges


def cycles(files, edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for f in files:
        if f not in index:
            visit(f)
    return out


def layers(files, edges):
    """Each file's layer: 0 for a file that calls no other, else one above
    the highest it calls (the graph is acyclic)."""
    layer = {}

    def of(f):
        if f not in layer:
            layer[f] = 1 + max((of(g) for g in edges[f]), default=-1)
        return layer[f]

    for f in files:
        of(f)
    return layer


# The Vulkan backend's private headers, bottom-up (src/vk_base.h says what
# each group holds).
HEADERS = ["vk_base.h", "vk_resources.h", "vk_exec.h", "vk_ops.h", "vk_internal.h"]
DECLARATION = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\(")
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def header_cases(src, files, edges, first):
    """TAP cases `first` and `first` + 1 (see the module's docstring)."""
    declared = {}
    for h in HEADERS:
        text = strip(open(os.path.join(src, h), encoding="utf-8").read())
        for name in DECLARATION.findall(text):
            declared.setdefault(name, h)
    own, wrong = {}, []
    for f in files:
        if not f.startswith("vk_"):
            continue
        text = open(os.path.join(src, f), encoding="utf-8").read()
        inc = [h for h in INCLUDE.findall(text) if h in HEADERS]
        defs = {m.group(1) for m in DEFINITION.finditer(strip(text))}
        homes = sorted({declared[d] for d in defs if d in declared})
        if len(inc) != 1 or len(homes) > 1 or (homes and homes[0] != inc[0]):
            wrong.append("# %s includes %s; its functions are declared in %s"
                         % (f, ", ".join(inc) or "none", ", ".join(homes) or "none"))
        if len(inc) == 1:
            own[f] = inc[0]
    for line in wrong:
        print(line)
    print("%s %d - each Vulkan file includes the header that declares its functions"
          % ("not ok" if wrong else "ok", first))
    up = []
    for a in sorted(own):
        for b in sorted(edges[a]):
            if b in own and HEADERS.index(own[b]) > HEADERS.index(own[a]):
                up.append("# %s (%s) calls up into %s (%s): %s"
                          % (a, own[a], b, own[b], ", ".join(sorted(edges[a][b]))))
    for line in up:
        print(line)
    print("%s %d - no Vulkan file calls a file whose header is above its own"
          % ("not ok" if up else "ok", first + 1))
    return not wrong and not up


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    files, edges = graph(sys.argv[1])
    found = cycles(files, edges)
    for comp in found:
        print("# cycle between " + ", ".join(comp) + ":")
        for a in comp:
            for b in sorted(edges[a]):
                if b in comp:
                    print("#   %s -> %s (%s)" % (a, b, ", ".join(sorted(edges[a][b]))))
    print("%s 1 - no cycle between the %d files of src/ (%d calls between files)"
          % ("not ok" if found else "ok", len(files), sum(len(e) for e in edges.values())))
    if not found:
        layer = layers(files, edges)
        for n in range(max(layer.values()) + 1):
            print("# layer %d: %s" % (n, " ".join(f for f in files if layer[f] == n)))
    print("%s 2 - every file has a layer" % ("not ok" if found else "ok"))
    headers_ok = header_cases(sys.argv[1], files, edges, 3)
    print("1..4")
    return 1 if found or not headers_ok else 0


if __name__ == "__main__":
    sys.exit(main())
