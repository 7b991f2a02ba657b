// bench/sim-results regenerates docs/simulator.md's results tables between
// `<!-- sim-results begin: ... -->` / `<!-- sim-results end -->` markers from `uroce sim` runs.
// The full regeneration takes minutes; these tests run the generator on a tiny document whose one
// table is a short shipped scenario (back-to-back: one 4 MiB flow, a few ms of CPU), so the table
// code, the in-place rewrite, --check and the one-line errors are tested in seconds.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

const std::string kResults = std::string(UROCE_SOURCE_DIR) + "/bench/sim-results";
const std::string kReport = std::string(UROCE_SOURCE_DIR) + "/bench/sim-report";
const std::string kUroce = std::string(UROCE_BINARY_DIR) + "/bin/uroce";

struct Result {
  int rc = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

Result run(const std::string& cmd, const fs::path& work) {
  const fs::path err = work / "stderr.txt";
  Result r;
  FILE* p = popen((cmd + " 2>" + err.string()).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) r.out.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = slurp(err);
  fs::remove(err);
  return r;
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

}  // namespace
