// Port numbers: a device has one port per netdev, so modify_qp accepts 1..phys_port_cnt and
// refuses anything else with EINVAL (ib_modify_qp_is_ok / rxe_qp_chk_attr do the same).
#include <gtest/gtest.h>

#include <cerrno>

#include "transport/engine.hpp"

namespace uroce::test {
namespace {

using namespace transport;

Status to_init(Engine& e, uint32_t qpn, uint8_t port) {
  QpAttr attr;
  attr.qp_state = QpState::kInit;
  attr.pkey_index = 0;
  attr.port_num = port;
  attr.qp_access_flags = kAccessRemoteWrite;
  return e.modify_qp(qpn, attr, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags);
}

uint32_t make_rc_qp(Engine& e) {
  const PdId pd = e.alloc_pd().value();
  const CqId cq = e.create_cq(8).value();
  QpInitAttr init;
  init.qp_type = QpType::kRc;
  init.send_cq = cq;
  init.recv_cq = cq;
  init.cap = {8, 8, 1, 1, 0};
  return e.create_qp(pd, init).value().qpn;
}

TEST(EnginePorts, OnePortDeviceRefusesPortTwo) {
  Engine e(EngineConfig{});
  const uint32_t qpn = make_rc_qp(e);
  EXPECT_EQ(to_init(e, qpn, 0).code(), EINVAL);
  EXPECT_EQ(to_init(e, qpn, 2).code(), EINVAL);
  EXPECT_TRUE(to_init(e, qpn, 1).is_ok());
}

TEST(EnginePorts, EveryPortOfAMultiPortDeviceIsAccepted) {
  EngineConfig config;
  config.limits.phys_port_cnt = 3;
  Engine e(config);
  for (uint8_t port = 1; port <= 3; ++port) {
    const uint32_t qpn = make_rc_qp(e);
    EXPECT_TRUE(to_init(e, qpn, port).is_ok()) << int(port);
  }
  EXPECT_EQ(to_init(e, make_rc_qp(e), 4).code(), EINVAL);
}

}  // namespace
}  // namespace uroce::test
