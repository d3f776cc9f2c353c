"""The settings of an accumulator, checked once when made (:class:`Settings`).

The driver (:meth:`fastcal.score.Options.accumulator`) and the keyword front
doors (``CalibrationAccumulator(...)``, ``BinaryAccumulator(...)``, ...) make
one; every state class takes it whole and reads what its kind uses (soft
labels have no bins). Its bins are a :class:`~fastcal.inputs.binning.Bins`,
which gives the kernels their edges.
"""

from dataclasses import dataclass

import numpy as np

from fastcal._kernels import binary as kb
from fastcal._kernels import ecce as kec
from fastcal._kernels import smooth as ks
from fastcal.inputs import validation as v
from fastcal.inputs.binning import Bins
from fastcal.inputs.validation import show
from fastcal.reports.stats import check_count, check_seed

# The keyword options of every kind, as CalibrationAccumulator takes them.
KEYWORDS = ("n_bins", "edges", "closed", "nan_policy", "eps", "threads", "n_boot", "seed",
            "logits", "renormalize", "n_classes", "classwise", "ace_buckets", "with_logs",
            "smooth", "ecce", "weighted")
# the keywords that make the bins
BIN_KEYWORDS = ("n_bins", "edges", "closed")
# the keywords of the binned states of one probability or logit column
BINNED = frozenset(KEYWORDS) - {"logits", "renormalize", "n_classes", "classwise"}
# the keywords that decide what a state holds: two states merge only when these are equal
# (threads and nan_policy change how rows are read, not what the sums mean)
STATE_KEYWORDS = tuple(k for k in KEYWORDS if k not in ("threads", "nan_policy"))

#: The most memory one binned state may take (its per-bin arrays, bootstrap replicates,
#: ACE's buckets, the smooth ECE grid and K x n_bins class-wise counters), checked
#: before any of it is allocated: a state is meant to be small, and it is copied per
#: thread while filling and gathered from every process under DDP.
MAX_STATE_BYTES = 1 << 30


@dataclass(frozen=True)
class Settings:
    """Every option of an accumulator, checked once when made.

    The meaning of each is in :class:`fastcal.CalibrationAccumulator`; ``bins``
    holds ``n_bins``, ``edges`` and ``closed``. Read as a mapping of those
    keywords (``settings["n_bins"]``, ``CalibrationAccumulator(**settings)``),
    it gives the options it was made from, checked.

    Raises
    ------
    ValueError
        The message of the check of the first bad option (the same as the
        public functions').

    Examples
    --------
    >>> from fastcal.accumulators.settings import Settings
    >>> s = Settings.of(dict(n_bins=5, eps=1e-6))
    >>> s.bins.n_bins, s.eps, s["closed"]
    (5, 1e-06, 'left')
    """

    bins: Bins = Bins()
    nan_policy: str = "raise"
    eps: float | None = None
    threads: int | None = None
    n_boot: int = 0
    seed: int = 0
    logits: bool = False
    renormalize: bool = False
    n_classes: int | None = None
    classwise: bool = True
    ace_buckets: int = 0
    with_logs: bool = True
    smooth: bool = False
    ecce: bool = False
    weighted: bool = False

    def __post_init__(self):
        if not isinstance(self.bins, Bins):
            msg = f"bins must be a Bins; got {type(self.bins).__name__}"
            raise TypeError(msg)
        checked = dict(
            nan_policy=v.check_choice("nan_policy", self.nan_policy, v.NAN_POLICIES),
            eps=v.check_eps(self.eps),
            threads=self.threads if self.threads is None else v.check_threads(self.threads),
            n_boot=check_count("n_boot", self.n_boot, 0), seed=check_seed(self.seed),
            n_classes=v.check_n_classes(self.n_classes),
            ace_buckets=check_buckets(self.ace_buckets),
            logits=bool(self.logits), renormalize=bool(self.renormalize),
            classwise=bool(self.classwise), with_logs=bool(self.with_logs),
            smooth=bool(self.smooth), ecce=bool(self.ecce), weighted=bool(self.weighted))
        for name, value in checked.items():
            object.__setattr__(self, name, value)  # frozen: set once, here
        k = self.n_classes
        self.check_size(k, "" if k is None else f"n_classes={k:,}")

    def check_size(self, n_classes, what, *, copies=1):
        """:func:`check_state_size` of a state of these settings with ``n_classes``
        classes (None: binary, or K not known yet), ``copies`` of it together."""
        check_state_size(self.bins.n_bins, n_classes, classwise=self.classwise,
                         n_boot=self.n_boot, ace_buckets=self.ace_buckets, smooth=self.smooth,
                         ecce=self.ecce, what=what, copies=copies)

    @classmethod
    def of(cls, options, takes=KEYWORDS):
        """The settings of keyword ``options`` (a dict of some of ``KEYWORDS``;
        the others take their defaults).

        Raises
        ------
        TypeError
            A keyword not in ``takes``: it is an error, never dropped.
        """
        unknown = sorted(set(options) - set(takes))
        if unknown:
            msg = (f"unknown accumulator option(s) {', '.join(unknown)}; expected some of "
                   f"{', '.join(sorted(takes))}")
            raise TypeError(msg)
        bins = Bins(**{k: x for k, x in options.items() if k in BIN_KEYWORDS})
        return cls(bins, **{k: x for k, x in options.items() if k not in BIN_KEYWORDS})

    def keys(self):
        """The keyword options (``KEYWORDS``): with ``__getitem__``, ``**settings`` works."""
        return KEYWORDS

    def __getitem__(self, name):
        if name not in KEYWORDS:
            raise KeyError(name)
        return getattr(self.bins if name in BIN_KEYWORDS else self, name)


def state_settings(settings, options, takes):
    """What a state class is made with: ``settings`` (a :class:`Settings`) whole,
    or the settings of its keyword ``options``, each one of ``takes``."""
    if settings is None:
        return Settings.of(options, takes)
    if not isinstance(settings, Settings):
        msg = f"settings must be a Settings; got {type(settings).__name__}"
        raise TypeError(msg)
    if options:
        msg = (f"an accumulator takes a Settings or keyword options, not both; got "
               f"settings and {', '.join(sorted(options))}")
        raise TypeError(msg)
    return settings


def state_bytes(n_bins, n_classes=None, *, classwise=True, n_boot=0, ace_buckets=0,
                smooth=False, ecce=False):
    """The bytes of a binned state by part (a dict of part -> bytes): ``n_classes``
    None for a binary state (or one whose K is not known yet)."""
    # 8 bytes an int64 count or a float64 sum (the arrays of the binned layouts of
    # fastcal.backends.layout: per bin, replicates, buckets, grid, class-wise)
    parts = {"per-bin arrays": 8 * ((n_bins + 1) * (kb.N_COUNTS + kb.N_SUMS) + kb.N_TOTALS),
             f"bootstrap replicates (n_boot={n_boot:,} x n_bins x 32 bytes)": n_boot * n_bins * 32,
             f"ACE buckets (ace_buckets={ace_buckets:,})":
                 8 * (ace_buckets + 1) * (kb.N_COUNTS + 1) if ace_buckets else 0,
             "smooth ECE grid": 8 * (2 * (ks.GRID + 1) + 1) if smooth else 0,
             "ECCE buckets": 8 * (4 * (kec.BUCKETS + 1) + 2) if ecce else 0}
    if n_classes is not None and classwise:
        parts[f"class-wise counters ({n_classes:,} classes x n_bins x 24 bytes)"] = \
            n_classes * n_bins * 24
    return parts


def check_state_size(n_bins, n_classes=None, *, classwise=True, n_boot=0, ace_buckets=0,
                     smooth=False, ecce=False, what="", copies=1):
    """Refuse, before anything is allocated, a binned state of more than
    ``MAX_STATE_BYTES``. ``what`` says where K comes from in the message
    (``"n_classes=1,000"``, ``"y_prob's 1,000 columns"``). ``copies``: the
    state is that many states of these options side by side (one per group of
    :class:`fastcal.torch.CalibrationMetric`'s ``num_groups``; ``what`` names it).

    Raises
    ------
    ValueError
        One line: the options, the memory the state would take, its largest part
        and the limit.
    """
    parts = state_bytes(n_bins, n_classes, classwise=classwise, n_boot=n_boot,
                        ace_buckets=ace_buckets, smooth=smooth, ecce=ecce)
    each = sum(parts.values())
    total = copies * each
    if total <= MAX_STATE_BYTES:
        return
    largest = max(parts, key=parts.get)
    hint = ("pass classwise=False (top-label state only) or fewer bins"
            if largest.startswith("class-wise") else
            "use fewer replicates or bins" if largest.startswith("bootstrap") else
            "use fewer bins or buckets")
    if copies > 1 and each <= MAX_STATE_BYTES:
        hint = f"use at most {MAX_STATE_BYTES // each:,} groups, or {hint.replace('use ', '')}"
    source = f"{what} with " if what else ""
    size = f"{_gib(total)} ({copies:,} states of {each:,} bytes)" if copies > 1 else _gib(total)
    msg = (f"{source}n_bins={n_bins:,} makes a state of {size}, mostly {largest}; a "
           f"state may take at most {_gib(MAX_STATE_BYTES)} "
           f"(fastcal.accumulators.settings.MAX_STATE_BYTES): {hint}")
    raise ValueError(msg)


def _gib(n):
    return f"{n / 2**30:,.3g} GiB" if n >= 2**30 else f"{n / 2**20:,.3g} MiB"


def check_buckets(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 or (
            n and (n & (n - 1) or n < 16 or n > 1 << 24)):
        msg = f"ace_buckets must be 0 or a power of two from 16 to 2**24; got {show(n)}"
        raise ValueError(msg)
    return int(n)
