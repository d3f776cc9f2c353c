"""The docs site as ``make docs`` builds it, read in its files and in a real browser.

The site is built once for the module, by ``mkdocs build --strict`` (a broken link or a
missing reference fails) in a child Python that can import only what ``make docs`` installs:
fastcal's core requirements and the ``docs`` extra (tests/installs.py), as on a fresh clone.
Headless Chromium then opens its pages from disk (file://), as the README says to, with
every host name unresolvable: the equations are typeset, search finds pages, and no help
block of the CLI reference or equation is wider than its column. Without a Chromium binary
the browser tests skip and say so (``.ci/run`` installs one first).

The build and the browser are subprocesses: the file runs in the background child, beside
the suite (tests/conftest.py).
"""

import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests import installs, subsuites

pytestmark = pytest.mark.background

ROOT = installs.ROOT
# what `make docs` runs: $(PY) -m mkdocs build --strict --site-dir site
BUILD = "from mkdocs.__main__ import cli\nsys.argv = ['mkdocs', 'build', '--strict', *sys.argv[1:]]\ncli()\n"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# a laptop's window: Material's columns are at their widest from 1220 px on
WINDOW = "1280,900"
# characters of Material's code font that a code block shows without scrolling
CODE_COLUMN = 80
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


def test_cli_reference_lines_fit_the_code_block(site):
    # argparse wraps at the hook's width, so no help line runs past a code block's right edge
    # (test_blocks_fit_their_column measures the blocks in the browser)
    width = CODE_COLUMN
    lines = [line for block in _code_blocks((site / "cli.html").read_text(encoding="utf-8"))
             for line in block.splitlines()]
    assert len(lines) > 100
    long = [line for line in lines if len(line) > width]
    assert long == [], f"{len(long)} help lines longer than {width} characters, e.g. {long[0]!r}"


def test_pages_load_nothing_from_the_network(site):
    # scripts, stylesheets and fonts come with the site: it reads offline, opened from disk
    remote = re.compile(r"""<(?:script|link)\b[^>]*\b(?:src|href)="(?:https?:)?//([^"]+)""")
    found = {str(p.relative_to(site)): remote.findall(p.read_text(encoding="utf-8"))
             for p in site.rglob("*.html")}
    assert len(found) > 20
    assert {page: urls for page, urls in found.items() if urls} == {}
    assert list((site / "assets" / "vendor" / "katex" / "fonts").glob("*.woff2"))


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    found = next(filter(None, map(shutil.which, BROWSERS)), None)
    if found is None:
        pytest.skip(f"no headless browser to open the site in: none of {', '.join(BROWSERS)} is on "
                    "PATH (.ci/run installs Debian's chromium)")
    profile = tmp_path_factory.mktemp("chromium-profile")

    def dom(path, query=""):
        """The page's DOM once its scripts have run, opened from disk with no network."""
        proc = subprocess.run(
            [found, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND",
             f"--window-size={WINDOW}", "--virtual-time-budget=10000", "--dump-dom",
             path.as_uri() + query],
            capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "</html>" in proc.stdout, proc.stderr[-3000:]
        return proc.stdout

    return dom


def _text(dom):
    """The text a reader sees: no scripts, styles, or the TeX source KaTeX keeps for MathML."""
    dom = re.sub(r"<(script|style|annotation)\b.*?</\1>", "", dom, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", dom))


def test_equations_are_typeset(site, browser):
    page = site / "guide" / "metrics.html"
    equations = page.read_text(encoding="utf-8").count('class="arithmatex"')
    assert equations > 20
    dom = browser(page)
    assert dom.count('class="katex"') == equations       # each one typeset by KaTeX
    assert dom.count('class="katex-display"') > 3        # the display equations as blocks
    assert "katex-error" not in dom                       # none that KaTeX could not read
    raw = [m for m in ("\\(", "\\[", "$$") if m in _text(dom)]
    assert raw == [], f"TeX left as text on the page: {raw}"


def test_search_works_from_disk(site, browser):
    # Material's search runs in a worker, which a page opened from file:// cannot start
    # without the shim; ?q= types the query into the search box as a reader would
    dom = browser(site / "index.html", "?q=entropic")
    search = re.search(r'<div class="md-search"[^>]*>', dom).group(0)
    assert "hidden" not in search
    assert re.search(r'<input[^>]*name="query"', dom)
    meta = re.search(r'class="md-search-result__meta">([^<]*)<', dom)
    assert meta and re.fullmatch(r"\d+ matching documents?", meta.group(1)), meta
    found = re.findall(r'<a href="([^"]+)" class="md-search-result__link"', dom)
    assert (site / "guide" / "metrics.html").as_uri() in found, found


# Added to a copy of a page, beside it: once the page's scripts and fonts are done, the
# blocks (SELECTOR) whose content is wider than their box, so cut at its edge.
_PROBE = """<script>
addEventListener("load", () => document.fonts.ready.then(() => {
  const wide = [...document.querySelectorAll("SELECTOR")]
    .filter(el => el.scrollWidth > el.clientWidth + 1)
    .map(el => el.textContent.trim().slice(0, 60));
  document.body.setAttribute("data-wide", JSON.stringify(wide));
}));
</script>"""


@pytest.mark.parametrize("page, blocks", [("cli.html", "pre > code"),            # the help blocks
                                          ("guide/metrics.html", "div.arithmatex")])  # equations
def test_blocks_fit_their_column(site, browser, page, blocks):
    source = (site / page).read_text(encoding="utf-8")
    probe = (site / page).with_name("probe-" + (site / page).name)
    probe.write_text(source.replace("</body>", _PROBE.replace("SELECTOR", blocks) + "</body>"),
                     encoding="utf-8")
    found = re.search(r'data-wide="([^"]*)"', browser(probe))
    assert found, "the probe did not run"
    wide = json.loads(html.unescape(found.group(1)))
    assert wide == [], f"{len(wide)} blocks wider than their column, cut at its edge: " + " | ".join(wide)
