"""Hive-partitioned datasets: the partition columns a directory's names give
(``model=v3/day=2024-05-01/part-0.parquet``), and filters on them that choose the
files to read before any is opened.

A directory (or prefix) is in Hive layout when every file under it sits below
directories named ``KEY=VALUE``, the same keys in the same order: each key is then
a column of every row of its files (an integer column when every value is an
integer, else text; ``__HIVE_DEFAULT_PARTITION__`` is null). A key that is also a
column of the files is not a partition column: the files' column wins.

A filter (``where=``) is a pyarrow expression (``pyarrow.compute.field("model") ==
"v3"``) or the same written as text, a small SQL-like language::

    model = 'v3'
    model in ('v2', 'v3') and day >= '2024-05-01'
    not (shard = 3 or shard is null)

It may name partition columns only: it chooses files, never rows within a file, so
rows keep their numbers within the files read.
"""

import re
import urllib.parse

from fastcal.sources.readers.base import _fail, _one_line

NULL = "__HIVE_DEFAULT_PARTITION__"


class Partitions:
    """The partition columns of a dataset's files: ``names``, their Arrow ``types``
    and each file's ``values`` (a tuple per file, in the order of ``names``)."""

    def __init__(self, names, types, values):
        self.names = list(names)
        self.types = list(types)
        self.values = list(values)

    def __bool__(self):
        return bool(self.names)

    def fields(self):
        import pyarrow as pa

        return [pa.field(n, t) for n, t in zip(self.names, self.types)]

    def array(self, i, name, n):
        """Column ``name`` of file ``i`` for ``n`` rows, as an Arrow array."""
        import pyarrow as pa

        k = self.names.index(name)
        return pa.repeat(pa.scalar(self.values[i][k], self.types[k]), n)

    def table(self):
        """One row per file: its partition values (for the filter)."""
        import pyarrow as pa

        cols = {n: pa.array([v[k] for v in self.values], t)
                for k, (n, t) in enumerate(zip(self.names, self.types))}
        return pa.table(cols)

    def without(self, names):
        """These partitions less the keys in ``names`` (columns of the files)."""
        keep = [k for k, n in enumerate(self.names) if n not in names]
        return Partitions([self.names[k] for k in keep], [self.types[k] for k in keep],
                          [tuple(v[k] for k in keep) for v in self.values])

    def take(self, rows):
        return Partitions(self.names, self.types, [self.values[i] for i in rows])


def discover(root, files):
    """The :class:`Partitions` of ``files`` under directory ``root`` (none when a file
    sits below a directory not named ``KEY=VALUE``, or the files disagree on the keys)."""
    import pyarrow as pa

    base = root.rstrip("/").rstrip("\\")
    keys, raw = None, []
    for f in files:
        rel = f[len(base):].lstrip("/\\").replace("\\", "/")
        dirs = rel.split("/")[:-1]
        pairs = [d.split("=", 1) for d in dirs]
        if not pairs or any(len(p) != 2 or not p[0] for p in pairs):
            return Partitions([], [], [() for _ in files])
        names = [urllib.parse.unquote(p[0]) for p in pairs]
        if keys is None:
            keys = names
        elif names != keys:
            return Partitions([], [], [() for _ in files])
        raw.append([urllib.parse.unquote(p[1]) for p in pairs])
    if not keys or len(set(keys)) != len(keys):
        return Partitions([], [], [() for _ in files])
    types, columns = [], []
    for k in range(len(keys)):
        vals = [None if r[k] == NULL else r[k] for r in raw]
        if all(v is None or re.fullmatch(r"[+-]?\d{1,18}", v) for v in vals):
            types.append(pa.int64())
            columns.append([None if v is None else int(v) for v in vals])
        else:
            types.append(pa.string())
            columns.append(vals)
    return Partitions(keys, types, list(zip(*columns)))


def select(path, partitions, where):
    """The indices of the files whose partition values pass ``where`` (an expression or
    its text); one line for a filter that does not parse, names a column that is not a
    partition column, compares values of two types, or keeps no file."""
    import pyarrow.compute as pc

    if not partitions:
        _fail(path, "where= filters the partition columns of a Hive-partitioned dataset "
                    "(directories named KEY=VALUE); this path has none")
    if isinstance(where, str):
        try:
            expr, text = parse(where, partitions.names), where
        except _NotAColumn as exc:
            _bad_name(path, where, exc.args[0], partitions)
        except ValueError as exc:
            _fail(path, str(exc))
    elif isinstance(where, pc.Expression):
        expr, text = where, str(where)
    else:
        msg = (f"where must be a pyarrow.compute.Expression or its text (\"model = 'v3'\"); "
               f"got {type(where).__name__}")
        raise ValueError(msg)
    import pyarrow as pa

    table = partitions.table()
    table = table.append_column("__file__", pa.array(range(table.num_rows), pa.int64()))
    try:
        kept = table.filter(expr)
    except Exception as exc:
        line = _one_line(exc)
        m = re.search(r"No match for FieldRef\.Name\(([^)]*)\)", line)
        if m:
            _bad_name(path, text, m.group(1), partitions)
        m = re.search(r"has no kernel matching input types \(([^)]*)\)", line)
        if m:
            _fail(path, f"where {text!r} compares values of two types ({m.group(1)}); write "
                        "text in quotes ('v3') and numbers without")
        _fail(path, f"where {text!r} cannot be evaluated on the partition columns "
                    f"({_listing(partitions)}): {line}")
    rows = kept.column("__file__").to_pylist()
    if not rows:
        _fail(path, f"where {text!r} keeps none of the {table.num_rows} files; the partition "
                    f"values are {_values(partitions)}")
    return rows


def _listing(partitions):
    return ", ".join(f"{n} ({t})" for n, t in zip(partitions.names, partitions.types))


def _values(partitions, k=8):
    out = []
    for i, n in enumerate(partitions.names):
        vals = sorted({v[i] for v in partitions.values}, key=lambda x: (x is None, str(x)))
        more = f" and {len(vals) - k} more" if len(vals) > k else ""
        out.append(f"{n}: {', '.join(repr(v) for v in vals[:k])}{more}")
    return "; ".join(out)


def _bad_name(path, text, name, partitions):
    _fail(path, f"where {text!r} names {name!r}, which is not a partition column; where= "
                f"chooses files by the partition columns: {_listing(partitions)}")


class _NotAColumn(ValueError):
    """A filter's text names a column that is not a partition column."""


# -- the text form of a filter ----------------------------------------------------------

_TOKEN = re.compile(r"""\s*(?:
    (?P<str>'(?:[^']|'')*')
  | (?P<qname>"(?:[^"]|"")*"|`[^`]*`)
  | (?P<num>[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,)
  | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
)""", re.VERBOSE)
_KEYWORDS = {"and", "or", "not", "in", "is", "null", "true", "false"}


def _tokens(text):
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip() == "":
                break
            _syntax(text, pos, "a name, a value or an operator")
        kind = m.lastgroup
        val, at = m.group(kind), m.start(kind)
        if kind == "word" and val.lower() in _KEYWORDS:
            kind, val = "kw", val.lower()
        out.append((kind, val, at))
        pos = m.end()
    out.append(("end", "", len(text)))
    return out


def _syntax(text, pos, expected):
    msg = (f"where {text!r}: expected {expected} at character {pos}; write a filter on the "
           "partition columns such as \"model = 'v3'\" or \"day >= '2024-05-01' and model "
           "in ('v2', 'v3')\"")
    raise ValueError(msg)


def parse(text, names):
    """The pyarrow expression of a filter written as text (see the module's notes)."""
    toks = _tokens(text)
    i = 0

    def peek():
        return toks[i]

    def take(kind=None, val=None, expected=None):
        nonlocal i
        k, v, pos = toks[i]
        if (kind and k != kind) or (val is not None and v != val):
            _syntax(text, pos, expected or repr(val))
        i += 1
        return v

    def or_():
        e = and_()
        while peek()[:2] == ("kw", "or"):
            take()
            e = e | and_()
        return e

    def and_():
        e = not_()
        while peek()[:2] == ("kw", "and"):
            take()
            e = e & not_()
        return e

    def not_():
        if peek()[:2] == ("kw", "not"):
            take()
            return ~not_()
        return cmp()

    def cmp():
        import pyarrow.compute as pc

        left = atom()
        k, v, pos = peek()
        if k == "op" and v in ("=", "==", "!=", "<>", "<", "<=", ">", ">="):
            take()
            right = atom()
            return {"=": left.__eq__, "==": left.__eq__, "!=": left.__ne__,
                    "<>": left.__ne__, "<": left.__lt__, "<=": left.__le__,
                    ">": left.__gt__, ">=": left.__ge__}[v](right)
        negate = False
        if (k, v) == ("kw", "not") and toks[i + 1][:2] == ("kw", "in"):
            take()
            negate = True
            k, v, pos = peek()
        if (k, v) == ("kw", "in"):
            take()
            take("op", "(")
            values = [literal()]
            while peek()[:2] == ("op", ","):
                take()
                values.append(literal())
            take("op", ")", "')' or ','")
            e = left.isin(values)
            return ~e if negate else e
        if (k, v) == ("kw", "is"):
            take()
            if peek()[:2] == ("kw", "not"):
                take()
                take("kw", "null", "null")
                return ~left.is_null()
            take("kw", "null", "null")
            return left.is_null()
        if isinstance(left, pc.Expression) and left.equals(pc.scalar(True)):
            return left
        _syntax(text, pos, "a comparison (=, !=, <, <=, >, >=, in, is null)")

    def literal():
        k, v, pos = peek()
        if k == "str":
            take()
            return v[1:-1].replace("''", "'")
        if k == "num":
            take()
            return float(v) if any(c in v for c in ".eE") else int(v)
        if k == "kw" and v in ("true", "false"):
            take()
            return v == "true"
        if k == "kw" and v == "null":
            take()
            return None
        _syntax(text, pos, "a value ('text', a number, true, false or null)")

    def atom():
        import pyarrow.compute as pc

        k, v, pos = peek()
        if (k, v) == ("op", "("):
            take()
            e = or_()
            take("op", ")", "')'")
            return e
        if k in ("word", "qname"):
            take()
            name = v if k == "word" else v[1:-1].replace('""', '"')
            if name not in names:
                raise _NotAColumn(name)
            return pc.field(name)
        return pc.scalar(literal())

    expr = or_()
    if peek()[0] != "end":
        _syntax(text, peek()[2], "'and', 'or' or the end")
    return expr
