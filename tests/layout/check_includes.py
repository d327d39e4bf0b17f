#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""No include cycle between the modules of the shim outside preload/core/.

    check_includes.py SRC               check the tree at SRC
    check_includes.py --self-test       show that a cycle is caught

A module is a source file without its extension (fork.c and fork.h are the
module preload/base/fork). Module A depends on module B when a file of A
includes a header of B, found by its name as the build finds it: in A's own
folder first, else anywhere in the layer folders. A cycle is a set of
modules that depend on each other, found as the strongly connected
components of that graph. preload/core keeps its registry and segment, and
its memory sampler, each with a private header that both halves share
(registry_impl.h, memsampler_impl.h): cycles wholly inside preload/core are
allowed; any other fails.
"""
import os
import re
import sys
import tempfile

CODE_DIRS = ("preload", "hooks", "exporter")
ALLOWED = "preload/core/"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def modules(root):
    """{relative path of each .c/.h: its module}"""
    files = {}
    for d in CODE_DIRS:
        for dirpath, dirs, names in os.walk(os.path.join(root, d)):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            for n in names:
                if n.endswith((".c", ".h")):
                    rel = os.path.relpath(os.path.join(dirpath, n), root)
                    files[rel] = os.path.splitext(rel)[0]
    return files


def graph(root):
    files = modules(root)
    by_name = {}
    for rel in files:
        by_name.setdefault(os.path.basename(rel), []).append(rel)
    edges = {m: set() for m in files.values()}
    for rel, mod in files.items():
        text = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read()
        for inc in INCLUDE.findall(text):
            found = by_name.get(os.path.basename(inc), [])
            here = [f for f in found if os.path.dirname(f) == os.path.dirname(rel)]
            target = (here or sorted(found) or [None])[0]
            if target and files[target] != mod:
                edges[mod].add(files[target])
    return edges


def cycles(edges):
    """The strongly connected components of more than one module (Tarjan's
    algorithm, without recursion)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def check(root):
    errors = []
    for comp in cycles(graph(root)):
        if not all(m.startswith(ALLOWED) for m in comp):
            errors.append("include cycle: " + " -> ".join(comp))
    return errors


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(rel, text):
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").write(text)
        write("hooks/a.c", '#include "a.h"\n#include "b.h"\n')
        write("hooks/a.h", "\n")
        write("preload/follow/b.h", "\n")
        write("preload/follow/b.c", '#include "b.h"\n')
        if check(root):
            print("self-test: a tree without a cycle fails")
            return 1
        write("preload/follow/b.h", '#include "a.h"\n')
        caught = check(root)
        write("preload/follow/b.h", "\n")
        write("preload/core/r.h", '#include "r_impl.h"\n')
        write("preload/core/r_impl.h", '#include "r.h"\n')
        allowed = check(root)
    print(f"{'caught' if caught else 'MISSED'}: a cycle between hooks/ and preload/follow/")
    print(f"{'allowed' if not allowed else 'WRONGLY FAILED'}: a cycle inside preload/core/")
    return 0 if caught and not allowed else 1


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    errors = check(os.path.abspath(argv[1]))
    for e in errors:
        print(e)
    print(f"include cycles outside {ALLOWED}: {len(errors)}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
