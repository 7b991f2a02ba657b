// `uroce perf --recovery` and the recovery offer in the side channel's setup
// (docs/congestion.md "Loss recovery"): parsed strictly, carried by the setup, and absent in
// an older peer's setup means go-back-N.
#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cli/perf_options.hpp"
#include "cli/perf_protocol.hpp"

namespace uroce::cli {
namespace {

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

TEST(PerfRecovery, OptionIsGbnOrSrAndUnsetMeansTheDevicesOffer) {
  PerfOptions unset;
  ASSERT_EQ(parse({"write_bw"}, unset), "");
  EXPECT_FALSE(unset.recovery.has_value());
  PerfOptions sr;
  ASSERT_EQ(parse({"write_bw", "--recovery", "sr"}, sr), "");
  EXPECT_EQ(sr.recovery, transport::Recovery::kSelectiveRepeat);
  PerfOptions gbn;
  ASSERT_EQ(parse({"write_bw", "--recovery", "gbn"}, gbn), "");
  EXPECT_EQ(gbn.recovery, transport::Recovery::kGoBackN);
  PerfOptions bad;
  EXPECT_EQ(parse({"write_bw", "--recovery", "irn"}, bad),
            "--recovery: unknown loss recovery 'irn'; use gbn (go-back-N) or sr (selective "
            "repeat, uroce peers only)");
}

TEST(PerfRecovery, TheSetupCarriesTheOfferAndAnOlderPeerMeansGoBackN) {
  PerfSetup s;
  s.test = "write_bw";
  s.sizes = {65536};
  s.slot_size = 65536;
  s.qps.resize(1);
  s.recovery = transport::Recovery::kSelectiveRepeat;
  nlohmann::json j = to_json(s);
  EXPECT_EQ(j.at("recovery"), "sr");
  PerfSetup back;
  std::string error;
  ASSERT_TRUE(from_json(j, back, error)) << error;
  EXPECT_EQ(back.recovery, transport::Recovery::kSelectiveRepeat);

  j.erase("recovery");  // a uroce perf from before selective repeat
  back.recovery = transport::Recovery::kSelectiveRepeat;
  ASSERT_TRUE(from_json(j, back, error)) << error;
  EXPECT_EQ(back.recovery, transport::Recovery::kGoBackN);

  j["recovery"] = "sack";
  EXPECT_FALSE(from_json(j, back, error));
  EXPECT_EQ(error,
            "the client's recovery: unknown loss recovery 'sack'; use gbn (go-back-N) or sr "
            "(selective repeat, uroce peers only)");
}

}  // namespace
}  // namespace uroce::cli
