"""Seeded Monte Carlo scenarios (kept at this path; the code is in :mod:`tracking.montecarlo.scenario`)."""

from tracking.montecarlo.scenario import (
    MAX_PARAM,  # noqa: F401 - and the other name the module had
    SCENARIOS,
    Scenario,
    Simulation,
    make_scenario,
    scenario_names,
    simulate,
)

__all__ = ["Scenario", "Simulation", "simulate", "make_scenario", "scenario_names", "SCENARIOS"]
