"""Griffe extension (not API): what a module completes at import time is read from the live objects.

``fastcal.distributed`` fills a shared block of options into three docstrings with
``str.format`` when it is imported; static analysis sees the ``{options}`` placeholder.
``fastcal.soft`` makes its measures with one factory (``entce, rankcs, ... = (...)``);
static analysis does not see them, so they are inspected as the functions they are.
"""

import importlib
import inspect

import griffe


class RuntimeDocstrings(griffe.Extension):
    def on_function_instance(self, *, node, func, agent, **kwargs):
        if func.docstring is not None and "{options}" in func.docstring.value:
            live = getattr(importlib.import_module(func.module.path), func.name)
            func.docstring.value = inspect.cleandoc(live.__doc__)

    def on_module_members(self, *, node, mod, agent, **kwargs):
        if isinstance(agent, griffe.Inspector):
            return
        exported = {str(name) for name in (mod.exports or ())}
        # exported, but not seen as a function (tuple unpacking is not recorded at all)
        unseen = [name for name in exported if name not in mod.members
                  or (not mod.members[name].is_alias and mod.members[name].is_attribute)]
        made = [name for name in unseen if _is_made(mod.path, name)]
        if made:
            live = griffe.inspect(mod.path)
            for name in made:
                mod.set_member(name, live.members[name])


def _is_made(path, name):
    """A function of the module made at import time (by a factory it holds). Read from the
    module's namespace: a name that a module ``__getattr__`` makes on first use (the scorers
    of ``fastcal.sklearn``, which import scikit-learn then) is not made here."""
    obj = vars(importlib.import_module(path)).get(name)
    return inspect.isfunction(obj) and obj.__module__ == path
