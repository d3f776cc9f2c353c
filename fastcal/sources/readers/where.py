"""Where a path lives: on this machine, in an object store, or on a web server.

Every reader asks here, once per path, and opens its files through the answer:

* a local path (or a ``file://`` URL, read as the path it names) is read with the
  operating system's calls, as always: ``os.stat``, ``os.walk``, ``os.pread``;
* ``s3://``, ``gs://``, ``abfs://`` / ``abfss://``, ``az://`` and ``hf://`` URLs are
  resolved to one of pyarrow's file systems (:mod:`pyarrow.fs`, C++ clients that
  read byte ranges without the GIL and retry as each store's SDK does), with the
  credentials and endpoints of each store's own environment variables and files;
* ``http://`` and ``https://`` URLs are read by :class:`HttpFileSystem` here:
  ranged GETs on one kept-alive connection per open file, retried with back-off
  when the server is busy or the connection drops.

A URL names one object, or a prefix (a "directory") whose objects form a dataset;
names starting with ``.`` or ``_`` are skipped there as in a local directory.
Credentials never appear in fastcal's options or messages: a URL carrying a
password (``s3://key:secret@bucket/...``) is refused without echoing it.
"""

import http.client
import io
import os
import re
import stat as _stat_mod
import threading
import time
import urllib.parse

# The schemes read, and what each store reads its credentials from (for messages).
CREDENTIALS = {
    "s3": ("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_PROFILE, "
           "or ~/.aws/credentials and ~/.aws/config"),
    "gs": "GOOGLE_APPLICATION_CREDENTIALS, or gcloud's application default credentials",
    "az": ("AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN, or Azure's default "
           "credential (AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_CLIENT_SECRET; az login)"),
    "hf": "HF_TOKEN, or the token saved by huggingface-cli login",
    "http": "none: a signed URL carries its own",
}
_KIND = {"s3": "s3", "gs": "gs", "gcs": "gs", "az": "az", "abfs": "az", "abfss": "az",
         "hf": "hf", "http": "http", "https": "http"}
SCHEMES = ("s3", "gs", "gcs", "az", "abfs", "abfss", "hf", "http", "https", "file")

# Environment variables that decide a store's client: a change gives a new client.
_ENV = {
    "s3": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
           "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
           "AWS_ENDPOINT_URL_S3", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"),
    "gs": ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUD_STORAGE_EMULATOR_ENDPOINT"),
    "az": ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_ACCOUNT_KEY",
           "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_CLIENT_ID", "AZURE_TENANT_ID",
           "AZURE_CLIENT_SECRET"),
    "hf": ("HF_TOKEN", "HF_ENDPOINT"),
    "http": (),
}

_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def url_scheme(path):
    """The scheme of a URL (``s3`` of ``s3://bucket/key``, ``https``...), else None."""
    m = _URL.match(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else None
    return m.group(1).lower() if m else None


def is_url(path):
    """True for a URL that is read through a file system here (not ``file://``)."""
    s = url_scheme(path)
    return s is not None and s != "file"


def _fail(path, what):
    msg = f"{path}: {what}"
    raise ValueError(msg)


def shown(url):
    """``url`` as messages show it: a password in it, and the values of its query (a
    signed URL's signature, a SAS token), replaced by ``***``."""
    if not isinstance(url, str) or not is_url(url):
        return url
    url = re.sub(r"^([^:/]+://)[^/@\s]*:[^/@\s]*@", r"\1***@", url)
    return re.sub(r"([?&][^=&\s]+=)[^&\s]+?(?=:\s|[&\s]|:?$)", r"\1***", url)


def local(path):
    """The path a reader opens: a ``file://`` URL as its local path; anything else as it
    is, after a check of its scheme (one line for a scheme that is not read)."""
    path = os.fspath(path)
    scheme = url_scheme(path)
    if scheme is None:
        return path
    if scheme not in SCHEMES:
        _fail(path, f"{scheme}:// URLs are not read; expected a local path or a URL of "
                    "s3://, gs://, az://, abfs://, hf://, http(s):// or file://")
    if urllib.parse.urlsplit(path).password is not None:
        _fail(shown(path), "a password in the URL is not accepted (it would show in "
                           "messages and process lists); give the credentials through "
                           f"the store's own settings: {CREDENTIALS[_KIND.get(scheme, 's3')]}")
    if scheme == "file":
        parts = urllib.parse.urlsplit(path)
        if parts.netloc not in ("", "localhost"):
            _fail(path, f"file:// URL names host {parts.netloc!r}; expected file:///PATH "
                        "on this machine")
        return urllib.parse.unquote(parts.path)
    return path


def name_of(path):
    """The part of a path or URL that holds the file name (a URL without its query)."""
    if is_url(path):
        return urllib.parse.urlsplit(path).path
    return path


# -- file systems ---------------------------------------------------------------------

_CLIENTS: dict = {}
_LOCK = threading.Lock()


def _env(kind):
    return tuple(os.environ.get(k) for k in _ENV[kind])


def resolve(url):
    """``(filesystem, path)`` of a URL: a pyarrow file system (or :class:`HttpFileSystem`)
    and the path in it. Clients are kept per store, account and environment, so the
    files of a dataset share one (pyarrow's ``from_uri`` may ask the store for a
    bucket's region: once)."""
    scheme = url_scheme(url)
    kind = _KIND[scheme]
    parts = urllib.parse.urlsplit(url)
    key = (scheme, parts.netloc, parts.query, _env(kind))
    with _LOCK:
        fs = _CLIENTS.get(key)
    if kind == "http":
        inner = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        fs = fs or HttpFileSystem(scheme, parts.netloc)
    elif kind == "az":
        container = parts.netloc.split("@", 1)[0]
        inner = container + parts.path
        fs = fs or _azure(url, scheme, parts)
    else:
        inner = parts.netloc + parts.path
        if fs is None:
            try:
                from pyarrow import fs as pafs

                fs = pafs.FileSystem.from_uri(url)[0]
            except ImportError as exc:  # hf:// without huggingface_hub
                _fail(url, f"{scheme}:// needs a package that is not installed: {_line(exc)}")
            except Exception as exc:
                _fail(shown(url), reason(exc, scheme))
    with _LOCK:
        _CLIENTS[key] = fs
    return fs, inner.rstrip("/") or inner


def _azure(url, scheme, parts):
    from pyarrow import fs as pafs

    if scheme == "az":
        account = (os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
                   or os.environ.get("AZURE_STORAGE_ACCOUNT"))
        if not account:
            _fail(url, "az://CONTAINER/PATH needs the storage account in "
                       "AZURE_STORAGE_ACCOUNT_NAME (or use abfs://CONTAINER@ACCOUNT"
                       ".dfs.core.windows.net/PATH)")
    else:
        if "@" not in parts.netloc:
            _fail(url, f"{scheme}:// URL has no container@account; expected "
                       f"{scheme}://CONTAINER@ACCOUNT.dfs.core.windows.net/PATH")
        account = parts.netloc.split("@", 1)[1].split(".", 1)[0]
    key = os.environ.get("AZURE_STORAGE_ACCOUNT_KEY") or os.environ.get("AZURE_STORAGE_KEY")
    sas = os.environ.get("AZURE_STORAGE_SAS_TOKEN")
    try:
        if key:
            return pafs.AzureFileSystem(account, account_key=key)
        if sas:
            return pafs.AzureFileSystem(account, sas_token=sas)
        return pafs.AzureFileSystem(account)
    except Exception as exc:
        _fail(url, reason(exc, scheme))


def _line(exc):
    text = str(exc).strip().splitlines()
    return text[0].strip() if text else type(exc).__name__


# How pyarrow's clients word the faults of a store, and what they mean.
_DENIED = ("ACCESS_DENIED", "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH",
           "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "PERMISSION_DENIED",
           "Unauthorized", "AuthorizationFailure", "AuthenticationFailed", "HTTP 401",
           "HTTP 403", "403 Forbidden", "EXPIRED_TOKEN", "INVALID_CLIENT_TOKEN_ID")
_THROTTLED = ("SLOW_DOWN", "SlowDown", "THROTTLING", "Throttling", "TooManyRequests",
              "REQUEST_LIMIT_EXCEEDED", "SERVICE_UNAVAILABLE", "HTTP 429", "HTTP 503",
              "ServerBusy")
_NETWORK = ("NETWORK_CONNECTION", "curlCode", "Could not connect", "Connection refused",
            "connection was dropped", "Connection reset", "timed out", "Couldn't connect",
            "Could not resolve", "UNAVAILABLE", "Transferred a partial file")


def reason(exc, scheme):
    """One line for a failure of a store's client: what it means, the client's words
    (without the location, already named, nor a request id), and what to check."""
    text = _line(exc)
    text = re.sub(r"^When [^:]*?(in bucket '[^']*'|for '[^']*'|of '[^']*')?: ", "", text)
    text = re.sub(r"\s*\(Request ID: [^)]*\)", "", text).strip().rstrip(".")
    kind = _KIND.get(scheme, "s3")
    if isinstance(exc, FileNotFoundError) or "NO_SUCH_KEY" in text or "NoSuchKey" in text \
            or "NO_SUCH_BUCKET" in text or "HTTP 404" in text:
        return f"no such object ({text})"
    if isinstance(exc, PermissionError) or any(w in text for w in _DENIED):
        if kind == "http":
            return (f"access denied ({text}); fastcal sends no credentials to a web server: "
                    "give a URL the server allows (a signed URL carries its own)")
        return (f"access denied ({text}); check the credentials ({CREDENTIALS[kind]}) and "
                "the permissions on the object")
    if any(w in text for w in _THROTTLED):
        return (f"the store refused the requests as too many (or was unavailable), still "
                f"after retries ({text})")
    if any(w in text for w in _NETWORK) or isinstance(exc, (ConnectionError, TimeoutError)):
        where = _endpoint(kind)
        return f"connection failed ({text}){where}, still after retries"
    return text


def _endpoint(kind):
    if kind == "s3":
        for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
            if os.environ.get(var):
                return f"; the endpoint is {os.environ[var]} (from {var})"
    return ""


def fail_remote(url, exc, doing=None):
    """One ``ValueError`` line for a store's failure on ``url``."""
    text = reason(exc, url_scheme(url))
    _fail(shown(url), f"cannot {doing}: {text}" if doing and not text.startswith(
        ("no such", "access denied", "connection failed", "the store")) else text)


# -- what the readers call ------------------------------------------------------------

def info(url):
    """pyarrow's FileInfo of a URL (type File, Directory or NotFound)."""
    fs, inner = resolve(url)
    try:
        return fs.get_file_info(inner)
    except Exception as exc:
        fail_remote(url, exc)


def stat(url):
    """An ``os.stat_result`` of a URL (its type and size), or one line: no such object,
    access denied, connection failed."""
    got = info(url)
    from pyarrow import fs as pafs

    if got.type == pafs.FileType.NotFound:
        _fail(shown(url), "no such object, nor objects under this prefix")
    mode = _stat_mod.S_IFDIR if got.type == pafs.FileType.Directory else _stat_mod.S_IFREG
    return os.stat_result((mode | 0o444, 0, 0, 1, 0, 0, got.size or 0, 0, 0, 0))


def isdir(path):
    """Whether a local path or a URL is a directory (a prefix of objects)."""
    if not is_url(path):
        return os.path.isdir(path)
    from pyarrow import fs as pafs

    return info(path).type == pafs.FileType.Directory


def list_files(url, keep):
    """The URLs of the objects under a prefix whose every part passes ``keep``, sorted."""
    from pyarrow import fs as pafs

    fs, inner = resolve(url)
    try:
        found = fs.get_file_info(pafs.FileSelector(inner, recursive=True))
    except Exception as exc:
        fail_remote(url, exc, "list this prefix")
    base = url.rstrip("/")
    out = []
    for f in found:
        if f.type != pafs.FileType.File:
            continue
        rel = f.path[len(inner):].lstrip("/")
        if all(keep(part) for part in rel.split("/")):
            out.append(f"{base}/{rel}")
    return sorted(out)


def size(path):
    """Bytes of a local file (``os.path.getsize``) or an object."""
    if not is_url(path):
        return os.path.getsize(path)
    return stat(path).st_size


def open_file(url):
    """A random-access pyarrow file of an object: every read is a ranged request."""
    fs, inner = resolve(url)
    try:
        return fs.open_input_file(inner)
    except Exception as exc:
        fail_remote(url, exc, "open it")


def open_stream(url, compression=None):
    """A sequential pyarrow stream of an object (``compression="gzip"``: decompressed)."""
    fs, inner = resolve(url)
    try:  # the bytes as stored (pyarrow would decompress by the name's extension)
        stream = fs.open_input_stream(inner, compression=None)
    except Exception as exc:
        fail_remote(url, exc, "open it")
    if compression is None:
        return stream
    import pyarrow as pa

    return pa.CompressedInputStream(stream, compression)


# -- http:// and https:// ---------------------------------------------------------------

# Tries of one request, and the first pause between two (doubled each time): a
# server that answers 429/5xx or drops the connection is asked again.
HTTP_TRIES = 4
HTTP_PAUSE = 0.1
HTTP_TIMEOUT = 60.0
_RETRY_STATUS = (429, 500, 502, 503, 504)
_MOVED = (301, 302, 303, 307, 308)
MAX_REDIRECTS = 5


class HttpError(OSError):
    """A request that failed for good: the status, or the connection's error."""


class _Moved(Exception):
    """A redirect to ``url``: followed by :meth:`HttpFileSystem.follow`."""


class HttpFileSystem:
    """A read-only file system of one web server (what the readers ask of pyarrow's:
    ``get_file_info``, ``open_input_file``, ``open_input_stream``).

    A random-access file reads each range with a GET and a ``Range`` header; a
    stream reads one GET from its start, and where the connection drops asks for
    the rest with a ``Range`` header. Redirects are followed (at most
    :data:`MAX_REDIRECTS`) once, when the file is opened; later requests go to
    where they led. No listing: a URL is one file.
    """

    def __init__(self, scheme, netloc):
        self.scheme, self.netloc = scheme, netloc

    def _connect(self):
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.netloc, timeout=HTTP_TIMEOUT)

    def request(self, path, method="GET", headers=None, conn=None, body=False):
        """``(conn, response)`` of a request, retried; statuses other than 2xx raise."""
        headers = {"User-Agent": "fastcal", **(headers or {})}
        pause = HTTP_PAUSE
        for attempt in range(HTTP_TRIES):
            last = attempt == HTTP_TRIES - 1
            try:
                if conn is None:
                    conn = self._connect()
                conn.request(method, path, headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                if conn is not None:
                    conn.close()
                conn = None
                if last:
                    text = f"connection was dropped or refused: {_line(exc) or type(exc).__name__}"
                    raise HttpError(text) from None
                time.sleep(pause)
                pause *= 2
                continue
            if resp.status in _RETRY_STATUS and not last:
                resp.read()
                after = resp.getheader("Retry-After")
                time.sleep(min(float(after), 2.0) if after and after.isdigit() else pause)
                pause *= 2
                continue
            if resp.status in _MOVED and resp.getheader("Location"):
                resp.read()
                conn.close()
                raise _Moved(urllib.parse.urljoin(f"{self.scheme}://{self.netloc}{path}",
                                                  resp.getheader("Location")))
            if resp.status >= 400:
                resp.read()
                conn.close()
                text = f"HTTP {resp.status} {resp.reason}"
                if resp.status == 404:
                    raise FileNotFoundError(text)
                if resp.status in (401, 403):
                    raise PermissionError(text)
                raise HttpError(text)
            return conn, resp
        raise AssertionError("unreachable")  # pragma: no cover

    def follow(self, path, call):
        """``call(fs, path)``, again where a redirect leads (another server, maybe)."""
        fs = self
        for _ in range(MAX_REDIRECTS + 1):
            try:
                return call(fs, path)
            except _Moved as moved:
                parts = urllib.parse.urlsplit(moved.args[0])
                if parts.scheme not in ("http", "https"):
                    msg = f"the server redirects to a {parts.scheme}:// URL; expected http(s)://"
                    raise HttpError(msg) from None
                fs = HttpFileSystem(parts.scheme, parts.netloc)
                path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        msg = f"more than {MAX_REDIRECTS} redirects"
        raise HttpError(msg)

    def locate(self, path):
        """``(fs, path, size)`` of the file once redirects are followed; size None where
        the server gives none. A missing file raises FileNotFoundError."""
        def head(fs, p):
            try:
                conn, resp = fs.request(p, "HEAD")
                size = resp.getheader("Content-Length")
            except HttpError as exc:
                if not str(exc).startswith(("HTTP 405", "HTTP 501")):
                    raise
                # no HEAD here: the first byte's Content-Range gives the size
                conn, resp = fs.request(p, headers={"Range": "bytes=0-0"})
                size = (resp.getheader("Content-Range") or "").rpartition("/")[2] \
                    if resp.status == 206 else None
            conn.close()  # a body, if any, is not read
            return fs, p, (int(size) if size and size.isdigit() else None)

        return self.follow(path, head)

    def get_file_info(self, path):
        from pyarrow import fs as pafs

        if isinstance(path, pafs.FileSelector):
            msg = "http(s):// URLs name one file each: a web server has no listing"
            raise HttpError(msg)
        try:
            size = self.locate(path)[2]
        except FileNotFoundError:
            return pafs.FileInfo(path, pafs.FileType.NotFound)
        return pafs.FileInfo(path, pafs.FileType.File, size=size)

    def open_input_file(self, path):
        import pyarrow as pa

        return pa.PythonFile(_RangeFile(self, path), mode="r")

    def open_input_stream(self, path, compression=None):
        import pyarrow as pa

        return pa.PythonFile(_Stream(self, path), mode="r")


class _RangeFile:
    """A file of a web server read by ranges (``seek``, ``read``), for pyarrow.PythonFile."""

    closed = False

    def __init__(self, fs, path):
        self.conn = None
        self.pos = 0
        self.fs, self.path, size = fs.locate(path)  # where redirects lead
        if size is None:
            msg = "the server gives no Content-Length; a file read by ranges needs its size"
            raise HttpError(msg)
        self.length = size

    def readable(self):
        return True

    def seekable(self):
        return True

    def writable(self):
        return False

    def tell(self):
        return self.pos

    def seek(self, pos, whence=0):
        self.pos = pos if whence == 0 else (self.pos + pos if whence == 1 else self.length + pos)
        return self.pos

    def size(self):
        return self.length

    def read(self, n=-1):
        if n is None or n < 0:
            n = self.length - self.pos
        n = max(0, min(n, self.length - self.pos))
        if n == 0:
            return b""
        if self.closed:  # a read ahead that comes after close: no new connection
            raise HttpError("read after close")
        out = bytearray()
        tries = 0
        while len(out) < n:
            a = self.pos + len(out)
            b = self.pos + n - 1
            self.conn, resp = self.fs.request(self.path, headers={"Range": f"bytes={a}-{b}"},
                                              conn=self.conn)
            if resp.status != 206:
                resp.read()
                msg = (f"the server does not answer range requests (HTTP {resp.status} to "
                       "a Range header); this format is read by ranges (CSV is streamed)")
                raise HttpError(msg)
            try:
                out += resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                out += getattr(exc, "partial", b"")
                tries += 1
                if tries >= HTTP_TRIES:
                    text = f"connection was dropped mid-file: {_line(exc) or type(exc).__name__}"
                    raise HttpError(text) from None
                time.sleep(HTTP_PAUSE * 2 ** (tries - 1))
        self.pos += n
        return bytes(out)

    def _drop(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def close(self):
        self._drop()
        self.closed = True


class _Stream:
    """A web server's file read from its start (``read`` only), resumed with a Range
    header where the connection drops."""

    closed = False

    def __init__(self, fs, path):
        self.pos = 0
        self.tries = 0
        self.fs, self.path, self.conn, self.resp = fs.follow(
            path, lambda f, p: (f, p, *f.request(p)))

    def readable(self):
        return True

    def seekable(self):
        return False

    def writable(self):
        return False

    def tell(self):
        return self.pos

    def read(self, n=-1):
        while True:
            if self.closed:  # a read ahead that comes after close: no new connection
                raise HttpError("read after close")
            try:
                data = self.resp.read() if n is None or n < 0 else self.resp.read(n)
                if not data and n != 0 and self.resp.length:  # bytes still due: dropped
                    raise http.client.IncompleteRead(b"", self.resp.length)
            except (OSError, http.client.HTTPException) as exc:
                self._resume(exc)
                continue
            self.pos += len(data)
            return data

    def _resume(self, exc):
        self.conn.close()
        self.tries += 1
        if self.tries >= HTTP_TRIES:
            text = f"connection was dropped mid-file: {_line(exc) or type(exc).__name__}"
            raise HttpError(text) from None
        time.sleep(HTTP_PAUSE * 2 ** (self.tries - 1))
        if self.closed:
            raise HttpError("read after close")
        self.conn, self.resp = self.fs.request(self.path, headers={"Range": f"bytes={self.pos}-"})
        if self.closed:  # closed while the request was made
            self.conn.close()
            raise HttpError("read after close")
        if self.resp.status != 206:
            msg = (f"the connection was dropped at byte {self.pos} and the server does not "
                   "answer range requests to resume")
            raise HttpError(msg)

    def close(self):
        self.conn.close()
        self.closed = True


# -- handles for positional reads (the readers that parse byte ranges themselves) --------

def open_handle(path):
    """A handle for :func:`pread`: a file descriptor of a local file (``os.open``), a
    random-access pyarrow file of an object. Local failures are ``OSError``."""
    if is_url(path):
        return open_file(path)
    return os.open(path, os.O_RDONLY)


def pread(handle, n, pos):
    """Up to ``n`` bytes at ``pos`` of a handle (fewer at its end)."""
    if isinstance(handle, int):
        return os.pread(handle, n, pos)
    return handle.read_at(n, pos)


def handle_size(handle):
    """The size now of a handle's file (an object's does not change)."""
    if isinstance(handle, int):
        return os.fstat(handle).st_size
    return handle.size()


def close_handle(handle):
    if isinstance(handle, int):
        os.close(handle)
    else:
        handle.close()


def open_buffered(url, block=8 << 20):
    """A seekable Python file of an object that reads ahead ``block`` bytes per request,
    for readers that read a few bytes at a time (``zipfile``)."""
    return _ReadAhead(open_file(url), block)


class _ReadAhead(io.RawIOBase):
    def __init__(self, f, block):
        self.f, self.block = f, block
        self.length = f.size()
        self.pos = 0
        self.buf, self.buf_at = b"", 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, pos, whence=0):
        self.pos = pos if whence == 0 else (self.pos + pos if whence == 1 else self.length + pos)
        return self.pos

    def read(self, n=-1):
        if n is None or n < 0:
            n = self.length - self.pos
        n = max(0, min(n, self.length - self.pos))
        a = self.pos - self.buf_at
        if not (0 <= a and a + n <= len(self.buf)):
            if n >= self.block:
                out = self.f.read_at(n, self.pos)
                self.pos += len(out)
                return out
            self.buf, self.buf_at = self.f.read_at(self.block, self.pos), self.pos
            a = 0
        out = self.buf[a:a + n]
        self.pos += len(out)
        return out

    def readinto(self, b):
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def close(self):
        self.f.close()
        super().close()
