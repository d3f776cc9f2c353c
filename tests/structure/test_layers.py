"""The layering of fastcal holds: import-linter's contracts in pyproject.toml.

A module may import only from the layers below it, directly or through
another module, imports inside functions included; so no import loop can
cross layers, and a shortcut upwards fails here instead of growing.
"""

import os

import pytest

importlinter = pytest.importorskip("importlinter")


def test_import_contracts_hold():
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    exe = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    proc = subprocess.run([exe, "--config", os.path.join(root, "pyproject.toml")], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
    # tracking builds on fastcal's public door only (fastcal.io, fastcal.jit, the API)
    assert "tracking imports only fastcal's public modules KEPT" in proc.stdout
    # and keeps layers of its own: kernels <- models | filters | scoring <- montecarlo <- commands
    text = " ".join(proc.stdout.split())  # import-linter wraps long contract names
    assert "tracking layers: kernels <- models | filters | scoring <- montecarlo <- commands <- CLI KEPT" in text
    assert "tracking commands: one module per command, none importing another KEPT" in text


def test_tracking_reads_files_only_through_fastcal_io():
    import ast
    import pathlib

    tracking = pathlib.Path(__file__).resolve().parents[2] / "tracking"
    found = []
    for path in tracking.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [(path.name, n) for n in names if n.split(".")[0] == "pyarrow"]
    assert found == []


def test_the_kernels_import_nothing_of_the_api():
    import ast
    import pathlib

    kernels = pathlib.Path(__file__).resolve().parents[2] / "fastcal" / "_kernels"
    for path in kernels.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert not node.module.startswith("fastcal") or \
                    node.module.startswith("fastcal._kernels"), (path.name, node.module)
