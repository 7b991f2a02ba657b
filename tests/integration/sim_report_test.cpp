// bench/sim-report (docs/simulator.md) turns a `uroce sim --out` directory into one
// self-contained HTML file. These tests render what it writes in Debian's headless Chromium:
// the report's inline script records, on `load`, how many plots decoded to a non-empty image
// and whether any script error or Content-Security-Policy violation (a fetch of anything from
// outside the file) happened, into #render-check's attributes, read back from --dump-dom; a
// --screenshot must show content, with the plots' colours in it.
//
// Always run on the hand-built fixtures of tests/data/sim/ (the contract's format), so the
// generator is tested without the simulator; LiveSimRunRenders also renders a real
// `uroce sim` run when the built `uroce` has the subcommand (skipped otherwise).
//
// Needs /usr/bin/python3 with Debian's python3-matplotlib and chromium-headless-shell
// (scripts/deps installs them). Labelled no_tsan and no_sanitize (tests/integration/
// CMakeLists.txt): what it tests is Python and a browser, the same in every tree.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "png_pixels.hpp"
#include "shell_run.hpp"

namespace {

namespace fs = std::filesystem;

const std::string kReport = std::string(UROCE_SOURCE_DIR) + "/bench/sim-report";
const std::string kFixtures = std::string(UROCE_SOURCE_DIR) + "/tests/data/sim";
const char* const kChromium = "/usr/bin/chromium-headless-shell";
// A small shipped scenario for the live run: a 16:1 incast through a lossless switch with
// DCQCN, so every output file (rates.csv too) has rows and the report has all five plots.
const std::string kLiveScenario = std::string(UROCE_SOURCE_DIR) + "/scenarios/incast-lossless.toml";

using uroce::test::slurp;
using uroce::test::spit;
using Result = uroce::test::ShellResult;

// Runs cmd with sh; stdout and stderr are kept apart (the error tests check stderr alone).
Result run(const std::string& cmd, const fs::path& work) {
  return uroce::test::run_shell_split(cmd, work);
}

class SimReport : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/uroce-sim-report-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    work_ = tmpl;
    ASSERT_EQ(access(kChromium, X_OK), 0) << kChromium << " missing: run scripts/deps";
  }
  void TearDown() override {
    if (!work_.empty()) fs::remove_all(work_);
  }

  // A copy of a fixture: the report writes report.html and *.png beside the data.
  fs::path fixture(const std::string& name) {
    const fs::path dst = work_ / name;
    fs::copy(fs::path(kFixtures) / name, dst, fs::copy_options::recursive);
    return dst;
  }

  Result report(const std::string& args) { return run(kReport + " " + args, work_); }

  std::string chromium(const std::string& what, const fs::path& html) {
    // --no-sandbox: the tests run as root; a user-data dir of its own so parallel runs and
    // the user's profile stay apart; generous timeout for a loaded 2-core machine.
    return "timeout -k 10 240 " + std::string(kChromium) +
           " --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
           " --disable-extensions --hide-scrollbars --user-data-dir=" +
           (work_ / "chromium-profile").string() + " " + what + " file://" +
           fs::absolute(html).string();
  }

  struct Check {
    std::string status, expected, plots, bad, errors, text, log;
  };

  Check render_check(const fs::path& html) {
    const Result r = run(chromium("--dump-dom", html), work_);
    Check c;
    c.log = "rc " + std::to_string(r.rc) + "\n" + r.err;
    std::smatch m;
    const std::regex div(R"re(<div id="render-check"([^>]*)>([^<]*)</div>)re");
    if (!std::regex_search(r.out, m, div)) return c;
    const std::string attrs = m[1].str();
    c.text = m[2].str();
    auto attr = [&](const std::string& name) {
      std::smatch a;
      const std::regex re(" data-" + name + "=\"([^\"]*)\"");
      return std::regex_search(attrs, a, re) ? a[1].str() : std::string("(absent)");
    };
    c.status = attr("status");
    c.expected = attr("expected");
    c.plots = attr("plots");
    c.bad = attr("bad");
    c.errors = attr("errors");
    return c;
  }

  void expect_renders(const fs::path& html, int plots) {
    const Check c = render_check(html);
    EXPECT_EQ(c.status, "ok") << c.text << "\n" << c.log;
    EXPECT_EQ(c.expected, std::to_string(plots)) << c.text;
    EXPECT_EQ(c.plots, std::to_string(plots)) << c.text;
    EXPECT_EQ(c.bad, "0") << c.text;
    EXPECT_EQ(c.errors, "0") << c.text << "\n" << c.log;
  }

  // The screenshot is not blank: text and tables ink some of it, and the plots' lines and
  // bars (matplotlib's saturated blue/orange; the page's own text is grey) show up.
  void expect_screenshot_has_plots(const fs::path& html) {
    const fs::path png = work_ / "screenshot.png";
    const Result r =
        run(chromium("--window-size=1100,1600 --screenshot=" + png.string(), html), work_);
    ASSERT_EQ(r.rc, 0) << r.err;
    const pngtest::Image img = pngtest::decode_png(png.string());
    ASSERT_EQ(img.error, "") << png;
    ASSERT_EQ(img.width, 1100u);
    ASSERT_EQ(img.height, 1600u);
    size_t ink = 0, colour = 0;
    for (size_t i = 0; i + 2 < img.rgb.size(); i += 3) {
      const int r0 = img.rgb[i], g = img.rgb[i + 1], b = img.rgb[i + 2];
      if (r0 < 240 || g < 240 || b < 240) ++ink;
      if (std::max({r0, g, b}) - std::min({r0, g, b}) > 80) ++colour;
    }
    const size_t pixels = size_t{img.width} * img.height;
    EXPECT_GT(ink, pixels / 50) << "the screenshot is (nearly) blank: " << ink << " inked pixels";
    EXPECT_GT(colour, 5000u) << "no plot colours in the screenshot: " << colour << " pixels";
  }

  fs::path work_;
};

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

bool is_png(const fs::path& p) {
  const std::string s = slurp(p);
  return s.size() > 1000 && s.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

// Nothing the browser would fetch: no URL, no stylesheet or script by reference, every
// image inline. (The CSP in the page blocks the rest; render_check reports violations.)
void expect_self_contained(const std::string& html) {
  for (const char* bad : {"http:", "https:", "<link", "href=", "url(", "@import", "src=\"/",
                          "<script src", "<iframe"})
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  EXPECT_EQ(count(html, " src=\""), count(html, " src=\"data:image/png;base64,"));
  EXPECT_NE(html.find("http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"),
            std::string::npos);
}

TEST_F(SimReport, FixtureReportHasEveryPartAndRendersInChromium) {
  const fs::path dir = fixture("incast-lossless");
  const Result r = report(dir.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "sim-report: wrote " + (dir / "report.html").string() + "\n");
  EXPECT_EQ(r.out, "");
  for (const char* png :
       {"fct-buckets.png", "fct-cdf.png", "goodput.png", "queues.png", "rates.png"})
    EXPECT_TRUE(is_png(dir / png)) << png;
  const std::string html = slurp(dir / "report.html");
  expect_self_contained(html);
  EXPECT_EQ(count(html, "<img class=\"plot\""), 5u);
  EXPECT_EQ(html.find("no data"), std::string::npos);
  // The scenario, its seed and config, from summary.json.
  EXPECT_NE(html.find("<title>uroce sim report: incast-lossless (seed 1)</title>"),
            std::string::npos);
  EXPECT_NE(html.find("<h1>uroce sim: incast-lossless</h1>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"t\">config: buffer_mode</td><td class=\"t\">lossless</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"t\">config: pfc</td><td class=\"t\">yes</td>"),
            std::string::npos);
  // The headline table, from summary.json's totals.
  for (const char* row :
       {"<td class=\"t\">flows completed</td><td>10 of 11</td>",
        "<td class=\"t\">goodput (Gb/s: bytes every flow delivered / span of the run)</td>"
        "<td>47.66</td>",
        "<td class=\"t\">drops, all</td><td>0</td>",
        "<td class=\"t\">ECN marks (CE set by switches)</td><td>120</td>",
        "<td class=\"t\">CNPs</td><td>40</td>", "<td class=\"t\">PFC pause frames</td><td>48</td>",
        "<td class=\"t\">PFC paused time (sum over paused links)</td><td>36 µs</td>",
        "<td class=\"t\">retransmitted packets</td><td>0</td>",
        "<td class=\"t\">retransmission timeouts</td><td>0</td>"})
    EXPECT_NE(html.find(row), std::string::npos) << row;
  // Per-bucket slowdowns as summary.json has them (3.51837 -> 4 significant digits).
  EXPECT_NE(html.find("<td class=\"t\">≤ 10 KiB</td><td>3</td><td>3.518</td><td>3.709</td>"
                      "<td>15.22 µs</td><td>17.21 µs</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"t\">1 MiB – 10 MiB</td><td>1</td>"), std::string::npos);
  // The flow that did not complete, the port that queued, the receiving host.
  EXPECT_NE(html.find("<td>10</td><td class=\"t\">h3 → h0</td><td class=\"t\">send</td>"
                      "<td>11.4 MiB</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td>NO</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"t\">sw0</td><td class=\"t\">0</td><td class=\"t\">h0</td>"
                      "<td>3</td><td>24000</td><td>23.4 MiB</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"t\">h0</td><td>6000</td><td>24000</td>"), std::string::npos);

  expect_renders(dir / "report.html", 5);
  expect_screenshot_has_plots(dir / "report.html");
}

TEST_F(SimReport, AbsentOrEmptyTimeSeriesSayNoData) {
  // incast-naked: goodput.csv is only its header, rates.csv is absent. A plot left from an
  // earlier report of other data must not survive.
  const fs::path dir = fixture("incast-naked");
  spit(dir / "goodput.png", "stale");
  spit(dir / "rates.png", "stale");
  const Result r = report(dir.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string html = slurp(dir / "report.html");
  EXPECT_NE(html.find("<p class=\"nodata\">no data: goodput.csv is absent or has no rows</p>"),
            std::string::npos);
  EXPECT_NE(html.find("<p class=\"nodata\">no data: rates.csv is absent or has no rows (it is "
                      "written only when cc = dcqcn)</p>"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "goodput.png"));
  EXPECT_FALSE(fs::exists(dir / "rates.png"));
  EXPECT_TRUE(is_png(dir / "queues.png"));
  EXPECT_NE(html.find("<td class=\"t\">drops, tail (buffer full)</td><td>57</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"t\">retransmission timeouts</td><td>1</td>"), std::string::npos);
  expect_renders(dir / "report.html", 3);

  // Every optional file gone or empty: the report still comes out, with two plots.
  const fs::path bare = fixture("incast-lossless");
  spit(bare / "queues.csv", "");
  spit(bare / "goodput.csv", "time_ns,flow_id,gbps\n");
  for (const char* f : {"rates.csv", "ports.csv", "hosts.csv", "run.json"}) fs::remove(bare / f);
  const Result b = report(bare.string());
  ASSERT_EQ(b.rc, 0) << b.err;
  const std::string bare_html = slurp(bare / "report.html");
  EXPECT_EQ(count(bare_html, "<p class=\"nodata\">no data: "), 5u);
  for (const char* f : {"queues.csv", "ports.csv", "hosts.csv"})
    EXPECT_NE(bare_html.find(std::string("no data: ") + f + " is absent or has no rows"),
              std::string::npos)
        << f;
  EXPECT_FALSE(fs::exists(bare / "queues.png"));
  expect_renders(bare / "report.html", 2);
}

TEST_F(SimReport, CompareWritesOneRowPerRunAndMarkdown) {
  const fs::path a = fixture("incast-lossless");
  const fs::path b = fixture("incast-naked");
  const fs::path out = work_ / "cmp.html";
  const Result r =
      report("--compare " + out.string() + " --markdown " + a.string() + " " + b.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  // The figures are summary.json's totals and the nearest-rank p50/p99 of flows.csv's
  // slowdowns (10 completed flows each: p50 is the 5th smallest, p99 the largest).
  EXPECT_EQ(r.out,
            "| run | seed | flows done | p50 slowdown | p99 slowdown | goodput Gb/s | drops | ECN "
            "marks | CNPs | PFC pauses | paused | retx pkts | timeouts |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
            "| incast-lossless | 1 | 10/11 | 2.63 | 3.71 | 47.66 | 0 | 120 | 40 | 48 | 36 µs | 0 "
            "| 0 |\n"
            "| incast-naked | 2 | 10/11 | 5.49 | 7.09 | 18.98 | 57 | 0 | 0 | 0 | 0 | 212 | 1 |\n");
  EXPECT_EQ(r.err, "sim-report: wrote " + out.string() + "\n");
  EXPECT_TRUE(is_png(work_ / "cmp-fct-cdf.png"));
  EXPECT_TRUE(is_png(work_ / "cmp-p99.png"));
  const std::string html = slurp(out);
  expect_self_contained(html);
  EXPECT_NE(html.find("<td class=\"t\">incast-naked</td><td>2</td><td>10/11</td><td>5.49</td>"
                      "<td>7.09</td><td>18.98</td><td>57</td>"),
            std::string::npos);
  expect_renders(out, 2);

  // The same scenario twice: the seed tells the rows apart; --markdown alone writes no HTML.
  const Result twice = report("--markdown " + a.string() + " " + a.string());
  ASSERT_EQ(twice.rc, 0) << twice.err;
  EXPECT_NE(twice.out.find("\n| incast-lossless (seed 1) [incast-lossless] | 1 |"),
            std::string::npos)
      << twice.out;
  EXPECT_EQ(twice.err, "");
}

TEST_F(SimReport, BadInputIsOneLineNamingTheFileAndExit2) {
  struct Case {
    std::string file;      // the file to break, "" for none
    std::string contents;  // its new contents
    std::string expected;  // stderr after "sim-report: DIR/"
  };
  const std::vector<Case> cases = {
      {"summary.json",
       "{\"scenario\": ", "summary.json: not JSON: Expecting value at line 1 column 14"},
      {"summary.json", "[1]", "summary.json: not a JSON object"},
      {"summary.json",
       "{\"scenario\": \"x\", \"seed\": 1, \"flows\": {\"total\": 1, \"completed\": 1}, "
       "\"totals\": {\"goodput_gbps\": 1}, \"fct_buckets\": []}",
       "summary.json: no totals.drops"},
      {"summary.json",
       "{\"scenario\": \"x\", \"seed\": \"1\", \"flows\": {}, \"totals\": {}, \"fct_buckets\": []}",
       "summary.json: seed is \"1\", not an integer"},
      {"flows.csv",
       "flow_id,src,dst,op,bytes,priority,start_ns,end_ns,fct_ns,ideal_fct_ns,slowdown,goodput_"
       "gbps,retransmitted_packets,completed\n0,h1,h0,write,4k,0,0,5,5,4,1.25,1,0,1\n",
       "flows.csv: line 2: column bytes: '4k' is not an integer"},
      {"flows.csv",
       "flow_id,src,dst,op,bytes,priority,start_ns,end_ns,fct_ns,ideal_fct_ns,slowdown,goodput_"
       "gbps,retransmitted_packets,completed\n0,h1,h0,write,4,0,0,5,5,4,1.25,1,0,1\n"
       "1,h1,h0,write,4,0,0,5,5,4,1.25,1,0\n",
       "flows.csv: line 3: 13 cells, the header has 14"},
      {"flows.csv", "",
       "flows.csv: empty; expected the header line flow_id,src,dst,op,bytes,"
       "priority,start_ns,end_ns,fct_ns,ideal_fct_ns,slowdown,goodput_gbps,"
       "retransmitted_packets,completed"},
      {"queues.csv", "time_ns,switch,port,priority\n0,sw0,1,0\n",
       "queues.csv: line 1: header lacks column 'depth_bytes' (expected time_ns,switch,port,"
       "priority,depth_bytes)"},
      {"queues.csv", "time_ns,switch,port,priority,depth_bytes\n0,sw0,1,0,1500\n10,sw0,1,0,12.5\n",
       "queues.csv: line 3: column depth_bytes: '12.5' is not an integer"},
      {"rates.csv", "time_ns,flow_id,rate_gbps\n0,1,nan\n",
       "rates.csv: line 2: column rate_gbps: nan is not a value"},
      {"run.json", "{\"wall_s\": 1,}",
       "run.json: not JSON: Expecting property name enclosed in "
       "double quotes at line 1 column 14"},
  };
  for (const Case& c : cases) {
    const fs::path dir = fixture("incast-lossless");
    spit(dir / c.file, c.contents);
    const Result r = report(dir.string());
    EXPECT_EQ(r.rc, 2) << c.file << ": " << c.contents;
    EXPECT_EQ(r.err, "sim-report: " + dir.string() + "/" + c.expected + "\n");
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(fs::exists(dir / "report.html")) << c.expected;
    fs::remove_all(dir);
  }

  const fs::path missing = work_ / "nope";
  Result r = report(missing.string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "sim-report: " + missing.string() +
                       ": no such directory (give the --out directory of `uroce sim`)\n");
  const fs::path no_summary = fixture("incast-naked");
  fs::remove(no_summary / "summary.json");
  r = report("--compare " + (work_ / "c.html").string() + " " + no_summary.string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "sim-report: " + (no_summary / "summary.json").string() +
                       ": missing (is the directory a `uroce sim --out` directory?)\n");
  EXPECT_FALSE(fs::exists(work_ / "c.html"));

  // Usage errors are one line too.
  r = report((work_ / "a").string() + " " + (work_ / "b").string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err,
            "sim-report: several DIRs need --compare OUT.html or --markdown (see "
            "bench/sim-report --help)\n");
  r = report("--top 0 " + no_summary.string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err,
            "sim-report: --top takes a number of at least 1 (see bench/sim-report --help)\n");
}

TEST_F(SimReport, LiveSimRunRenders) {
  const std::string uroce = std::string(UROCE_BINARY_DIR) + "/bin/uroce";
  // `uroce sim --help` would print the top-level help with status 0 where sim is missing:
  // ask the list of subcommands instead.
  if (run(uroce + " --help | grep -q '^  sim '", work_).rc != 0)
    GTEST_SKIP() << uroce << " has no `sim` subcommand in this tree";
  ASSERT_TRUE(fs::exists(kLiveScenario)) << kLiveScenario;
  const fs::path out = work_ / "live";
  const Result sim = run("timeout -k 10 300 " + uroce + " sim " + kLiveScenario + " --out " +
                             out.string() + " --seed 1 --no-report",
                         work_);
  ASSERT_EQ(sim.rc, 0) << sim.out << sim.err;
  EXPECT_FALSE(fs::exists(out / "report.html")) << "--no-report wrote a report";
  const Result r = report(out.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string html = slurp(out / "report.html");
  expect_self_contained(html);
  for (const char* png :
       {"fct-buckets.png", "fct-cdf.png", "goodput.png", "queues.png", "rates.png"})
    EXPECT_TRUE(is_png(out / png)) << png;
  EXPECT_EQ(count(html, "<img class=\"plot\""), 5u);
  EXPECT_EQ(html.find("no data"), std::string::npos);
  // The headline is the run's summary.json.
  const nlohmann::json summary = nlohmann::json::parse(slurp(out / "summary.json"));
  const std::string name = summary.at("scenario").get<std::string>();
  EXPECT_NE(html.find("<h1>uroce sim: " + name + "</h1>"), std::string::npos);
  const auto& flows = summary.at("flows");
  const std::string done = std::to_string(flows.at("completed").get<int64_t>()) + " of " +
                           std::to_string(flows.at("total").get<int64_t>());
  EXPECT_NE(html.find("<td class=\"t\">flows completed</td><td>" + done + "</td>"),
            std::string::npos)
      << done;
  EXPECT_NE(
      html.find("<td class=\"t\">ECN marks (CE set by switches)</td><td>" +
                std::to_string(summary.at("totals").at("ecn_marks").get<int64_t>()) + "</td>"),
      std::string::npos);
  // The adaptive RTO's columns (hosts.csv's last two) reach the headline and the host table.
  const auto& totals = summary.at("totals");
  EXPECT_NE(
      html.find("<td class=\"t\">adaptive RTO go-backs (of them spurious)</td><td>" +
                std::to_string(totals.at("adaptive_retrans").get<int64_t>()) + " (" +
                std::to_string(totals.at("adaptive_retrans_spurious").get<int64_t>()) + ")</td>"),
      std::string::npos);
  EXPECT_NE(html.find("<th>early RTO</th><th>spurious</th></tr>"), std::string::npos);
  expect_renders(out / "report.html", 5);
  expect_screenshot_has_plots(out / "report.html");

  // Without --no-report, `uroce sim` writes the report itself (bench/sim-report of this tree).
  const fs::path with_report = work_ / "with-report";
  const Result sim2 = run("timeout -k 10 300 " + uroce + " sim " + kLiveScenario + " --out " +
                              with_report.string() + " --seed 1",
                          work_);
  ASSERT_EQ(sim2.rc, 0) << sim2.out << sim2.err;
  EXPECT_NE(slurp(with_report / "report.html").find("<h1>uroce sim: " + name + "</h1>"),
            std::string::npos)
      << sim2.out << sim2.err;
  EXPECT_EQ(slurp(with_report / "summary.json"), slurp(out / "summary.json"));
  expect_renders(with_report / "report.html", 5);
}

}  // namespace
