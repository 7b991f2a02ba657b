"""Command line of bench/sim-report; exit 0 done, 2 bad input (one line names the file and
the problem), 1 the output could not be written."""
import argparse
import os
import sys

USAGE = """bench/sim-report DIR                        write DIR/report.html and DIR/*.png
  bench/sim-report --compare OUT.html DIR...  several runs side by side in OUT.html
  bench/sim-report --markdown DIR...          print the compare table as Markdown"""


class Parser(argparse.ArgumentParser):
    """Usage errors in one line, like the input errors, with where to look."""

    def error(self, message):
        self.exit(2, f"sim-report: {message} (see bench/sim-report --help)\n")


def parse(argv):
    p = Parser(
        prog="bench/sim-report", usage=USAGE,
        description="The report of `uroce sim` runs (docs/simulator.md).")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="a `uroce sim --out` directory")
    p.add_argument("--compare", metavar="OUT.html",
                   help="compare the runs in OUT.html (plots beside it as OUT-*.png)")
    p.add_argument("--markdown", action="store_true",
                   help="print the compare table as a Markdown table on stdout")
    p.add_argument("--top", type=int, default=8, metavar="N",
                   help="flows and queues drawn in the over-time plots (default 8)")
    args = p.parse_args(argv)
    if args.top < 1:
        p.error("--top takes a number of at least 1")
    if not args.compare and not args.markdown and len(args.dirs) != 1:
        p.error("several DIRs need --compare OUT.html or --markdown")
    return args


def main(argv):
    args = parse(argv)
    # Imported after parsing so --help works without matplotlib.
    try:
        from .load import InputError, load_run
        from . import compare, report
    except ImportError as e:
        print(f"sim-report: {e}; install Debian's python3-matplotlib (scripts/deps) and run "
              "with /usr/bin/python3", file=sys.stderr)
        return 2
    try:
        runs = [load_run(d) for d in args.dirs]
    except InputError as e:
        print(f"sim-report: {e}", file=sys.stderr)
        return 2
    try:
        if args.compare:
            compare.write_compare(runs, args.compare)
            print(f"sim-report: wrote {args.compare}", file=sys.stderr)
        elif not args.markdown:
            out = report.write_report(runs[0], args.top)
            print(f"sim-report: wrote {out}", file=sys.stderr)
        if args.markdown:
            sys.stdout.write(compare.markdown(runs))
    except OSError as e:
        name = e.filename or (args.compare or os.path.join(args.dirs[0], "report.html"))
        print(f"sim-report: {name}: cannot write: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0
