"""The settings of an accumulator, checked once when made (:class:`Settings`).

The driver (:meth:`fastcal.score.Options.accumulator`) and the keyword front
doors (``CalibrationAccumulator(...)``, ``BinaryAccumulator(...)``, ...) make
one; every state class takes it whole and reads what its kind uses (soft
labels have no bins). Its bins are a :class:`~fastcal.inputs.binning.Bins`,
which gives the kernels their edges.
"""

from dataclasses import dataclass

import numpy as np

from fastcal.inputs import validation as v
from fastcal.inputs.binning import Bins
from fastcal.reports.stats import check_count, check_seed
from fastcal.inputs.validation import show

# The keyword options of every kind, as CalibrationAccumulator takes them.
KEYWORDS = ("n_bins", "edges", "closed", "nan_policy", "eps", "threads", "n_boot", "seed",
            "logits", "renormalize", "n_classes", "classwise", "ace_buckets", "with_logs",
            "smooth")
# the keywords that make the bins
BIN_KEYWORDS = ("n_bins", "edges", "closed")
# the keywords of the binned states of one probability or logit column
BINNED = frozenset(KEYWORDS) - {"logits", "renormalize", "n_classes", "classwise"}


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
    eps: float = None
    threads: int = None
    n_boot: int = 0
    seed: int = 0
    logits: bool = False
    renormalize: bool = False
    n_classes: int = None
    classwise: bool = True
    ace_buckets: int = 0
    with_logs: bool = True
    smooth: bool = False

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
            smooth=bool(self.smooth))
        for name, value in checked.items():
            object.__setattr__(self, name, value)  # frozen: set once, here

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


def check_buckets(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 or (
            n and (n & (n - 1) or n < 16 or n > 1 << 24)):
        msg = f"ace_buckets must be 0 or a power of two from 16 to 2**24; got {show(n)}"
        raise ValueError(msg)
    return int(n)
