"""One table from the kernels' invalid-input counts to error messages.

Every fill kernel (binary, binary logits, multi-class, soft labels, and
their GPU versions) reports bad rows the same way: ``checks[kind]`` is how
many rows of that kind it met and ``checks[n_kinds + kind]`` the first of
them (-1 if none). :func:`raise_for` turns the first kind that applies into
one ``ValueError`` that names the argument, the count, the first row and
what was expected; the tables below are the only place those sentences live.
"""

from dataclasses import dataclass

import numpy as np

from fastcal._kernels import _config
from fastcal._kernels import binary as kb
from fastcal._kernels import multiclass as km
from fastcal.inputs.validation import prob_range_hint

_OMIT = "pass nan_policy='omit' to drop them"
_OMIT_ROWS = "pass nan_policy='omit' to drop those rows"


@dataclass(frozen=True)
class Check:
    """One kind of bad row: its index in the kernel's checks, the message
    (a format string over ``n``, ``row`` and the fields of ``detail``), and
    whether it is an error only under ``nan_policy="raise"``."""

    kind: int
    text: str
    nan: bool = False
    detail: object = None  # (first row, context) -> dict of more fields


@dataclass(frozen=True)
class Table:
    n_kinds: int  # the kernel's number of kinds: first rows follow the counts
    omitted: int  # the kind that counts rows dropped under nan_policy='omit'
    checks: tuple


def _row_min(r, ctx):
    return {"min": float(np.min(ctx["p"][r]))}


def _row_sum(r, ctx):
    return {"sum": float(np.sum(ctx["p"][r], dtype=np.float64))}


def _label(r, ctx):
    label = ctx["y"][r]
    return {"label": label.item() if hasattr(label, "item") else label,
            "top": ctx["p"].shape[1] - 1, "k": ctx["p"].shape[1]}


def _range_hint(r, ctx):
    return {"hint": prob_range_hint(ctx.get("p"))}


def _target_row(r, ctx):
    t = ctx["t"][r]
    return {"min": float(np.min(t)), "sum": float(np.sum(t, dtype=np.float64))}


_NAN_P = Check(kb.CHECK_NAN_P, "y_prob contains {n} NaN values (first at index {row}); " + _OMIT,
               nan=True)
_NAN_Y = Check(kb.CHECK_NAN_Y, "y_true contains {n} NaN values (first at index {row}); " + _OMIT,
               nan=True)
_BAD_Y = Check(kb.CHECK_BAD_Y, "y_true contains {n} labels other than 0 and 1 (first at index "
                               "{row}); binary labels must be 0/1 or bool")

BINARY = Table(kb.N_CHECK_KINDS, kb.CHECK_OMITTED, (
    _NAN_P, _NAN_Y,
    Check(kb.CHECK_RANGE_P, "y_prob contains {n} values outside [0, 1] or infinite (first at "
                            "index {row}); probabilities must be in [0, 1]{hint}",
          detail=_range_hint),
    _BAD_Y,
))

BINARY_LOGITS = Table(kb.N_CHECK_KINDS, kb.CHECK_OMITTED, (
    Check(kb.CHECK_RANGE_P, "y_prob (logits) contains {n} infinite values (first at index "
                            "{row}); logits must be finite"),
    _NAN_P, _NAN_Y, _BAD_Y,
))

_MC_NAN_P = Check(km.CHECK_NAN_P, "y_prob contains NaN in {n} rows (first at row {row}); "
                  + _OMIT_ROWS, nan=True)
_MC_NEG_P = Check(km.CHECK_NEG_P, "y_prob has negative probabilities in {n} rows (first at row "
                  "{row}, min {min:.6g}); probabilities must be >= 0 (pass logits=True if these "
                  "are logits)", detail=_row_min)
_MC_INF = Check(km.CHECK_INF_P, "y_prob has an infinite value in {n} rows (first at row {row}); "
                "probabilities must be finite")
_MC_SUM = Check(km.CHECK_SUM_P, "y_prob has {n} rows that do not sum to 1 within "
                f"{_config.SUM_TOL:g} (first at row {{row}}, sum {{sum!r}}); pass "
                "renormalize=True to divide each row by its sum, or logits=True if these are "
                "logits", detail=_row_sum)
_MC_SUM_ZERO = Check(km.CHECK_SUM_P, "y_prob has {n} rows summing to 0 (first at row {row}); "
                     "they cannot be renormalized")
_MC_LABELS = (
    Check(km.CHECK_NAN_Y, "y_true contains {n} NaN labels (first at row {row}); " + _OMIT_ROWS,
          nan=True),
)
_MC_BAD_Y = Check(km.CHECK_BAD_Y, "y_true has {n} labels outside the class indices 0..{top} "
                  "(first: label {label!r} at row {row}); labels must be integers in [0, K) "
                  "with K = {k} columns of y_prob", detail=_label)

MULTICLASS = Table(km.N_CHECK_KINDS, km.CHECK_OMITTED, (
    _MC_NAN_P, *_MC_LABELS, _MC_INF, _MC_NEG_P, _MC_SUM, _MC_BAD_Y))
MULTICLASS_RENORMALIZE = Table(km.N_CHECK_KINDS, km.CHECK_OMITTED, (
    _MC_NAN_P, *_MC_LABELS, _MC_INF, _MC_NEG_P, _MC_SUM_ZERO, _MC_BAD_Y))
MULTICLASS_LOGITS = Table(km.N_CHECK_KINDS, km.CHECK_OMITTED, (
    _MC_NAN_P, *_MC_LABELS,
    Check(km.CHECK_INF_P, "y_prob has +inf, or every logit -inf in {n} rows (first at row "
                          "{row}); logits must be finite"),
    _MC_BAD_Y,
))

_SOFT_TARGET = (
    Check(km.CHECK_NAN_Y, "y_true contains NaN in {n} rows (first at row {row}); " + _OMIT_ROWS,
          nan=True),
    Check(km.CHECK_BAD_T, "y_true has {n} rows that are not label distributions (first at row "
                          "{row}: min {min:.6g}, sum {sum!r}); each row must be non-negative, "
                          f"finite and sum to 1 within {_config.SUM_TOL:g}",
          detail=_target_row),
)


def _soft(table):
    """A soft-label table: the target checks first, then y_prob's (labels are no indices)."""
    rest = tuple(c for c in table.checks if c.kind not in (km.CHECK_NAN_Y, km.CHECK_BAD_Y))
    return Table(table.n_kinds, table.omitted, _SOFT_TARGET + rest)


SOFT = _soft(MULTICLASS)
SOFT_RENORMALIZE = _soft(MULTICLASS_RENORMALIZE)
SOFT_LOGITS = _soft(MULTICLASS_LOGITS)


def multiclass_table(logits, renormalize, soft=False):
    """The table of K-class input (and of soft labels with ``soft``)."""
    if logits:
        return SOFT_LOGITS if soft else MULTICLASS_LOGITS
    if renormalize:
        return SOFT_RENORMALIZE if soft else MULTICLASS_RENORMALIZE
    return SOFT if soft else MULTICLASS


def first_error(table, checks, nan_policy, offset=0, **context):
    """The message of the first check of ``table`` that fails, or None.

    ``offset`` is added to the kernel's first row (the chunk's global row);
    ``context`` holds the arrays some messages quote (``y``, ``p``, ``t``),
    indexed by the kernel's own row, or functions that return them (GPU data
    is copied to the host only for a message; see ``Batch.context``).
    """
    for check in table.checks:
        n = int(checks[check.kind])
        if n == 0 or (check.nan and nan_policy != "raise"):
            continue
        r = int(checks[table.n_kinds + check.kind])
        fields = {"n": n, "row": r + offset}
        if check.detail is not None:
            ctx = {k: x() if callable(x) else x for k, x in context.items()}
            fields.update(check.detail(r, ctx))
        return check.text.format(**fields)
    return None


def raise_for(table, checks, nan_policy, offset=0, **context):
    """Raise the ValueError of the first failing check of ``table`` (see first_error)."""
    msg = first_error(table, checks, nan_policy, offset, **context)
    if msg is not None:
        raise ValueError(msg)


def omitted(table, checks):
    """Rows the kernel dropped under nan_policy='omit'."""
    return int(checks[table.omitted])
