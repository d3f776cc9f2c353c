"""mathfn.order_key: int64 keys that order as the floats (the K-class kernels' vectorised max and min)."""

import numpy as np

from fastcal._kernels.mathfn import KEY_HIGH, KEY_LOW, from_key, order_key
from fastcal.jit import njit


@njit(cache=True)
def _keys(x):
    keys = np.empty(x.shape[0], np.int64)
    back = np.empty(x.shape[0], np.float64)
    lo, hi = KEY_HIGH, KEY_LOW
    for i in range(x.shape[0]):
        keys[i] = order_key(x[i])
        back[i] = from_key(keys[i])
        lo = min(lo, keys[i])
        hi = max(hi, keys[i])
    return keys, back, from_key(lo), from_key(hi)


def test_keys_order_as_the_floats_and_turn_back_into_them():
    tiny = np.nextafter(0.0, 1.0)  # the least subnormal
    x = np.array([-np.inf, -1e308, -1.0, -0.3, -tiny, -0.0, 0.0, tiny, 2.2e-308, 1e-300,
                  0.1, 1.0 - 2 ** -53, 1.0, 1.5, 1e308, np.inf])
    rng = np.random.default_rng(0)
    x = np.concatenate([x, rng.standard_normal(200) * 10.0 ** rng.integers(-300, 300, 200)])
    keys, back, lo, hi = _keys(x)
    assert np.array_equal(back.view(np.int64), x.view(np.int64))  # bit for bit, -0.0 too
    order = np.argsort(keys, kind="stable")
    assert np.all(np.diff(x[order]) >= 0)
    assert keys[5] + 1 == keys[6]  # -0.0 just below 0.0
    assert (lo, hi) == (-np.inf, np.inf)
    _, _, lo, hi = _keys(np.array([0.25, -0.0, 3.0]))
    assert (lo, hi) == (0.0, 3.0) and np.signbit(lo)

