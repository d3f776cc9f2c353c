"""The docs site as ``make docs`` builds it.

The site is built once for the module, by ``mkdocs build --strict`` (a broken link or a
missing reference fails) in a child Python that can import only what ``make docs`` installs:
fastcal's core requirements and the ``docs`` extra (tests/installs.py), as on a fresh clone.

The build is a subprocess: the file runs in the background child, beside the suite
(tests/conftest.py).
"""

import html
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests import installs, subsuites

pytestmark = pytest.mark.background

ROOT = installs.ROOT
# what `make docs` runs: $(PY) -m mkdocs build --strict --site-dir site
BUILD = "from mkdocs.__main__ import cli\nsys.argv = ['mkdocs', 'build', '--strict', *sys.argv[1:]]\ncli()\n"
# modules of the other extras, named when the site does not build without them
NAMED = ("sklearn", "torch", "matplotlib", "dask", "pandas")


def _hook():
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "docs" / "hooks" / "cli_reference.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not subsuites.BACKGROUND_CHILD:
        return None  # these tests run in the background child, which builds the site there
    out = tmp_path_factory.mktemp("docs") / "site"
    missing = installs.missing_modules(installs.make_extras("docs"))
    proc = subprocess.run([sys.executable, "-c", installs.without(missing) + BUILD, "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # Material's banner
    assert proc.returncode == 0, (f"the site does not build with only what `make docs` installs "
                                  f"({len(missing)} modules of the other extras made unimportable, "
                                  f"{', '.join(m for m in NAMED if m in missing)} among them):\n"
                                  f"{proc.stderr[-4000:]}")
    return out


def test_site_builds_with_the_docs_extra_alone(site):
    # the pages are written, the API page of fastcal.sklearn among them
    for page in ("index.html", "cli.html", "guide/metrics.html", "api/modules.html"):
        assert (site / page).stat().st_size > 0, page
    assert 'id="fastcal.sklearn.make_ecd_scorer"' in (site / "api" / "modules.html").read_text(encoding="utf-8")


def _code_blocks(page):
    """The text of each ``<pre><code>`` block of a built page."""
    blocks = re.findall(r"<pre[^>]*>.*?<code[^>]*>(.*?)</code></pre>", page, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", b)) for b in blocks]


def test_cli_reference_has_every_subcommand(site):
    # rendered from the parsers: every subcommand has its section and its help block
    cli = (site / "cli.html").read_text(encoding="utf-8")
    hook = _hook()
    sections = 0
    for command in ("fastcal", "tracking"):
        subs = hook.subcommands(hook.build_parser(command))
        sections += 1 + len(subs)
        for name, _ in subs:
            assert f"{command} {name}" in cli
    assert len(_code_blocks(cli)) == sections
