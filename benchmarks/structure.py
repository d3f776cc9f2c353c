"""The structural measures of issue 25, counted the same way each time.

    python benchmarks/structure.py            # fastcal/ and tracking/ of this checkout

- device branches: ``if`` lines that ask where data lives (``is_device_array``,
  ``device ==``, ``.device ==``) outside the gate (``fastcal/inputs``) and the
  backends (``fastcal/backends``);
- function-local imports of the package's own modules (fastcal and tracking);
- functions of 60 or more code lines (docstrings, comments and blank lines
  not counted) in fastcal/, and in tracking/;
- the near-copy pairs are counted by the ``duplicates`` tool (run it in fastcal/, and in tracking/).
"""

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEVICE_IF = re.compile(r"^\s*(if|elif)\b.*(is_device_array|device ==|device is|\.device ==)")
LOCAL_IMPORT = re.compile(r"^\s+(from fastcal|import fastcal|from \.|from tracking)")


def files(*dirs):
    for d in dirs:
        yield from sorted((ROOT / d).rglob("*.py"))


def device_branches():
    out = []
    for f in files("fastcal"):
        rel = f.relative_to(ROOT).as_posix()
        if rel.startswith(("fastcal/inputs/", "fastcal/backends/")):
            continue
        out += [f"{rel}:{i}" for i, line in enumerate(f.read_text().splitlines(), 1)
                if DEVICE_IF.match(line)]
    return out


def local_imports():
    return [f"{f.relative_to(ROOT)}:{i}" for f in files("fastcal", "tracking")
            for i, line in enumerate(f.read_text().splitlines(), 1) if LOCAL_IMPORT.match(line)]


def long_functions(package="fastcal", limit=60):
    out = []
    for f in files(package):
        text = f.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            skip = set()
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(
                    getattr(body[0], "value", None), ast.Constant) and isinstance(
                    body[0].value.value, str):
                skip = set(range(body[0].lineno, body[0].end_lineno + 1))
            code = [i for i in range(node.lineno, node.end_lineno + 1) if i not in skip
                    and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#")]
            if len(code) >= limit:
                out.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name} ({len(code)})")
    return out


def main():
    for name, found in (("device branches outside the gate and backends", device_branches()),
                        ("function-local imports of own modules", local_imports()),
                        ("functions of 60+ code lines in fastcal/", long_functions()),
                        ("functions of 60+ code lines in tracking/", long_functions("tracking"))):
        print(f"{name}: {len(found)}")
        if "-v" in sys.argv:
            for x in found:
                print("   ", x)


if __name__ == "__main__":
    main()
