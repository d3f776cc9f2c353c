"""The bins and the settings of an accumulator (issue 25): made and checked once, held
whole by every state, and the one place the kernels get their edges from."""

from pathlib import Path
import pickle

import numpy as np
import pytest

import fastcal
from fastcal.accumulators.binary import BinaryAccumulator, BinaryLogitAccumulator
from fastcal.accumulators.calibration import CalibrationAccumulator, accumulator_for
from fastcal.accumulators.classes import MulticlassAccumulator
from fastcal.accumulators.settings import KEYWORDS, Settings
from fastcal.accumulators.soft import SoftLabelAccumulator
from fastcal.inputs import validation as v
from fastcal.inputs.binning import Bins, kernel_edges
from fastcal.score import Options
from tests.reports_close import assert_reports_close


@pytest.mark.parametrize("kwargs, pattern", [
    ({"n_bins": 0}, r"^n_bins must be >= 1; got 0$"),
    ({"n_bins": 2.5}, r"^n_bins must be an integer >= 1; got 2.5 of type float$"),
    ({"edges": [0.0, 0.6, 0.4, 1.0]}, r"^edges must be strictly increasing; edges\[1\]=0.6"),
    ({"edges": [0.1, 0.5, 1.0]}, r"^edges must start at 0 and end at 1"),
    ({"closed": "both"}, r"^closed must be one of 'left', 'right'; got 'both'$"),
])
def test_bad_bins_raise_the_messages_of_the_checks_wherever_they_are_made(kwargs, pattern):
    for make in (Bins, Options, CalibrationAccumulator, BinaryAccumulator,
                 lambda **kw: Settings.of(kw)):
        with pytest.raises(ValueError, match=pattern):
            make(**kwargs)


def test_the_bins_are_checked_once_when_made(monkeypatch):
    calls = []

    def counted(n_bins):
        calls.append(n_bins)
        return int(n_bins)

    monkeypatch.setattr(v, "check_n_bins", counted)
    opts = Options(n_bins=7)
    assert calls == [7]
    y, p = fastcal.simulate(500, seed=1)
    acc = opts.accumulator(500).update(y, p)
    acc = acc + opts.accumulator(500).update(y, p)
    assert acc.n == 1_000 and calls == [7]  # the states take the bins as they are


def test_every_state_holds_the_bins_the_options_made():
    opts = Options(n_bins=7)
    acc = opts.accumulator()
    assert acc.state.bins is opts.bins and acc.bins is opts.bins
    # a first batch of K classes replaces the empty binary state: same settings, same bins
    y = np.array([0, 2, 1])
    p = np.array([[0.6, 0.3, 0.1], [0.1, 0.2, 0.7], [0.2, 0.5, 0.3]])
    acc.update(y, p)
    assert type(acc.state) is MulticlassAccumulator and acc.state.bins is opts.bins
    assert acc.copy().bins is opts.bins  # copies share the (frozen) settings
    # the readers of before: the bins read as the state's own
    assert (acc.n_bins, acc.edges, acc.closed) == (7, None, "left")
    edged = CalibrationAccumulator(edges=[0, 0.2, 1], closed="right")
    assert edged.n_bins == 2 and edged.closed == "right"
    np.testing.assert_array_equal(edged.edges, [0, 0.2, 1])


def test_bins_give_the_kernel_edges():
    bins = Bins(n_bins=10)
    edges, uniform = bins.kernel_edges(np.float32)
    assert uniform and edges is kernel_edges(10, "<f4")  # shared between calls
    assert float(edges[7]) == float(np.float32(0.7))
    np.testing.assert_array_equal(bins.report_edges(), np.arange(11) / 10)
    assert bins.report_edges() is not bins.report_edges()
    explicit = Bins(edges=[0, 0.25, 1])
    assert explicit.kernel_edges(np.float32)[1] is False
    # states whose values are computed in float64 ask for float64 edges whatever the input
    assert BinaryLogitAccumulator(n_bins=10).kernel_edges(np.float32)[0] is kernel_edges(10, "<f8")
    assert MulticlassAccumulator(n_bins=10, renormalize=True).kernel_edges(
        np.float32)[0] is kernel_edges(10, "<f8")
    assert BinaryAccumulator(n_bins=10).kernel_edges(np.float32)[0] is edges


def test_explicit_edges_are_a_copy():
    e = np.array([0.0, 0.4, 1.0])
    bins = Bins(edges=e)
    e[1] = 0.9
    assert bins.edges[1] == 0.4 and bins.n_bins == 2


def test_bins_equality_is_what_a_merge_checks():
    assert Bins(n_bins=5) == Bins(n_bins=5, edges=None, closed="left")
    assert Bins(edges=[0, 0.5, 1]) == Bins(edges=np.array([0, 0.5, 1.0]), n_bins=99)
    assert Bins(n_bins=5) != Bins(n_bins=6)
    assert Bins(n_bins=5) != Bins(n_bins=5, closed="right")
    assert Bins(n_bins=2) != Bins(edges=[0, 0.5, 1])  # uniform never equals explicit
    assert len({Bins(n_bins=5), Bins(n_bins=5), Bins(edges=[0, 0.5, 1])}) == 2
    y, p = fastcal.simulate(300, seed=2)
    a = CalibrationAccumulator(n_bins=5).update(y, p)
    b = Options(n_bins=5, ace=False).accumulator().update(y, p)  # bins made elsewhere
    assert (a + b).n == 600
    with pytest.raises(ValueError, match="different bins, closed side or eps"):
        a + CalibrationAccumulator(n_bins=5, closed="right")
    with pytest.raises(ValueError, match="different bins, closed side or eps"):
        a + CalibrationAccumulator(edges=np.linspace(0, 1, 6))


def test_bins_and_settings_pickle_and_merge_after_a_round_trip():
    y, p = fastcal.simulate(400, seed=3)
    acc = CalibrationAccumulator(edges=[0, 0.3, 0.6, 1], n_boot=3, seed=4).update(y, p)
    back = pickle.loads(pickle.dumps(acc))
    assert back.bins == acc.bins and back._options == acc._options
    assert pickle.loads(pickle.dumps(Bins(n_bins=3, closed="right"))) == Bins(3, None, "right")
    merged = sum([back, acc])
    assert merged.n == 800 and merged.bins == acc.bins
    np.testing.assert_array_equal(merged.counts, 2 * acc.counts)


def test_settings_read_as_the_keywords_they_were_made_from():
    s = Settings.of(dict(edges=[0, 0.5, 1], eps=1e-6, n_boot=2))
    assert tuple(s.keys()) == KEYWORDS
    assert s["n_bins"] == 2 and s["eps"] == 1e-6 and s["threads"] is None
    assert Settings.of(dict(s)) == s
    assert CalibrationAccumulator(**s)._options == s
    with pytest.raises(KeyError):
        s["bins"]


def test_unknown_keywords_are_an_error_never_dropped():
    with pytest.raises(TypeError, match=r"^unknown accumulator option\(s\) n_bin; expected"):
        Settings.of({"n_bin": 5})
    # each state takes its own keywords: an option of another kind is an error there
    with pytest.raises(TypeError, match=r"unknown accumulator option\(s\) logits"):
        BinaryAccumulator(logits=True)
    with pytest.raises(TypeError, match=r"unknown accumulator option\(s\) n_bins"):
        SoftLabelAccumulator(n_bins=5)
    # the front door and accumulator_for take the options of every kind
    assert accumulator_for("soft", n_bins=5, classwise=False).n_classes is None
    settings = Settings.of({"n_bins": 5})
    with pytest.raises(TypeError, match=r"not both; got settings and eps"):
        BinaryAccumulator(settings, eps=0.1)
    with pytest.raises(TypeError, match=r"^settings must be a Settings; got dict"):
        BinaryAccumulator({"n_bins": 5})
    with pytest.raises(TypeError, match=r"^bins must be a Bins; got int"):
        Settings(5)


def test_every_state_class_takes_the_settings_whole():
    settings = Settings.of(dict(n_bins=4, eps=1e-3, nan_policy="omit", logits=True))
    for cls in (BinaryAccumulator, BinaryLogitAccumulator, MulticlassAccumulator):
        state = cls(settings)
        assert state.bins is settings.bins and state.eps == 1e-3 and state.nan_policy == "omit"
    soft = SoftLabelAccumulator(settings)
    assert soft.logits and soft.eps == 1e-3 and not hasattr(soft, "bins")


def _pickled_data():
    rng = np.random.default_rng(0)
    p = rng.random(500)
    y = (rng.random(500) < p).astype(int)
    P = rng.dirichlet(np.ones(3), 500)
    yk = rng.integers(0, 3, 500)
    return y, p, yk, P


# States pickled by fastcal at 85c7951, before the bins and settings were values (loose
# n_bins / edges / closed fields, the front door's options a dict), from _pickled_data():
#   front_binary  CalibrationAccumulator(n_bins=7).update(y, p)
#   front_edges   CalibrationAccumulator(edges=[0, 0.2, 0.5, 1], closed="right").update(y, p)
#   front_multi   CalibrationAccumulator(n_bins=5).update(yk, P)
#   front_soft    CalibrationAccumulator().update(P, P)
#   state_binary  BinaryAccumulator(n_bins=4, n_boot=3).update(y, p)
PICKLED = {
    "front_binary": lambda y, p, yk, P: CalibrationAccumulator(n_bins=7).update(y, p),
    "front_edges": lambda y, p, yk, P: CalibrationAccumulator(
        edges=[0, 0.2, 0.5, 1], closed="right").update(y, p),
    "front_multi": lambda y, p, yk, P: CalibrationAccumulator(n_bins=5).update(yk, P),
    "front_soft": lambda y, p, yk, P: CalibrationAccumulator().update(P, P),
    "state_binary": lambda y, p, yk, P: BinaryAccumulator(n_bins=4, n_boot=3).update(y, p),
}


@pytest.mark.parametrize("name", sorted(PICKLED))
def test_states_pickled_before_the_bins_were_a_value_load_merge_and_report(name):
    path = Path(__file__).parents[1] / "data" / "pickled_before_bins" / f"{name}.pkl"
    with open(path, "rb") as f:
        old = pickle.load(f)
    now = PICKLED[name](*_pickled_data())
    assert type(old) is type(now)
    # every field; the float sums to 1e-12 (the pickles were filled on another CPU, whose
    # vector width orders the additions differently: the last digits differ)
    np.testing.assert_array_equal(old.n_rows, now.n_rows)
    assert_reports_close(old.report(), now.report())
    merged = old + now
    assert merged.report().n == 2 * now.report().n
    if name != "front_soft":  # soft labels have no bins
        assert old.bins == now.bins
