"""Monte Carlo comparisons: seeded scenarios (:mod:`tracking.montecarlo.scenario`) on which the EKF
and the UKF run and are scored side by side (:mod:`tracking.montecarlo.compare`)."""
