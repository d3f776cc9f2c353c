"""What the tracking CLI writes: JSON as fastcal writes it, outputs checked and committed together.

JSON: NaN becomes ``null`` and +-inf the strings ``"inf"`` / ``"-inf"`` (as
``fastcal score --json``), built whole in memory before anything is printed.
Outputs: refused when they are an input (or inside an input directory) or
another output, by path or through a link; written with
:func:`fastcal._atomic.commit`, all of them or none.
"""

import json
import math
import os

import numpy as np

from fastcal import _atomic

__all__ = ["jsonable", "to_json", "check_outputs", "commit"]


def jsonable(obj):
    """A copy of ``obj`` with JSON-safe scalars: NaN -> None, +-inf -> "inf" / "-inf", numpy -> Python."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    return obj


def to_json(obj):
    """One line of strict JSON (``allow_nan=False``) for ``obj`` made :func:`jsonable`."""
    return json.dumps(jsonable(obj), allow_nan=False) + "\n"


def _same(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_outputs(outputs, inputs):
    """Before any work: each ``(option, path)`` output is writable, not an input and not another output.

    Raises ValueError with one line naming the option and the path.
    """
    seen = []
    for option, target in outputs:
        if target is None or target == "-" or _atomic.is_special(target):
            continue
        real = _atomic.resolve(target)
        if os.path.isdir(real):
            msg = f"{option} {target}: is a directory; expected a file name"
            raise ValueError(msg)
        folder = os.path.dirname(real)
        if not os.path.isdir(folder):
            msg = f"{option} {target}: the directory {folder} does not exist"
            raise ValueError(msg)
        for inp in inputs:
            src = os.path.realpath(inp)
            if real == src or _same(real, src) or (os.path.isdir(src) and os.path.commonpath([real, src]) == src):
                msg = f"{option} {target}: is the input {inp} (or inside it); refusing to overwrite an input"
                raise ValueError(msg)
        for other, other_real in seen:
            if real == other_real or _same(real, other_real):
                msg = f"{option} {target}: is also the {other} output; expected a different file for each output"
                raise ValueError(msg)
        seen.append((option, real))


def commit(outputs):
    """Write ``[(path, bytes)]`` all together (``"-"`` is standard output, written last)."""
    _atomic.commit(outputs)


def cleanup():
    """Remove temporary files of an interrupted write."""
    _atomic.cleanup()
