"""Connecting to a Dask scheduler: the time limit holds for the whole handshake (issue 12, defect 2).

The peers here are real sockets on 127.0.0.1: one that accepts and never
answers, one that answers with bytes that are not Dask's protocol. Each
server thread stops itself (after its test, or after 60 s at most).
"""

import os
import socket
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("distributed")

import fastcal  # noqa: E402
from fastcal import cli  # noqa: E402
from fastcal.distributed import connect  # noqa: E402

LIMIT = 2.0
SLACK = 8.0  # generous: a correctness bound, not a speed test (the bug waited 832 s)


class Peer:
    """A TCP server on 127.0.0.1 that accepts and then stays silent or sends garbage."""

    def __init__(self, reply=None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.reply = reply
        self.conns = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self):
        t_end = time.monotonic() + 60.0
        while not self.stop.is_set() and time.monotonic() < t_end:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)
            if self.reply:
                try:
                    conn.sendall(self.reply)
                except OSError:
                    pass
        self.close()

    def close(self):
        self.stop.set()
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.fixture
def silent():
    peer = Peer()
    yield peer
    peer.stop.set()
    peer.thread.join(5)


@pytest.fixture
def garbage():
    peer = Peer(reply=b"\xff" * 64 + b"this is not a dask scheduler" * 100)
    yield peer
    peer.stop.set()
    peer.thread.join(5)


def test_connect_to_a_silent_peer_gives_up_within_the_timeout(silent):
    t0 = time.monotonic()
    with pytest.raises(ConnectionError) as info:
        connect(silent.address, timeout=LIMIT)
    elapsed = time.monotonic() - t0
    assert elapsed < LIMIT + SLACK, elapsed
    text = str(info.value)
    assert "\n" not in text and silent.address in text and f"within {LIMIT:g} s" in text
    assert silent.conns  # it did accept: the hang was in the handshake, not the TCP connect
    from distributed import Client

    live = [c for c in Client._instances if c.status not in ("closed", "closing")]
    assert live == []  # no half-made client left running


def test_connect_to_a_peer_sending_garbage_fails_in_one_line(garbage):
    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match="does not speak Dask's protocol") as info:
        connect(garbage.address, timeout=LIMIT)
    assert time.monotonic() - t0 < LIMIT + SLACK
    assert "\n" not in str(info.value)


def test_connect_checks_its_timeout():
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        connect("tcp://127.0.0.1:1", timeout=0)


@pytest.fixture
def tiny(tmp_path):
    y, p = fastcal.simulate(500, seed=1)
    f = tmp_path / "t.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f)
    return str(f)


@pytest.mark.parametrize("kind", ["silent", "garbage"])
def test_cli_scheduler_limit_holds_on_a_bad_peer(kind, silent, garbage, tiny, capsys):
    peer = silent if kind == "silent" else garbage
    t0 = time.monotonic()
    code = cli.main(["score", tiny, "--prob", "p", "--label", "y", "--scheduler", peer.address,
                     "--timeout", "2"])
    elapsed = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and elapsed < 2 + SLACK, (code, elapsed)
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("fastcal score: error: could not reach the Dask scheduler")
    assert peer.address in err
    assert os.listdir(os.path.dirname(tiny)) == ["t.parquet"]
