"""JSON as every report and command writes it: NaN is null, an infinity the string
"inf" or "-inf", numpy unwrapped (a leaf: it imports no fastcal module)."""

import json
import math
import numbers


def clean(x):
    """A JSON-safe scalar: NaN -> None, +-inf -> "inf" / "-inf", numpy -> Python
    (by the number tower, so that importing this module needs no numpy)."""
    if isinstance(x, bool):
        return x
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        x = float(x)
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    return x


def json_safe(x):
    """``x`` with plain Python types throughout: dicts (keys as str), lists, numpy
    scalars and arrays (anything with ``tolist``) unwrapped, floats :func:`clean`."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if hasattr(x, "tolist") and not isinstance(x, (str, bytes)):  # numpy scalar or array
        return json_safe(x.tolist())
    return clean(x)


def json_text(obj):
    """The whole JSON text of ``obj`` (one line and a newline), built before anything
    is printed: strict JSON (``allow_nan=False``) of :func:`json_safe`."""
    return json.dumps(json_safe(obj), allow_nan=False) + "\n"
