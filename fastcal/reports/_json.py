"""JSON-safe scalars, shared by every report (a leaf: it imports no fastcal module)."""

import math

import numpy as np


def clean(x):
    """A JSON-safe scalar: NaN -> None, +-inf -> "inf" / "-inf", numpy -> Python."""
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    return x
