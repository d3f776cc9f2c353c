"""Saved maps read back: :func:`from_dict` and :func:`load`, every field checked
before anything is built (a map is data, never code)."""

import json

from fastcal.recalibrate.base import FORMAT_VERSION
from fastcal.recalibrate.fields import _bool_field, _int_field
from fastcal.recalibrate.methods import _CLASSES, METHODS


def from_dict(d):
    """The fitted object saved by ``to_dict`` (or ``to_json``, parsed).

    Every field is checked before anything is built (a map is data, never
    code): one ValueError names the first bad field. Temperature: a finite
    T in [MIN_TEMPERATURE, MAX_TEMPERATURE] = [1e-6, 1e6]; Platt: finite a > 0
    and b (a <= 0 would invert the ranking), feature "logit" (also when
    absent) or "p" (not in a map of logits); isotonic: one knot or more,
    x strictly increasing in [0, 1], y non-decreasing in [0, 1], equal
    lengths; histogram: n_bins in [1, MAX_MAP_BINS] equal to len(values),
    values in [0, 1], counts (optional) non-negative integers; ``n`` an
    integer >= 0, ``n_classes`` null or an integer >= 2, ``logits`` a JSON
    boolean. Sizes are checked before any array is allocated.
    """
    if not isinstance(d, dict) or d.get("fastcal_recalibration") != FORMAT_VERSION \
            or isinstance(d.get("fastcal_recalibration"), bool) \
            or d.get("method") not in METHODS or not isinstance(d.get("params"), dict):
        keys = sorted(map(str, d))[:6] if isinstance(d, dict) else type(d).__name__
        msg = (f"not a fastcal recalibration (expected a dict with fastcal_recalibration="
               f"{FORMAT_VERSION}, a method in {list(METHODS)} and params); got {keys}")
        raise ValueError(msg)
    method = d["method"]
    logits = _bool_field(d, "logits")
    n_classes = _int_field(d, "n_classes", 2, 1 << 31, allow_none=True)
    n = _int_field(d, "n", 0, (1 << 63) - 1, default=0)
    obj = _CLASSES[method](logits=logits)
    obj._set_params(d["params"])
    obj.n_classes_ = n_classes
    obj.n_ = n
    return obj


def load(path):
    """The fitted object saved in a JSON file (``fastcal recalibrate --out``).

    Raises
    ------
    ValueError
        One line naming ``path`` and the first bad field (see :func:`from_dict`),
        or saying why the file is not a map (not UTF-8 JSON, nested too deeply).
    OSError
        The file cannot be read.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
    except json.JSONDecodeError as exc:
        msg = f"{path}: not JSON ({exc.msg} at line {exc.lineno})"
        raise ValueError(msg) from None
    except RecursionError:
        msg = f"{path}: not a fastcal recalibration (JSON nested too deeply)"
        raise ValueError(msg) from None
    except (UnicodeDecodeError, ValueError) as exc:  # not UTF-8; an integer of > 4300 digits
        msg = f"{path}: not a fastcal recalibration ({type(exc).__name__}: {exc})"
        raise ValueError(msg[:300]) from None
    try:
        return from_dict(d)
    except ValueError as exc:
        msg = f"{path}: {exc}"
        raise ValueError(msg) from None
