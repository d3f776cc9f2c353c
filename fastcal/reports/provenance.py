"""Where a report came from: the rows read, the passes over the data, the source."""

from dataclasses import dataclass, field


@dataclass
class Provenance:
    """How a report was made; set once, by the driver (:func:`fastcal.score.score`).

    n_rows : int or None
        Rows read, omitted ones included.
    passes : int or None
        Passes over the data.
    pass_steps : list of (str, int)
        What the passes were, in order: "fill", "equal-mass bins", "ACE" or
        "certain-and-wrong rows" (a step that needed no pass is left out).
    source, format : str or None
        The file or dataset scored and its format (None for arrays).
    dask : str or None
        The Dask cluster that scored it.
    """

    n_rows: int | None = None
    passes: int | None = None
    pass_steps: list = field(default_factory=list)
    source: str | None = None
    format: str | None = None
    dask: str | None = None


class HasProvenance:
    """A report's ``provenance`` (not a dataclass field: two reports of the same
    numbers compare equal however they were made), and its fields as the
    report's own attributes (``rep.n_rows``, ...)."""

    provenance = Provenance()  # until the driver sets the report's own

    @property
    def n_rows(self):
        return self.provenance.n_rows

    @property
    def passes(self):
        return self.provenance.passes

    @property
    def pass_steps(self):
        return self.provenance.pass_steps

    @property
    def source(self):
        return self.provenance.source

    @property
    def format(self):
        return self.provenance.format

    @property
    def dask(self):
        return self.provenance.dask
