"""What the parsers of :mod:`fastcal.cli` and every command share: the exit
statuses, the bounds of the options, the CLI's own error and its checks.

Light on purpose: :mod:`fastcal.cli` imports it to build the parsers, before
any command runs.
"""

import os
import re

from fastcal.inputs.validation import check_n_bins
from fastcal.sources.readers.base import _url_scheme

EXIT_OK = 0
EXIT_BAD = 2
EXIT_INTERNAL = 1

# Sane bounds, checked with a message before anything is allocated.
MAX_BINS = 1_000_000          # = fastcal.inputs.validation.MAX_BINS (checked there)
MAX_CHUNK_ROWS = 1 << 26      # 67M rows: a few chunks are alive at once, ~9 bytes a row each
MAX_PLOT_BINS = 1_000         # --plot draws a bar per bin: about 5 ms each (5 s at the bound)
MAX_SIM_ROWS = 1 << 40        # 1.1e12 rows; the disk is checked too
DASK_TIME_LIMIT = 3600.0      # seconds for a whole --workers / --scheduler run


class _Fail(Exception):
    """Bad usage or input found by the CLI itself (message printed, exit 2)."""


def _check_range(option, value, lo, hi, why=""):
    if value is None:
        return
    if value < lo:
        raise _Fail(f"{option} must be >= {lo:,}; got {value:,}")
    if value > hi:
        raise _Fail(f"{option} must be <= {hi:,}{why}; got {value:,}")


def _check_bins(option, value):
    """A bin count, with the API's own check and message (one bound for both)."""
    try:
        check_n_bins(value)
    except ValueError as exc:
        raise _Fail(str(exc).replace("n_bins", option, 1)) from None


def _check_local_output(option, target):
    """An output that is a URL (s3://, https://...): one line saying they are not
    written yet (the data's path: ``fastcal.sources.readers.base._check_local``)."""
    scheme = _url_scheme(target)
    if scheme is not None:
        raise _Fail(f"{option} {target}: {scheme}:// URLs are not written yet; give a local "
                    "file name")


def _check_local_input(option, path):
    """A file read by an option (``--recalibration``) that is a URL: one line."""
    scheme = _url_scheme(path)
    if scheme is not None:
        raise _Fail(f"{option} {path}: {scheme}:// URLs are not read yet; copy the file to "
                    "a local path and pass that")


def _debug(args):
    return bool(getattr(args, "debug", False)) or os.environ.get("FASTCAL_DEBUG", "") not in (
        "", "0")


def _columns(text):
    """--prob / --label: one column, or a comma-separated list of them."""
    return [c.strip() for c in text.split(",")] if "," in text else text


def _input_format(args):
    """--format, or CSV for a .csv.gz file (pyarrow decompresses it)."""
    if args.format is None and args.path.lower().endswith(".csv.gz") \
            and os.path.isfile(args.path):
        return "csv"
    return args.format


# -- messages --------------------------------------------------------------------

# Python keywords in library messages, as the option a command-line user types.
_WORDS = [
    # file messages give both ("use nan_policy='omit' (--nan-policy omit)"): keep one
    (re.compile(r"\bnan_policy='(\w+)' \(--nan-policy \1\)"), r"--nan-policy \1"),
    (re.compile(r"\bnan_policy='(\w+)'"), r"--nan-policy \1"),
    (re.compile(r"\bstrategy='(\w+)'"), r"--strategy \1"),
    (re.compile(r"\bclosed='(\w+)'"), r"--closed \1"),
    (re.compile(r"\bdevice='(\w+)'"), r"--device \1"),
    (re.compile(r"\bobserved='(\w+)'"), r"--observed \1"),
    (re.compile(r"\bace=True\b"), "--ace"),
    (re.compile(r"\blogits=True\b"), "--logits"),
    (re.compile(r"\brenormalize=True\b"), "--renormalize"),
    (re.compile(r"\bsmooth=True\b"), "--smece"),
    (re.compile(r"\bpass format=\s*"), "pass --format "),
    (re.compile(r"\bformat=(?=\W|$)"), "--format"),
    (re.compile(r"\bprob=(?=['\"\[])"), "--prob "),
    (re.compile(r"\blabel=(?=['\"])"), "--label "),
    (re.compile(r"(?<!\.)\bn_bins\b"), "--bins"),  # not a map field (params.n_bins)
    (re.compile(r"\bchunk_rows\b"), "--chunk-rows"),
    (re.compile(r"\brows_per_partition\b"), "--chunk-rows"),
    (re.compile(r"\beps must\b"), "--eps must"),
    # the options of one optional measure (fastcal.score._for_metric)
    (re.compile(r"\bsweep='(\w+)'"), r"--sweep \1"),
    (re.compile(r"\btace_threshold=(?=\d)"), "--tace-threshold "),
    (re.compile(r"\bmetrics=\['(\w+)'\]"), r"--metrics \1"),
    (re.compile(r"\bleave (sweep|tace_threshold) out\b"),
     lambda m: f"leave --{m.group(1).replace('_', '-')} out"),
    (re.compile(r"\btace_threshold must\b"), "--tace-threshold must"),
    # weights refused with measures that do not take them (fastcal.score.check_weighted)
    (re.compile(r"^sample_weight cannot\b"), "--weight cannot"),
    (re.compile(r"\bci with n_boot=(\d+)"), r"--ci with --n-boot \1"),
    (re.compile(r"\bpass n_boot=0\b"), "pass --n-boot 0"),
    (re.compile(r"\bpass ace=False\b"), "drop --ace"),
    (re.compile(r"\bleave smooth out\b"), "drop --smece"),
    # segments (fastcal.score.check_segmented, fastcal.inputs.segments.too_many)
    (re.compile(r"\bby= scores\b"), "--by scores"),
    (re.compile(r"^(.*: )?by has\b"), r"\1--by has"),
    (re.compile(r"^(.*: )?by=\[?'([^\]]*?)'\]? has\b"),  # Dask's: by='g' has, by=['a', 'b'] has
     lambda m: f"{m.group(1) or ''}--by {m.group(2).replace(chr(39), '').replace(' ', '')} has"),
    (re.compile(r"\bmax_segments=(?=\d)"), "--max-segments "),
    (re.compile(r"\ba larger max_segments\b"), "a larger --max-segments"),
]


def by_options(args):
    """score_file's (and score_dataset's) by=, correction= and max_segments= of --by /
    --correction / --max-segments (nothing without --by)."""
    if getattr(args, "by", None) is None:
        return {}
    columns = [c.strip() for c in args.by.split(",")]
    if not all(columns):
        raise _Fail(f"--by must name one column or several, comma-separated; got {args.by!r}")
    return {"by": columns if len(columns) > 1 else columns[0],
            "correction": args.correction or "holm", "max_segments": args.max_segments}


def _cli_words(text):
    for pattern, repl in _WORDS:
        text = pattern.sub(repl, text)
    return text

