"""Several runs side by side: one HTML page (--compare OUT.html) and/or a Markdown table
(--markdown) for docs/simulator.md. Only deterministic figures (summary.json, flows.csv)
appear, so the table of the same runs is the same text every time."""
import os

from . import plots, stats
from .page import Page

COLUMNS = [
    # (header, key, format)
    ("run", "label", str),
    ("seed", "seed", str),
    ("flows done", "flows", str),
    ("p50 slowdown", "p50_slowdown", lambda v: stats.num(v, 3)),
    ("p99 slowdown", "p99_slowdown", lambda v: stats.num(v, 3)),
    ("goodput Gb/s", "goodput_gbps", lambda v: stats.num(v, 4)),
    ("drops", "drops", stats.num),
    ("ECN marks", "ecn_marks", stats.num),
    ("CNPs", "cnps", stats.num),
    ("PFC pauses", "pause_frames", stats.num),
    ("paused", "paused_ns", stats.duration),
    ("retx pkts", "retransmitted_packets", stats.num),
    ("timeouts", "timeouts", stats.num),
]


def labels(runs):
    """The scenario name; with the seed when a scenario appears more than once; with the
    directory's name when that still leaves two alike."""
    names = [r.summary["scenario"] for r in runs]
    out = [n if names.count(n) == 1 else f"{n} (seed {r.summary['seed']})"
           for n, r in zip(names, runs)]
    return [x if out.count(x) == 1 else f"{x} [{os.path.basename(os.path.normpath(r.path))}]"
            for x, r in zip(out, runs)]


def rows(runs):
    table = []
    for r, label in zip(runs, labels(runs)):
        o = stats.overall(r)
        o["label"] = label
        o["flows"] = f"{stats.num(o['flows_completed'])}/{stats.num(o['flows_total'])}"
        table.append([fmt(o[key]) if o[key] is not None else "n/a" for _, key, fmt in COLUMNS])
    return table


def markdown(runs):
    def line(cells):
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    head = [h for h, _, _ in COLUMNS]
    out = [line(head), "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head)))
           + "|"]
    out += [line(r) for r in rows(runs)]
    return "\n".join(out) + "\n"


def write_compare(runs, out_html):
    """Writes OUT.html and its plots as OUT-fct-cdf.png and OUT-p99.png beside it."""
    stem = os.path.splitext(out_html)[0]
    names = labels(runs)
    page = Page(f"uroce sim: {len(runs)} runs compared")
    page.add(f"<h1>uroce sim: {len(runs)} runs compared</h1>")
    page.p("p50/p99 slowdown here are over all completed flows of a run (nearest rank); the "
           "per-size figures are in the plot below and in each run's report.html.", "lead")
    page.h2("Runs", "runs")
    page.table([h for h, _, _ in COLUMNS], rows(runs), text_cols=(0,))
    page.h2("Where the runs came from", "sources")
    page.table(["run", "directory", "description"],
               [(n, r.path, r.summary.get("description", "")) for n, r in zip(names, runs)],
               text_cols=(0, 1, 2))
    page.h2("FCT distribution", "fct-cdf")
    fig = plots.fct_cdf(runs, names)
    if fig is None:
        page.no_data("no run has a completed flow")
    else:
        page.plot(plots.save(fig, stem + "-fct-cdf.png"), "overlaid FCT and slowdown CDFs")
    page.h2("p99 FCT slowdown per flow size", "p99")
    fig = plots.bucket_bars(runs, names)
    if fig is None:
        page.no_data("no run has an FCT bucket")
    else:
        page.plot(plots.save(fig, stem + "-p99.png"), "p99 slowdown per size bucket per run")
    with open(out_html, "w", encoding="utf-8") as f:
        f.write(page.html())
