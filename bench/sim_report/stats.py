"""Numbers the report derives from a run: percentiles, bucket labels, top-N choices, units."""
import math

# The simulator's FCT bucket edges (docs/simulator.md): 10 KiB, 100 KiB, 1 MiB, 10 MiB, then
# one open bucket written as max_bytes 0.
BUCKET_EDGES = (10240, 102400, 1048576, 10485760)


def percentile(values, q):
    """Nearest-rank percentile (the smallest value with at least q of the values at or
    below it), so p99 of 10 flows is the slowest one, never an interpolated figure."""
    v = sorted(values)
    if not v:
        return None
    return v[max(0, min(len(v) - 1, math.ceil(q * len(v)) - 1))]


def size(n):
    """Bytes with a binary unit: 10240 -> '10 KiB', 1500 -> '1500 B'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            x = n / scale
            return f"{x:.0f} {unit}" if x == int(x) else f"{x:.3g} {unit}"
    return f"{n} B"


def bucket_label(max_bytes, all_max):
    """'≤ 10 KiB', '10 KiB – 100 KiB', ..., '> 10 MiB' for the open bucket (max_bytes 0)."""
    edges = sorted(set(BUCKET_EDGES) | {m for m in all_max if m > 0})
    if max_bytes == 0:
        return f"> {size(edges[-1])}"
    below = [e for e in edges if e < max_bytes]
    if not below:
        return f"≤ {size(max_bytes)}"
    return f"{size(below[-1])} – {size(max_bytes)}"


def ordered_buckets(buckets):
    """Buckets smallest first, the open bucket (max_bytes 0) last."""
    return sorted(buckets, key=lambda b: (b["max_bytes"] == 0, b["max_bytes"]))


def time_unit(max_ns):
    """(divisor, label) for a time axis that ends at max_ns."""
    if max_ns >= 10_000_000_000:
        return 1e9, "s"
    if max_ns >= 10_000_000:
        return 1e6, "ms"
    return 1e3, "µs"


def duration(ns):
    """A duration in ns as text with a readable unit."""
    if ns is None:
        return ""
    if ns == 0:
        return "0"
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if abs(ns) >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:g} ns"


def num(x, digits=4):
    """An integer as is, a float to `digits` significant digits, None as empty."""
    if x is None:
        return ""
    if isinstance(x, int):
        return str(x)
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.{digits}g}"


def flow_rank(run):
    """Flow ids, most bytes first then by id: the order the 'top N flows' plots use."""
    return [f["flow_id"] for f in sorted(run.flows, key=lambda f: (-f["bytes"], f["flow_id"]))]


def completed(run):
    return [f for f in run.flows if f["completed"] and f["fct_ns"] is not None]


def overall(run):
    """The figures one row of the compare table shows, from summary.json and flows.csv."""
    s = run.summary
    t = s["totals"]
    done = completed(run)
    slow = [f["slowdown"] for f in done if f["slowdown"] is not None]
    return {
        "scenario": s["scenario"],
        "seed": s["seed"],
        "flows_total": s["flows"]["total"],
        "flows_completed": s["flows"]["completed"],
        "p50_slowdown": percentile(slow, 0.50),
        "p99_slowdown": percentile(slow, 0.99),
        "goodput_gbps": t["goodput_gbps"],
        "drops": t["drops"],
        "ecn_marks": t["ecn_marks"],
        "cnps": t["cnps"],
        "pause_frames": t["pause_frames"],
        "paused_ns": t["paused_ns"],
        "retransmitted_packets": t["retransmitted_packets"],
        "timeouts": t["timeouts"],
    }
