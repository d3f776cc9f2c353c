"""Every Python example of the README and the docs site runs, and its shown output is checked.

Each ```python block of a page runs in order, in one namespace per page. A block whose lines
start with ``>>>`` is a doctest (ELLIPSIS, NORMALIZE_WHITESPACE); any other block is executed
and, when the next block is ```text title="output", what it prints must equal that block.
A block after a line ``<!-- skip: REASON -->`` is not run; it becomes a skipped test that says
why. The site itself is built with ``mkdocs build --strict`` (no broken link, no missing
reference), and every exported name has its entry in the API reference.
"""

import contextlib
import doctest
import importlib.util
import io
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\S*)(.*)$")
SKIP = re.compile(r"^<!-- skip: (.+) -->$")


class Block:
    def __init__(self, page, line, code, expected=None, skip=None):
        self.page, self.line, self.code, self.expected, self.skip = page, line, code, expected, skip

    @property
    def where(self):
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


def blocks(page):
    """The ```python blocks of one page, with the output shown after each and any skip reason."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i, skip = [], 0, None
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            s = SKIP.match(lines[i].strip())
            if s:
                skip = s.group(1)
            elif lines[i].strip():
                skip = None
            i += 1
            continue
        lang, rest, start = m.group(1), m.group(2), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = "\n".join(lines[start:j]) + "\n"
        if lang == "python":
            found.append(Block(page, start, body, skip=skip))
        elif lang == "text" and 'title="output"' in rest and found and found[-1].line == _prev_end(lines, i):
            found[-1].expected = body
        skip = None
        i = j + 1
    return found


def _prev_end(lines, i):
    """Start line of the python block that a fence at line i follows (blank lines between)."""
    k = i - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    if k < 0 or lines[k] != "```":
        return -1
    k -= 1
    while k >= 0 and not lines[k].startswith("```"):
        k -= 1
    return k + 1


def _run(block, namespace):
    if re.search(r"^>>> ", block.code, re.M):
        test = doctest.DocTestParser().get_doctest(block.code, namespace, block.where, str(block.page),
                                                   block.line)
        out = io.StringIO()
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        runner.run(test, out=out.write, clear_globs=False)
        namespace.update(test.globs)      # DocTest works on a copy of the namespace
        assert runner.failures == 0, f"{block.where}:\n{out.getvalue()}"
        return
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block.code, block.where, "exec"), namespace)
    if block.expected is not None:
        got = [line.rstrip() for line in printed.getvalue().rstrip().splitlines()]
        want = [line.rstrip() for line in block.expected.rstrip().splitlines()]
        assert got == want, f"{block.where}: printed\n" + "\n".join(got) + "\nexpected\n" + "\n".join(want)


RUNNABLE = [p for p in PAGES if any(not b.skip for b in blocks(p))]
SKIPPED = [b for p in PAGES for b in blocks(p) if b.skip]


@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_page_examples(page, tmp_path, monkeypatch):
    runnable = [b for b in blocks(page) if not b.skip]
    monkeypatch.chdir(tmp_path)            # examples may write files
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace = {"__name__": "__docs__"}
    for block in runnable:
        _run(block, namespace)


@pytest.mark.parametrize("block", SKIPPED, ids=[b.where for b in SKIPPED])
def test_skipped_examples_say_why(block):
    pytest.skip(f"{block.where} not run: {block.skip}")


def test_runner_checks_output(tmp_path):
    # the runner itself: a wrong shown output fails, a right one passes, skip marks are read
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent("""\
        ```python
        x = 2
        print(x + 1)
        ```

        ```text title="output"
        3
        ```

        <!-- skip: needs a GPU -->
        ```python
        raise SystemExit("must not run")
        ```

        ```python
        >>> x * 5
        10
        ```
        """))
    found = blocks(page)
    assert [b.expected for b in found] == ["3\n", None, None]
    assert [b.skip for b in found] == [None, "needs a GPU", None]
    namespace = {}
    _run(found[0], namespace)
    _run(found[2], namespace)
    found[0].expected = "4\n"
    with pytest.raises(AssertionError, match="expected"):
        _run(found[0], {})


def _documented(page):
    return set(re.findall(r"^::: ([\w.]+)", page.read_text(encoding="utf-8"), re.M))


def _resolve(path):
    """The object a ``::: a.b.c`` directive names: by attributes from the package
    (``tracking.compare`` is the function), else from the longest importable module
    (``fastcal.simulate.simulate``: the attribute ``fastcal.simulate`` is the function)."""
    parts = path.split(".")
    try:
        obj = importlib.import_module(parts[0])
        for i, part in enumerate(parts[1:], start=2):
            obj = getattr(obj, part) if hasattr(obj, part) else importlib.import_module(".".join(parts[:i]))
        return obj
    except ImportError:
        pass
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def test_every_exported_name_is_in_the_api_reference():
    import fastcal
    import tracking

    documented = set().union(*(_documented(p) for p in (ROOT / "docs" / "api").glob("*.md")))
    shown = {id(_resolve(path)) for path in documented}
    exported = [(f"{m.__name__}.{n}", getattr(m, n)) for m in (fastcal, tracking) for n in m.__all__]
    exported.append(("fastcal.torch.CalibrationMetric", _resolve("fastcal.torch.CalibrationMetric")))
    assert sorted(name for name, obj in exported if id(obj) not in shown) == []


def test_site_builds_strict(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # Material's banner
    assert proc.returncode == 0, proc.stderr[-4000:]
    cli = (tmp_path / "site" / "cli.html").read_text(encoding="utf-8")
    # the CLI reference is rendered from the parsers: every subcommand has its section
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "docs" / "hooks" / "cli_reference.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    for command in ("fastcal", "tracking"):
        for name, _ in hook.subcommands(hook.build_parser(command)):
            assert f"{command} {name}" in cli
