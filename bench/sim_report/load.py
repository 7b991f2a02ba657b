"""Reads one `uroce sim --out DIR` directory (the format docs/simulator.md describes).

summary.json and flows.csv must be there; every other file may be absent or hold only its
header, which the report shows as "no data". Anything that is there must be well formed:
the first problem found raises InputError naming the file (and line) and what is wrong, so
a writer that drifts from the format is caught at once instead of plotting nonsense.
"""
import csv
import json
import math
import os
from array import array


class InputError(Exception):
    """Bad input: `path` names the file (or directory), `problem` says what is wrong."""

    def __init__(self, path, problem):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


# Column types: "int" and "float" must parse; "int?" and "float?" may also be empty (a flow
# that did not complete has no end, FCT, slowdown or goodput).
SCHEMAS = {
    "flows.csv": [
        ("flow_id", "int"), ("src", "str"), ("dst", "str"), ("op", "str"), ("bytes", "int"),
        ("priority", "int"), ("start_ns", "int"), ("end_ns", "int?"), ("fct_ns", "int?"),
        ("ideal_fct_ns", "int"), ("slowdown", "float?"), ("goodput_gbps", "float?"),
        ("retransmitted_packets", "int"), ("completed", "int"),
    ],
    "queues.csv": [
        ("time_ns", "int"), ("switch", "str"), ("port", "str"), ("priority", "int"),
        ("depth_bytes", "int"),
    ],
    "ports.csv": [
        ("switch", "str"), ("port", "str"), ("peer", "str"), ("priority", "int"),
        ("enqueued", "int"), ("dequeued_bytes", "int"), ("dropped_tail", "int"),
        ("dropped_headroom", "int"), ("ecn_marked", "int"), ("max_depth_bytes", "int"),
        ("pause_frames_sent", "int"), ("paused_ns", "int"),
    ],
    "hosts.csv": [
        ("host", "str"), ("tx_packets", "int"), ("rx_packets", "int"), ("tx_bytes", "int"),
        ("rx_bytes", "int"), ("retransmitted_packets", "int"), ("timeouts", "int"),
        ("cnps_sent", "int"), ("cnps_received", "int"), ("ecn_ce_received", "int"),
        ("pause_frames_received", "int"), ("paused_ns", "int"),
    ],
    "rates.csv": [("time_ns", "int"), ("flow_id", "int"), ("rate_gbps", "float")],
    "goodput.csv": [("time_ns", "int"), ("flow_id", "int"), ("gbps", "float")],
}
# Columns later versions of `uroce sim` appended: read when the header has them (older runs'
# files do not), absent from the row otherwise.
OPTIONAL_COLUMNS = {
    "ports.csv": [("pause_events", "int"), ("xon_frames_sent", "int")],
    "hosts.csv": [("adaptive_retrans", "int"), ("adaptive_retrans_spurious", "int")],
}
REQUIRED_FILES = ("summary.json", "flows.csv")
# The time series are kept per series as two compact arrays (time, value), not as rows:
# file: (the columns naming a series, the value column). A long run has millions of rows.
SERIES = {
    "queues.csv": (("switch", "port", "priority"), "depth_bytes"),
    "rates.csv": (("flow_id",), "rate_gbps"),
    "goodput.csv": (("flow_id",), "gbps"),
}
TOTALS_KEYS = ("goodput_gbps", "drops", "drops_tail", "drops_headroom", "drops_link",
               "ecn_marks", "cnps", "pause_frames", "paused_ns", "retransmitted_packets",
               "timeouts")
BUCKET_KEYS = ("max_bytes", "count", "p50_slowdown", "p99_slowdown", "p50_fct_ns",
               "p99_fct_ns")


class Series:
    """One time series: `t` (time_ns) and `v` (its value), sorted by time."""

    def __init__(self, value_kind):
        self.t = array("q")
        self.v = array("q" if value_kind == "int" else "d")

    def sort(self):
        if any(a > b for a, b in zip(self.t, self.t[1:])):
            pairs = sorted(zip(self.t, self.v))
            self.t = array("q", (p[0] for p in pairs))
            self.v = array(self.v.typecode, (p[1] for p in pairs))


class Run:
    """One run's data: `summary` (dict), `run_info` (dict or None); per table CSV a list of
    row dicts with typed values, per time-series CSV a dict {series key: Series} (the key is
    a tuple of the SERIES columns); None when the file is absent or has no rows."""

    def __init__(self, path):
        self.path = path
        self.summary = {}
        self.run_info = None
        self.tables = {}
        self.series = {}

    def rows(self, name):
        return self.tables.get(name)

    def time_series(self, name):
        return self.series.get(name)

    @property
    def flows(self):
        return self.tables.get("flows.csv") or []


def _parse_cell(path, line, column, kind, text):
    if kind == "str":
        return text
    if kind.endswith("?"):
        if text == "":
            return None
        kind = kind[:-1]
    try:
        if kind == "int":
            return int(text, 10)
        value = float(text)
    except ValueError:
        a = "an integer" if kind == "int" else "a number"
        raise InputError(path, f"line {line}: column {column}: {text!r} is not {a}") from None
    if math.isnan(value):
        raise InputError(path, f"line {line}: column {column}: nan is not a value")
    return value


def read_csv(path, schema, required, series=None, optional=()):
    """Typed rows of one CSV, or None for an absent or empty file (when not required).
    With `series` = (key columns, value column): {key: Series} instead of rows."""
    if not os.path.exists(path):
        if required:
            raise InputError(path, "missing (is the directory a `uroce sim --out` directory?)")
        return None
    expected = ",".join(name for name, _ in schema)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                if required:
                    raise InputError(path, f"empty; expected the header line {expected}")
                return None
            missing = [name for name, _ in schema if name not in header]
            if missing:
                raise InputError(path, f"line 1: header lacks column {missing[0]!r} "
                                       f"(expected {expected})")
            index = [(name, kind, header.index(name)) for name, kind in schema]
            index += [(name, kind, header.index(name)) for name, kind in optional
                      if name in header]
            rows = []
            per = {}
            if series:
                keys, value = series
                kinds = dict(schema)
                convs = {"str": str, "int": lambda x: int(x, 10), "float": float}
                key_conv = [(convs[kinds[k]], header.index(k)) for k in keys]
                t_index = header.index("time_ns")
                v_index = header.index(value)
                value_conv = convs[kinds[value]]
            for cells in reader:
                if not cells:
                    continue  # a blank line (the writer's final newline)
                if len(cells) != len(header):
                    raise InputError(path, f"line {reader.line_num}: {len(cells)} cells, "
                                           f"the header has {len(header)}")
                if not series:
                    rows.append({name: _parse_cell(path, reader.line_num, name, kind, cells[i])
                                 for name, kind, i in index})
                    continue
                # The fast path of the millions of rows; any cell that does not parse is
                # parsed again by _parse_cell, which names the problem.
                try:
                    key = tuple(conv(cells[i]) for conv, i in key_conv)
                    t = int(cells[t_index], 10)
                    v = value_conv(cells[v_index])
                    if v != v:
                        raise ValueError
                except ValueError:
                    for name, kind, i in index:
                        _parse_cell(path, reader.line_num, name, kind, cells[i])
                    raise InputError(path, f"line {reader.line_num}: malformed row") from None
                ts = per.get(key)
                if ts is None:
                    ts = per[key] = Series(kinds[value])
                ts.t.append(t)
                ts.v.append(v)
    except UnicodeDecodeError as e:
        raise InputError(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise InputError(path, f"not CSV: {e}") from None
    except OSError as e:
        raise InputError(path, e.strerror or str(e)) from None
    if series:
        for ts in per.values():
            ts.sort()
        return per or None
    return rows or None


def read_json(path, required):
    if not os.path.exists(path):
        if required:
            raise InputError(path, "missing (is the directory a `uroce sim --out` directory?)")
        return None
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except json.JSONDecodeError as e:
        raise InputError(path, f"not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except UnicodeDecodeError as e:
        raise InputError(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise InputError(path, e.strerror or str(e)) from None
    if not isinstance(value, dict):
        raise InputError(path, "not a JSON object")
    return value


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _need(path, obj, key, where, check, what):
    if not isinstance(obj, dict) or key not in obj:
        raise InputError(path, f"no {where}{key}")
    if not check(obj[key]):
        raise InputError(path, f"{where}{key} is {json.dumps(obj[key])}, not {what}")
    return obj[key]


def check_summary(path, s):
    _need(path, s, "scenario", "", lambda v: isinstance(v, str), "a string")
    _need(path, s, "seed", "", lambda v: isinstance(v, int) and not isinstance(v, bool),
          "an integer")
    for key in ("description",):
        if key in s and not isinstance(s[key], str):
            raise InputError(path, f"{key} is {json.dumps(s[key])}, not a string")
    for key in ("sim_time_ns", "events", "packet_hops"):
        if key in s and not _is_number(s[key]):
            raise InputError(path, f"{key} is {json.dumps(s[key])}, not a number")
    if "config" in s and not isinstance(s["config"], dict):
        raise InputError(path, "config is not an object")
    flows = _need(path, s, "flows", "", lambda v: isinstance(v, dict), "an object")
    for key in ("total", "completed"):
        _need(path, flows, key, "flows.", _is_number, "a number")
    totals = _need(path, s, "totals", "", lambda v: isinstance(v, dict), "an object")
    for key in TOTALS_KEYS:
        _need(path, totals, key, "totals.", _is_number, "a number")
    buckets = _need(path, s, "fct_buckets", "", lambda v: isinstance(v, list), "a list")
    for i, b in enumerate(buckets):
        if not isinstance(b, dict):
            raise InputError(path, f"fct_buckets[{i}] is not an object")
        for key in BUCKET_KEYS:
            _need(path, b, key, f"fct_buckets[{i}].", _is_number, "a number")


def load_run(path):
    if not os.path.isdir(path):
        what = "not a directory" if os.path.exists(path) else "no such directory"
        raise InputError(path, f"{what} (give the --out directory of `uroce sim`)")
    run = Run(path)
    summary_path = os.path.join(path, "summary.json")
    run.summary = read_json(summary_path, required=True)
    check_summary(summary_path, run.summary)
    run.run_info = read_json(os.path.join(path, "run.json"), required=False)
    for name, schema in SCHEMAS.items():
        data = read_csv(os.path.join(path, name), schema, required=name in REQUIRED_FILES,
                        series=SERIES.get(name), optional=OPTIONAL_COLUMNS.get(name, ()))
        (run.series if name in SERIES else run.tables)[name] = data
    return run
