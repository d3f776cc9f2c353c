"""Every example of the README and the docs site runs, and its shown output is checked.

Each ```python and ```sh block of a docs page runs in order, in one temporary directory per page
(a file a Python example writes is there for the next shell line). Python blocks share one
namespace per page. The README's blocks are read one at a time, so each runs on its own: in a
fresh namespace and folder, in a child Python that can import only what the README's set-up
(``make demo``) installs (tests/installs.py). A block whose lines start with ``>>>`` is a doctest (ELLIPSIS,
NORMALIZE_WHITESPACE); any other block is executed and, when the next block is
```text title="output", what it prints must equal that block.

Each line of a ```sh block is one command (what follows `` #`` is a comment), run in this
process through the commands' own entry points (``fastcal.cli.main``, ``tracking.cli.main``,
an ``examples/`` script as ``__main__``): it must exit 0; a ``--json`` line must print one
JSON object; the files it names with ``--plot`` / ``--out`` (and ``fastcal simulate``'s
output) must be written by it; a command that writes no file must print something. Any other
program (``make``, ``pip``) fails the test unless a marker skips it. A block in another
language (```bash, ```console), or an output block after no Python block, fails too.

Markers, each an HTML comment on its own line before a block (the site does not show them):

- ``<!-- skip: REASON -->``: the block is not run; it becomes a skipped test that says why.
- ``<!-- skip-lines: PREFIX[, PREFIX...]: REASON -->``: the lines of the next ```sh block
  that start with one of the prefixes (comment dropped; ``$`` at the end: the whole command)
  are not run, each a skipped test with the reason; a prefix that names no line fails.
- ``<!-- prints: PREFIX[, PREFIX...]: TEXT -->``: what those lines print holds TEXT.
- ``<!-- setup: COMMAND -->``: a shell command the page does not show, run at that point
  (a small input for a block that scores a file the page never writes).
- ``<!-- json-keys PATH: KEY, KEY... -->``: each ``--json`` line of the next ```sh block
  prints an object with these keys at PATH (dotted, ``*`` for every value; no PATH: the top).

Every exported name has its entry in the API reference (the site itself is built and read in
tests/docs/test_docs_site.py).
"""
import contextlib
import doctest
import functools
import importlib.util
import io
import json
import os
from pathlib import Path
import re
import runpy
import shlex
import subprocess
import sys
import textwrap

import pytest

from tests import installs, subsuites

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\S*)(.*)$")
MARK = re.compile(r"^<!-- (skip|skip-lines|prints|setup|json-keys)(?: (\S+))?: (.+) -->$")


def _where(page, line):
    page = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
    return f"{page}:{line}"


class Block:
    def __init__(self, page, line, code, expected=None, skip=None):
        self.page, self.line, self.code, self.expected, self.skip = page, line, code, expected, skip
        self.fence = line

    @property
    def where(self):
        return _where(self.page, self.line)


class Command:
    """One line of a ```sh block (or a hidden ``setup`` marker): run, or skipped with a reason.
    ``fence``: the line that opens its block (None for a set-up marker)."""

    def __init__(self, page, line, text, skip=None, keys=(), prints=(), setup=False, fence=None):
        self.page, self.line, self.text, self.skip = page, line, text, skip
        self.keys, self.prints, self.setup, self.fence = list(keys), list(prints), setup, fence

    @property
    def where(self):
        return _where(self.page, self.line)


def blocks(page):
    """The examples of one page in order: a Block per ```python block (with the output shown
    after it and any skip reason) and a Command per line of a ```sh block or setup marker."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    skip, rules, keys = None, [], []
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            mark = MARK.match(lines[i].strip())
            if mark:
                kind, path, text = mark.groups()
                if kind == "skip":
                    skip = text
                elif kind == "setup":
                    found.append(Command(page, i + 1, text, setup=True))
                elif kind == "json-keys":
                    keys.append((path or "", [k.strip() for k in text.split(",")]))
                else:                      # skip-lines / prints: PREFIX[, PREFIX]: TEXT
                    prefixes, sep, said = text.partition(": ")
                    if not (sep and said):
                        msg = f"{_where(page, i + 1)}: {kind} needs 'PREFIX[, PREFIX]: TEXT'"
                        raise ValueError(msg)
                    rules.append((kind, [p.strip() for p in prefixes.split(", ")], said, i + 1))
            elif lines[i].strip():
                skip, rules, keys = None, [], []
            i += 1
            continue
        lang, rest, start = m.group(1), m.group(2), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = "\n".join(lines[start:j]) + "\n"
        if lang == "python":
            found.append(Block(page, start, body, skip=skip))
        elif lang == "text" and 'title="output"' in rest and found and isinstance(found[-1], Block) \
                and found[-1].line == _prev_end(lines, i):
            found[-1].expected = body
        elif lang == "sh":
            found.extend(_commands(page, lines, start, j, skip, rules, keys))
        skip, rules, keys = None, [], []
        i = j + 1
    return found


def _matches(prefix, text):
    """Whether a marker's PREFIX names a command line: the command (comment dropped, words as
    the shell splits them) starts with it; a PREFIX ending in ``$`` must be the whole command."""
    command = shlex.join(shlex.split(text, comments=True))
    return command == prefix[:-1] if prefix.endswith("$") else command.startswith(prefix)


def _commands(page, lines, start, end, skip, rules, keys):
    commands, used = [], set()
    for k in range(start, end):
        text = lines[k].strip()
        if not text or text.startswith("#"):
            continue
        command = Command(page, k + 1, text, skip=skip, keys=keys, fence=start)
        for n, (kind, prefixes, said, _) in enumerate(rules):
            hit = [p for p in prefixes if _matches(p, text)]
            used.update((n, p) for p in hit)
            if hit and kind == "skip-lines":
                command.skip = command.skip or said
            elif hit:
                command.prints.append(said)
        commands.append(command)
    for n, (kind, prefixes, _, line) in enumerate(rules):
        for p in prefixes:
            if (n, p) not in used:
                msg = f"{_where(page, line)}: {kind} prefix {p!r} names no line of the next ```sh block"
                raise ValueError(msg)
    return commands


def units(page):
    """The examples of a page by fenced block: the items of each block, after the set-up
    markers just before it."""
    found, pending = [], []
    for item in blocks(page):
        if item.fence is None:
            pending.append(item)
        elif found and not pending and found[-1][-1].fence == item.fence:
            found[-1].append(item)
        else:
            found.append([*pending, item])
            pending = []
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


def _entry(argv):
    """The entry point a command line names, as a function of its arguments."""
    if argv[0] == "fastcal":
        from fastcal.cli import main
        return main, argv[1:]
    if argv[0] == "tracking":
        from tracking.cli import main
        return main, argv[1:]
    if argv[0] == "python" and len(argv) > 1 and argv[1].startswith("examples/"):
        return functools.partial(_script, ROOT / argv[1]), argv[2:]
    return None, argv


def _script(path, args):
    """Run an examples/ script as ``python path args`` would (its folder first on sys.path)."""
    saved = sys.argv[:], sys.path[:]
    sys.argv, sys.path = [str(path), *args], [str(path.parent), *sys.path]
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv, sys.path = saved
    return 0


def _written(argv):
    """The files a command line says it writes."""
    files = [argv[k + 1] for k, a in enumerate(argv[:-1]) if a in ("--plot", "--out")]
    if argv[:2] == ["fastcal", "simulate"] and len(argv) > 2:
        files.append(argv[2])
    return files


def _stamp(path):
    st = os.stat(path) if os.path.exists(path) else None
    return st and (st.st_ino, st.st_mtime_ns, st.st_size)


def _at(obj, path, where):
    """The objects at a dotted path of a JSON object (``*``: every value or item)."""
    objs = [obj]
    for part in filter(None, path.split(".")):
        if part == "*":
            objs = [v for o in objs for v in (o.values() if isinstance(o, dict) else o)]
        else:
            found = all(isinstance(o, dict) and part in o for o in objs)
            assert found, f"{where}: --json has no {path}"
            objs = [o[part] for o in objs]
    return objs


def _shell(command):
    """Run one command line; it must exit 0 and leave what it says it makes."""
    argv = shlex.split(command.text, comments=True)
    main, args = _entry(argv)
    assert main is not None, (f"{command.where}: no runner for {argv[0]!r}; mark the line "
                              "<!-- skip-lines: PREFIX: REASON --> or the block <!-- skip: REASON -->")
    files = _written(argv)
    before = {f: _stamp(f) for f in files}
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(args)
        except SystemExit as e:
            status = e.code
    printed = out.buffer.getvalue().decode("utf-8")
    said = f"{command.where}: `{command.text}`"
    assert status in (0, None), f"{said} exited {status}:\n{err.getvalue()[-2000:]}"
    for f in files:
        assert _stamp(f) not in (None, before[f]), f"{said} did not write {f}"
        assert os.path.getsize(f) > 0, f"{command.where}: {f} is empty"
        if f.endswith(".json"):
            json.loads(Path(f).read_text(encoding="utf-8"))
    if "--json" in argv:
        try:
            got = json.loads(printed)
        except ValueError as e:
            raise AssertionError(f"{said} printed no JSON ({e}):\n{printed[:2000]}") from None
        assert isinstance(got, dict), f"{said} printed {type(got).__name__}, not an object"
        for path, keys in command.keys:
            for obj in _at(got, path, command.where) or [{}]:
                missing = [k for k in keys if k not in obj]
                assert not missing, f"{command.where}: --json lacks {missing} at {path or 'the top'}"
    elif not files:
        assert printed.strip(), f"{said} printed nothing"
    for text in command.prints:
        assert text in printed, f"{said} did not print {text!r}:\n{printed[-2000:]}"


RUNNABLE = [p for p in PAGES if p != README and any(not b.skip for b in blocks(p))]
SKIPPED = [b for p in PAGES for b in blocks(p) if b.skip]
README_UNITS = [u for u in units(README) if any(not item.skip for item in u)]


@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_page_examples(page, tmp_path, monkeypatch):
    runnable = [b for b in blocks(page) if not b.skip]
    monkeypatch.chdir(tmp_path)            # examples may write files
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace = {"__name__": "__docs__"}
    environ = dict(os.environ)             # and set variables (a store's endpoint): undone
    try:
        for block in runnable:
            if isinstance(block, Command):
                _shell(block)
            else:
                _run(block, namespace)
    finally:
        os.environ.clear()
        os.environ.update(environ)


# In the child: the runner is imported before the modules `make demo` does not install are
# hidden (it imports pytest); then each block of the page runs in a fresh namespace and folder,
# and what it raised, if anything, is written out by the line of its fence.
_ON_ITS_OWN = """
import json, os, sys, tempfile
from pathlib import Path
from tests.docs import test_docs_examples as t
{hide}
os.environ["MPLBACKEND"] = "Agg"
page, out, results = Path(sys.argv[1]), sys.argv[2], {{}}
for unit in t.units(page):
    run = [item for item in unit if not item.skip]
    if not run:
        continue
    namespace = {{"__name__": "__docs__"}}
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            for item in run:
                t._shell(item) if isinstance(item, t.Command) else t._run(item, namespace)
            results[unit[-1].fence] = None
        except Exception as e:
            results[unit[-1].fence] = f"{{type(e).__name__}}: {{e}}"
        finally:
            os.chdir(t.ROOT)
Path(out).write_text(json.dumps(results), encoding="utf-8")
"""


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory):
    """Each README block, run on its own as after `make demo`: {fence line: error or None}."""
    if not subsuites.BACKGROUND_CHILD:
        return None  # the test runs in the background child, which runs the blocks there
    out = tmp_path_factory.mktemp("readme") / "results.json"
    hide = installs.without(installs.missing_modules(installs.make_extras("demo")))
    proc = subprocess.run([sys.executable, "-c", _ON_ITS_OWN.format(hide=hide), str(README), str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and out.exists(), proc.stderr[-4000:]
    return {int(line): error for line, error in json.loads(out.read_text(encoding="utf-8")).items()}


# the child's time is its own (a fresh interpreter loading the kernels): beside the suite
@pytest.mark.background
@pytest.mark.parametrize("unit", README_UNITS, ids=[_where(README, u[-1].fence) for u in README_UNITS])
def test_readme_example_runs_on_its_own(unit, readme_run):
    # a reader copies one block of the README, after its set-up: it must not need a name or a
    # file that another block made, nor a module that `make demo` does not install
    error = readme_run[unit[-1].fence]
    assert error is None, f"{_where(README, unit[-1].fence)}, run on its own after `make demo`: {error}"


@pytest.mark.parametrize("block", SKIPPED, ids=[b.where for b in SKIPPED])
def test_skipped_examples_say_why(block):
    what = f" `{block.text}`" if isinstance(block, Command) else ""
    pytest.skip(f"{block.where}{what} not run: {block.skip}")


def _fences(page):
    """(line, language, rest) of every fenced block that a page opens."""
    lines, found, i = page.read_text(encoding="utf-8").splitlines(), [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            found.append((i + 1, m.group(1), m.group(2).strip()))
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
        i += 1
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_block_is_run_or_text(page):
    # a block in a language the runner does not know (```bash, ```console) or an output block
    # that follows no Python block would be left unchecked without a word
    fences = _fences(page)
    unknown = [f"{_where(page, line)}: ```{lang}" for line, lang, _ in fences
               if lang not in ("python", "sh", "text", "")]
    assert unknown == [], "no runner for these blocks (write them as ```python or ```sh)"
    shown = sum(1 for _, lang, rest in fences if lang == "text" and 'title="output"' in rest)
    checked = sum(1 for b in blocks(page) if isinstance(b, Block) and b.expected is not None)
    assert shown == checked, f"{page.name}: {shown - checked} output block(s) follow no ```python block"


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


def test_runner_reads_blocks_one_at_a_time(tmp_path):
    # units: the items of each fenced block together, a set-up marker with the block after it
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent("""\
        ```python
        x = 1
        ```

        <!-- setup: fastcal simulate preds.parquet --n 2000 --seed 1 -->
        ```sh
        fastcal score preds.parquet --prob p --label y
        fastcal score preds.parquet --prob p --label y --json
        ```

        ```sh
        fastcal warmup
        ```
        """))
    assert [[item.line for item in unit] for unit in units(page)] == [[1], [5, 7, 8], [12]]


def test_runner_runs_shell_lines(tmp_path, monkeypatch):
    # the shell runner itself: set-up, skipped lines, prints and json-keys markers are read;
    # a failing command, a missing key or text, an unknown program and a stale prefix all fail
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent("""\
        <!-- setup: fastcal simulate preds.parquet --n 2000 --seed 1 -->
        <!-- skip-lines: make, fastcal simulate big.parquet: set-up commands -->
        <!-- prints: fastcal score preds.parquet --prob p --label y$: | bin | range | count | -->
        <!-- json-keys: n, ece -->
        <!-- json-keys bins.*: count -->
        ```sh
        make demo        # builds .venv
        fastcal simulate big.parquet --n 1000000000
        fastcal score preds.parquet --prob p --label y
        fastcal score 'preds.parquet' --prob p --label y --json   # one JSON object
        ```
        """))
    found = blocks(page)
    assert [c.line for c in found] == [1, 7, 8, 9, 10]
    assert [c.skip for c in found] == [None, "set-up commands", "set-up commands", None, None]
    assert found[0].setup and found[3].prints == ["| bin | range | count |"] and found[4].prints == []
    assert found[4].keys == [("", ["n", "ece"]), ("bins.*", ["count"])]
    monkeypatch.chdir(tmp_path)
    for command in (found[0], found[3], found[4]):
        _shell(command)
    assert os.path.getsize("preds.parquet") > 0

    def fails(text, match, **kw):
        with pytest.raises(AssertionError, match=match):
            _shell(Command(page, 1, text, **kw))

    fails("fastcal score preds.parquet --prob q --label y", "exited 2")
    fails("fastcal score preds.parquet --prob p --label y --json", "lacks", keys=[("bins.*", ["nope"])])
    fails("fastcal score preds.parquet --prob p --label y", "did not print", prints=["no such text"])
    fails("make demo", "no runner for 'make'")
    page.write_text("<!-- skip-lines: fastcal warmup: stale -->\n```sh\nfastcal score x\n```\n")
    with pytest.raises(ValueError, match="'fastcal warmup' names no line"):
        blocks(page)
