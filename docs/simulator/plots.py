#!/usr/bin/python3
"""The two docs/simulator.md figures that bench/sim-report --compare does not draw.

  docs/simulator/plots.py dcqcn [--until-us N] RUN... OUT.png    (dcqcn-fairness runs)
  docs/simulator/plots.py storm RUN START_US END_US OUT.png      (a pfc-storm run)

dcqcn: per-flow DCQCN rate (rates.csv) and goodput (goodput.csv) over time for each run, and
Jain's fairness index (sum x)^2 / (n sum x^2) of the goodput of the flows started so far,
averaged over 50 us windows; --until-us draws only the run's first N us. storm: per-flow goodput over time, the storm's span (the scenario's [[storm]] start_us and
end_us, which the run's files do not hold) shaded.
Needs Debian's python3-matplotlib (scripts/deps installs it).
"""
import csv
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WINDOW_NS = 50_000


def series(path, col):
    out = defaultdict(dict)  # flow -> {time_ns: value}
    with open(path) as f:
        for r in csv.DictReader(f):
            out[int(r["flow_id"])][int(r["time_ns"])] = float(r[col])
    return out


def starts(run):
    with open(f"{run}/flows.csv") as f:
        return {int(r["flow_id"]): int(r["start_ns"]) for r in csv.DictReader(f)}


def windowed(s, end_ns):
    """Mean of each flow's samples per WINDOW_NS window: flow -> [(mid_us, mean)]."""
    out = {}
    for flow, pts in s.items():
        acc = defaultdict(list)
        for t, v in pts.items():
            acc[(t - 1) // WINDOW_NS].append(v)
        out[flow] = [((k + 0.5) * WINDOW_NS / 1000, sum(v) / len(v)) for k, v in sorted(acc.items())
                     if (k + 1) * WINDOW_NS <= end_ns]
    return out


def jain(gp, st):
    by_w = defaultdict(dict)
    for flow, pts in gp.items():
        for mid, v in pts:
            by_w[mid][flow] = v
    xs, js = [], []
    for mid in sorted(by_w):
        v = [x for f, x in by_w[mid].items() if st[f] <= (mid * 1000 - WINDOW_NS / 2)]
        if v and sum(v) > 0:
            xs.append(mid)
            js.append(sum(v) ** 2 / (len(v) * sum(x * x for x in v)))
    return xs, js


def dcqcn(runs, out, until_us=None):
    fig, ax = plt.subplots(3, len(runs), figsize=(11, 8), sharex=True, squeeze=False)
    for c, run in enumerate(runs):
        with open(f"{run}/summary.json") as f:
            summary = json.load(f)
        end = summary["sim_time_ns"]
        st = starts(run)
        rates = series(f"{run}/rates.csv", "rate_gbps")
        gp = windowed(series(f"{run}/goodput.csv", "gbps"), end)
        for flow in sorted(rates):
            pts = sorted(rates[flow].items())
            ax[0][c].plot([t / 1000 for t, _ in pts], [v for _, v in pts], lw=0.8, label=f"flow {flow}")
            ax[1][c].plot([m for m, _ in gp[flow]], [v for _, v in gp[flow]], lw=1)
        # The fair share of the flows started so far.
        edges = sorted(st.values())
        fx, fy = [], []
        for i, s in enumerate(edges):
            e = edges[i + 1] if i + 1 < len(edges) else end
            fx += [s / 1000, e / 1000]
            fy += [100 / (i + 1)] * 2
        ax[1][c].plot(fx, fy, "k--", lw=1, label="100/N Gb/s")
        xs, js = jain(gp, st)
        ax[2][c].plot(xs, js, "k", lw=1.2)
        ax[2][c].set_ylim(0, 1.05)
        if until_us:
            ax[2][c].set_xlim(0, until_us)
        ax[0][c].set_title(summary["scenario"], fontsize=10)
        ax[0][c].set_ylabel("DCQCN rate (Gb/s)")
        ax[1][c].set_ylabel("goodput, 50 µs mean (Gb/s)")
        ax[2][c].set_ylabel("Jain's index")
        ax[2][c].set_xlabel("time (µs)")
        ax[1][c].legend(fontsize=8, loc="upper right")
        for a in ax[:, c]:
            a.grid(alpha=0.3)
    ax[0][0].legend(fontsize=7, ncol=4, loc="upper right")
    fig.tight_layout()
    fig.savefig(out, dpi=72)


def storm(run, start_us, end_us, out):
    with open(f"{run}/summary.json") as f:
        summary = json.load(f)
    with open(f"{run}/flows.csv") as f:
        flows = {int(r["flow_id"]): f"{r['src']} → {r['dst']}" for r in csv.DictReader(f)}
    gp = windowed(series(f"{run}/goodput.csv", "gbps"), summary["sim_time_ns"])
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for flow in sorted(gp):
        ax.plot([m for m, _ in gp[flow]], [v for _, v in gp[flow]], lw=1.2, label=flows[flow])
    ax.axvspan(start_us, end_us, color="red", alpha=0.1, label="storm (stuck receiver pausing)")
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("goodput, 50 µs mean (Gb/s)")
    ax.set_title(summary["scenario"], fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=72)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "dcqcn":
        args = sys.argv[2:]
        until = None
        if args[0] == "--until-us":
            until, args = float(args[1]), args[2:]
        dcqcn(args[:-1], args[-1], until)
    elif len(sys.argv) == 6 and sys.argv[1] == "storm":
        storm(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    else:
        sys.exit(__doc__.strip().splitlines()[2] + "\nplots.py: give dcqcn [--until-us N] RUN... OUT.png or storm RUN START_US END_US OUT.png")
