"""The layering of fastcal holds: import-linter's contracts in pyproject.toml.

A module may import only from the layers below it, directly or through
another module, imports inside functions included; so no import loop can
cross layers, and a shortcut upwards fails here instead of growing.
"""

import os

import pytest

importlinter = pytest.importorskip("importlinter")


def test_import_contracts_hold():
    from importlinter import api

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    report = api.create_report(api.read_user_options(os.path.join(root, "pyproject.toml")))
    failed = [c.contract.name for c in report.get_contracts_and_checks() if not c.kept] \
        if hasattr(report, "get_contracts_and_checks") else None
    assert report.contains_failures is False, failed


def test_the_kernels_import_nothing_of_the_api():
    import ast
    import pathlib

    kernels = pathlib.Path(__file__).resolve().parents[1] / "fastcal" / "_kernels"
    for path in kernels.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert not node.module.startswith("fastcal") or \
                    node.module.startswith("fastcal._kernels"), (path.name, node.module)
