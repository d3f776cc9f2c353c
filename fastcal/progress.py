"""A small progress bar on stderr: rows done, rows/s and time left (not API).

Drawn only when the stream is a terminal; redrawn at most a few times per
second so that it costs nothing next to the work it reports on.
"""

import sys
import time


def _fmt_count(n):
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(int(n))


def _fmt_time(seconds):
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    """Progress of a run over ``total`` rows (None if unknown).

    Parameters
    ----------
    total : int or None
        Rows expected; without it no bar or ETA is shown, only rows and rate.
    label : str
        Printed before the bar.
    enabled : bool or None, default None
        None: draw only if ``stream`` is a terminal.
    stream : file, default sys.stderr
    interval : float, default 0.2
        Minimum seconds between redraws.
    """

    def __init__(self, total=None, *, label="", enabled=None, stream=None, interval=0.2):
        self.stream = sys.stderr if stream is None else stream
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = bool(enabled)
        self.total = total
        self.label = label
        self.interval = interval
        self.done = 0
        self.t0 = time.perf_counter()
        self._last = -1.0
        self._width = 0

    def line(self, now=None):
        """The text of the bar for the current state."""
        now = time.perf_counter() if now is None else now
        dt = max(now - self.t0, 1e-9)
        rate = self.done / dt
        parts = [self.label] if self.label else []
        if self.total:
            frac = min(self.done / self.total, 1.0)
            filled = int(frac * 24)
            parts.append(f"[{'#' * filled}{'.' * (24 - filled)}] {100 * frac:5.1f}%")
            parts.append(f"{_fmt_count(self.done)}/{_fmt_count(self.total)} rows")
        else:
            parts.append(f"{_fmt_count(self.done)} rows")
        parts.append(f"{_fmt_count(rate)} rows/s")
        if self.total and rate > 0:
            parts.append(f"ETA {_fmt_time(max(self.total - self.done, 0) / rate)}")
        return " ".join(parts)

    def update(self, rows):
        """Add ``rows`` to the count and redraw if enough time has passed."""
        self.done += rows
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            self._draw(self.line(now))

    def _draw(self, text):
        pad = max(self._width - len(text), 0)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._width = len(text)

    def close(self):
        """Draw the final state and end the line."""
        if self.enabled and self._width >= 0:
            self._draw(self.line())
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
