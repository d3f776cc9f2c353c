"""Recalibration judged by ECD: temperature, Platt, isotonic and histogram binning.

Each method is a small fitted object with ``fit(y_true, y_prob)`` (arrays in
memory), ``fit_source(source)`` (any source of the driver: arrays, a file read
in chunks, Dask partitions), ``transform(y_prob)`` (probabilities from the same
kind of input: probabilities or logits, 1-D binary or (N, K)), ``to_dict`` /
:func:`from_dict` for saving. Options are keyword-only and fitted attributes
end in ``_``, as in scikit-learn.

How they are fitted, from any source, in a bounded number of passes:

- **Temperature** (binary or K classes, one scalar T; q = sigmoid(z / T) or
  softmax(z / T)): Newton steps on s = 1 / T, where the NLL is convex. Each
  step is one pass that sums the gradient and Hessian of the NLL (float64,
  mergeable); a step that leaves the bracket known so far is replaced by
  bisection. Stops when the step is below ``tol`` relative (the last step is
  then taken without another pass).
- **Platt** (binary: q = sigmoid(a f + b), f the logit or logit(p)): 2-D
  Newton steps with step halving, one pass per step.
- **Isotonic** (binary; top-label for K classes) and **histogram binning**:
  one pass fills, per bin of the value (p, sigmoid of the logit, or the
  top-label confidence), rows, positives and the sum of the value. Histogram
  binning is exact from it. Isotonic regression from a source pools the rows
  of each of ``n_fine`` bins (2**16 by default: resolution 1.5e-5 in p) at
  their mean value: it is the exact isotonic regression of the data with each
  value replaced by its bin's mean (moved by less than 1 / n_fine), i.e. it
  differs from the exact fit only in that rows inside one fine bin are no
  longer ordered among themselves. It is therefore exact when every fine bin
  holds one distinct value (tests/recalibrate/test_recalibrate.py checks both). In
  memory, ``fit`` is exact pool-adjacent-violators over the distinct values
  (scikit-learn's IsotonicRegression gives the same thresholds only when no two
  distinct values lie within 1e-15 of each other: it pools such near-ties).

The safe target (temperature): the ECD test of the recalibrated
probabilities has z(s) = g(s) / sqrt(h(s)), where g and h are the gradient
and Hessian of the NLL in s = 1 / T (binary: sum (q - y) z and
sum q (1 - q) z^2; K classes: sum E_q z - z_y and sum Var_q z; eq. 12 and 15
give s g and s^2 h, and s cancels). ``target="safe"`` returns the temperature
closest to 1 whose one-sided p-value for over-confidence reaches ``alpha``:
T = 1 if the model is not flagged, otherwise the root of
g(s) - z_(1-alpha) sqrt(h(s)) between the NLL optimum and s = 1, found by
safeguarded Newton steps (its derivative needs the third derivative of the
NLL, summed in the same pass). The NLL optimum is fitted first; the fitted
object keeps both, so the cost of being safe is ``nll_ - nll_at_optimum_``.

The package holds one module per method (``temperature``, ``platt``,
``isotonic``, ``histogram``, and ``binned`` for what the last two share),
``base`` (what every method shares), ``passes`` (what one pass computes),
``sources`` (reading a source in passes; :func:`fit_file`, :func:`fit_dask`),
``fields`` and ``io`` (saved maps) and ``evaluation``.

Examples
--------
A method by name, fitted, saved and read back:

>>> import numpy as np
>>> from fastcal import recalibrate
>>> rng = np.random.default_rng(0)
>>> p = rng.random(10_000)
>>> y = (rng.random(10_000) < p ** 2).astype(np.uint8)
>>> m = recalibrate.make("platt").fit(y, p)
>>> again = recalibrate.from_dict(m.to_dict())
>>> bool(np.array_equal(again.transform(p), m.transform(p)))
True
"""

# the names after "as" are kept where users may have imported them from here
from fastcal.recalibrate.base import FORMAT_VERSION as FORMAT_VERSION
from fastcal.recalibrate.base import NAN_POLICIES as NAN_POLICIES
from fastcal.recalibrate.evaluation import Evaluation, before_after_diagram, evaluate
from fastcal.recalibrate.fields import (
    MAX_MAP_BINS as MAX_MAP_BINS,
)
from fastcal.recalibrate.fields import (
    MAX_N_FINE as MAX_N_FINE,
)
from fastcal.recalibrate.fields import (
    MAX_TEMPERATURE as MAX_TEMPERATURE,
)
from fastcal.recalibrate.fields import (
    MIN_TEMPERATURE as MIN_TEMPERATURE,
)
from fastcal.recalibrate.histogram import HistogramBinning
from fastcal.recalibrate.io import from_dict, load
from fastcal.recalibrate.isotonic import IsotonicCalibration
from fastcal.recalibrate.methods import METHODS as METHODS
from fastcal.recalibrate.methods import make
from fastcal.recalibrate.platt import PlattScaling
from fastcal.recalibrate.sources import _Data as _Data
from fastcal.recalibrate.sources import _Runner as _Runner
from fastcal.recalibrate.sources import fit_dask, fit_file
from fastcal.recalibrate.temperature import TARGETS as TARGETS
from fastcal.recalibrate.temperature import TemperatureScaling

__all__ = ["TemperatureScaling", "PlattScaling", "IsotonicCalibration", "HistogramBinning",
           "Evaluation", "evaluate", "fit_file", "fit_dask", "from_dict", "load", "make", "before_after_diagram"]
