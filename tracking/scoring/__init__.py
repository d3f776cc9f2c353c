"""Consistency scores: of filter runs (:mod:`tracking.scoring.consistency`) and of any tracker's
files (:mod:`tracking.scoring.files`, read through the gate :mod:`tracking.scoring.inputs`), with
what their reports share (:mod:`tracking.scoring.report`).

Built on fastcal's public modules only: nothing here imports the filters, the models or the kernels.
"""
