"""The report of one run: DIR/report.html and the plots as DIR/*.png."""
import json
import os

from . import plots, stats
from .page import Page, esc

PLOT_FILES = ("fct-buckets.png", "fct-cdf.png", "goodput.png", "queues.png", "rates.png")
FLOWS_SHOWN = 40       # flows.csv rows listed in full up to this many flows
SLOWEST_SHOWN = 20     # past that: the incomplete flows and this many slowest
TABLE_ROWS_MAX = 256   # ports/hosts rows shown at most


def headline_rows(s):
    t = s["totals"]
    f = s["flows"]
    return [
        ("flows completed", f"{stats.num(f['completed'])} of {stats.num(f['total'])}"),
        ("goodput (Gb/s: bytes every flow delivered / span of the run)",
         stats.num(t["goodput_gbps"])),
        ("drops, all", stats.num(t["drops"])),
        ("drops, tail (buffer full)", stats.num(t["drops_tail"])),
        ("drops, PFC headroom overrun", stats.num(t["drops_headroom"])),
        ("drops, link (loss injected on links)", stats.num(t["drops_link"])),
        ("ECN marks (CE set by switches)", stats.num(t["ecn_marks"])),
        ("CNPs", stats.num(t["cnps"])),
        ("PFC pause frames", stats.num(t["pause_frames"])),
        ("PFC paused time (sum over paused links)", stats.duration(t["paused_ns"])),
        ("retransmitted packets", stats.num(t["retransmitted_packets"])),
        ("retransmission timeouts", stats.num(t["timeouts"])),
    ] + ([("adaptive RTO go-backs (of them spurious)",
           f"{stats.num(t['adaptive_retrans'])} ({stats.num(t['adaptive_retrans_spurious'])})")]
         if "adaptive_retrans" in t and "adaptive_retrans_spurious" in t else [])


def _cfg_value(v):
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return str(v)


def _plot(page, run, name, fig, alt, what_missing):
    path = os.path.join(run.path, name)
    if fig is None:
        if os.path.exists(path):
            os.remove(path)  # a plot left from an earlier report of other data
        page.no_data(what_missing)
        return
    page.plot(plots.save(fig, path), alt)


def section_scenario(page, run):
    s = run.summary
    page.add(f"<h1>uroce sim: {esc(s['scenario'])}</h1>")
    if s.get("description"):
        page.p(s["description"], "lead")
    rows = [("seed", str(s["seed"]))]
    if "sim_time_ns" in s:
        rows.append(("simulated time", stats.duration(s["sim_time_ns"])))
    for key, label in (("events", "events processed"), ("packet_hops", "packet hops")):
        if key in s:
            rows.append((label, stats.num(s[key])))
    for k, v in (s.get("config") or {}).items():
        rows.append((f"config: {k}", _cfg_value(v)))
    page.table(["", "value"], rows, text_cols=(0, 1))
    info = run.run_info
    if info:
        bits = []
        if "wall_s" in info:
            bits.append(f"{stats.num(info['wall_s'])} s of wall-clock time")
        for key, label in (("events_per_s", "events/s"), ("packet_hops_per_s", "packet hops/s")):
            if key in info:
                bits.append(f"{stats.num(info[key], 3)} {label}")
        if "uroce_version" in info:
            bits.append(f"uroce {info['uroce_version']}")
        if bits:
            page.p("This run (run.json, not part of the deterministic output): "
                   + ", ".join(bits) + ".", "note")


def section_headline(page, run):
    page.h2("Headline", "headline")
    page.table(["", "value"], headline_rows(run.summary), text_cols=(0,))


def section_fct(page, run):
    page.h2("Flow completion time slowdown per flow size", "fct-buckets")
    buckets = stats.ordered_buckets(run.summary["fct_buckets"])
    if not buckets:
        _plot(page, run, "fct-buckets.png", None, "",
              "no flow completed (summary.json fct_buckets is empty)")
        return
    all_max = [b["max_bytes"] for b in buckets]
    page.table(["flow size", "flows", "p50 slowdown", "p99 slowdown", "p50 FCT", "p99 FCT"],
               [(stats.bucket_label(b["max_bytes"], all_max), stats.num(b["count"]),
                 stats.num(b["p50_slowdown"]), stats.num(b["p99_slowdown"]),
                 stats.duration(b["p50_fct_ns"]), stats.duration(b["p99_fct_ns"]))
                for b in buckets], text_cols=(0,))
    _plot(page, run, "fct-buckets.png", plots.bucket_bars([run], [run.summary["scenario"]]),
          "FCT slowdown p50 and p99 per flow size bucket", "no bucket")


def section_cdf(page, run):
    page.h2("FCT distribution", "fct-cdf")
    _plot(page, run, "fct-cdf.png", plots.fct_cdf([run], [run.summary["scenario"]]),
          "CDF of flow completion time and of slowdown",
          "no completed flow in flows.csv")


def section_goodput(page, run, top):
    page.h2("Goodput over time", "goodput")
    _plot(page, run, "goodput.png", plots.goodput(run, top),
          "goodput per flow over simulated time", "goodput.csv is absent or has no rows")


def section_queues(page, run, top):
    page.h2("Queue depth over time", "queues")
    _plot(page, run, "queues.png", plots.queues(run, top),
          "egress queue depth over simulated time", "queues.csv is absent or has no rows")


def section_rates(page, run, top):
    page.h2("DCQCN sending rate over time", "rates")
    _plot(page, run, "rates.png", plots.rates(run, top),
          "DCQCN rate per flow over simulated time",
          "rates.csv is absent or has no rows (it is written only when cc = dcqcn)")


def _flow_row(f):
    return (str(f["flow_id"]), f"{f['src']} → {f['dst']}", f["op"], stats.size(f["bytes"]),
            str(f["priority"]), stats.duration(f["start_ns"]), stats.duration(f["fct_ns"]),
            stats.duration(f["ideal_fct_ns"]), stats.num(f["slowdown"]),
            stats.num(f["goodput_gbps"]), str(f["retransmitted_packets"]),
            "yes" if f["completed"] else "NO")


def section_flows(page, run):
    page.h2("Flows", "flows")
    flows = run.flows
    if not flows:
        page.no_data("flows.csv has no rows")
        return
    if len(flows) <= FLOWS_SHOWN:
        shown = flows
    else:
        pending = [f for f in flows if not f["completed"]]
        slow = sorted((f for f in flows if f["completed"] and f["slowdown"] is not None),
                      key=lambda f: (-f["slowdown"], f["flow_id"]))[:SLOWEST_SHOWN]
        shown = pending + slow
        page.p(f"{len(flows)} flows: listed are the {len(pending)} that did not complete and "
               f"the {len(slow)} with the largest slowdown (flows.csv has them all).", "note")
    page.table(["flow", "path", "op", "size", "prio", "start", "FCT", "ideal FCT", "slowdown",
                "Gb/s", "retx", "done"], [_flow_row(f) for f in shown], text_cols=(1, 2))


def _capped(page, rows, what):
    if len(rows) > TABLE_ROWS_MAX:
        page.p(f"{len(rows)} {what}: the first {TABLE_ROWS_MAX} are listed.", "note")
        return rows[:TABLE_ROWS_MAX]
    return rows


def section_ports(page, run):
    page.h2("Switch egress ports", "ports")
    rows = run.rows("ports.csv")
    if not rows:
        page.no_data("ports.csv is absent or has no rows")
        return
    counters = ("enqueued", "dequeued_bytes", "dropped_tail", "dropped_headroom", "ecn_marked",
                "max_depth_bytes", "pause_frames_sent", "paused_ns")
    busy = [r for r in rows if any(r[c] for c in counters)]
    if len(busy) < len(rows):
        page.p(f"{len(rows) - len(busy)} of {len(rows)} port/priority rows are all zero and "
               "left out.", "note")
    busy = _capped(page, busy, "port/priority rows")
    page.table(["switch", "port", "peer", "prio", "enqueued", "dequeued", "tail drops",
                "headroom drops", "ECN marked", "max depth", "pauses sent", "paused"],
               [(r["switch"], r["port"], r["peer"], str(r["priority"]), str(r["enqueued"]),
                 stats.size(r["dequeued_bytes"]), str(r["dropped_tail"]),
                 str(r["dropped_headroom"]), str(r["ecn_marked"]),
                 stats.size(r["max_depth_bytes"]), str(r["pause_frames_sent"]),
                 stats.duration(r["paused_ns"])) for r in busy], text_cols=(0, 1, 2))


def section_hosts(page, run):
    page.h2("Hosts", "hosts")
    rows = run.rows("hosts.csv")
    if not rows:
        page.no_data("hosts.csv is absent or has no rows")
        return
    rows = _capped(page, rows, "hosts")
    # The adaptive RTO's go-backs when the run has the columns (newer uroce sim).
    adaptive = all("adaptive_retrans" in r and "adaptive_retrans_spurious" in r for r in rows)
    page.table(["host", "tx pkts", "rx pkts", "tx", "rx", "retx", "timeouts", "CNPs sent",
                "CNPs rcvd", "CE rcvd", "pauses rcvd", "paused"]
               + (["early RTO", "spurious"] if adaptive else []),
               [(r["host"], str(r["tx_packets"]), str(r["rx_packets"]), stats.size(r["tx_bytes"]),
                 stats.size(r["rx_bytes"]), str(r["retransmitted_packets"]), str(r["timeouts"]),
                 str(r["cnps_sent"]), str(r["cnps_received"]), str(r["ecn_ce_received"]),
                 str(r["pause_frames_received"]), stats.duration(r["paused_ns"]))
                + ((str(r["adaptive_retrans"]), str(r["adaptive_retrans_spurious"]))
                   if adaptive else ())
                for r in rows], text_cols=(0,))


def write_report(run, top):
    """Writes run.path/report.html and the plots beside it; returns the report's path."""
    page = Page(f"uroce sim report: {run.summary['scenario']} (seed {run.summary['seed']})")
    section_scenario(page, run)
    section_headline(page, run)
    section_fct(page, run)
    section_cdf(page, run)
    section_goodput(page, run, top)
    section_queues(page, run, top)
    section_rates(page, run, top)
    section_flows(page, run)
    section_ports(page, run)
    section_hosts(page, run)
    out = os.path.join(run.path, "report.html")
    with open(out, "w", encoding="utf-8") as f:
        f.write(page.html())
    return out
