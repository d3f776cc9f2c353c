"""The paper's simulated predictions (Sumler et al., "An Entropic Metric for Measuring
Calibration of Machine Learning Models", section V-A, eq. 16-19).

u' ~ Uniform(-10, 10), u = W u' (W = 0.5), true probability sigmoid(u),
label ~ Bernoulli(sigmoid(u)), reported probability sigmoid(u + e) with
e ~ N(0, sigma^2). sigma = 0 is perfectly calibrated; larger sigma is
over-confident.

Rows are generated in fixed blocks of BLOCK_ROWS, block k from its own seed
sequence (seed, k), so any row range is reproducible for a seed whatever the
chunking used to produce it.
"""

import numpy as np

from fastcal.inputs.validation import show

BLOCK_ROWS = 1 << 16


def _block(seed, k, sigma, weight):
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(k,))))
    u = weight * rng.uniform(-10.0, 10.0, BLOCK_ROWS)
    e = rng.normal(0.0, 1.0, BLOCK_ROWS)
    r = rng.random(BLOCK_ROWS)
    y = (r < 1.0 / (1.0 + np.exp(-u))).astype(np.uint8)
    p = 1.0 / (1.0 + np.exp(-(u + sigma * e)))
    return y, p


def simulate(n, *, sigma=0.0, seed=0, weight=0.5, start=0, dtype=np.float64):
    """Rows [start, start + n) of the paper's simulation.

    Parameters
    ----------
    n : int
        Number of rows.
    sigma : float, default 0
        Standard deviation of the log-odds noise (0, 0.5 and 2 in Table I).
    seed : int, default 0
    weight : float, default 0.5
        W of eq. 17.
    start : int, default 0
        First row, for generating a long sequence in chunks.
    dtype : float32 or float64
        dtype of the returned probabilities.

    Returns
    -------
    y_true : ndarray of uint8, y_prob : ndarray of ``dtype``

    Examples
    --------
    >>> y, p = simulate(5, sigma=0.5, seed=1)
    >>> y.shape, p.dtype
    ((5,), dtype('float64'))
    """
    if n < 0 or start < 0:
        msg = f"n and start must be >= 0; got n={n}, start={start}"
        raise ValueError(msg)
    if not sigma >= 0:
        msg = f"sigma must be >= 0; got {show(sigma)}"
        raise ValueError(msg)
    y = np.empty(n, np.uint8)
    p = np.empty(n, dtype)
    pos = 0
    while pos < n:
        row = start + pos
        k, off = divmod(row, BLOCK_ROWS)
        take = min(BLOCK_ROWS - off, n - pos)
        yb, pb = _block(seed, k, sigma, weight)
        y[pos:pos + take] = yb[off:off + take]
        p[pos:pos + take] = pb[off:off + take]
        pos += take
    return y, p


__all__ = ["simulate"]
