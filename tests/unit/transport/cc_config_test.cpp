// Parsing of UROCE_CC / UROCE_DCQCN values: accepted forms and the exact one-line errors.
#include "transport/cc/cc_config.hpp"

#include <gtest/gtest.h>

namespace uroce::transport {
namespace {

TEST(CcConfig, AlgorithmNames) {
  CcAlgorithm a = CcAlgorithm::kDefault;
  EXPECT_EQ(parse_cc_algorithm("UROCE_CC", "dcqcn", a), "");
  EXPECT_EQ(a, CcAlgorithm::kDcqcn);
  EXPECT_EQ(parse_cc_algorithm("UROCE_CC", "none", a), "");
  EXPECT_EQ(a, CcAlgorithm::kNone);
  EXPECT_EQ(parse_cc_algorithm("UROCE_CC", "DCQCN", a),
            "UROCE_CC: unknown congestion control 'DCQCN'; use none or dcqcn");
  EXPECT_EQ(a, CcAlgorithm::kNone);
  EXPECT_EQ(cc_algorithm_name(CcAlgorithm::kDcqcn), "dcqcn");
}

TEST(CcConfig, DcqcnParamsSetOnlyWhatIsNamed) {
  DcqcnParams p;
  EXPECT_EQ(parse_dcqcn_params("UROCE_DCQCN", "rpg_time_reset=55,min_time_between_cnps=50", p), "");
  EXPECT_EQ(p.rpg_time_reset, 55u);
  EXPECT_EQ(p.min_time_between_cnps, 50u);
  EXPECT_EQ(p.rpg_ai_rate, DcqcnParams{}.rpg_ai_rate);
  EXPECT_EQ(parse_dcqcn_params("UROCE_DCQCN", "", p), "");
  EXPECT_EQ(dcqcn_param_table().size(), 19u);
}

TEST(CcConfig, DcqcnErrorsNameTheProblemAndLeaveTheParamsAlone) {
  DcqcnParams p;
  EXPECT_EQ(
      parse_dcqcn_params("UROCE_DCQCN", "rpg_time_reset=55,rpg_foo=1", p)
          .rfind(
              "UROCE_DCQCN: unknown parameter 'rpg_foo' (known: initial_alpha_value, dce_tcp_g, ",
              0),
      0u);
  EXPECT_EQ(p.rpg_time_reset, DcqcnParams{}.rpg_time_reset);  // all or nothing
  EXPECT_EQ(parse_dcqcn_params("UROCE_DCQCN", "rpg_ai_rate=5x", p),
            "UROCE_DCQCN: rpg_ai_rate='5x' is not an unsigned 32-bit integer");
  EXPECT_EQ(parse_dcqcn_params("UROCE_DCQCN", "rpg_ai_rate=", p),
            "UROCE_DCQCN: rpg_ai_rate='' is not an unsigned 32-bit integer");
  EXPECT_EQ(parse_dcqcn_params("UROCE_DCQCN", "rpg_ai_rate=4294967296", p),
            "UROCE_DCQCN: rpg_ai_rate='4294967296' is not an unsigned 32-bit integer");
  EXPECT_EQ(parse_dcqcn_params("UROCE_DCQCN", "rpg_min_dec_fac=0", p),
            "UROCE_DCQCN: rpg_min_dec_fac=0 is out of range; use 1..100");
  EXPECT_EQ(parse_dcqcn_params("UROCE_DCQCN", "rpg_gd", p),
            "UROCE_DCQCN: 'rpg_gd' has no value; write rpg_gd=<unsigned integer>");
  EXPECT_EQ(parse_dcqcn_params("UROCE_DCQCN", "rpg_gd=11,,", p),
            "UROCE_DCQCN: empty item; give name=value pairs separated by commas");
}

}  // namespace
}  // namespace uroce::transport
