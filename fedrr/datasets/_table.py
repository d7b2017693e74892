"""Your own table as a discrete dataset: a pandas DataFrame, or a CSV or Parquet file (read by pandas
/ pyarrow), with a declared schema — the label column, categorical columns with their domains, numeric
columns cut at declared public edges (``read_table``). A bad cell is one ValidationError naming its row
and column."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError
from ._adult import bin_states, quantile_edges
from ._schema import Dataset, FeatureSpec, Schema

#: the one opt-in to edges fitted on the private rows: ``edges = {col = "private-quantiles:K"}``
PRIVATE_QUANTILES = re.compile(r"private-quantiles:(\d+)")
TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


def _text(v: Any) -> str | None:
    """A cell (or a declared value) as the text it is compared by; None when missing. An integral
    float is written as an integer (3.0 -> "3"), so a domain [1, 2, 3] matches 1, 1.0 or "1"."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return None
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v)).lower()
    return str(v)


def _read(source: Any, what: str):
    """The table as a DataFrame, and how its rows are named in errors."""
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        return source, f"{what} (DataFrame)", None
    if not isinstance(source, (str, os.PathLike)):
        raise ValidationError(
            what, f"must be a pandas DataFrame or a .csv / .parquet path, got {type(source).__name__}"
        )
    p = Path(source)
    suffix = "".join(s for s in p.suffixes[-2:] if s != ".gz") if p.suffix == ".gz" else p.suffix
    if suffix.lower() not in TABLE_SUFFIXES:
        raise ValidationError(what, f"must be a {' / '.join(TABLE_SUFFIXES)} file, got {str(p)!r}")
    if not p.is_file():
        raise ValidationError(what, f"file {str(p)!r} does not exist")
    try:
        if suffix.lower() == ".csv":  # every cell as text: the schema, not a guess, says what a column is
            df = pd.read_csv(p, dtype=str, keep_default_na=False, na_values=[""], skipinitialspace=True)
        else:
            df = pd.read_parquet(p)
    except ImportError as exc:
        raise ValidationError(what, f"cannot read {p.name}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - pandas / pyarrow's own parse errors, named by the file
        raise ValidationError(what, f"cannot read {str(p)!r}: {type(exc).__name__}: {exc}") from None
    return df, str(p), 2 if suffix.lower() == ".csv" else None


def _where(name: str, df, r: int, first_line: int | None, col: str) -> str:
    """A cell's place: the file's row (and line) or the DataFrame's index label, and the column."""
    if first_line is None and "(DataFrame)" in name:
        return f"{name} row {df.index[r]!r}, column {col!r}"
    line = f" (line {r + first_line})" if first_line is not None else ""
    return f"{name} row {r}{line}, column {col!r}"


def _domain(col: str, declared: Any, series) -> tuple[str, ...]:
    """A categorical column's domain: the declared values, or the categories its own dtype declares
    (pandas ``category``, a Parquet dictionary column)."""
    if declared is None:
        cats = getattr(getattr(series, "cat", None), "categories", None) if str(series.dtype) == "category" else None
        if cats is None:
            raise ValidationError(
                f"categorical.{col}",
                "give its domain (a list of values): the table does not declare one (only a pandas 'category' "
                "column or a Parquet dictionary column does)",
            )
        declared = list(cats)
    if isinstance(declared, (str, bytes)) or not isinstance(declared, Sequence) or not declared:
        raise ValidationError(f"categorical.{col}", f"must be a non-empty list of values, got {declared!r}")
    dom = tuple(_text(v) for v in declared)
    if None in dom or len(set(dom)) != len(dom):
        raise ValidationError(f"categorical.{col}", f"must be distinct, non-missing values, got {list(declared)!r}")
    return dom


def _edges(col: str, declared: Any) -> tuple[tuple[float, ...] | None, int | None]:
    """Declared public edges (strictly increasing, finite), or the private-quantile opt-in's bin count."""
    if isinstance(declared, str):
        m = PRIVATE_QUANTILES.fullmatch(declared)
        if m is None or int(m.group(1)) < 2:
            raise ValidationError(
                f"edges.{col}",
                f"must be a list of public cut points, or 'private-quantiles:K' (K >= 2), got {declared!r}",
            )
        return None, int(m.group(1))
    try:
        e = np.asarray(declared, dtype=float)
    except (TypeError, ValueError):
        e = np.array([np.nan])
    if e.ndim != 1 or e.size == 0 or not np.all(np.isfinite(e)) or np.any(np.diff(e) <= 0):
        raise ValidationError(
            f"edges.{col}", f"must be a non-empty list of strictly increasing finite numbers, got {declared!r}"
        )
    return tuple(float(x) for x in e), None


def _first_bad(bad: dict[str, np.ndarray], columns: list[str]) -> tuple[int, str, int] | None:
    """The first bad cell (row, then table column order), and how many bad cells there are."""
    best, total = None, 0
    for col in columns:
        rows = bad.get(col)
        if rows is None or rows.size == 0:
            continue
        total += int(rows.size)
        if best is None or int(rows[0]) < best[0]:
            best = (int(rows[0]), col)
    return None if best is None else (*best, total)


def _codes(df, name, first_line, label, classes, categorical, numeric):
    """Per declared column: its states (numeric columns: floats, binned later) or one error naming the
    first bad cell (row, column) of the table (``label`` None: no label column)."""
    out, bad, why = {}, {}, {}
    coded = ([(label, classes)] if label is not None else []) + list(categorical.items())
    cells = {c: [_text(v) for v in df[c].tolist()] for c, _ in coded}
    for col, dom in coded:
        index = {v: i for i, v in enumerate(dom)} if dom is not None else None
        vals = cells[col]
        missing = np.array([v is None for v in vals])
        outside = np.array([v is not None and index is not None and v not in index for v in vals])
        bad[col] = np.flatnonzero(missing | outside)
        what = "the label" if col == label else "a categorical value"
        why[col] = lambda r, vals=vals, dom=dom, what=what: (
            f"missing {what}"
            if vals[r] is None
            else f"{vals[r]!r} is outside the declared domain {list(dom)!r}"
            + (" (classes)" if what == "the label" else "")
        )
        if index is not None:
            out[col] = np.array([index.get(v, -1) if v is not None else -1 for v in vals], dtype=np.int64)
        else:
            out[col] = vals
    import pandas as pd

    for col in numeric:
        raw = df[col]
        num = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad[col] = np.flatnonzero(np.isnan(num))
        texts = raw.tolist()
        why[col] = lambda r, texts=texts: (
            ("missing number" if _text(texts[r]) is None else f"{texts[r]!r} is not a number")
            + " (a numeric column, cut at its edges)"
        )
        out[col] = num
    order = [c for c in df.columns if c in bad]
    hit = _first_bad(bad, order)
    if hit is not None:
        r, col, total = hit
        more = f" ({total - 1} more bad cell(s) in this table)" if total > 1 else ""
        raise ValidationError(_where(name, df, r, first_line, col), why[col](r) + more)
    return out


def read_table(  # noqa: PLR0913  keyword-only schema
    table: Any,
    *,
    label: str,
    classes: Sequence | None = None,
    categorical: Mapping[str, Sequence | None] | None = None,
    edges: Mapping[str, Sequence[float] | str] | None = None,
    test: Any = None,
) -> Dataset:
    """A table (DataFrame, .csv or .parquet path; ``test``: a held-out table of the same columns) as a
    discrete ``Dataset`` whose features are the declared columns, in the table's column order:

    * ``label``: the label column; ``classes`` its declared values (y = index in ``classes``). Left
      out (None), the classes are the sorted distinct labels of the rows (and of ``test``): the set of
      labels is then treated as public — say so only if it is (a rare label reveals that someone has it).
    * ``categorical``: {column: domain} (state = index in the domain); a domain None is read from the
      column's dtype (a pandas 'category' column, a Parquet dictionary column), never from its values.
    * ``edges``: {column: public cut points}, a value on an edge goes up (bins [e_{b−1}, e_b),
      closed="left", as ``ADULT_PUBLIC_EDGES``): k = len(edges) + 1 states. The explicit opt-in
      ``"private-quantiles:K"`` cuts at K quantile bins of the training rows (``quantile_edges``) —
      edges fitted on the private records, which no ε pays for: the release's ε is then not the whole
      privacy cost (the edges themselves reveal the rows' quantiles). ``extra["private_edges"]`` lists them.

    Columns not declared are left out (``extra["unused_columns"]``). Values are compared as text (3,
    3.0 and "3" are one value). A missing label, a value outside its domain, or a cell of a numeric
    column that is missing or not a number raises one ValidationError naming the first such row and
    its column (and how many more there are). With ``test``, ``extra["is_test"]`` marks its rows."""
    if not isinstance(label, str) or not label:
        raise ValidationError("label", f"must name the label column, got {label!r}")
    categorical = dict(categorical or {})
    edges = dict(edges or {})
    both = sorted(set(categorical) & set(edges))
    if both:
        raise ValidationError(f"edges.{both[0]}", "is also declared categorical: declare each column once")
    if label in categorical or label in edges:
        raise ValidationError("label", f"{label!r} is the label column: do not declare it as a feature too")
    if not categorical and not edges:
        raise ValidationError("categorical", "declare at least one feature column (categorical or edges)")
    parts = [_read(table, "table")]
    if test is not None:
        parts.append(_read(test, "test_table"))
    df0 = parts[0][0]
    for df, name, _ in parts:
        missing = [c for c in [label, *categorical, *edges] if c not in df.columns]
        if missing:
            key = "label" if missing[0] == label else ("categorical" if missing[0] in categorical else "edges")
            raise ValidationError(
                f"{key}.{missing[0]}" if key != "label" else key,
                f"column {missing[0]!r} is not in {name}; its columns: {', '.join(map(str, df.columns))}",
            )
    domains = {c: _domain(c, d, df0[c]) for c, d in categorical.items()}
    cuts = {c: _edges(c, e) for c, e in edges.items()}
    if classes is not None:
        cls = _domain("classes", list(classes) if not isinstance(classes, str) else classes, df0[label])
    elif str(df0[label].dtype) == "category":
        cls = _domain("classes", None, df0[label])
    else:
        seen = {_text(v) for df, _, _ in parts for v in df[label].tolist()} - {None}
        cls = tuple(sorted(seen, key=lambda s: (not _is_number(s), float(s) if _is_number(s) else 0.0, s)))
    if len(cls) < 2:
        raise ValidationError("classes", f"a classification table needs at least 2 classes, got {list(cls)!r}")
    coded = [_codes(df, name, line, label, cls, domains, list(edges)) for df, name, line in parts]
    features = [c for c in df0.columns if c in domains or c in cuts]
    train = coded[0]
    specs, cols, private = [], [], {}
    for c in features:
        if c in domains:
            specs.append(FeatureSpec(str(c), "discrete", n_states=len(domains[c])))
            cols.append(np.concatenate([p[c] for p in coded]))
            continue
        e, k = cuts[c]
        if e is None:  # the explicit opt-in: cut at the private training rows' quantiles
            e = tuple(float(x) for x in quantile_edges(train[c], k))
            private[c] = e
        specs.append(
            FeatureSpec(str(c), "discrete", n_states=len(e) + 1, edges=e if c not in private else None, closed="left")
        )
        cols.append(np.concatenate([bin_states(p[c], np.asarray(e), "left") for p in coded]))
    X = np.column_stack(cols).astype(np.int64)
    y = np.concatenate([p[label] for p in coded]).astype(np.int64)
    schema = Schema(
        tuple(specs),
        classes=cls,
        target=str(label),
        source=f"table {parts[0][1]}" + (f", test table {parts[1][1]}" if test is not None else ""),
    )
    extra = {
        "categories": {c: domains[c] for c in domains},
        "edges": {c: cuts[c][0] or private[c] for c in cuts},
        "closed": "left",
        "private_edges": private,
        "classes_declared": classes is not None or str(df0[label].dtype) == "category",
        "unused_columns": [str(c) for c in df0.columns if c not in features and c != label],
        "table": parts[0][1],
    }
    if test is not None:
        extra["is_test"] = np.r_[np.zeros(len(df0), bool), np.ones(len(parts[1][0]), bool)]
        extra["test_table"] = parts[1][1]
    return Dataset(X, y, schema, extra=extra)


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def read_public_rows(source: Any, dataset: Dataset) -> np.ndarray:
    """Public clean rows (a DataFrame, .csv or .parquet path) coded as ``dataset``'s records: its
    feature columns, by the domains and edges that ``read_table`` declared for it (a label column
    and any other column are ignored). (M, D) integer states. A missing column, a value outside its
    domain or a bad number raises one ValidationError naming ``public_table``, the row and the
    column. The rows are a public sample, for a prior (Barber §5.2): nothing in them is private."""
    ex = dataset.extra
    if "categories" not in ex or "edges" not in ex or ex.get("closed", "left") != "left":
        raise ValidationError("public_table", "needs a population read from a table with its declared schema")
    features = [f.name for f in dataset.schema.features]
    categorical = {c: ex["categories"][c] for c in features if c in ex["categories"]}
    edges = {c: ex["edges"][c] for c in features if c in ex["edges"]}
    df, name, first_line = _read(source, "public_table")
    missing = [c for c in features if c not in df.columns]
    if missing:
        raise ValidationError(
            "public_table",
            f"column {missing[0]!r} is not in {name}; it needs the population's feature columns "
            f"({', '.join(features)}), its columns: {', '.join(map(str, df.columns))}",
        )
    if len(df) == 0:
        raise ValidationError("public_table", f"{name} has no rows")
    try:
        coded = _codes(df, name, first_line, None, None, categorical, list(edges))
    except ValidationError as exc:
        raise ValidationError("public_table", f"{exc.field}: {exc.message}") from None
    cols = [coded[c] if c in categorical else bin_states(coded[c], np.asarray(edges[c]), "left") for c in features]
    return np.column_stack(cols).astype(np.int64)
