"""The HTML frame: one self-contained file, plots embedded as base64 PNG.

The Content-Security-Policy forbids every fetch (no network, no file beside the report) and
every script but the inline ones, so a report that would need anything from outside shows
the gap in any browser instead of quietly loading it. The one script records, once the page
has loaded, whether every plot decoded to a non-empty image and whether any script error or
policy violation happened, into #render-check's attributes: tests/integration/
sim_report_test.cpp reads them from headless Chromium's --dump-dom.
"""
import base64
import html

CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
       "script-src 'unsafe-inline'")

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1000px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; margin-top: 1.8em; }
p.lead { color: #444; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.55em; text-align: right; }
th { background: #f2f2f2; }
td.t, th.t { text-align: left; }
img.plot { display: block; max-width: 100%; height: auto; margin: 0.5em 0; }
p.nodata { color: #777; font-style: italic; border: 1px dashed #bbb; padding: 0.6em; }
p.note { color: #555; font-size: 0.9em; }
#render-check { color: #999; font-size: 0.8em; margin-top: 3em; }
"""

# Errors are caught from the first line of <head>; the check runs on `load`, after every
# data: image has decoded (or failed to).
HEAD_SCRIPT = """window.simReportErrors = [];
window.addEventListener('error', function (e) { window.simReportErrors.push('error: ' + e.message); });
document.addEventListener('securitypolicyviolation', function (e) {
  window.simReportErrors.push('blocked: ' + e.violatedDirective + ' ' + e.blockedURI); });"""

CHECK_SCRIPT = """window.addEventListener('load', function () {
  var plots = document.querySelectorAll('.plot'), bad = 0;
  for (var i = 0; i < plots.length; i++) {
    var p = plots[i], r = p.getBoundingClientRect();
    var drawn = p.tagName === 'IMG' ? (p.complete && p.naturalWidth > 0 && p.naturalHeight > 0)
                                    : true;
    if (!drawn || !(r.width > 0 && r.height > 0)) bad++;
  }
  var c = document.getElementById('render-check'), errs = window.simReportErrors;
  var expected = parseInt(c.getAttribute('data-expected'), 10);
  var ok = bad === 0 && errs.length === 0 && plots.length === expected;
  c.setAttribute('data-plots', String(plots.length));
  c.setAttribute('data-bad', String(bad));
  c.setAttribute('data-errors', String(errs.length));
  c.setAttribute('data-status', ok ? 'ok' : 'fail');
  c.textContent = 'render check: ' + (ok ? 'ok' : 'FAILED') + ', ' + plots.length + ' plots (' +
      expected + ' expected), ' + bad + ' not drawn, ' + errs.length + ' errors' +
      (errs.length ? ': ' + errs.join('; ') : '');
});"""


def esc(x):
    return html.escape(str(x), quote=True)


class Page:
    def __init__(self, title):
        self.title = title
        self.parts = []
        self.plots = 0

    def add(self, raw_html):
        self.parts.append(raw_html)

    def h2(self, text, anchor):
        self.add(f'<h2 id="{esc(anchor)}">{esc(text)}</h2>')

    def p(self, text, cls=None):
        c = f' class="{cls}"' if cls else ""
        self.add(f"<p{c}>{esc(text)}</p>")

    def no_data(self, what):
        self.p(f"no data: {what}", "nodata")

    def plot(self, png, alt):
        self.plots += 1
        b64 = base64.b64encode(png).decode("ascii")
        self.add(f'<img class="plot" alt="{esc(alt)}" src="data:image/png;base64,{b64}">')

    def table(self, header, rows, text_cols=()):
        """header: column names; rows: lists of cells (already formatted text);
        text_cols: indexes of left-aligned (text) columns."""
        def cell(tag, i, v):
            c = ' class="t"' if i in text_cols else ""
            return f"<{tag}{c}>{esc(v)}</{tag}>"
        out = ["<table>", "<tr>" + "".join(cell("th", i, h) for i, h in enumerate(header))
               + "</tr>"]
        for r in rows:
            out.append("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>")
        out.append("</table>")
        self.add("\n".join(out))

    def html(self):
        body = "\n".join(self.parts)
        return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(self.title)}</title>
<script>
{HEAD_SCRIPT}
</script>
<style>{CSS}</style>
</head>
<body>
{body}
<div id="render-check" data-expected="{self.plots}" data-status="pending">render check: \
pending (needs the inline script)</div>
<script>
{CHECK_SCRIPT}
</script>
</body>
</html>
"""
