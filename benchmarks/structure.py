"""The structural measures of the code, counted the same way each time.

    python benchmarks/structure.py            # fastcal/ and tracking/ of this checkout
    python benchmarks/structure.py -v         # and where each one is
    python benchmarks/structure.py PATH       # another checkout (e.g. an earlier commit)
    python benchmarks/structure.py --check    # exit 1 when a measure is past its goal (make check)

Layers and seams:

- device branches: ``if`` lines that ask where data lives (``is_device_array``,
  ``device ==``, ``.device ==``) outside the gate (``fastcal/inputs``) and the
  backends (``fastcal/backends``);
- function-local imports of the package's own modules (fastcal and tracking); the
  goal went from 10 to 11 with the one that loads Numba when a kernel first needs it
  (``fastcal._kernels._lazy.materialize``: a report run by the ahead-of-time module
  never imports Numba, so that import cannot sit at the top of a module);
- functions of 60 or more code lines (docstrings, comments and blank lines
  not counted) in fastcal/, and in tracking/;
- the near-copy pairs are counted by the ``duplicates`` tool (run it in fastcal/, and in tracking/).

Values across boundaries (a backend takes a batch and a spec and returns named
arrays; the gate only asks where data lives):

- accumulator attributes read by the backends: the distinct ``acc.<name>``
  reads (and private method calls, named with ``()``) in ``fastcal/backends``
  (goal 0);
- GPU kernel launches and CUDA loads outside ``fastcal/backends/cuda.py`` and
  ``fastcal/_kernels``: calls of a kernel with a launch configuration
  (``kernel[blocks, threads](...)``), ``kernels("_cuda")``-style loads of the
  CUDA kernel modules, imports of ``numba.cuda`` and ``import_module`` of
  ``fastcal._kernels`` (goal 0);
- device questions in the gate: code lines of ``fastcal/inputs`` that ask
  where data lives (``is_device_array(``, ``device ==`` / ``!=`` / ``is``,
  ``on_gpu``), docstrings and comments not counted (goal at most 6);
- state read or returned by position: integer or slice subscripts of what a
  backend's ``fill*`` function returned (or of a ``filled`` / ``state``
  argument), tuple unpacking of such a call, and tuples returned by the
  ``fill*`` functions of ``fastcal/backends`` (goal 0: named arrays).
"""

import ast
import io
import pathlib
import re
import sys
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEVICE_IF = re.compile(r"^\s*(if|elif)\b.*(is_device_array|device ==|device is|\.device ==)")
LOCAL_IMPORT = re.compile(r"^\s+(from fastcal|import fastcal|from \.|from tracking)")
DEVICE_QUESTION = re.compile(r"\bis_device_array\(|\bdevice\s*(==|!=|is\b)|\bon_gpu\b")
CUDA_MODULE = re.compile(r"^_?cuda")  # fastcal._kernels._cuda, cuda_binary, ...


def files(*dirs, root=None):
    for d in dirs:
        yield from sorted(((root or ROOT) / d).rglob("*.py"))


def _rel(f, root):
    return f.relative_to(root).as_posix()


def device_branches(root=ROOT):
    out = []
    for f in files("fastcal", root=root):
        rel = _rel(f, root)
        if rel.startswith(("fastcal/inputs/", "fastcal/backends/")):
            continue
        out += [f"{rel}:{i}" for i, line in enumerate(f.read_text().splitlines(), 1)
                if DEVICE_IF.match(line)]
    return out


def local_imports(root=ROOT):
    return [f"{_rel(f, root)}:{i}" for f in files("fastcal", "tracking", root=root)
            for i, line in enumerate(f.read_text().splitlines(), 1) if LOCAL_IMPORT.match(line)]


def long_functions(package="fastcal", limit=60, root=ROOT):
    out = []
    for f in files(package, root=root):
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
                out.append(f"{_rel(f, root)}:{node.lineno} {node.name} ({len(code)})")
    return out


# -- values across boundaries ----------------------------------------------------

def accumulator_reads(root=ROOT):
    """Distinct ``acc.<name>`` reads in fastcal/backends (private calls as ``name()``)."""
    found = {}
    for f in files("fastcal/backends", root=root):
        tree = ast.parse(f.read_text())
        calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "acc":
                name = node.attr + ("()" if id(node) in calls else "")
                found.setdefault(name, f"{_rel(f, root)}:{node.lineno}")
    return [f"{where} acc.{name}" for name, where in sorted(found.items())]


def _call_name(func):
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _is_cuda_load(node):
    """A load of the CUDA kernels or of numba.cuda."""
    if isinstance(node, ast.Import):
        return any(a.name.startswith("numba.cuda") for a in node.names)
    if isinstance(node, ast.ImportFrom):
        mod = node.module or ""
        return (mod == "numba" and any(a.name == "cuda" for a in node.names)) or \
            mod.startswith("numba.cuda") or (mod.startswith("fastcal._kernels") and any(
                CUDA_MODULE.match(a.name) for a in node.names)) or bool(
                re.match(r"fastcal\._kernels\._?cuda", mod))
    if not isinstance(node, ast.Call):
        return False
    name = _call_name(node.func)
    arg = node.args[0] if node.args else None
    if name == "import_module" and arg is not None:
        return "_kernels" in ast.unparse(arg)
    return name in ("kernels", "_k") and isinstance(arg, ast.Constant) and isinstance(
        arg.value, str) and bool(CUDA_MODULE.match(arg.value))


def _is_launch(node):
    """``kernel[config](...)``: a call of a subscript with two or more launch values
    (a table of functions keyed by a tuple, an upper-case name, is no kernel)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)):
        return False
    sub = node.func
    table = isinstance(sub.value, ast.Name) and sub.value.id.lstrip("_").isupper()
    return isinstance(sub.slice, ast.Tuple) and len(sub.slice.elts) >= 2 and not table


def gpu_work_outside_backend(root=ROOT):
    out = []
    for f in files("fastcal", root=root):
        rel = _rel(f, root)
        if rel == "fastcal/backends/cuda.py" or rel.startswith("fastcal/_kernels/"):
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if _is_launch(node):
                out.append(f"{rel}:{node.lineno} launch")
            elif _is_cuda_load(node):
                out.append(f"{rel}:{node.lineno} load")
    return sorted(set(out))


def _code_lines(text):
    """Each line's code, strings and comments blanked (so docstrings do not count)."""
    lines = text.splitlines()
    keep = [list(line) for line in lines]
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.STRING, tokenize.COMMENT):
            (r0, c0), (r1, c1) = tok.start, tok.end
            for r in range(r0, r1 + 1):
                a = c0 if r == r0 else 0
                b = c1 if r == r1 else len(keep[r - 1])
                keep[r - 1][a:b] = " " * (b - a)
    return ["".join(x) for x in keep]


def gate_device_questions(root=ROOT):
    out = []
    for f in files("fastcal/inputs", root=root):
        for i, line in enumerate(_code_lines(f.read_text()), 1):
            if DEVICE_QUESTION.search(line) and not line.lstrip().startswith("def "):
                out.append(f"{_rel(f, root)}:{i}")
    return out


def _positional(node):
    s = node.slice
    return isinstance(s, ast.Slice) or (isinstance(s, ast.Constant) and isinstance(s.value, int)) \
        or (isinstance(s, ast.UnaryOp) and isinstance(s.operand, ast.Constant))


_NOT_BACKENDS = ("source", "em", "self")  # a source's fill (acc, rows), the equal-mass groups


def _backend_fills(root):
    """The names of the fill functions of fastcal/backends."""
    return {node.name for f in files("fastcal/backends", root=root)
            for node in ast.parse(f.read_text()).body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("fill")}


def _is_fill_call(node, fills):
    if not isinstance(node, ast.Call) or _call_name(node.func) not in fills:
        return False
    owner = node.func.value if isinstance(node.func, ast.Attribute) else None
    return not (isinstance(owner, ast.Name) and owner.id in _NOT_BACKENDS)


def positional_state(root=ROOT):
    out = []
    fills = _backend_fills(root)
    for f in files("fastcal", root=root):
        rel = _rel(f, root)
        if rel.startswith("fastcal/_kernels/"):
            continue
        tree = ast.parse(f.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.Lambda)):
                continue
            held = {a.arg for a in fn.args.args if a.arg in ("filled", "state")}
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and _is_fill_call(node.value, fills):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            held.add(t.id)
                        elif isinstance(t, ast.Tuple):
                            out.append(f"{rel}:{node.lineno} unpacked")
            for node in ast.walk(fn):
                if isinstance(node, ast.Subscript) and _positional(node) and (
                        (isinstance(node.value, ast.Name) and node.value.id in held)
                        or _is_fill_call(node.value, fills)):
                    out.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
            if rel.startswith("fastcal/backends/") and isinstance(fn, ast.FunctionDef) \
                    and fn.name.lstrip("_").startswith("fill"):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Return) and node.value is not None and (
                            isinstance(node.value, ast.Tuple) or (
                                isinstance(node.value, ast.Subscript)
                                and _positional(node.value))):
                        out.append(f"{rel}:{node.lineno} return {ast.unparse(node.value)}")
    return sorted(set(out))


def root_test_files(root=ROOT):
    """Test modules in the root of ``tests/`` (goal 0: tests live in folders that mirror the
    packages; the root keeps only shared helpers and fixtures)."""
    return sorted(str(f.relative_to(root)) for f in (root / "tests").glob("test_*.py"))


# name, how it is counted, goal (the most allowed); `--check` fails past a goal
MEASURES = [
    ("device branches outside the gate and backends", device_branches, 2),
    ("function-local imports of own modules", local_imports, 11),
    ("functions of 60+ code lines in fastcal/", long_functions, 10),
    ("functions of 60+ code lines in tracking/", lambda root: long_functions("tracking", root=root), 2),
    ("accumulator attributes read by the backends", accumulator_reads, 0),
    ("GPU kernel launches or CUDA loads outside backends/cuda.py and _kernels/", gpu_work_outside_backend, 0),
    ("device questions in the gate (fastcal/inputs/)", gate_device_questions, 6),
    ("state read or returned by position", positional_state, 0),
    ("test files in the root of tests/", root_test_files, 0),
]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    root = pathlib.Path(args[0]).resolve() if args else ROOT
    over = []
    for name, count, goal in MEASURES:
        found = count(root=root)
        print(f"{name}: {len(found)} (goal at most {goal})")
        if "-v" in sys.argv:
            for x in found:
                print("   ", x)
        if len(found) > goal:
            over.append(name)
    if "--check" in sys.argv and over:
        print(f"past the goal: {'; '.join(over)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
