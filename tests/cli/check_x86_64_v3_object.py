#!/usr/bin/env python3
"""Checks the CLI's x86-64-v3 unit (apps/cli/x86_64_v3_codec.cpp) for what
would make the program fault on a CPU without x86-64-v3:

1. ebac/host/x86_64_v3_begin.hpp includes every standard header that ebac's
   host headers include (a header first included inside the region would have
   its inline functions compiled for AVX2 under their usual names);
2. in the compiled object, every function that the linker may share with
   other units (global or weak symbols) and that holds x86-64-v3 instructions
   (VEX-encoded AVX/AVX2/FMA/F16C, BMI1/2, LZCNT, POPCNT, MOVBE) lives in
   ebac's tagged namespace (v_..._abi_x86_64_v3), and no static initializer
   (run at start-up on any CPU) holds any;
3. the object does hold such code: the region compiled for x86-64-v3 at all.

usage: check_x86_64_v3_object.py --object X.o --include-dir include [--objdump objdump]
"""
import argparse
import pathlib
import re
import subprocess
import sys

TAG = "abi_x86_64_v3"
# Mnemonics of instructions x86-64 (v1) lacks and x86-64-v3 has, besides every
# VEX-encoded one (all of which start with 'v').
NON_VEX_V3 = {"andn", "bextr", "blsi", "blsmsk", "blsr", "bzhi", "lzcnt", "tzcnt", "mulx", "pdep", "pext", "rorx", "sarx",
              "shlx", "shrx", "popcnt", "movbe"}


def standard_headers(include_dir: pathlib.Path):
    """<name> of every #include <...> in ebac's host headers that is not ebac's own."""
    found = {}
    for h in sorted(include_dir.glob("ebac/**/*.hpp")):
        rel = h.relative_to(include_dir).as_posix()
        if rel.startswith("ebac/cuda/") or rel.startswith("ebac/host/x86_64_v3_"):
            continue
        for line in h.read_text().splitlines():
            m = re.match(r"\s*#\s*include\s*<([^>]+)>", line)
            if m and not m.group(1).startswith(("ebac/", "cuda", "thrust/", "cub/")):
                found.setdefault(m.group(1), rel)
    return found


def begin_header_includes(begin: pathlib.Path):
    """Headers the begin header includes before it opens the region."""
    names = set()
    for line in begin.read_text().splitlines():
        if line.startswith("#pragma GCC push_options"):
            return names
        m = re.match(r"\s*#\s*include\s*<([^>]+)>", line)
        if m:
            names.add(m.group(1))
    raise SystemExit(f"{begin}: no '#pragma GCC push_options' line")


def functions(objdump: str, obj: str):
    """{symbol: (binding, set of mnemonics)} for every function in the object."""
    binding = {}
    for line in subprocess.run([objdump, "-t", obj], check=True, capture_output=True, text=True).stdout.splitlines():
        # e.g. "0000000000000000  w    F .text._ZN...  0000000000000123 _ZN..."
        m = re.match(r"^[0-9a-f]+ (.{7}) (\S+)\s+[0-9a-f]+\s+(?:\.hidden\s+)?(\S+)$", line)
        if not m or "F" not in m.group(1):
            continue
        flags = m.group(1)
        binding[m.group(3)] = "local" if flags[0] == "l" else "weak" if flags[1] == "w" else "global"
    insns = {}
    current = None
    dis = subprocess.run([objdump, "-d", "--no-show-raw-insn", obj], check=True, capture_output=True, text=True).stdout
    for line in dis.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            current = m.group(1)
            insns.setdefault(current, set())
            continue
        m = re.match(r"^\s+[0-9a-f]+:\s+(?:\{\w+\}\s+)?([a-z][a-z0-9.]*)", line)
        if m and current is not None:
            insns[current].add(m.group(1))
    return {name: (binding.get(name, "local"), ops) for name, ops in insns.items()}


def v3_only(ops):
    return sorted(op for op in ops if op.startswith("v") or op in NON_VEX_V3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--object", required=True)
    ap.add_argument("--include-dir", required=True, type=pathlib.Path)
    ap.add_argument("--objdump", default="objdump")
    a = ap.parse_args()
    errors = []

    wanted = standard_headers(a.include_dir)
    have = begin_header_includes(a.include_dir / "ebac/host/x86_64_v3_begin.hpp")
    for name, where in sorted(wanted.items()):
        if name not in have:
            errors.append(f"ebac/host/x86_64_v3_begin.hpp does not include <{name}> before the region (included by {where})")

    funcs = functions(a.objdump, a.object)
    with_v3 = {name: v3_only(ops) for name, (bind, ops) in funcs.items() if v3_only(ops)}
    shared = [n for n, (bind, _) in funcs.items() if bind != "local"]
    for name, ops in sorted(with_v3.items()):
        bind = funcs[name][0]
        if name.startswith("_GLOBAL__sub_I"):
            errors.append(f"static initializer {name} holds x86-64-v3 instructions ({', '.join(ops[:5])})")
        elif bind != "local" and TAG not in name:
            errors.append(f"{bind} function {name} holds x86-64-v3 instructions ({', '.join(ops[:5])}) outside ebac's {TAG} namespace")
    if not with_v3:
        errors.append(f"{a.object}: no function holds x86-64-v3 instructions: the region was not compiled for x86-64-v3")

    print(f"{len(wanted)} standard headers in ebac's host headers, {len(have)} included before the region; "
          f"{len(funcs)} functions in the object, {len(shared)} global or weak, {len(with_v3)} with x86-64-v3 instructions")
    for e in errors:
        print("FAIL:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
