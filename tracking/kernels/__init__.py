"""The compiled machinery under the filters (not API; the public name is :func:`tracking.kernel_dir`).

- :mod:`tracking.kernels.blocks`: ``@njit`` building blocks (small linear algebra,
  numerical Jacobians, mappers, where a batch is);
- ``batch_template.py``: the source of the batched EKF / UKF, one kernel per model
  pair (read as text, never imported);
- :mod:`tracking.kernels.factory`: writes that kernel for a model pair into the
  kernel directory under the trust rule, imports it (or compiles it in memory);
- :mod:`tracking.kernels.guard`: a user's model functions bounds-checked,
  probed once and watched while a batch runs.

Nothing here imports the models, the filters or anything above them.
"""
