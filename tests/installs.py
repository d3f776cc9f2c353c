"""What an install of fastcal made by a Makefile target can import, for tests that run a
child Python as that install would (the docs site as ``make docs`` builds it, the README's
examples after ``make demo``).

The test environment holds every extra; a child started with ``without(modules)`` finds
none of the modules that the target's install lacks: importing one raises the
ModuleNotFoundError it would raise there. What a target installs is read from the Makefile
(its stamp's ``pip install -e '.[EXTRAS]'``) and from pyproject.toml's extras, with each
requirement's own requirements as this environment's installed metadata lists them.
"""

import importlib.metadata as md
from pathlib import Path
import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def make_extras(target):
    """The extras that ``make TARGET`` installs: those of the ``pip install -e`` of the stamp
    the target depends on (``()`` for a plain ``pip install -e .``)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    rule = re.search(rf"^{re.escape(target)}:(.*)$", makefile, re.M)
    stamps = re.findall(r"\$\(VENV\)/(\.stamp-[\w-]+)", rule.group(1)) if rule else []
    if len(stamps) != 1:
        msg = f"Makefile: target {target!r} depends on {len(stamps)} install stamps; expected one"
        raise ValueError(msg)
    recipe = re.search(rf"^\$\(VENV\)/{re.escape(stamps[0])}:.*\n((?:\t.*\n)+)", makefile, re.M)
    install = re.search(r"pip install -e '?\.(?:\[([\w,-]+)\])?'?", recipe.group(1)) if recipe else None
    if install is None:
        msg = f"Makefile: the recipe of {stamps[0]} has no 'pip install -e .[EXTRAS]'"
        raise ValueError(msg)
    return tuple(install.group(1).split(",")) if install.group(1) else ()


def _closure(requirements):
    """Canonical names of the distributions that ``requirements`` install, with theirs."""
    names, seen, todo = set(), set(), [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        names.add(name)
        try:
            requires = md.requires(req.name) or []
        except md.PackageNotFoundError:
            continue
        extras = {"", *req.extras}
        for sub in map(Requirement, requires):
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
                todo.append(sub)
    return names


def _venv_tools():
    """What the Makefile's virtualenv is made with (``pip install --upgrade pip setuptools wheel``)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    tools = re.search(r"^\$\(PY\):.*\n(?:\t.*\n)*?\t.*pip install --upgrade ([\w -]+)$", makefile, re.M)
    return tools.group(1).split() if tools else []


def missing_modules(extras):
    """Top-level modules of this environment that an install of fastcal with ``extras`` (its
    core requirements, in the Makefile's virtualenv) lacks: the other extras' alone."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    optional = project["optional-dependencies"]
    unknown = sorted(set(extras) - set(optional))
    if unknown:
        msg = f"pyproject.toml has no extra {unknown[0]!r}; it has {sorted(optional)}"
        raise ValueError(msg)
    kept = _closure([*_venv_tools(), *project["dependencies"], *(r for e in extras for r in optional[e])])
    dropped = _closure([r for e, reqs in optional.items() if e not in extras for r in reqs]) - kept
    return sorted(module for module, dists in md.packages_distributions().items()
                  if module.isidentifier()
                  and all(canonicalize_name(d) in dropped for d in dists))


def without(modules):
    """Python source that, run first in a child, makes ``modules`` (top-level names)
    unimportable, as where they are not installed."""
    return (
        "import sys\n"
        f"_MISSING = frozenset({sorted(modules)!r})\n"
        "class _NotInstalled:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in _MISSING:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _NotInstalled())\n"
    )
