"""``fastcal score --scheduler`` / ``--workers``: the same report, computed by
Dask workers, with a watchdog for ``--time-limit`` and distributed's loggers
silenced for the run."""

import dataclasses
import logging
import threading

from fastcal.commands.common import _debug, _Fail, by_options
import fastcal.distributed
from fastcal.sources.io import detect_format


def score(args, fmt, prob, label, transform):
    """The report of ``fastcal score`` computed on Dask (``prob``, ``label``: the
    column names, or lists of them, as parsed; ``transform``: the --recalibration
    map or None)."""
    fmt = detect_format(args.path, fmt)  # a URL's scheme checked, a prefix listed
    if fmt != "parquet":
        raise _Fail(f"{args.path}: --scheduler and --workers read Parquet only; got {fmt}")
    debug = _debug(args)
    levels = _quiet_dask(debug)
    own = []
    try:
        client, where = _client(args, debug, own)
        with _Watchdog(client, args.time_limit) as dog:
            try:
                rep = _score_dataset(args, prob, label, transform, client)
            except Exception:
                if dog.message:
                    raise _Fail(dog.message) from None
                raise
        # the CLI made the client: name the cluster as the user asked for it
        whole = getattr(rep, "overall", rep)  # a segmented report's provenance is its whole's
        whole.provenance = dataclasses.replace(whole.provenance, dask=where)
        return rep
    finally:
        for x in reversed(own):
            try:
                x.close()
            except Exception:
                pass
        _restore_logs(levels)


def _client(args, debug, own):
    """(client, where) for --scheduler or --workers; what it opens is appended to ``own``."""
    if args.scheduler is not None:
        client = fastcal.distributed.connect(args.scheduler, timeout=args.timeout)
        own.append(client)
        return client, f"scheduler {args.scheduler}"
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address="127.0.0.1:0",
                           silence_logs=logging.WARNING if debug else logging.CRITICAL)
    own.append(cluster)
    client = Client(cluster, set_as_default=False)
    own.append(client)
    return client, f"local cluster of {args.workers} workers"


def _score_dataset(args, prob, label, transform, client):
    rows = args.chunk_rows or fastcal.distributed.ROWS_PER_PARTITION
    return fastcal.distributed.score_dataset(
        args.path, prob=prob, label=label, n_bins=args.bins, closed=args.closed,
        strategy=args.strategy, observed=args.observed, nan_policy=args.nan_policy,
        eps=args.eps, ace=args.ace, logits=args.logits, ci=args.ci, n_boot=args.n_boot,
        seed=args.seed, device=args.device, transform=transform, smooth=args.smece,
        verify_checksums=not args.no_verify_checksums, metrics=args.metrics, sweep=args.sweep,
        tace_threshold=args.tace_threshold, client=client, rows_per_partition=rows,
        where=args.where, weight=args.weight, **by_options(args))


class _Watchdog:
    """Closes a Dask client after ``limit`` seconds, saying what the workers were doing."""

    def __init__(self, client, limit):
        self.client = client
        self.limit = limit
        self.message = None
        self._timer = threading.Timer(limit, self._fire)
        self._timer.daemon = True

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self._timer.cancel()
        return False

    def _fire(self):
        paused = []
        try:
            info = self.client.scheduler_info()
            for addr, w in sorted(info.get("workers", {}).items()):
                if str(w.get("status", "")).lower() == "paused":
                    mem = (w.get("metrics") or {}).get("memory")
                    lim = w.get("memory_limit")
                    share = f", memory {100 * mem / lim:.0f}% of its limit" if mem and lim else ""
                    paused.append(f"{addr} (paused{share})")
        except Exception:  # the scheduler itself may be the problem
            pass
        why = ("; workers paused for memory: " + ", ".join(paused) if paused
               else "; no worker reported paused (slow or stuck tasks?)")
        self.message = (f"the Dask run did not finish within --time-limit {self.limit:g} s{why}")
        try:
            self.client.close(timeout=5)
        except Exception:
            pass


_DASK_LOGGERS = ("distributed", "tornado", "asyncio", "bokeh")


def _quiet_dask(debug):
    """Silence distributed's loggers in this process for a run (workers get silence_logs);
    returns their old levels for :func:`_restore_logs`.

    Each logger is set, not only the top one: distributed's config gives
    ``distributed.client`` and others their own level (and handler), so a killed
    scheduler's tracebacks would still be printed before fastcal's one line.
    """
    if debug:
        return {}
    names = {n for n in logging.root.manager.loggerDict if n.split(".")[0] in _DASK_LOGGERS}
    old = {}
    for name in sorted(names | set(_DASK_LOGGERS)):
        logger = logging.getLogger(name)
        old[name] = logger.level
        logger.setLevel(logging.CRITICAL + 1)
    return old


def _restore_logs(old):
    for name, level in old.items():
        logging.getLogger(name).setLevel(level)

