// bench/sim-results regenerates docs/simulator.md's results tables between
// `<!-- sim-results begin: ... -->` / `<!-- sim-results end -->` markers from `uroce sim` runs.
// The full regeneration takes minutes; these tests run the generator on a tiny document whose one
// table is a short shipped scenario (back-to-back: one 4 MiB flow, a few ms of CPU), so the table
// code, the in-place rewrite, --check and the one-line errors are tested in seconds.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "shell_run.hpp"

namespace {

namespace fs = std::filesystem;

const std::string kResults = std::string(UROCE_SOURCE_DIR) + "/bench/sim-results";
const std::string kReport = std::string(UROCE_SOURCE_DIR) + "/bench/sim-report";
const std::string kUroce = std::string(UROCE_BINARY_DIR) + "/bin/uroce";

using uroce::test::slurp;
using uroce::test::spit;
using Result = uroce::test::ShellResult;

Result run(const std::string& cmd, const fs::path& work) {
  return uroce::test::run_shell_split(cmd, work);
}

const std::string kBefore = "# Doc\n\nProse before, kept byte for byte.\n\n";
const std::string kBegin = "<!-- sim-results begin: markdown back-to-back -->\n";
const std::string kEnd = "<!-- sim-results end -->\n";
const std::string kAfter = "\nProse after | with a pipe, kept too.\n";

class SimResults : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/uroce-sim-results-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    work_ = tmpl;
    ASSERT_EQ(access(kUroce.c_str(), X_OK), 0) << kUroce << " not built";
  }
  void TearDown() override { fs::remove_all(work_); }

  std::string results(const std::string& args) {
    return kResults + " --doc " + (work_ / "doc.md").string() + " --runs " +
           (work_ / "runs").string() + " --uroce " + kUroce + " " + args;
  }

  fs::path work_;
};

TEST_F(SimResults, RewritesTheTableInPlaceAndCheckSeesItCurrent) {
  spit(work_ / "doc.md", kBefore + kBegin + "| stale | table |\n" + kEnd + kAfter);
  const Result gen = run(results(""), work_);
  ASSERT_EQ(gen.rc, 0) << gen.err;
  EXPECT_NE(gen.out.find("rewritten (1 tables from 1 runs in "), std::string::npos) << gen.out;
  EXPECT_EQ(gen.err, "sim-results: ran back-to-back\n");

  // The run is the doc's seed-1 run, and the table is exactly sim-report's Markdown of it.
  EXPECT_NE(slurp(work_ / "runs/back-to-back/summary.json").find("\"seed\": 1"), std::string::npos);
  const Result md = run(kReport + " --markdown " + (work_ / "runs/back-to-back").string(), work_);
  ASSERT_EQ(md.rc, 0) << md.err;
  EXPECT_NE(md.out.find("| back-to-back | 1 | 1/1 | "), std::string::npos) << md.out;
  const std::string want = kBefore + kBegin + md.out + kEnd + kAfter;
  EXPECT_EQ(slurp(work_ / "doc.md"), want);

  const Result check = run(results("--check --no-run"), work_);
  EXPECT_EQ(check.rc, 0) << check.err;
  EXPECT_NE(check.out.find("is up to date (1 tables from 1 runs in "), std::string::npos)
      << check.out;

  // A second regeneration of the same runs changes nothing.
  const Result again = run(results("--no-run"), work_);
  EXPECT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.out.find(": unchanged ("), std::string::npos) << again.out;
  EXPECT_EQ(slurp(work_ / "doc.md"), want);
}

TEST_F(SimResults, CheckReportsAStaleTableWithADiffAndLeavesTheDocAlone) {
  spit(work_ / "doc.md", kBefore + kBegin + "| stale | table |\n" + kEnd + kAfter);
  const Result check = run(results("--check"), work_);
  EXPECT_EQ(check.rc, 1);
  EXPECT_NE(check.out.find("\n-| stale | table |\n"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("\n+| back-to-back | 1 | 1/1 | "), std::string::npos) << check.out;
  EXPECT_NE(check.err.find(" is stale: run bench/sim-results (1 tables from 1 runs in "),
            std::string::npos)
      << check.err;
  EXPECT_EQ(slurp(work_ / "doc.md"), kBefore + kBegin + "| stale | table |\n" + kEnd + kAfter);
}

TEST_F(SimResults, BadMarkersAndRunsGetOneLineAndStatus2) {
  const std::string doc = (work_ / "doc.md").string();
  spit(work_ / "doc.md", kBefore + "<!-- sim-results begin: sparkline x -->\n" + kEnd);
  Result r = run(results("--no-run"), work_);
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err,
            "sim-results: " + doc +
                ":5: unknown table kind sparkline (known: markdown, buckets, pfc-victims, guides, "
                "dcqcn-jain)\n");

  spit(work_ / "doc.md", kBefore + kBegin + "| x |\n");
  r = run(results("--no-run"), work_);
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "sim-results: " + doc + ":5: no `<!-- sim-results end -->` for this table\n");

  spit(work_ / "doc.md",
       kBefore + "<!-- sim-results begin: markdown no-such-scenario -->\n" + kEnd);
  r = run(results(""), work_);
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err,
            "sim-results: no scenario no-such-scenario: scenarios/no-such-scenario.toml does not "
            "exist (nor is it one of bench/sim-results' VARIANTS)\n");

  spit(work_ / "doc.md", kBefore + kBegin + kEnd);
  r = run(results("--no-run"), work_);
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "sim-results: " + (work_ / "runs/back-to-back").string() +
                       ": no summary.json (run it, or leave out --no-run)\n");
}

// The derived tables read the runs' CSV and JSON files themselves: the guides' table on
// hand-built runs whose figures are easy to check (a 100 MB / 4 ms aggregate is 200 Gb/s).
const std::string kFlowsHeader =
    "flow_id,src,dst,op,bytes,priority,start_ns,end_ns,fct_ns,ideal_fct_ns,slowdown,goodput_gbps,"
    "retransmitted_packets,completed\n";

void fixture_run(const fs::path& dir, const std::string& flows, const std::string& summary) {
  fs::create_directories(dir);
  spit(dir / "flows.csv", kFlowsHeader + flows);
  spit(dir / "summary.json", summary);
}

std::string totals(int n) {
  return "\"totals\": {\"goodput_gbps\": " + std::to_string(50 + n) +
         ".5, \"drops\": " + std::to_string(10 * n) +
         ", \"retransmitted_packets\": " + std::to_string(20 * n) +
         ", \"adaptive_retrans\": " + std::to_string(n) +
         ", \"adaptive_retrans_spurious\": " + std::to_string(n / 2) +
         ", \"timeouts\": " + std::to_string(3 * n) + "}";
}

TEST_F(SimResults, GuidesTableIsComputedFromTheRuns) {
  const fs::path runs = work_ / "runs";
  for (const char* fabric : {"pfc", "pfc-dcqcn", "dcqcn"}) {
    const std::string f = fabric;
    fixture_run(runs / ("guide-" + f + "-bw"),
                "0,h1,h0,write,16777216,0,0,1373300,1373300,1373278,1.00002,97.7311,0,1\n", "{}");
    // 1000 WRs of 4 bytes, one at a time: FCT / 1000 is the round trip.
    fixture_run(runs / ("guide-" + f + "-lat"),
                "0,h1,h0,write,4000,0,0,4028000,4028000,4024000,1.001,0.00794,0,1\n",
                R"({"input": {"workload": [{"message_bytes": 4}]}})");
  }
  int n = 0;
  for (const char* name :
       {"guide-pfc-100flow", "guide-pfc-noadaptive-100flow", "guide-pfc-dcqcn-100flow",
        "guide-pfc-dcqcn-noadaptive-100flow", "guide-dcqcn-sr-100flow"}) {
    // 50 MB each, from 1 ms to 5 ms: 100 MB over 4 ms is 200 Gb/s.
    fixture_run(runs / name,
                "0,h1,h0,write,50000000,0,1000000,3000000,2000000,1000000,2,200,0,1\n"
                "1,h2,h0,write,50000000,0,1500000,5000000,3500000,1000000,3.5,114.3,0,1\n",
                "{\"sim_time_ns\": 20000000, " + totals(++n) + "}");
  }
  // One flow unfinished at the end (20 ms): what completed over the run from the first start.
  fixture_run(runs / "guide-dcqcn-100flow",
              "0,h1,h0,write,38000000,0,1000000,3000000,2000000,1000000,2,152,0,1\n"
              "1,h2,h0,write,50000000,0,1500000,,,1000000,,20.2,7,0\n",
              "{\"sim_time_ns\": 20000000, " + totals(7) + "}");
  spit(work_ / "doc.md", kBefore + "<!-- sim-results begin: guides -->\n" + kEnd + kAfter);
  const Result r = run(results("--no-run"), work_);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string want =
      "| fabric | single-flow bandwidth | 4-byte WRITE latency (round trip / half) | 100-flow "
      "aggregate | flows done | delivered Gb/s | drops | retx pkts | early RTO (spurious) | "
      "timeouts |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
      "| PFC (lossless, no ECN, no CC), go-back-N | 97.73 Gb/s | 4.028 µs / 2.014 µs | 200 Gb/s | "
      "2/2 | 51.5 | 10 | 20 | 1 (0) | 3 |\n"
      "| the same without adaptive retransmission | — | — | 200 Gb/s | 2/2 | 52.5 | 20 | 40 | 2 "
      "(1) | 6 |\n"
      "| PFC + ECN + DCQCN (lossless), go-back-N | 97.73 Gb/s | 4.028 µs / 2.014 µs | 200 Gb/s | "
      "2/2 | 53.5 | 30 | 60 | 3 (1) | 9 |\n"
      "| the same without adaptive retransmission | — | — | 200 Gb/s | 2/2 | 54.5 | 40 | 80 | 4 "
      "(2) | 12 |\n"
      "| DCQCN (ECN, lossy: no PFC), go-back-N | 97.73 Gb/s | 4.028 µs / 2.014 µs | 16 Gb/s | 1/2 "
      "| "
      "57.5 | 70 | 140 | 7 (3) | 21 |\n"
      "| DCQCN (ECN, lossy), selective repeat | — | — | 200 Gb/s | 2/2 | 55.5 | 50 | 100 | 5 (2) | "
      "15 |\n";
  EXPECT_EQ(slurp(work_ / "doc.md"),
            kBefore + "<!-- sim-results begin: guides -->\n" + want + kEnd + kAfter);

  // A run without the file a table needs: one line naming it.
  fs::remove(runs / "guide-pfc-lat/flows.csv");
  const Result bad = run(results("--no-run"), work_);
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("sim-results: line 5: table guides: the runs lack what it needs "
                         "(FileNotFoundError: "),
            std::string::npos)
      << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

// Jain's index over the flows started by a window's start; the link's use counts a flow joining
// during the window too. Flow 0 sends 60 Gb/s from 0, flow 1 20 Gb/s from 150 µs, flow 2
// 10 Gb/s from 1.5 ms: Jain of {60, 20} is 0.80, of {60, 20, 10} 8100 / (3 × 4100) = 0.66.
TEST_F(SimResults, DcqcnJainTableIsComputedFromGoodputCsv) {
  std::string goodput = "time_ns,flow_id,gbps\n";
  for (long t = 50000; t <= 15000000; t += 50000) {
    goodput += std::to_string(t) + ",0,60\n";
    if (t > 150000) goodput += std::to_string(t) + ",1,20\n";
    if (t > 1500000) goodput += std::to_string(t) + ",2,10\n";
  }
  const std::string flows =
      "0,h0,h8,write,0,0,0,,,,,60,0,0\n1,h1,h9,write,0,0,150000,,,,,20,0,0\n"
      "2,h2,h10,write,0,0,1500000,,,,,10,0,0\n";
  for (const char* name : {"guide-dcqcn-fairness-long", "guide-dcqcn-paper-fairness",
                           "guide-dcqcn-fairness-long-noadaptive"}) {
    fixture_run(work_ / "runs" / name, flows,
                R"({"sim_time_ns": 15000000, "input": {"topology": {"fabric_gbps": 100}}})");
    spit(work_ / "runs" / name / "goodput.csv", goodput);
  }
  spit(work_ / "doc.md", kBefore + "<!-- sim-results begin: dcqcn-jain -->\n" + kEnd + kAfter);
  const Result r = run(results("--no-run"), work_);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string two = " | 0.80 | 20.0–60.0 | 80%";
  const std::string joining = " | 0.80 | 20.0–60.0 | 90%";
  const std::string three = " | 0.66 | 10.0–60.0 | 90%";
  const std::string want =
      "| time | flows | mlx5 defaults: Jain | min–max Gb/s | link use | paper's parameters: Jain | "
      "min–max Gb/s | link use | mlx5, no adaptive retx: Jain | min–max Gb/s | link use |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
      "| 0.15–0.3 ms | 2" +
      two + two + two +
      " |\n"
      "| 0.3–0.45 ms | 2" +
      two + two + two +
      " |\n"
      "| 1–2 ms | 2" +
      joining + joining + joining +
      " |\n"
      "| 2–3 ms | 3" +
      three + three + three +
      " |\n"
      "| 5–6 ms | 3" +
      three + three + three +
      " |\n"
      "| 9–10 ms | 3" +
      three + three + three +
      " |\n"
      "| 14–15 ms | 3" +
      three + three + three + " |\n";
  EXPECT_EQ(slurp(work_ / "doc.md"),
            kBefore + "<!-- sim-results begin: dcqcn-jain -->\n" + want + kEnd + kAfter);

  // A run shorter than the table's last window.
  spit(work_ / "runs/guide-dcqcn-paper-fairness/summary.json",
       R"({"sim_time_ns": 14000000, "input": {"topology": {"fabric_gbps": 100}}})");
  const Result bad = run(results("--no-run"), work_);
  EXPECT_EQ(bad.rc, 2);
  EXPECT_EQ(bad.err, "sim-results: " + (work_ / "runs/guide-dcqcn-paper-fairness").string() +
                         ": the run ends before 15000 µs\n");
}

}  // namespace
