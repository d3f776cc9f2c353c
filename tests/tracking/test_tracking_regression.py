"""Today's 2-D range-bearing scenario gives the same numbers after the generic-model rewrite.

The values below were printed by the fixed-size kernels (``N = 4``, ``M = 2``,
sensor picked by an integer ``kind``) at commit 23dc9d8, before the kernels
became generic over model pairs; the generic kernels must reproduce them to
1e-12 (relative).
"""

import numpy as np
import pytest

from tracking import ExtendedKalmanFilter, UnscentedKalmanFilter
from tracking.compare import compare
from tracking.scenario import Scenario, simulate

RTOL = 1e-12

RECORDED = {
    "ekf": dict(
        means_sum=1331.9768964290126, covs_sum=52.92154405603695,
        innov_sum=2.8640411993058494, S_sum=10.42810786475275,
        last_means=[[18.671015495832645, -0.14543975248345273, 13.235820874333887, 1.0908421778080983],
                    [18.028354112206866, -0.32350691651476937, 12.49189168109459, 1.1103033837687755],
                    [18.52180393282434, -0.15881487496080546, 16.577756296189087, 1.498394403939348],
                    [24.71080196546161, 0.4852724863097395, 10.256761878931352, 0.9537939736522874]],
        last_cov_diag=[[0.3152305364199183, 0.030415254645859268, 0.6413336104663071, 0.036059567719189334],
                       [0.33685970597234743, 0.028720114264946625, 0.7001032977893242, 0.03939549863324425],
                       [0.46130615916930934, 0.03667097374066746, 0.5586140660311562, 0.029612301202458453],
                       [0.2179674006613537, 0.019281093625106594, 1.394832218819519, 0.05768087570783792]],
        report=(5.136013756985005, 0.5680068784925022, 0.02, 1.4982141479202935, 101.03906114273313),
    ),
    "ukf": dict(
        means_sum=1331.5070344268834, covs_sum=54.690407155470766,
        innov_sum=2.6503935663273697, S_sum=11.330811345267461,
        last_means=[[18.630483412894108, -0.13907346931437434, 13.24259569547559, 1.0850515194493036],
                    [17.88818939990508, -0.3256503804919549, 12.636522667802472, 1.100180142242196],
                    [18.43631046440319, -0.16104235909000797, 16.63153093550651, 1.5035240461664228],
                    [24.565390609693527, 0.4676115289151319, 10.482476445601971, 0.9514472988746026]],
        last_cov_diag=[[0.32564362119147433, 0.030977469966946922, 0.6538616251184423, 0.03700365351410613],
                       [0.36153413245400157, 0.029694106321889478, 0.7106982704027796, 0.039868909272188294],
                       [0.47457186555750847, 0.03723129463240302, 0.5698729807305106, 0.03056939513926351],
                       [0.24113780133006718, 0.021042082532635273, 1.4083737166187498, 0.05741952456664118]],
        report=(4.20906347872048, 0.10453173936023981, 0.9, 1.4627786883897973, 91.04648888457507),
    ),
}
SIM = (836.8910301948583, 1355.642951815566, 81.18079672484157)


def test_simulation_draws_the_recorded_data():
    sim = simulate(Scenario(runs=4, steps=12, seed=3, missing=0.2))
    got = (float(np.nansum(sim.measurements)), float(sim.truth.sum()), float(sim.x0.sum()))
    np.testing.assert_allclose(got, SIM, rtol=RTOL)


@pytest.mark.parametrize("name", ["ekf", "ukf"])
def test_filters_reproduce_the_recorded_runs(name):
    sc = Scenario(runs=4, steps=12, seed=3, missing=0.2)
    sim = simulate(sc)
    cls = ExtendedKalmanFilter if name == "ekf" else UnscentedKalmanFilter
    r = cls(sc.motion, sc.sensor).run(sim.x0, sim.P0, sim.measurements)
    rec = RECORDED[name]
    assert np.isnan(sim.measurements).any()  # the missed detections are part of the record
    got = [float(np.nansum(r.means)), float(np.nansum(r.covs)),
           float(np.nansum(r.innovations)), float(np.nansum(r.innovation_covs))]
    np.testing.assert_allclose(got, [rec["means_sum"], rec["covs_sum"], rec["innov_sum"], rec["S_sum"]], rtol=RTOL)
    np.testing.assert_allclose(r.means[:, -1], rec["last_means"], rtol=RTOL)
    np.testing.assert_allclose(np.diagonal(r.covs[:, -1], axis1=-2, axis2=-1), rec["last_cov_diag"], rtol=RTOL)


def test_default_compare_reproduces_the_recorded_report():
    rep = compare()
    for name in ("ekf", "ukf"):
        f = rep["filters"][name]
        got = (f["mean_anees"], f["mean_ecd"], f["inside_fraction"], f["rmse"], float(np.sum(f["nis"])))
        np.testing.assert_allclose(got, RECORDED[name]["report"], rtol=RTOL)
