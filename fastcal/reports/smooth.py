"""Smooth ECE and the smoothed reliability curve, read off the grid sums.

The grid sums (``fastcal._kernels.smooth``) hold, per grid point j / G, the
rows' linear-interpolation weights (``mass``) and weighted residuals x - y
(``resid``). Smoothing with the reflected Gaussian kernel (Blasiok and
Nakkiran, 2023, eq. 9: the kernel of [0, 1] reflected at both ends, all
images) is a circular convolution of the even extension of each grid to
[0, 2), computed by FFT:

    R(t) = sum_i (x_i - y_i) K_sigma(t, x_i),   D(t) = sum_i K_sigma(t, x_i)
    smECE_sigma = int_0^1 |R(t)| dt / int_0^1 D(t) dt

with both integrals by the trapezoid rule on the grid (over the period of the
even extension: plain sums). smECE is smECE_sigma at the fixed point
sigma = smECE_sigma, found to about 1e-14 (Brent's method), never below
``SIGMA_MIN``.

A row at an end (x = 0 or 1) is its own mirror image: its reflected kernel
is twice the periodic Gaussian there, and its integral over [0, 1] is 1 as
for every other row. In the even extension the end points appear once where
every inner point appears twice (at t and 2 - t), so the ends carry weight 2:
then the extension's period holds each row's mass twice, wherever it lies.
"""

import numpy as np

from fastcal.inputs.validation import show

# The smallest bandwidth: relplot's floor (smECE(eps=0.001)); below it the grid
# (G = 8192 cells) would no longer resolve the kernel.
SIGMA_MIN = 1e-3


class SmoothGrid:
    """The spectra of one grid's sums, for smoothing at any bandwidth."""

    def __init__(self, mass, resid):
        self.g = mass.shape[0] - 1
        self.total = float(mass.sum())
        self._mass = np.fft.rfft(_even(mass))
        self._resid = np.fft.rfft(_even(resid))
        # the weights times their grid point: sum_i x_i K(t, x_i) once smoothed (linear
        # interpolation keeps each row's mean: (1 - w) j / G + w (j + 1) / G = x)
        self._first = np.fft.rfft(_even(mass * np.linspace(0.0, 1.0, self.g + 1)))
        self._freq = np.arange(self._mass.shape[0], dtype=np.float64)

    def _kernel(self, sigma):
        """The DFT of the period-2 Gaussian of unit mass sampled on the 2 G points,
        exp(-(pi sigma f)^2 / 2) at f cycles a period: its aliases are below
        exp(-2 (pi sigma G)^2), under 1e-300 for sigma >= SIGMA_MIN."""
        return np.exp(-0.5 * (np.pi * sigma * self._freq) ** 2)

    def smoothed(self, sigma):
        """(R, D) on the even extension (2 G points; the first G + 1 are [0, 1]),
        in units of rows per grid step."""
        k = self._kernel(sigma)
        length = 2 * self.g
        return (np.fft.irfft(self._resid * k, length), np.fft.irfft(self._mass * k, length))

    def smece(self, sigma):
        """smECE at bandwidth ``sigma`` (NaN for an empty grid)."""
        if self.total <= 0.0:
            return float("nan")
        r = np.fft.irfft(self._resid * self._kernel(sigma), 2 * self.g)
        # the trapezoid rule on [0, 1] is the plain sum over the even extension's period;
        # sum D over it is twice the mass (the kernel has unit mass)
        return float(np.abs(r).sum() / (2.0 * self.total))

    def fixed_point(self):
        """(smECE, sigma) at the fixed point sigma = smECE_sigma (NaN, NaN when empty)."""
        from scipy.optimize import brentq

        if self.total <= 0.0:
            return float("nan"), float("nan")
        gap = lambda s: s - self.smece(s)  # noqa: E731 (increasing: smoothing contracts)
        if gap(SIGMA_MIN) >= 0.0:
            sigma = SIGMA_MIN
        else:
            sigma = brentq(gap, SIGMA_MIN, 1.0, xtol=1e-15, rtol=4 * np.finfo(float).eps,
                           maxiter=200)
        return self.smece(sigma), float(sigma)

    def curve(self, sigma, step=16):
        """(t, mu, density) at every ``step``-th grid point: the smoothed mean of y,
        mu(t) = sum_i y_i K(t, x_i) / D(t) (relplot's curve: the kernel regression of
        y on x), and the density of the values (integral 1)."""
        r, d = self.smoothed(sigma)
        first = np.fft.irfft(self._first * self._kernel(sigma), 2 * self.g)
        idx = np.arange(0, self.g + 1, step)
        t = idx / self.g
        with np.errstate(invalid="ignore", divide="ignore"):
            mu = (first[idx] - r[idx]) / d[idx]  # sum x K - sum (x - y) K = sum y K
        return t, mu, d[idx] * self.g / self.total


def _even(a):
    """The even extension of a grid on [0, 1] to the period [0, 2): inner points at t
    and 2 - t, the two ends (their own mirror images) once at weight 2."""
    g = a.shape[0] - 1
    out = np.concatenate([a, a[g - 1:0:-1]])
    out[0] *= 2.0
    out[g] *= 2.0
    return out


def check_sigma(sigma):
    """``sigma``, a bandwidth in [SIGMA_MIN, 1], as float (None stays None)."""
    if sigma is None:
        return None
    ok = isinstance(sigma, (int, float, np.integer, np.floating)) and not isinstance(sigma, bool)
    if not ok or not SIGMA_MIN <= float(sigma) <= 1.0:
        msg = (f"sigma must be a number from {SIGMA_MIN} to 1 (the kernel's bandwidth), or None "
               f"for the fixed point sigma = smECE_sigma; got {show(sigma)}")
        raise ValueError(msg)
    return float(sigma)
