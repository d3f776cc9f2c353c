"""The bounds of a saved map and the checks of its fields: one ValueError naming
the first bad field, sizes checked before any array is allocated."""

import numpy as np

from fastcal.inputs import validation as v

# bounds of a saved map, checked on load (and by the fits, which never save outside them)
MIN_TEMPERATURE = 1e-6  # 1 / T must be a normal, finite scale of the logits
MAX_TEMPERATURE = 1e6
MAX_MAP_BINS = v.MAX_BINS  # histogram n_bins (the bins cap of the API and the CLI)
MAX_N_FINE = v.MAX_BINS    # isotonic n_fine: the fit fills that many value bins
_BIG = float(np.finfo(np.float64).max)


def _check_size(name, value, top):
    """A fit's bin count: an integer in [1, top], so that its map loads again."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > top:
        msg = f"{name} must be <= {top:,}; got {int(value):,}"
        raise ValueError(msg)
    try:
        return v.check_n_bins(value)
    except ValueError as exc:  # the same rule, under this option's name
        raise ValueError(str(exc).replace("n_bins", name, 1)) from None


def _field(name, value, expected):
    """The one-line error of a bad map field (``value`` shown short, never recursed into)."""
    if isinstance(value, (list, dict)):
        shown = f"a {type(value).__name__} of {len(value)} items"
    else:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return ValueError(f"{name} must be {expected}; got {shown}")


def _int_field(d, name, lo, hi, *, prefix="", default=None, allow_none=False):
    value = d.get(name, default)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _field(prefix + name, value, f"an integer in [{lo}, {hi}]")
    return value


def _number_field(d, name, lo, hi, *, prefix="", open_lo=False, open_hi=False, default=None):
    value = d.get(name, default)
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) \
        and -_BIG <= value <= _BIG  # finite (also a Python int of 400 digits: no overflow)
    if ok:
        value = float(value)
        ok = (lo < value if open_lo else lo <= value) and (value < hi if open_hi else value <= hi)
    if not ok:
        lb, rb = "(" if open_lo else "[", ")" if open_hi else "]"
        raise _field(prefix + name, value, f"a finite number in {lb}{lo:g}, {hi:g}{rb}")
    return value


def _bool_field(d, name, *, prefix="", default=False):
    value = d.get(name, default)
    if not isinstance(value, bool):
        raise _field(prefix + name, value, "a JSON boolean (true or false)")
    return value


def _array_field(d, name, lo, hi, max_len, *, prefix=""):
    """A non-empty list of finite numbers in [lo, hi] (at most ``max_len`` if given),
    as float64 (its length is checked before anything is allocated)."""
    value = d.get(name)
    if not isinstance(value, list) or not 1 <= len(value) <= (max_len or len(value)):
        what = f"1 to {max_len}" if max_len else "1 or more"
        raise _field(prefix + name, value, f"a list of {what} numbers")
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not lo <= x <= hi:
            raise _field(f"{prefix}{name}[{i}]", x, f"a finite number in [{lo:g}, {hi:g}]")
    return np.asarray(value, np.float64)
