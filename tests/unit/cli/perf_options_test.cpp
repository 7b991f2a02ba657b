// `uroce perf` options: perftest defaults per test and every combination it rejects.
#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cli/perf_options.hpp"
#include "cli/perf_protocol.hpp"

namespace uroce::cli {
namespace {

// Parses like the `uroce perf` subcommand; returns "" or the first error (CLI11's or ours).
std::string parse(std::vector<std::string> args, PerfOptions& o) {
  CLI::App app{"test"};
  add_perf_options(app, o);
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return finish_perf_options(o);
}

TEST(PerfOptions, TestNames) {
  for (const char* name : {"write_bw", "read_bw", "send_bw", "atomic_bw", "write_lat", "read_lat",
                           "send_lat", "atomic_lat"}) {
    const auto t = parse_perf_test(name);
    ASSERT_TRUE(t.has_value()) << name;
    EXPECT_EQ(perf_test_name(*t), name);
  }
  EXPECT_FALSE(parse_perf_test("write").has_value());
  EXPECT_EQ(perf_test_title({PerfVerb::kWrite, PerfKind::kBandwidth}, AtomicType::kFetchAndAdd),
            "RDMA_Write BW Test");
  EXPECT_EQ(perf_test_title({PerfVerb::kSend, PerfKind::kLatency}, AtomicType::kFetchAndAdd),
            "Send Latency Test");
  EXPECT_EQ(perf_test_title({PerfVerb::kAtomic, PerfKind::kBandwidth}, AtomicType::kCmpAndSwap),
            "Atomic CMP_and_SWAP BW Test");
}

TEST(PerfOptions, PerftestDefaults) {
  PerfOptions bw;
  ASSERT_EQ(parse({"write_bw"}, bw), "");
  EXPECT_EQ(bw.sizes, std::vector<uint64_t>{65536});
  EXPECT_EQ(*bw.iters, 5000u);
  EXPECT_EQ(*bw.tx_depth, 128);
  EXPECT_EQ(*bw.cq_mod, 100);
  EXPECT_EQ(bw.port, 18515);
  EXPECT_EQ(bw.conn, PerfConnection::kRc);
  EXPECT_TRUE(bw.host.empty());

  PerfOptions lat;
  ASSERT_EQ(parse({"send_lat", "10.0.0.1"}, lat), "");
  EXPECT_EQ(lat.sizes, std::vector<uint64_t>{2});
  EXPECT_EQ(*lat.iters, 1000u);
  EXPECT_EQ(*lat.tx_depth, 1);
  EXPECT_EQ(lat.host, "10.0.0.1");

  PerfOptions atomic;
  ASSERT_EQ(parse({"atomic_bw", "-A", "CMP_AND_SWAP"}, atomic), "");
  EXPECT_EQ(atomic.sizes, std::vector<uint64_t>{8});
  EXPECT_EQ(atomic.atomic, AtomicType::kCmpAndSwap);
}

TEST(PerfOptions, PerftestFlags) {
  PerfOptions o;
  ASSERT_EQ(parse({"send_bw",
                   "host",
                   "-d",
                   "uroce_eth0",
                   "-i",
                   "1",
                   "-x",
                   "3",
                   "-s",
                   "1024",
                   "-n",
                   "100",
                   "-q",
                   "4",
                   "-m",
                   "2048",
                   "-c",
                   "UD",
                   "-t",
                   "64",
                   "-r",
                   "256",
                   "-I",
                   "64",
                   "-e",
                   "-Q",
                   "16",
                   "-p",
                   "20000",
                   "-F",
                   "--report_gbits",
                   "--json",
                   "--verify"},
                  o),
            "");
  EXPECT_EQ(o.device, "uroce_eth0");
  EXPECT_EQ(o.ib_port, 1);
  EXPECT_EQ(o.gid_index, 3);
  EXPECT_EQ(o.sizes, std::vector<uint64_t>{1024});
  EXPECT_EQ(*o.iters, 100u);
  EXPECT_EQ(o.num_qps, 4);
  EXPECT_EQ(*o.mtu, 2048u);
  EXPECT_EQ(o.conn, PerfConnection::kUd);
  EXPECT_EQ(*o.tx_depth, 64);
  EXPECT_EQ(*o.rx_depth, 256);
  EXPECT_EQ(*o.inline_size, 64);
  EXPECT_TRUE(o.use_event && o.report_gbits && o.json && o.verify && o.cpu_freq_ignored);
  EXPECT_EQ(*o.cq_mod, 16);
  EXPECT_EQ(o.port, 20000);

  PerfOptions all;
  ASSERT_EQ(parse({"write_bw", "-a", "--gid-index", "1"}, all), "");
  ASSERT_EQ(all.sizes.size(), 23u);
  EXPECT_EQ(all.sizes.front(), 2u);
  EXPECT_EQ(all.sizes.back(), 1u << 23);

  PerfOptions dur;
  ASSERT_EQ(parse({"read_lat", "-D", "2"}, dur), "");
  EXPECT_DOUBLE_EQ(*dur.duration, 2.0);
}

TEST(PerfOptions, RejectsWhatPerftestRejects) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"write"},
       "unknown test 'write'; choose write_bw, read_bw, send_bw, atomic_bw, write_lat, read_lat, "
       "send_lat or atomic_lat"},
      // Found by fuzz_perf_options: the echoed name must not break the one-line error.
      {{"write_bw\n0"},
       "unknown test 'write_bw?0'; choose write_bw, read_bw, send_bw, atomic_bw, write_lat, "
       "read_lat, send_lat or atomic_lat"},
      {{"read_bw", "-c", "UC"}, "read_bw does not run over UC; use -c RC"},
      {{"write_bw", "-c", "UD"}, "write_bw does not run over UD; use -c RC or UC"},
      {{"atomic_lat", "-c", "UD"}, "atomic_lat does not run over UD; use -c RC"},
      {{"write_bw", "-A", "CMP_AND_SWAP"}, "-A/--atomic_type needs atomic_bw or atomic_lat"},
      {{"write_lat", "-q", "2"}, "multiple QPs (-q) only run in BW tests"},
      {{"send_lat", "-Q", "10"}, "-Q/--cq-mod only applies to BW tests"},
      {{"write_bw", "-n", "10", "-D", "1"}, "give either -n/--iters or -D/--duration, not both"},
      {{"write_bw", "-n", "2"}, "-n/--iters must be between 5 and 100000000"},
      {{"write_bw", "-n", "0"}, "-n/--iters must be between 5 and 100000000"},
      {{"write_bw", "-D", "0"}, "-D/--duration must be more than 0 and at most 3600 seconds"},
      {{"write_bw", "-D", "3601"}, "-D/--duration must be more than 0 and at most 3600 seconds"},
      {{"write_bw", "-a", "-s", "8"}, "give either -a/--all or -s/--size, not both"},
      {{"write_bw", "-s", "0"}, "-s/--size must be between 1 and 2147483648"},
      {{"atomic_bw", "-s", "16"}, "atomic tests move 8 bytes; drop -s or give -s 8"},
      {{"read_bw", "-I", "16"}, "-I/--inline_size only applies to write and send tests"},
      {{"write_bw", "-r", "16"}, "-r/--rx-depth only applies to send"},
      {{"write_bw", "-t", "8", "-Q", "16"}, "-Q/--cq-mod cannot be larger than -t/--tx-depth"},
      {{"send_bw", "-c", "UD", "-s", "8192"},
       "a UD message cannot be larger than the MTU (4096 bytes)"},
  };
  for (const auto& [args, message] : cases) {
    PerfOptions o;
    EXPECT_EQ(parse(args, o), message) << args[0];
  }
}

// Numbers with a range fail in the parser with one line naming the range (main.cpp adds
// the command and where the usage is).
TEST(PerfOptions, NumbersOutOfRangeNameTheRange) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"write_bw", "-p", "0"}, "--port: Value 0 not in range 1 to 65535"},
      {{"write_bw", "-p", "70000"}, "--port: Value 70000 not in range 1 to 65535"},
      {{"write_bw", "-q", "0"}, "--qp: Value 0 not in range 1 to 1024"},
      {{"write_bw", "-q", "1025"}, "--qp: Value 1025 not in range 1 to 1024"},
      {{"write_bw", "-x", "1024"}, "--gid-index: Value 1024 not in range 0 to 1023"},
  };
  for (const auto& [args, message] : cases) {
    PerfOptions o;
    EXPECT_EQ(parse(args, o), message) << args[1] << " " << args[2];
  }
}

// The server checks the client's setup against the same QP limit as the -q option.
TEST(PerfOptions, TheServerAcceptsAsManyQpsAsTheClientMayAskAndNoMore) {
  PerfSetup s;
  s.test = "write_bw";
  s.sizes = {65536};
  s.slot_size = 65536;
  for (const int qps : {kPerfMaxQps, kPerfMaxQps + 1}) {
    s.num_qps = qps;
    s.qps.assign(static_cast<size_t>(qps), PerfQpInfo{});
    PerfSetup back;
    std::string error;
    EXPECT_EQ(from_json(to_json(s), back, error), qps <= kPerfMaxQps) << qps;
    EXPECT_EQ(error, qps <= kPerfMaxQps ? "" : "the client sent a setup out of range");
  }
}

TEST(PerfOptions, BadValuesFailInTheParser) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"write_bw", "-m", "1000"},
                                             {"write_bw", "-c", "XRC"},
                                             {"write_bw", "-q", "0"},
                                             {"write_bw", "-s", "abc"},
                                             {"write_bw", "-i", "0"},
                                             {"write_bw", "--no-such-flag"},
                                             {"atomic_bw", "-A", "SWAP"}}) {
    PerfOptions o;
    EXPECT_NE(parse(args, o), "") << args[1];
  }
}

// --cc / --dcqcn / -T: the run's congestion control and traffic class (cc_options.hpp).
TEST(PerfOptions, CongestionControlAndTrafficClass) {
  PerfOptions none;
  ASSERT_EQ(parse({"write_bw"}, none), "");
  EXPECT_FALSE(none.cc.resolved.algorithm.has_value());  // UROCE_CC (or none) decides
  EXPECT_EQ(none.cc.resolved.dcqcn, "");
  EXPECT_EQ(none.cc.traffic_class, 0);

  PerfOptions o;
  ASSERT_EQ(parse({"write_bw", "host", "--cc", "dcqcn", "--dcqcn",
                   "rpg_time_reset=55,min_time_between_cnps=50", "-T", "106"},
                  o),
            "");
  EXPECT_EQ(o.cc.resolved.algorithm, transport::CcAlgorithm::kDcqcn);
  EXPECT_EQ(o.cc.resolved.dcqcn, "rpg_time_reset=55,min_time_between_cnps=50");
  EXPECT_EQ(o.cc.traffic_class, 106);

  // perftest's spellings: --tclass (GRH traffic class) and -T/--tos (rdma_cm's ToS).
  for (const char* flag : {"--tclass", "--tos", "-T"}) {
    PerfOptions t;
    ASSERT_EQ(parse({"send_bw", flag, "255", "--cc", "none"}, t), "") << flag;
    EXPECT_EQ(t.cc.traffic_class, 255) << flag;
    EXPECT_EQ(t.cc.resolved.algorithm, transport::CcAlgorithm::kNone);
  }
}

TEST(PerfOptions, BadCongestionOptionsAreOneLineErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"write_bw", "--cc", "reno"}, "--cc: unknown congestion control 'reno'; use none or dcqcn"},
      {{"write_bw", "--cc", "dcqcn\n"},
       "--cc: unknown congestion control 'dcqcn\\x0a'; use none or dcqcn"},
      {{"write_bw", "--dcqcn", "rpg_gd=99"}, "--dcqcn: rpg_gd=99 is out of range; use 0..30"},
      {{"write_bw", "--dcqcn", "rpg_ai_rate"},
       "--dcqcn: 'rpg_ai_rate' has no value; write rpg_ai_rate=<unsigned integer>"},
      {{"write_bw", "-T", "256"},
       "-T/--tclass 256 is out of range; give 0..255 (the IP TOS byte: DSCP << 2 | ECN)"},
      {{"write_bw", "--tclass", "-1"},
       "-T/--tclass -1 is out of range; give 0..255 (the IP TOS byte: DSCP << 2 | ECN)"},
  };
  for (const auto& [args, message] : cases) {
    PerfOptions o;
    EXPECT_EQ(parse(args, o), message) << args[1] << " " << args[2];
  }
  PerfOptions o;
  EXPECT_NE(parse({"write_bw", "-T", "abc"}, o), "");  // CLI11: not an integer
}

}  // namespace
}  // namespace uroce::cli
