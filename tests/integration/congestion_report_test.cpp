// The generator of docs/congestion.md's lossless-vs-lossy report (bench/congestion-report)
// must not rot: its --quick mode (one loss point, one 2-flow bottleneck run, about 30 s of
// real `uroce perf` processes in network namespaces) runs here against this tree's uroce and
// must write the CSVs with exactly the columns the report and the plots read, plots that are
// PNG files, a JSON of the run, and a report section rewritten between its markers with the
// rest of the file kept.
//
// Root only (namespaces; skipped otherwise). Needs /usr/bin/python3 with Debian's
// python3-matplotlib, iproute2 and nftables: scripts/deps installs them. Labelled
// no_sanitize and no_tsan (tests/integration/CMakeLists.txt): it measures rates, so it runs
// in the Release tree only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "shell_run.hpp"

namespace {

namespace fs = std::filesystem;

std::pair<int, std::string> run(const std::string& cmd) {
  return uroce::test::run_shell(cmd + " 2>&1");
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, sep)) out.push_back(cell);
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

// A CSV without quoted cells (the generator writes none): header and rows by column name.
struct Csv {
  std::string header;
  std::vector<std::map<std::string, std::string>> rows;
};

Csv read_csv(const fs::path& p) {
  Csv c;
  std::ifstream in(p);
  std::getline(in, c.header);
  const std::vector<std::string> names = split(c.header, ',');
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string> cells = split(line, ',');
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < names.size() && i < cells.size(); ++i) row[names[i]] = cells[i];
    if (cells.size() != names.size()) row["__bad"] = line;
    c.rows.push_back(row);
  }
  return c;
}

bool is_png(const fs::path& p) {
  const std::string s = slurp(p);
  return s.size() > 1000 && s.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

TEST(CongestionReport, QuickRunWritesTheCsvsPlotsAndReportSection) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  char tmpl[] = "/tmp/uroce-congestion-report-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;
  const fs::path out = dir / "out";
  const fs::path doc = dir / "doc.md";
  {
    std::ofstream d(doc);
    d << "# kept above\n\n<!-- report begin -->\nold numbers\n<!-- report end -->\n\nkept below\n";
  }
  const std::string cmd = std::string("timeout 300 ") + UROCE_SOURCE_DIR +
                          "/bench/congestion-report --quick --build " + UROCE_BINARY_DIR +
                          " --out " + out.string() + " --doc " + doc.string();
  const auto [rc, log] = run(cmd);
  ASSERT_EQ(rc, 0) << cmd << "\n" << log;

  // (a) goodput against loss: the reference series at the quick mode's one point, 2 %.
  const Csv loss = read_csv(out / "loss.csv");
  EXPECT_EQ(loss.header,
            "series,loss_percent,goodput_MBps,retransmitted_pkts,loss_dropped_pkts,duration_s,ok");
  ASSERT_FALSE(loss.rows.empty()) << log;
  EXPECT_EQ(loss.rows[0].at("series"), "gbn-rxe");
  for (const auto& r : loss.rows) {
    EXPECT_EQ(r.count("__bad"), 0u) << r.at("__bad");
    EXPECT_EQ(r.at("loss_percent"), "2.0");
    EXPECT_EQ(r.at("ok"), "True") << r.at("series") << "\n" << log;
    EXPECT_GT(std::stod(r.at("goodput_MBps")), 0.0) << r.at("series");
    // The loss was applied, and recovered from by retransmitting.
    EXPECT_GT(std::stoull(r.at("loss_dropped_pkts")), 0u) << r.at("series");
    EXPECT_GT(std::stoull(r.at("retransmitted_pkts")), 0u) << r.at("series");
  }

  // (b) two flows through the 200 Mbit/s (25 MB/s) bottleneck with DCQCN: the total stays
  // under the bottleneck's rate, both flows get a share, and the queue was sampled.
  const Csv flows = read_csv(out / "flows.csv");
  EXPECT_EQ(flows.header,
            "bottleneck,flows,cc,total_MBps,per_flow_MBps,jain,np_cnp_sent,rp_cnp_handled,"
            "np_ecn_marked,switch_marked,drops,link_drops,socket_drops,retransmitted_pkts,max_"
            "queue_bytes,ok");
  ASSERT_EQ(flows.rows.size(), 1u) << log;
  const auto& f = flows.rows[0];
  EXPECT_EQ(f.count("__bad"), 0u);
  EXPECT_EQ(f.at("flows"), "2");
  EXPECT_EQ(f.at("cc"), "dcqcn");
  EXPECT_EQ(f.at("ok"), "True") << log;
  const double total = std::stod(f.at("total_MBps"));
  EXPECT_GT(total, 0.0);
  EXPECT_LT(total, 25.0 * 1.1) << "the bottleneck did not limit the flows";
  const std::vector<std::string> per_flow = split(f.at("per_flow_MBps"), ' ');
  ASSERT_EQ(per_flow.size(), 2u) << f.at("per_flow_MBps");
  for (const std::string& r : per_flow) EXPECT_GT(std::stod(r), 0.0);
  const double jain = std::stod(f.at("jain"));
  EXPECT_GE(jain, 0.5);
  EXPECT_LE(jain, 1.0);
  EXPECT_GT(std::stoull(f.at("max_queue_bytes")), 0u);

  const Csv rate = read_csv(out / "flows-rate.csv");
  EXPECT_EQ(rate.header, "bottleneck,flows,cc,flow,t_s,rate_MBps");
  std::map<std::string, int> samples_per_flow;
  for (const auto& r : rate.rows) ++samples_per_flow[r.at("flow")];
  EXPECT_GE(samples_per_flow["0"], 5);
  EXPECT_GE(samples_per_flow["1"], 5);
  const Csv queue = read_csv(out / "flows-queue.csv");
  EXPECT_EQ(queue.header, "bottleneck,flows,cc,t_s,queue_bytes");
  EXPECT_GE(queue.rows.size(), 5u);

  EXPECT_TRUE(is_png(out / "loss.png"));
  EXPECT_TRUE(is_png(out / "flows-2.png"));
  const nlohmann::json report = nlohmann::json::parse(slurp(out / "report.json"));
  EXPECT_TRUE(report.at("features").at("cc").get<bool>());
  EXPECT_EQ(report.at("loss").at("rows").size(), loss.rows.size());

  // The section between the markers is the new one; the rest of the file is unchanged.
  const std::string text = slurp(doc);
  EXPECT_TRUE(text.starts_with("# kept above\n\n<!-- report begin -->\nGenerated ")) << text;
  EXPECT_TRUE(text.ends_with("\n<!-- report end -->\n\nkept below\n")) << text;
  EXPECT_EQ(text.find("old numbers"), std::string::npos);
  EXPECT_NE(text.find("![goodput against loss](out/loss.png)"), std::string::npos) << text;
  EXPECT_NE(text.find("![flows-2.png](out/flows-2.png)"), std::string::npos) << text;
  fs::remove_all(dir);
}

}  // namespace
