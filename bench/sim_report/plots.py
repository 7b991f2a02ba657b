"""The report's plots (matplotlib, Agg backend: no display, no GUI toolkit).

Every function returns a Figure, or None when its data is absent or empty (the report then
says "no data" in place of the plot). save() writes the PNG and returns its bytes.
"""
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from . import stats  # noqa: E402

WIDTH, HEIGHT, DPI = 9.0, 4.0, 100


def save(fig, path):
    buf = io.BytesIO()
    # No "Software" text chunk: the PNG then depends only on the data and the renderer.
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    data = buf.getvalue()
    with open(path, "wb") as f:
        f.write(data)
    return data


def _figure(ncols=1):
    fig, axes = plt.subplots(1, ncols, figsize=(WIDTH, HEIGHT), constrained_layout=True)
    return fig, axes


def _log_if_wide(ax, values, axis):
    pos = [v for v in values if v is not None and v > 0]
    if pos and max(pos) / min(pos) > 20:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")


def bucket_bars(runs, labels):
    """p50 and p99 FCT slowdown per size bucket: one run gives p50/p99 pairs, several runs
    give one p99 bar per run in each bucket."""
    all_max = sorted({b["max_bytes"] for r in runs for b in r.summary["fct_buckets"]},
                     key=lambda m: (m == 0, m))
    if not all_max:
        return None
    names = [stats.bucket_label(m, all_max) for m in all_max]
    fig, ax = _figure()
    xs = range(len(all_max))
    if len(runs) == 1:
        by = {b["max_bytes"]: b for b in runs[0].summary["fct_buckets"]}
        p50 = [by[m]["p50_slowdown"] for m in all_max]
        p99 = [by[m]["p99_slowdown"] for m in all_max]
        ax.bar([x - 0.2 for x in xs], p50, 0.4, label="p50")
        ax.bar([x + 0.2 for x in xs], p99, 0.4, label="p99")
        names = [f"{n}\n({by[m]['count']} flows)" for n, m in zip(names, all_max)]
        values = p50 + p99
    else:
        w = 0.8 / len(runs)
        values = []
        for i, (r, label) in enumerate(zip(runs, labels)):
            by = {b["max_bytes"]: b["p99_slowdown"] for b in r.summary["fct_buckets"]}
            ys = [by.get(m, 0) for m in all_max]
            values += ys
            ax.bar([x - 0.4 + w * (i + 0.5) for x in xs], ys, w, label=label)
    pad = 1.0 / len(all_max)  # one bucket alone gets narrower bars, not the whole width
    ax.set_xlim(-0.5 - pad, len(all_max) - 0.5 + pad)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names)
    ax.set_xlabel("flow size")
    ax.set_ylabel("FCT slowdown (FCT / ideal FCT)")
    ax.set_title("p99 FCT slowdown per flow size" if len(runs) > 1
                 else "FCT slowdown per flow size")
    _log_if_wide(ax, values, "y")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return fig


def fct_cdf(runs, labels):
    """CDF of FCT (µs) and of FCT slowdown over completed flows, one line per run."""
    if not any(stats.completed(r) for r in runs):
        return None
    fig, (a_fct, a_slow) = _figure(2)
    fct_all, slow_all = [], []
    for r, label in zip(runs, labels):
        done = stats.completed(r)
        if not done:
            continue
        fct = sorted(f["fct_ns"] / 1e3 for f in done)
        slow = sorted(f["slowdown"] for f in done if f["slowdown"] is not None)
        fct_all += fct
        slow_all += slow
        name = f"{label} ({len(done)} flows)" if len(runs) > 1 else f"{len(done)} flows"
        a_fct.step(fct, [(i + 1) / len(fct) for i in range(len(fct))], where="post", label=name)
        if slow:
            a_slow.step(slow, [(i + 1) / len(slow) for i in range(len(slow))], where="post",
                        label=name)
    a_fct.set_xlabel("flow completion time (µs)")
    a_slow.set_xlabel("FCT slowdown (FCT / ideal FCT)")
    for ax, values in ((a_fct, fct_all), (a_slow, slow_all)):
        _log_if_wide(ax, values, "x")
        ax.set_ylabel("fraction of completed flows")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize="small")
    a_fct.set_title("FCT CDF")
    a_slow.set_title("slowdown CDF")
    return fig


def _time_lines(ax, lines, max_ns, ylabel, title):
    div, unit = stats.time_unit(max_ns)
    for label, (xs, ys), style in lines:
        ax.plot([x / div for x in xs], ys, style, label=label, linewidth=1.2)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    # Beside the axes, not over the lines (constrained layout makes room for it).
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _sum_series(per, keys):
    total = {}
    for k in keys:
        for x, y in zip(per[k].t, per[k].v):
            total[x] = total.get(x, 0.0) + y
    xs = sorted(total)
    return xs, [total[x] for x in xs]


def _end(per):
    return max(ts.t[-1] for ts in per.values())


def per_flow_over_time(run, table, ylabel, title, top, with_rest):
    """One line per flow for the `top` largest flows (most bytes, then lowest id); with
    `with_rest`, the sum of the other flows as one dashed line and of all flows in black."""
    per = run.time_series(table)
    if not per:
        return None
    ids = {k[0]: k for k in per}
    rank = [ids[f] for f in stats.flow_rank(run) if f in ids]
    rank += sorted(set(per) - set(rank))  # ids flows.csv lacks still get plotted
    shown, rest = rank[:top], rank[top:]
    lines = [(f"flow {k[0]}", (per[k].t, per[k].v), "-") for k in shown]
    if with_rest and rest:
        lines.append((f"other {len(rest)} flows (sum)", _sum_series(per, rest), "--"))
    if with_rest and len(per) > 1:
        lines.append(("all flows (sum)", _sum_series(per, rank), "k-"))
    fig, ax = _figure()
    _time_lines(ax, lines, _end(per), ylabel, title)
    return fig


def goodput(run, top):
    return per_flow_over_time(run, "goodput.csv", "goodput (Gb/s)",
                              f"goodput over time (top {top} flows by size)", top, True)


def rates(run, top):
    return per_flow_over_time(run, "rates.csv", "DCQCN rate (Gb/s)",
                              f"DCQCN sending rate (top {top} flows by size)", top, False)


def queue_name(key, peers):
    sw, port, prio = key
    peer = peers.get((sw, port))
    to = f" → {peer}" if peer else ""
    return f"{sw}:{port}{to} prio {prio}"


def queues(run, top):
    """The `top` (switch, port, priority) queues with the largest depth, deepest first."""
    per = run.time_series("queues.csv")
    if not per:
        return None
    order = sorted(per, key=lambda k: (-max(per[k].v), k))
    shown = [k for k in order[:top] if max(per[k].v) > 0]  # an empty queue is a flat 0 line
    if not shown:
        shown = order[:1]
    peers = {(p["switch"], p["port"]): p["peer"] for p in run.rows("ports.csv") or []}
    lines = [(queue_name(k, peers), (per[k].t, [d / 1024 for d in per[k].v]), "-")
             for k in shown]
    fig, ax = _figure()
    title = f"egress queue depth ({len(shown)} deepest of {len(order)} queues sampled)"
    _time_lines(ax, lines, _end(per), "queue depth (KiB)", title)
    return fig
