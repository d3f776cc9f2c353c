"""Scoring a Parquet object from a local S3 server, against scoring the same local file.

    python benchmarks/remote_speed.py [--rows 1e8] [--moto-rows 1e7] [--dir DIR]

Writes one Parquet file of ``--rows`` rows (p float64, y uint8, with ``fastcal
simulate``), then scores it, each run in a fresh process (kernels compiled
first on a small file, then best of 3; peak RSS above the process's peak after
that warm-up):

* from the local file;
* as ``s3://`` through a thin S3-compatible server started here (HeadObject and
  GetObject with a Range header, answered from the file with ``os.pread``): what
  fastcal and pyarrow's S3 client cost over loopback;
* as ``http://`` from the same server, through fastcal's own ranged reader,
  and, to choose that reader, the time to read every chunk through it and
  through fsspec's HTTPFileSystem (aiohttp), each under pyarrow's pre-buffering
  of a row group's columns (as fastcal reads an object);
* as ``s3://`` from moto's S3 server (``moto[server]``, the tests' server) at
  ``--moto-rows`` rows, with the local file of that size: moto copies the whole
  object for every ranged GET, so its time grows with the object's size times
  the number of requests, a cost of the test server, not of the client.

Not a test: no timing is asserted anywhere. Prints a Markdown table.
"""

import argparse
import email.utils
import http.server
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SCORE = """
import resource, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np, pyarrow as pa, pyarrow.parquet as pq, fastcal
small = sys.argv[3]
fastcal.score_file(small)  # compile the kernels, open the clients' libraries
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
best = float("inf")
for _ in range(int(sys.argv[4])):
    t = time.perf_counter()
    r = fastcal.score_file(sys.argv[2])
    best = min(best, time.perf_counter() - t)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{best:.3f} {(peak - base) / 1024:.0f} {r.n} {r.ece!r}")
"""

_READ = """
import sys, time
sys.path.insert(0, sys.argv[1])
import pyarrow.parquet as pq
url, how = sys.argv[2], sys.argv[3]
if how == "fsspec":
    import fsspec
    f = fsspec.filesystem("http").open(url, "rb", block_size=8 << 20)
else:
    from fastcal.sources.readers import where
    f = where.open_file(url)
t = time.perf_counter()
pf = pq.ParquetFile(f, pre_buffer=True)  # as fastcal reads an object of small row groups
n = 0
for g in range(pf.metadata.num_row_groups):
    for b in pf.iter_batches(batch_size=1 << 18, row_groups=[g], columns=["p", "y"]):
        n += b.num_rows
print(f"{time.perf_counter() - t:.3f} {n}")
"""


class ThinS3(http.server.BaseHTTPRequestHandler):
    """HeadObject and GetObject (one byte range) of the files under ``root``, at
    /BUCKET/KEY: the part of S3's API that reading an object uses. Also plain HTTP."""

    protocol_version = "HTTP/1.1"
    root = None

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self._answer(False)

    def do_GET(self):
        self._answer(True)

    def _answer(self, body):
        path = self.path.split("?", 1)[0].lstrip("/")
        f = os.path.join(self.root, path.split("/", 1)[-1])
        if not os.path.isfile(f):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        st = os.stat(f)
        a, b, status = 0, st.st_size - 1, 200
        rng = self.headers.get("Range")
        if rng and body:
            lo, hi = rng.split("=", 1)[1].split("-")
            a, b, status = int(lo), min(int(hi) if hi else st.st_size - 1, st.st_size - 1), 206
        self.send_response(status)
        self.send_header("Content-Length", str(b - a + 1))
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{st.st_mtime_ns:x}"')
        self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
        if status == 206:
            self.send_header("Content-Range", f"bytes {a}-{b}/{st.st_size}")
        self.end_headers()
        if not body:
            return
        with open(f, "rb") as fh:
            pos = a
            while pos <= b:
                pos += os.sendfile(self.connection.fileno(), fh.fileno(), pos, b + 1 - pos)


def _serve(root):
    handler = type("Thin", (ThinS3,), {"root": root})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _moto(directory, name):
    """moto's server in a child process, holding ``name`` in bucket ``preds``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    import boto3

    endpoint = f"http://127.0.0.1:{port}"
    c = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench",
                     aws_secret_access_key="bench", region_name="us-east-1")
    c.create_bucket(Bucket="preds")
    c.upload_file(os.path.join(directory, name), "preds", name)
    return proc, endpoint


def _env(endpoint):
    env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="bench",
               AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
               AWS_EC2_METADATA_DISABLED="true", PYTHONPATH=ROOT)
    env.pop("AWS_ENDPOINT_URL_S3", None)
    return env


def _score(path, small, env, repeat=3):
    out = subprocess.run([sys.executable, "-c", _SCORE, ROOT, path, small, str(repeat)],
                         env=env, capture_output=True, text=True, check=True)
    secs, rss, n, ece = out.stdout.split()
    return float(secs), int(rss), int(n), float(ece)


def _read(url, how, env):
    out = subprocess.run([sys.executable, "-c", _READ, ROOT, url, how], env=env,
                         capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


def _write(path, rows):
    subprocess.run([sys.executable, "-m", "fastcal", "simulate", path, "--n", str(rows),
                    "--sigma", "0.5", "--quiet"], env=dict(os.environ, PYTHONPATH=ROOT),
                   check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e8)
    ap.add_argument("--moto-rows", type=float, default=1e7)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    rows, moto_rows = int(args.rows), int(args.moto_rows)
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        big, mid, small = (os.path.join(d, n) for n in ("big.parquet", "mid.parquet",
                                                           "small.parquet"))
        _write(small, 1000)
        _write(big, rows)
        size = os.path.getsize(big)
        server = _serve(d)
        thin = f"http://127.0.0.1:{server.server_port}"
        env = _env(thin)
        lines = [f"{rows:,} rows, {size / 2**20:.0f} MiB Parquet (p float64, y uint8), "
                 f"{os.cpu_count()} cores", "",
                 "| read from | rows | seconds (best of 3) | x local | peak RSS above warm-up (MiB) |",
                 "|---|---:|---:|---:|---:|"]
        local = _score(big, small, env)
        rows_out = [("local file", rows, local)]
        remote = _score("s3://preds/big.parquet", small, env)
        rows_out.append(("s3:// (thin S3 server, pyarrow's S3 client)", rows, remote))
        web = _score(f"{thin}/files/big.parquet", small, env)
        rows_out.append(("http:// (same server, fastcal's ranged reader)", rows, web))
        for name, n, (secs, rss, got, ece) in rows_out:
            assert got == rows and ece == local[3], (name, got, ece, local[3])
            lines.append(f"| {name} | {n:,} | {secs:.2f} | {secs / local[0]:.2f} | {rss} |")
        own = min(_read(f"{thin}/files/big.parquet", "own", env) for _ in range(3))
        try:
            theirs = min(_read(f"{thin}/files/big.parquet", "fsspec", env) for _ in range(3))
        except subprocess.CalledProcessError:
            theirs = float("nan")
        server.shutdown()
        if moto_rows:
            _write(mid, moto_rows)
            proc, endpoint = _moto(d, "mid.parquet")
            try:
                here = _score(mid, small, env)
                there = _score("s3://preds/mid.parquet", small, _env(endpoint))
            finally:
                proc.terminate()
                proc.wait(30)
            assert there[2:] == here[2:]
            lines.append(f"| local file | {moto_rows:,} | {here[0]:.2f} | 1.00 | {here[1]} |")
            lines.append(f"| s3:// (moto's server) | {moto_rows:,} | {there[0]:.2f} | "
                         f"{there[0] / here[0]:.2f} | {there[1]} |")
        lines += ["", f"Reading every chunk of (p, y) over http:// ({rows:,} rows), best of 3: "
                      f"fastcal's ranged reader {own:.2f} s, fsspec's HTTPFileSystem "
                      f"{theirs:.2f} s (a row group's columns pre-buffered)."]
        print("\n".join(lines))


if __name__ == "__main__":
    main()
