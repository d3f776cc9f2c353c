"""Reading where the data lives, against real servers on this machine: an S3-compatible
server (moto's server mode, in a child process, with IAM users and signature checks on),
a web server that answers range requests, and Hive-partitioned datasets.

Each server starts once for the module. The S3 requests go through a small proxy that
counts them (which files a filter opened) and, for the keys a test names, answers
"SlowDown" or drops the connection half-way through a body, so that the client's
retries and the one-line messages meet real faults. Every number equals the local
file's.
"""

import gzip
import http.client
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal import cli, recalibrate
from fastcal.io import exists, is_dir, open_arrays, open_table

BUCKET = "preds"
FIELDS = ("n", "ece", "esce", "mce", "ecd", "brier", "nll")


def same(a, b):
    """Two reports give the same numbers (to 1e-15)."""
    assert a.n == b.n
    for k in FIELDS[1:]:
        x, y = getattr(a, k), getattr(b, k)
        assert abs(x - y) <= 1e-15 * max(1.0, abs(y)), (k, x, y)
    np.testing.assert_array_equal(a.bins["count"], b.bins["count"])


# -- data ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Local files of one set of predictions, in every format, and a Hive dataset."""
    d = tmp_path_factory.mktemp("stores")
    y, p = fastcal.simulate(3000, sigma=0.5, seed=3)
    table = pa.table({"p": p, "y": y})
    pq.write_table(table, d / "pred.parquet", row_group_size=700)
    feather.write_feather(table, d / "pred.feather")
    text = "p,y\n" + "".join(f"{a!r},{b}\n" for a, b in zip(p.tolist(), y.tolist()))
    (d / "pred.csv").write_text(text)
    (d / "pred.csv.gz").write_bytes(gzip.compress(text.encode()))
    (d / "cols").mkdir()
    np.save(d / "cols" / "p.npy", p)
    np.save(d / "cols" / "y.npy", y)
    rec = np.empty(len(p), dtype=[("p", "<f8"), ("y", "u1")])
    rec["p"], rec["y"] = p, y
    np.save(d / "pred.npy", rec)
    np.savez(d / "pred.npz", p=p, y=y)
    # a column not asked for, before the others and larger than the footer's read (64 KiB)
    big = pa.FixedSizeListArray.from_arrays(np.random.default_rng(0).random(3000 * 8), 8)
    pq.write_table(pa.table({"big": big, "p": p, "y": y}), d / "wide.parquet")
    for k, (model, shard) in enumerate([("v1", 0), ("v2", 0), ("v3", 0), ("v3", 1)]):
        part = d / "hive" / f"model={model}" / f"shard={shard}"
        part.mkdir(parents=True)
        pq.write_table(table.slice(750 * k, 750), part / "part-0.parquet", row_group_size=300)
    # a tracker's estimates (tracking score): 6 runs x 5 steps of a 2-D state
    rng = np.random.default_rng(4)
    runs, steps = np.divmod(np.arange(30), 5)
    sd = rng.uniform(0.5, 2.0, (30, 2))
    truth = rng.normal(size=(30, 2))
    est = truth + sd * rng.normal(size=(30, 2))
    (d / "tracks").mkdir()
    pq.write_table(pa.table({"run": runs, "step": steps, "x_0": est[:, 0], "x_1": est[:, 1],
                             "t_0": truth[:, 0], "t_1": truth[:, 1], "P_00": sd[:, 0] ** 2,
                             "P_01": np.zeros(30), "P_10": np.zeros(30), "P_11": sd[:, 1] ** 2}),
                   d / "tracks" / "est.parquet", row_group_size=8)
    return d


# -- the S3 server: moto in a child process, behind a counting and faulting proxy ------------

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(port, proc):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the S3 server exited with status {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail("the S3 server did not start within 60 s")


class Proxy(http.server.BaseHTTPRequestHandler):
    """Forwards every request to the S3 server as it came (its signature holds), logs it,
    and applies the fault set for its key: ``("slowdown", n)`` answers the first n
    requests with S3's 503 SlowDown, ``("drop", n)`` sends half of the first n bodies
    and closes the connection."""

    protocol_version = "HTTP/1.1"
    target = None
    log = []
    faults = {}

    def log_message(self, *args):
        pass

    def _forward(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = urllib.parse.unquote(self.path.split("?", 1)[0])
        self.log.append((self.command, key, self.headers.get("Range")))
        fault = self.faults.get(key)
        if fault is not None and fault[1] > 0 and self.command == "GET":
            self.faults[key] = (fault[0], fault[1] - 1)
        else:
            fault = None
        if fault is not None and fault[0] == "slowdown":
            data = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
                    b"<Message>Please reduce your request rate.</Message></Error>")
            self.send_response(503, "Slow Down")
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        conn = http.client.HTTPConnection(*self.target, timeout=30)
        try:
            conn.request(self.command, self.path, body=body or None, headers=dict(self.headers))
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "content-length", "server",
                                 "date"):
                self.send_header(k, v)
        length = int(resp.getheader("Content-Length") or len(data))
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if fault is not None and fault[0] == "drop" and len(data) > 1:
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward


def _serve(handler):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def s3(data):
    """The S3 server, its bucket holding the data under data/, and two users: ``reader``
    (may get and list) and ``nobody`` (no policy). Signatures and permissions are
    checked from the first request fastcal makes."""
    boto3 = pytest.importorskip("boto3")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(port, proc)
        endpoint = f"http://127.0.0.1:{port}"
        kw = dict(endpoint_url=endpoint, aws_access_key_id="setup",
                  aws_secret_access_key="setup", region_name="us-east-1")
        client, iam = boto3.client("s3", **kw), boto3.client("iam", **kw)
        client.create_bucket(Bucket=BUCKET)
        for f in sorted(data.rglob("*")):
            if f.is_file():
                client.upload_file(str(f), BUCKET, f"data/{f.relative_to(data).as_posix()}")
        users = {}
        for name, actions in (("reader", ["s3:GetObject", "s3:ListBucket"]), ("nobody", None)):
            iam.create_user(UserName=name)
            if actions:
                iam.put_user_policy(UserName=name, PolicyName="read", PolicyDocument=json.dumps(
                    {"Version": "2012-10-17", "Statement": [
                        {"Effect": "Allow", "Action": actions, "Resource": "*"}]}))
            key = iam.create_access_key(UserName=name)["AccessKey"]
            users[name] = (key["AccessKeyId"], key["SecretAccessKey"])
        # from now on every request is authenticated and authorised
        urllib.request.urlopen(urllib.request.Request(
            endpoint + "/moto-api/reset-auth", data=b"0", method="POST",
            headers={"Content-Type": "application/octet-stream"}), timeout=30).read()
        handler = type("S3Proxy", (Proxy,), {"target": ("127.0.0.1", port), "log": [],
                                              "faults": {}})
        proxy = _serve(handler)
        yield type("S3", (), {"endpoint": f"http://127.0.0.1:{proxy.server_port}",
                              "users": users, "proxy": handler})
        proxy.shutdown()
        proxy.server_close()
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def aws(s3, monkeypatch, tmp_path):
    """The environment of a user of the S3 server: the standard variables only."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3",
                "AWS_REGION"):
        monkeypatch.delenv(var, raising=False)
    key, secret = s3.users["reader"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    s3.proxy.log.clear()
    s3.proxy.faults.clear()
    return s3


def url(name):
    return f"s3://{BUCKET}/data/{name}"


def key(name):
    return f"/{BUCKET}/data/{name}"


# -- S3: the numbers of the local files ---------------------------------------------------

@pytest.mark.parametrize("name", ["pred.parquet", "pred.csv", "pred.csv.gz", "pred.feather",
                                  "cols", "pred.npy", "hive"])
def test_an_s3_object_or_prefix_scores_as_the_local_file(aws, data, name):
    local = fastcal.score_file(data / name, prob="p", label="y", chunk_rows=1000)
    remote = fastcal.score_file(url(name), prob="p", label="y", chunk_rows=1000)
    same(remote, local)
    assert (remote.source, remote.format) == (url(name), local.format)


def test_equal_mass_bins_read_an_object_again_with_the_same_numbers(aws, data):
    local = fastcal.score_file(data / "pred.parquet", strategy="quantile", ace=True)
    remote = fastcal.score_file(url("pred.parquet"), strategy="quantile", ace=True)
    same(remote, local)
    assert remote.ace == local.ace and remote.passes == local.passes > 1


def test_a_parquet_object_is_read_by_ranges_of_the_columns_asked_for(aws, data):
    same(fastcal.score_file(url("wide.parquet")), fastcal.score_file(data / "pred.parquet"))
    ranges = [r for m, k, r in aws.proxy.log if m == "GET" and k == key("wide.parquet")]
    big = pq.ParquetFile(data / "wide.parquet").metadata.row_group(0).column(0)
    start = min(o for o in (big.dictionary_page_offset, big.data_page_offset) if o is not None)
    skipped = range(start, start + big.total_compressed_size)
    assert len(skipped) > 150_000
    size = (data / "wide.parquet").stat().st_size
    assert ranges and all(r is not None for r in ranges)  # ranged GETs only
    spans = [tuple(map(int, r.split("=", 1)[1].split("-"))) for r in ranges]
    # the footer is read as the file's last 64 KiB; after it, no read reaches into the
    # bytes of column 'big', and all reads together fetch less than half of the file
    assert spans[0] == (size - 65536, size - 1)
    for a, b in spans[1:]:
        assert b < skipped.start or a >= skipped.stop, (a, b, skipped)
    assert sum(b - a + 1 for a, b in spans) < size / 2


def test_open_table_and_open_arrays_read_objects(aws, data):
    t = open_table(url("pred.parquet"))
    assert (t.columns, t.n_rows, t.path) == (["p", "y"], 3000, url("pred.parquet"))
    got = np.concatenate([c.columns[0] for c in t.chunks(["p"], 1000)])
    np.testing.assert_array_equal(got, pq.read_table(data / "pred.parquet")["p"].to_numpy())
    a = open_arrays(url("pred.npz"))
    np.testing.assert_array_equal(a.read("p"), np.load(data / "pred.npz")["p"])
    assert exists(url("pred.npz")) and not exists(url("none.npz"))
    assert is_dir(url("hive")) and not is_dir(url("pred.npz"))


def test_recalibrate_fits_on_an_object_as_on_the_local_file(aws, data):
    local = recalibrate.fit_file(recalibrate.make("platt"), data / "pred.parquet")
    remote = recalibrate.fit_file(recalibrate.make("platt"), url("pred.parquet"))
    assert (remote.a_, remote.b_) == (local.a_, local.b_)


def test_score_dataset_reads_objects_on_dask(aws, data):
    pytest.importorskip("dask")
    from fastcal.distributed import score_dataset

    local = fastcal.score_file(data / "hive", where="model = 'v3'")
    remote = score_dataset(url("hive"), where="model = 'v3'", rows_per_partition=300)
    same(remote, local)
    assert remote.source == url("hive")


# -- Hive partitions ------------------------------------------------------------------------

def test_partition_columns_are_columns_of_every_row(aws, data):
    for path in (data / "hive", url("hive")):
        t = open_table(path)
        assert t.columns == ["p", "y", "model", "shard"]
        chunks = list(t.chunks(["model", "shard", "y"], 500, any_type=["model"]))
        model = np.concatenate([c.columns[0] for c in chunks])
        shard = np.concatenate([c.columns[1] for c in chunks])
        assert model.tolist() == ["v1"] * 750 + ["v2"] * 750 + ["v3"] * 1500
        assert shard.dtype == np.int64 and shard.tolist() == [0] * 2250 + [1] * 750
        assert t.dtype("shard") == np.int64


def test_a_filter_on_a_partition_column_opens_only_the_matching_files(aws, data):
    y, p = fastcal.simulate(3000, sigma=0.5, seed=3)
    ref = fastcal.calibration_report(y[1500:], p[1500:])
    for where in ("model = 'v3'", pc.field("model") == "v3",
                  "model in ('v3', 'v4') and not shard is null"):
        aws.proxy.log.clear()
        rep = fastcal.score_file(url("hive"), where=where)
        keys = [k for _, k, _ in aws.proxy.log]
        assert not [k for k in keys if "model=v1" in k or "model=v2" in k]
        assert {k for k in keys if "model=v3" in k} == {
            key("hive/model=v3/shard=0/part-0.parquet"), key("hive/model=v3/shard=1/part-0.parquet")}
        assert rep.n == 1500 and abs(rep.ece - ref.ece) <= 1e-15 and abs(rep.ecd - ref.ecd) <= 1e-15
    rep = fastcal.score_file(data / "hive", where="shard = 1 or model = 'v1'")
    same(rep, fastcal.calibration_report(np.r_[y[:750], y[2250:]], np.r_[p[:750], p[2250:]]))


@pytest.mark.parametrize("where, text", [
    ("p > 0.5", "where 'p > 0.5' names 'p', which is not a partition column; where= chooses "
                "files by the partition columns: model (string), shard (int64)"),
    ("model = ", "where 'model = ': expected a value ('text', a number, true, false or null) "
                 "at character 8; write a filter on the partition columns such as \"model = "
                 "'v3'\" or \"day >= '2024-05-01' and model in ('v2', 'v3')\""),
    ("model = 'v9'", "where \"model = 'v9'\" keeps none of the 4 files; the partition values "
                     "are model: 'v1', 'v2', 'v3'; shard: 0, 1"),
    ("model = 3", "where 'model = 3' compares values of two types (string, int8); write text in "
                  "quotes ('v3') and numbers without"),
    (pc.field("y") == 1, "where '(y == 1)' names 'y', which is not a partition column; where= "
                         "chooses files by the partition columns: model (string), shard "
                         "(int64)"),
])
def test_a_bad_filter_is_one_line(data, where, text):
    with pytest.raises(ValueError) as info:
        fastcal.score_file(data / "hive", where=where)
    assert str(info.value) == f"{data / 'hive'}: {text}"


def test_a_filter_needs_a_partitioned_parquet_dataset(data):
    with pytest.raises(ValueError, match=r"pred.parquet: where= filters the partition columns "
                                         r"of a Hive-partitioned dataset .*; this path has none$"):
        fastcal.score_file(data / "pred.parquet", where="model = 'v3'")
    with pytest.raises(ValueError, match=r"pred.csv: where= filters the partitions of a Parquet "
                                         r"dataset; this is csv data$"):
        fastcal.score_file(data / "pred.csv", where="model = 'v3'")


def test_the_cli_reads_urls_and_filters_partitions(aws, data, tmp_path, capsys):
    out = tmp_path / "report.json"
    argv = ["score", url("hive"), "--prob", "p", "--label", "y", "--where", "model = 'v3'",
            "--json", "--quiet", "--output", str(out)]
    assert cli.main(argv) == 0
    got = json.loads(out.read_text())
    local = fastcal.score_file(data / "hive", where="model = 'v3'")
    assert (got["file"], got["n"], got["ece"]) == (url("hive"), 1500, local.ece)
    # a failed run leaves the output as it was
    before = out.read_bytes()
    assert cli.main(["score", url("none.parquet"), "--prob", "p", "--label", "y", "--quiet",
                     "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"fastcal score: error: {url('none.parquet')}: no such object, nor objects "
                   "under this prefix\n")
    assert out.read_bytes() == before
    plan = tmp_path / "map.json"
    assert cli.main(["recalibrate", url("pred.parquet"), "--prob", "p", "--label", "y",
                     "--method", "platt", "--no-table", "--quiet", "--out", str(plan)]) == 0
    assert recalibrate.load(plan).a_ == recalibrate.fit_file(
        recalibrate.make("platt"), data / "pred.parquet").a_


# -- S3 faults: one line each, retried where the client retries -------------------------------

def test_tracking_score_reads_an_object_as_the_local_file(aws, data, capsys):
    from tracking.cli import main as tracking_main
    from tracking.scoring.files import score_file as score_tracks

    local = score_tracks(data / "tracks" / "est.parquet", chunk_rows=7)
    remote = score_tracks(url("tracks/est.parquet"), chunk_rows=7)
    for name in ("anees", "ecd", "nees_per_run"):
        np.testing.assert_array_equal(remote[name], local[name])
    assert tracking_main(["score", url("tracks/est.parquet"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose(out["anees"], local["anees"], rtol=1e-15)


def test_a_missing_object_or_bucket_is_one_line(aws):
    for path in (url("none.parquet"), "s3://no-such-bucket/pred.parquet"):
        with pytest.raises(ValueError) as info:
            fastcal.score_file(path)
        assert str(info.value) == f"{path}: no such object, nor objects under this prefix"


@pytest.mark.parametrize("who, code", [("nobody", "ACCESS_DENIED"),
                                        ("unknown", "INVALID_ACCESS_KEY_ID"),
                                        ("wrong secret", "SIGNATURE_DOES_NOT_MATCH")])
def test_denied_access_is_one_line_naming_the_credentials(aws, monkeypatch, who, code):
    key, secret = {"nobody": aws.users["nobody"], "unknown": ("AKIAUNKNOWN0000000000", "x"),
                   "wrong secret": (aws.users["reader"][0], "not-the-secret")}[who]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    with pytest.raises(ValueError) as info:
        fastcal.score_file(url("hive"))
    text = str(info.value)
    assert text.startswith(f"{url('hive')}: access denied (")
    assert text.endswith("; check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                         "(and AWS_SESSION_TOKEN), AWS_PROFILE, or ~/.aws/credentials and "
                         "~/.aws/config) and the permissions on the object")
    assert "\n" not in text and secret not in text


def test_a_throttled_store_is_asked_again(aws, data):
    aws.proxy.faults[key("pred.parquet")] = ("slowdown", 2)
    same(fastcal.score_file(url("pred.parquet")), fastcal.score_file(data / "pred.parquet"))
    assert aws.proxy.faults[key("pred.parquet")] == ("slowdown", 0)
    aws.proxy.faults[key("wide.parquet")] = ("slowdown", 100)
    with pytest.raises(ValueError) as info:
        fastcal.score_file(url("wide.parquet"))
    assert str(info.value).startswith(f"{url('wide.parquet')}: cannot read the Parquet footer: ")
    # the AWS SDK names the same 503 SlowDown answer either way, by its status or by the
    # code in its body (SLOW_DOWN seen once in a fresh-clone CI run): both are ours to word
    assert any(f"the store refused the requests as too many (or was unavailable), still after "
               f"retries (AWS Error {code} during GetObject operation" in str(info.value)
               for code in ("SERVICE_UNAVAILABLE", "SLOW_DOWN"))


def test_a_connection_dropped_mid_file_is_one_line(aws, data):
    aws.proxy.faults[key("pred.parquet")] = ("drop", 100)
    with pytest.raises(ValueError) as info:
        fastcal.score_file(url("pred.parquet"))
    text = str(info.value)
    assert text.startswith(f"{url('pred.parquet')}: ") and "\n" not in text
    assert "connection failed (" in text


# -- URLs that are not read ---------------------------------------------------------------------

@pytest.mark.parametrize("path, text", [
    ("ftp://host/pred.parquet", "ftp:// URLs are not read; expected a local path or a URL of "
                                "s3://, gs://, az://, abfs://, hf://, http(s):// or file://"),
    ("file://otherhost/tmp/pred.parquet", "file:// URL names host 'otherhost'; expected "
                                          "file:///PATH on this machine"),
])
def test_a_url_that_is_not_read_is_one_line(path, text):
    for call in (lambda: fastcal.score_file(path), lambda: open_table(path),
                 lambda: open_arrays(path)):
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == f"{path}: {text}"


def test_a_password_in_a_url_is_refused_without_showing_it(capsys):
    path = "s3://AKIAEXAMPLE:very-secret@preds/data/pred.parquet"
    with pytest.raises(ValueError) as info:
        fastcal.score_file(path)
    assert str(info.value).startswith("s3://***@preds/data/pred.parquet: a password in the URL "
                                      "is not accepted")
    assert cli.main(["score", path, "--prob", "p", "--label", "y"]) == 2
    assert "very-secret" not in capsys.readouterr().err


def test_az_without_an_account_is_one_line(monkeypatch):
    for var in ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match=r"^az://c/pred.parquet: az://CONTAINER/PATH needs the "
                                         r"storage account in AZURE_STORAGE_ACCOUNT_NAME"):
        fastcal.score_file("az://c/pred.parquet")


def test_a_file_url_is_its_local_path(data):
    path = (data / "pred.parquet").as_uri()
    same(fastcal.score_file(path), fastcal.score_file(data / "pred.parquet"))


# -- a web server with range requests -----------------------------------------------------------

class Files(http.server.BaseHTTPRequestHandler):
    """Serves a folder with single byte ranges. A path's first part says how:
    ``/ok/`` as asked, ``/norange/`` ignores Range headers, ``/busy/`` answers 503 to the
    first two requests of each path, ``/flaky/`` drops the first two bodies half-way,
    ``/dead/`` drops every body half-way, ``/deny/`` answers 403, ``/moved/`` redirects
    to ``/ok/`` (302), ``/nohead/`` answers HEAD with 405."""

    protocol_version = "HTTP/1.1"
    root = None
    seen = {}
    log = []

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self._answer(body=False)

    def do_GET(self):
        self._answer(body=True)

    def _answer(self, body):
        mode, _, rel = self.path.lstrip("/").partition("/")
        f = os.path.join(self.root, urllib.parse.unquote(rel.split("?", 1)[0]))
        n = self.seen[self.path] = self.seen.get(self.path, 0) + 1
        self.log.append((self.command, self.path, self.headers.get("Range")))
        if mode == "deny":
            return self._status(403, "Forbidden")
        if mode == "moved":
            return self._status(302, "Found", {"Location": f"/ok/{rel}"})
        if mode == "nohead" and not body:
            return self._status(405, "Method Not Allowed")
        if mode == "busy" and n <= 2:
            return self._status(503, "Service Unavailable")
        if not os.path.isfile(f):
            return self._status(404, "Not Found")
        with open(f, "rb") as fh:
            data = fh.read()
        size, status = len(data), 200
        rng = self.headers.get("Range")
        headers = {"Accept-Ranges": "bytes"} if mode != "norange" else {}
        if rng and mode != "norange" and body:
            a, b = rng.split("=", 1)[1].split("-")
            a, b = int(a), (int(b) if b else size - 1)
            data, status = data[a:b + 1], 206
            headers["Content-Range"] = f"bytes {a}-{a + len(data) - 1}/{size}"
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not body:
            return
        if mode == "dead" or (mode == "flaky" and n <= 2):
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(data)

    def _status(self, code, reason, headers=None):
        self.send_response(code, reason)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture(scope="module")
def web(data):
    handler = type("Web", (Files,), {"root": str(data), "seen": {}, "log": []})
    server = _serve(handler)
    yield type("Web", (), {"base": f"http://127.0.0.1:{server.server_port}",
                           "handler": handler})
    server.shutdown()
    server.server_close()


@pytest.fixture
def site(web):
    web.handler.seen.clear()
    web.handler.log.clear()
    return web


@pytest.mark.parametrize("name", ["pred.parquet", "pred.csv", "pred.csv.gz", "pred.feather",
                                  "pred.npy"])
def test_an_http_file_scores_as_the_local_file(site, data, name):
    local = fastcal.score_file(data / name, prob="p", label="y", chunk_rows=1000)
    remote = fastcal.score_file(f"{site.base}/ok/{name}", prob="p", label="y", chunk_rows=1000)
    same(remote, local)


def test_a_busy_or_dropping_web_server_is_asked_again(site, data):
    local = fastcal.score_file(data / "pred.parquet")
    for mode in ("busy", "flaky"):
        for name in ("pred.parquet", "pred.csv"):
            same(fastcal.score_file(f"{site.base}/{mode}/{name}"),
                 fastcal.score_file(data / name))
    assert local.n == 3000


def test_redirects_are_followed_and_head_is_not_needed(site, data):
    for name in ("pred.parquet", "pred.csv"):
        local = fastcal.score_file(data / name)
        for mode in ("moved", "nohead"):
            same(fastcal.score_file(f"{site.base}/{mode}/{name}"), local)
    # a redirect is followed when the file is opened: its ranged reads go where it led
    ranged = {p for _, p, r in site.handler.log if r is not None}
    assert "/ok/pred.parquet" in ranged and "/moved/pred.parquet" not in ranged


def test_http_faults_are_one_line(site):
    base = site.base
    cases = [
        (f"{base}/ok/none.parquet", "no such object, nor objects under this prefix"),
        (f"{base}/deny/pred.parquet", "access denied (HTTP 403 Forbidden); fastcal sends no "
                                      "credentials to a web server: give a URL the server "
                                      "allows (a signed URL carries its own)"),
        (f"{base}/norange/pred.parquet", "cannot read the Parquet footer: the server does not "
                                         "answer range requests (HTTP 200 to a Range header); "
                                         "this format is read by ranges (CSV is streamed)"),
    ]
    for path, text in cases:
        with pytest.raises(ValueError) as info:
            fastcal.score_file(path)
        assert str(info.value) == f"{path}: {text}"
    with pytest.raises(ValueError) as info:
        fastcal.score_file(f"{base}/dead/pred.csv")
    assert str(info.value).startswith(f"{base}/dead/pred.csv: ")
    assert "connection failed (connection was dropped mid-file" in str(info.value)


def test_a_csv_file_streams_from_a_server_without_ranges(site, data):
    same(fastcal.score_file(f"{site.base}/norange/pred.csv.gz"),
         fastcal.score_file(data / "pred.csv.gz"))


def test_a_signed_urls_query_is_not_shown(site):
    path = f"{site.base}/ok/none.parquet?X-Amz-Signature=abcdef&X-Amz-Expires=60"
    with pytest.raises(ValueError) as info:
        fastcal.score_file(path)
    assert str(info.value) == (f"{site.base}/ok/none.parquet?X-Amz-Signature=***&X-Amz-Expires="
                               "***: no such object, nor objects under this prefix")
