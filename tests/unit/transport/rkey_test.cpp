// R_Keys cannot be guessed and are not reused soon (docs/robustness.md "R_Keys"):
//   - 2^24 random guesses at a table with one MR hit nothing; neither does enumerating all 2^20
//     keys of the old format (the MR's table index in the low bits, random bits above);
//   - 2^20 register/deregister cycles never give a key twice, nor does churning the one free
//     slot of an otherwise full 256-MR table 2^19 times; a deregistered key is refused at once;
//   - on RC a wrong guess costs the guesser its connection: NAK Remote Access Error, QP in ERROR,
//     and the next WRITE with the right key changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "script_harness.hpp"
#include "transport/memory.hpp"

namespace uroce::test {
namespace {

using namespace transport;

constexpr uint32_t kAll =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

size_t guesses_that_pass(const MemoryTable& t, PdId pd, uint64_t va,
                         const std::vector<uint32_t>& keys) {
  size_t hits = 0;
  for (uint32_t k : keys) {
    uint8_t* p = nullptr;
    if (t.check_remote(pd, 0, k, va, 8, kAccessRemoteWrite, &p) == AccessError::kOk) ++hits;
  }
  return hits;
}

TEST(RkeyTest, TwoToTheTwentyFourRandomGuessesHitNothing) {
  MemoryTable t(DeviceLimits{}, 0x5EED);
  const PdId pd = t.alloc_pd().value();
  std::vector<uint8_t> buf(4096);
  const MrInfo mr = t.reg_mr(pd, buf.data(), buf.size(), kAll).value();
  std::mt19937_64 rng(99);
  std::vector<uint32_t> guesses(1u << 24);
  for (uint32_t& g : guesses) g = static_cast<uint32_t>(rng());
  EXPECT_EQ(guesses_that_pass(t, pd, mr.addr, guesses), 0u);
  // The real key passes (the check itself works).
  EXPECT_EQ(guesses_that_pass(t, pd, mr.addr, {mr.rkey}), 1u);
}

TEST(RkeyTest, EnumeratingTheOldFormatForTheSlotIndexFindsNothing) {
  // The old keys were `random << 12 | index`: a peer who knew the index (slots are handed out
  // in order, the first MR has index 0) needed at most 2^20 guesses.
  MemoryTable t(DeviceLimits{}, 0x5EED);
  const PdId pd = t.alloc_pd().value();
  std::vector<uint8_t> buf(4096);
  const MrInfo mr = t.reg_mr(pd, buf.data(), buf.size(), kAll).value();
  std::vector<uint32_t> guesses;
  for (uint32_t high = 0; high < (1u << 20); ++high) {
    if ((high << 12) != mr.rkey) guesses.push_back(high << 12);  // index 0
  }
  EXPECT_EQ(guesses_that_pass(t, pd, mr.addr, guesses), 0u);
  EXPECT_NE(mr.rkey & 0xFFF, 0u) << "the key's low bits are no longer the table index";
}

TEST(RkeyTest, NoKeyRepeatsInTwoToTheTwentyRegistrations) {
  MemoryTable t(DeviceLimits{}, 7);
  const PdId pd = t.alloc_pd().value();
  std::vector<uint8_t> buf(64);
  std::vector<uint32_t> keys;
  keys.reserve(2u << 20);
  uint32_t previous_rkey = 0;
  for (uint32_t i = 0; i < (1u << 20); ++i) {
    const MrInfo mr = t.reg_mr(pd, buf.data(), buf.size(), kAll).value();
    if (i > 0) {
      uint8_t* p = nullptr;
      ASSERT_EQ(t.check_remote(pd, 0, previous_rkey, mr.addr, 8, kAccessRemoteWrite, &p),
                AccessError::kBadKey)
          << "a deregistered key still works";
    }
    keys.push_back(mr.lkey);
    keys.push_back(mr.rkey);
    previous_rkey = mr.rkey;
    ASSERT_TRUE(t.dereg_mr(mr.lkey).is_ok());
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end())
      << "an lkey or rkey was handed out twice";
}

// The table remembers the slots of the last keys looked up (a data path looks up the same
// keys for every packet): a key looked up just before its MR goes, and whose slot the next MR
// takes, is refused all the same, and the new MR's keys work at once.
TEST(RkeyTest, AKeyLookedUpJustBeforeDeregistrationIsRefusedWhenItsSlotIsReused) {
  DeviceLimits limits;
  limits.max_mr = 2;  // one slot in use by `kept`: every new MR takes the other
  MemoryTable t(limits, 9);
  const PdId pd = t.alloc_pd().value();
  std::vector<uint8_t> buf(64);
  const MrInfo kept = t.reg_mr(pd, buf.data(), buf.size(), kAll).value();
  MrInfo old = t.reg_mr(pd, buf.data(), buf.size(), kAll).value();
  for (int i = 0; i < 1000; ++i) {
    uint8_t* p = nullptr;
    ASSERT_EQ(t.check_remote(pd, 0, old.rkey, old.addr, 8, kAccessRemoteWrite, &p),
              AccessError::kOk);
    ASSERT_EQ(t.check_local(pd, old.lkey, old.addr, 8, kAccessLocalWrite, &p), AccessError::kOk);
    ASSERT_TRUE(t.dereg_mr(old.lkey).is_ok());
    const MrInfo next = t.reg_mr(pd, buf.data(), buf.size(), kAll).value();
    ASSERT_EQ(t.check_remote(pd, 0, old.rkey, old.addr, 8, kAccessRemoteWrite, &p),
              AccessError::kBadKey)
        << "round " << i;
    ASSERT_EQ(t.check_local(pd, old.lkey, old.addr, 8, kAccessLocalWrite, &p), AccessError::kBadKey)
        << "round " << i;
    ASSERT_EQ(t.check_remote(pd, 0, next.rkey, next.addr, 8, kAccessRemoteWrite, &p),
              AccessError::kOk);
    ASSERT_EQ(t.check_remote(pd, 0, kept.rkey, kept.addr, 8, kAccessRemoteWrite, &p),
              AccessError::kOk);
    old = next;
  }
}

TEST(RkeyTest, TheLastFreeSlotOfAFullTableGetsANewKeyEveryTime) {
  DeviceLimits limits;
  limits.max_mr = 256;  // registration scans for the free slot: keep the table small
  MemoryTable t(limits, 8);
  const PdId pd = t.alloc_pd().value();
  std::vector<uint8_t> buf(64);
  for (uint32_t i = 0; i + 1 < limits.max_mr; ++i) {
    ASSERT_TRUE(t.reg_mr(pd, buf.data(), buf.size(), kAll).is_ok());
  }
  std::vector<uint32_t> keys;
  for (uint32_t i = 0; i < (1u << 19); ++i) {
    const MrInfo mr = t.reg_mr(pd, buf.data(), buf.size(), kAll).value();
    keys.push_back(mr.rkey);
    keys.push_back(mr.lkey);
    ASSERT_TRUE(t.dereg_mr(mr.lkey).is_ok());
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
}

TEST(RkeyTest, OnRcAWrongGuessCostsTheConnection) {
  script::ScriptQp s;
  const std::vector<uint8_t> payload(16, 0xEE);
  s.receive(s.rdma(wire::Op::kWriteOnly, 0x2000, s.va(0), s.mr().rkey ^ 0x00010000u, 16), payload);
  const auto tx = s.transmit();
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].hdr.aeth.syndrome, wire::Aeth::nak(wire::NakCode::kRemoteAccessError));
  EXPECT_EQ(s.state(), QpState::kErr);
  s.receive(s.rdma(wire::Op::kWriteOnly, 0x2001, s.va(0), s.mr().rkey, 16), payload);
  for (size_t i = 0; i < 16; ++i) ASSERT_EQ(*s.mem(i), 0u) << "written after the failed guess";
}

}  // namespace
}  // namespace uroce::test
