"""How fastcal's messages show the values they quote (also for packages built on fastcal).

Examples
--------
>>> import numpy as np
>>> from fastcal.messages import show
>>> show(np.float64(0.5)), show((np.int64(3), 4)), show("p")
('0.5', '(3, 4)', "'p'")
"""

import sys


def show(value):
    """``repr(value)`` as plain Python, for a message: a numpy scalar as the number or
    string it holds (``0.5``, not ``np.float64(0.5)``), in a tuple or list too.

    Imports nothing: a numpy scalar exists only once numpy is loaded, so a module
    that must start light (the commands' entry, :mod:`fastcal.noisy`) can use it."""
    np = sys.modules.get("numpy")
    if np is None:
        return repr(value)
    if isinstance(value, np.generic):
        value = value.item()
    elif isinstance(value, (tuple, list)):
        value = type(value)(v.item() if isinstance(v, np.generic) else v for v in value)
    return repr(value)


__all__ = ["show"]
