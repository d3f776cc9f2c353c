"""No two fastcal (or tracking) modules import each other, directly or through others.

The graph is read from the source with ast (imports inside functions included,
since they close a loop just as well when they run), so it holds whatever
import-linter's layers allow inside one layer.
"""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _modules(package="fastcal"):
    """Module name -> path of every module of the package."""
    out = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name, path, modules):
    """The fastcal modules that module ``name`` imports (the most specific existing name)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_package else name.split(".")[:-1]
                pkg = pkg[:len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            # "from a import b" imports a.b when that is a module, else a's attribute b
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}
    stack = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_graph_sees_function_local_and_relative_imports(tmp_path):
    mods = {"fastcal": None, "fastcal.a": None, "fastcal.b": None, "fastcal.sub": None,
            "fastcal.sub.c": None}
    src = tmp_path / "a.py"
    src.write_text("def f():\n    from fastcal.b import thing\n    from .sub import c\n")
    assert _imports("fastcal.a", src, mods) == {"fastcal.b", "fastcal.sub.c"}
    assert _cycle({"x": {"y"}, "y": {"z"}, "z": {"x"}}) == ["x", "y", "z", "x"]
    assert _cycle({"x": {"y"}, "y": set()}) is None


def test_fastcal_has_no_import_cycle():
    modules = _modules()
    graph = {m: _imports(m, p, modules) for m, p in modules.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_tracking_has_no_import_cycle():
    modules = _modules("tracking")
    graph = {m: _imports(m, p, modules) for m, p in modules.items()}
    assert len(graph) > 20  # the folders are read, not only the top level
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
