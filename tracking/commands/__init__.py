"""The commands of the ``tracking`` command line (:mod:`tracking.cli` reads the arguments and reports
failures): ``compare`` and ``score``, each its options and its run, and what they write
(:mod:`tracking.commands.output`). No library code: they call the public functions."""
