"""Griffe extension (not API): docstrings completed at import time are read from the live object.

``fastcal.distributed`` fills a shared block of options into three docstrings with
``str.format`` when it is imported; static analysis sees the ``{options}`` placeholder.
"""

import importlib
import inspect

import griffe


class RuntimeDocstrings(griffe.Extension):
    def on_function_instance(self, *, node, func, agent, **kwargs):
        if func.docstring is not None and "{options}" in func.docstring.value:
            live = getattr(importlib.import_module(func.module.path), func.name)
            func.docstring.value = inspect.cleandoc(live.__doc__)
