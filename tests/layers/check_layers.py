#!/usr/bin/env python3
"""Checks that ebac's headers include one another in one direction only.

Every file under include/ebac (.hpp, .cuh, .ipp) belongs to a layer (LAYERS
below; docs/stages.md, "Layers", states the same rule in words). A file may
include:
  - a file of a lower layer;
  - a file of its own group (its own directory, or the same top-level group);
and nothing else: no include into a higher layer, none into a sibling group of
the same layer (predictor/, quantizer/ and encoder/ are siblings, so are host/
and cuda/), and no include cycle anywhere, within a group included.

Every #include "ebac/..." or <ebac/...> counts, whatever #if it sits under: a
conditional include still ties the two files together. A file that matches no
layer is an error too, so a new directory gets a place in the rule.

Usage: check_layers.py [INCLUDE_DIR]   (default: include/ next to tests/)
       check_layers.py --self-test      (checks the checker on a made-up tree)
Exit status 0 when the tree follows the rule; 1 with one line per problem.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

# (rank, group, patterns): lowest first. A pattern is a path under include/
# ending in '/' (a directory and everything below it) or a file. The most
# specific (longest) matching pattern decides a file's layer.
LAYERS = [
    (0, "base", ["ebac/config.hpp", "ebac/version.hpp", "ebac/status.hpp", "ebac/detail/"]),
    # Element types and the vocabulary every stage shares: dtypes, extents,
    # bounds, the stage ids and the concepts a stage satisfies.
    (1, "element", ["ebac/dtype.hpp", "ebac/dtype_dispatch.hpp", "ebac/extents.hpp", "ebac/error_bound.hpp",
                    "ebac/concepts.hpp", "ebac/predictor/predictor_id.hpp", "ebac/quantizer/quantizer_id.hpp",
                    "ebac/encoder/encoder_id.hpp"]),
    (2, "predictor", ["ebac/predictor/"]),
    (2, "quantizer", ["ebac/quantizer/"]),
    (2, "encoder", ["ebac/encoder/"]),
    (3, "format", ["ebac/format/"]),
    (4, "pipeline", ["ebac/pipeline.hpp", "ebac/compress_options.hpp", "ebac/element_code.hpp"]),
    # Above what they use, below the drivers (cuda/statistics.cuh gathers
    # error_model's channel moments on the device).
    (5, "error_model", ["ebac/error_model/"]),
    (6, "adapt", ["ebac/adapt/"]),
    (7, "host", ["ebac/host/"]),
    (7, "cuda", ["ebac/cuda/"]),
    (8, "umbrella", ["ebac/ebac.hpp"]),
    # A unit's whole body (#included by one .cpp of a program), not a header.
    (9, "unit", ["ebac/host/x86_64_v3_codec.ipp"]),
    # Opt-in, never included by the umbrella.
    (9, "interop", ["ebac/interop/"]),
]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"](ebac/[^>"]+)[>"]')
SUFFIXES = (".hpp", ".cuh", ".ipp")


def layer_of(path: str, layers=LAYERS):
    best = None
    for rank, group, patterns in layers:
        for p in patterns:
            hit = path.startswith(p) if p.endswith("/") else path == p
            if hit and (best is None or len(p) > best[0]):
                best = (len(p), rank, group)
    return None if best is None else (best[1], best[2])


def read_includes(root: Path):
    """{file: [(line, included)]} for every header under root/ebac."""
    graph = {}
    for f in sorted((root / "ebac").rglob("*")):
        if not f.is_file() or f.suffix not in SUFFIXES:
            continue
        rel = f.relative_to(root).as_posix()
        edges = []
        for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            m = INCLUDE_RE.match(line)
            if m:
                edges.append((n, m.group(1)))
        graph[rel] = edges
    return graph


def find_cycles(graph):
    """Each cycle once, as a list of files (first == last)."""
    cycles, state, stack = [], {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for _, v in graph.get(u, []):
            if v not in graph:
                continue
            if state.get(v) == 1:
                cycles.append(stack[stack.index(v):] + [v])
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(graph):
        if u not in state:
            visit(u)
    return cycles


def check(root: Path, layers=LAYERS):
    problems = []
    graph = read_includes(root)
    for f, edges in graph.items():
        lf = layer_of(f, layers)
        if lf is None:
            problems.append(f"{f}: in no layer (add its directory to LAYERS in tests/layers/check_layers.py "
                            f"and to docs/stages.md)")
            continue
        for line, inc in edges:
            if inc not in graph:
                problems.append(f"{f}:{line}: includes <{inc}>, which is not under {root}")
                continue
            li = layer_of(inc, layers)
            if li is None:
                continue  # reported as a file of its own
            if li[1] == lf[1] or li[0] < lf[0]:
                continue
            how = "a higher layer" if li[0] > lf[0] else "a sibling group of its layer"
            problems.append(f"{f}:{line}: includes <{inc}> against the layers: {lf[1]} (layer {lf[0]}) "
                            f"may not include {li[1]} (layer {li[0]}), {how}")
    for c in find_cycles(graph):
        problems.append("include cycle: " + " -> ".join(c))
    return problems


def self_test():
    """The checker must pass a clean tree and name each kind of fault."""
    def tree(files):
        d = Path(tempfile.mkdtemp(prefix="ebac_layers_"))
        for name, includes in files.items():
            p = d / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("".join(f"#include <{i}>\n" for i in includes))
        return d

    clean = {"ebac/config.hpp": [], "ebac/detail/bytes.hpp": ["ebac/config.hpp"],
             "ebac/quantizer/linear.hpp": ["ebac/detail/bytes.hpp"],
             "ebac/predictor/lorenzo.hpp": ["ebac/config.hpp"],
             "ebac/format/h.hpp": ["ebac/quantizer/linear.hpp", "ebac/predictor/lorenzo.hpp"]}
    cases = [
        ("clean tree", clean, None),
        ("lower includes higher", {**clean, "ebac/detail/bytes.hpp": ["ebac/format/h.hpp"]},
         "ebac/detail/bytes.hpp:1: includes <ebac/format/h.hpp> against the layers"),
        ("sibling stages", {**clean, "ebac/quantizer/linear.hpp": ["ebac/predictor/lorenzo.hpp"]},
         "sibling group"),
        ("cycle in a group", {**clean, "ebac/format/a.hpp": ["ebac/format/b.hpp"],
                              "ebac/format/b.hpp": ["ebac/format/a.hpp"]}, "include cycle: ebac/format/a.hpp"),
        ("unplaced file", {**clean, "ebac/nowhere/x.hpp": []}, "ebac/nowhere/x.hpp: in no layer"),
    ]
    failed = 0
    for name, files, expect in cases:
        problems = check(tree(files))
        ok = (not problems) if expect is None else any(expect in p for p in problems)
        if not ok:
            failed += 1
            print(f"self-test '{name}' failed: got {problems}")
    print(f"check_layers self-test: {len(cases) - failed}/{len(cases)} cases")
    return 1 if failed else 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[2] / "include"
    problems = check(root)
    for p in problems:
        print(p)
    n = len(read_includes(root))
    print(f"check_layers: {n} files under {root}/ebac, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
