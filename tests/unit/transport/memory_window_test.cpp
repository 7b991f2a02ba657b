// Memory windows in the memory table (IBA 10.6.7): each bind rule refuses with
// IBV_WC_MW_BIND_ERR and leaves the window as it was; a bound window grants exactly its range
// and rights through its current R_Key only (type 2: through its QP only); LOCAL_INV and
// remote invalidation free type 2 windows only; an MR cannot be deregistered or moved under a
// bound window; destroying a QP frees its type 2 windows; window and MR keys never coincide.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "transport/memory.hpp"

namespace uroce::test {
namespace {

using namespace transport;

constexpr uint32_t kQpn = 0x11;
constexpr uint32_t kOtherQpn = 0x12;

struct Table {
  MemoryTable t{DeviceLimits{}, 0xC0FFEE};
  PdId pd = t.alloc_pd().value();
  std::vector<uint8_t> buf = std::vector<uint8_t>(8192);
  MrInfo mr = t.reg_mr(pd, buf.data(), buf.size(), kAccessLocalWrite | kAccessMwBind).value();

  [[nodiscard]] uint64_t addr(uint64_t off) const { return mr.addr + off; }
  MwBind bind(uint32_t mw_rkey, uint32_t new_rkey, uint64_t off, uint64_t len,
              uint32_t access = kAccessRemoteWrite | kAccessRemoteRead) const {
    return MwBind{mw_rkey, new_rkey, mr.lkey, addr(off), len, access};
  }
  AccessError remote(uint32_t qpn, uint32_t rkey, uint64_t off, uint64_t len, uint32_t access) {
    uint8_t* p = nullptr;
    return t.check_remote(pd, qpn, rkey, addr(off), len, access, &p);
  }
};

uint32_t next_key(uint32_t rkey) {
  return (rkey & ~0xFFu) | ((rkey + 1) & 0xFFu);
}

TEST(MemoryWindow, Type1GrantsItsRangeAndRightsThroughItsCurrentKeyOnly) {
  Table x;
  const uint32_t first = x.t.alloc_mw(x.pd, MwType::kType1).value();
  // Allocated but never bound: nothing is reachable through it.
  EXPECT_EQ(x.remote(kQpn, first, 0, 8, kAccessRemoteRead), AccessError::kBadKey);
  const uint32_t k1 = next_key(first);
  ASSERT_EQ(x.t.bind_mw(x.pd, kQpn, x.bind(first, k1, 1024, 512)), WcStatus::kSuccess);
  uint8_t* p = nullptr;
  EXPECT_EQ(x.t.check_remote(x.pd, kQpn, k1, x.addr(1024), 512, kAccessRemoteWrite, &p),
            AccessError::kOk);
  EXPECT_EQ(p, x.buf.data() + 1024);
  // Any QP of the PD may use a type 1 window.
  EXPECT_EQ(x.remote(kOtherQpn, k1, 1500, 36, kAccessRemoteRead), AccessError::kOk);
  EXPECT_EQ(x.remote(kQpn, k1, 1023, 8, kAccessRemoteRead), AccessError::kOutOfRange);
  EXPECT_EQ(x.remote(kQpn, k1, 1532, 8, kAccessRemoteRead), AccessError::kOutOfRange);
  EXPECT_EQ(x.remote(kQpn, k1, 1024, 8, kAccessRemoteAtomic), AccessError::kNoAccess);
  EXPECT_EQ(x.remote(kQpn, first, 1024, 8, kAccessRemoteRead), AccessError::kBadKey);
  // Another PD's QPs are refused.
  const PdId other = x.t.alloc_pd().value();
  uint8_t* q = nullptr;
  EXPECT_EQ(x.t.check_remote(other, kQpn, k1, x.addr(1024), 8, kAccessRemoteRead, &q),
            AccessError::kBadPd);

  // Rebinding moves the window and the key; the old key is dead at once.
  const uint32_t k2 = next_key(k1);
  ASSERT_EQ(x.t.bind_mw(x.pd, kQpn, x.bind(k1, k2, 4096, 64, kAccessRemoteRead)),
            WcStatus::kSuccess);
  EXPECT_EQ(x.remote(kQpn, k1, 1024, 8, kAccessRemoteRead), AccessError::kBadKey);
  EXPECT_EQ(x.remote(kQpn, k2, 4096, 64, kAccessRemoteRead), AccessError::kOk);
  EXPECT_EQ(x.remote(kQpn, k2, 4096, 8, kAccessRemoteWrite), AccessError::kNoAccess);

  // Length 0 unbinds (the key moves on too); the MR can then go.
  EXPECT_EQ(x.t.dereg_mr(x.mr.lkey).code(), EBUSY);
  const uint32_t k3 = next_key(k2);
  ASSERT_EQ(x.t.bind_mw(x.pd, kQpn, MwBind{k2, k3, 0, 0, 0, 0}), WcStatus::kSuccess);
  EXPECT_EQ(x.remote(kQpn, k2, 4096, 8, kAccessRemoteRead), AccessError::kBadKey);
  EXPECT_EQ(x.remote(kQpn, k3, 4096, 8, kAccessRemoteRead), AccessError::kBadKey);
  EXPECT_TRUE(x.t.dereg_mr(x.mr.lkey).is_ok());
}

TEST(MemoryWindow, EachBindRuleRefusesAndLeavesTheWindowAsItWas) {
  Table x;
  const uint32_t w1 = x.t.alloc_mw(x.pd, MwType::kType1).value();
  const uint32_t w2 = x.t.alloc_mw(x.pd, MwType::kType2).value();
  const PdId other_pd = x.t.alloc_pd().value();
  std::vector<uint8_t> plain(4096);
  const MrInfo no_bind = x.t.reg_mr(x.pd, plain.data(), plain.size(), kAccessLocalWrite).value();
  const MrInfo read_only =
      x.t.reg_mr(x.pd, plain.data(), plain.size(), kAccessMwBind | kAccessRemoteRead).value();
  const MrInfo elsewhere =
      x.t.reg_mr(other_pd, plain.data(), plain.size(), kAccessLocalWrite | kAccessMwBind).value();

  const auto refused = [&](const MwBind& b, PdId qp_pd = PdId{}) {
    const PdId pd = qp_pd == PdId{} ? x.pd : qp_pd;
    return x.t.bind_mw(pd, kQpn, b) == WcStatus::kMwBindErr;
  };
  // The new key must keep the window's tag; the window must exist.
  EXPECT_TRUE(refused(x.bind(w1, next_key(w1) ^ 0x100, 0, 64)));
  EXPECT_TRUE(refused(x.bind(w1 ^ 0x100, next_key(w1) ^ 0x100, 0, 64)));
  // The QP's PD must be the window's (C10-72).
  EXPECT_TRUE(refused(x.bind(w1, next_key(w1), 0, 64), other_pd));
  // The MR: its lkey, its PD, MW_BIND right (C10-73), LOCAL_WRITE for a writable window
  // (C10-74), the range inside it (C10-75).
  MwBind b = x.bind(w1, next_key(w1), 0, 64);
  b.mr_lkey ^= 1;
  EXPECT_TRUE(refused(b));
  b = MwBind{w1, next_key(w1), elsewhere.lkey, elsewhere.addr, 64, kAccessRemoteRead};
  EXPECT_TRUE(refused(b));
  b = MwBind{w1, next_key(w1), no_bind.lkey, no_bind.addr, 64, kAccessRemoteRead};
  EXPECT_TRUE(refused(b));
  b = MwBind{w1, next_key(w1), read_only.lkey, read_only.addr, 64, kAccessRemoteWrite};
  EXPECT_TRUE(refused(b));
  b.access = kAccessRemoteRead;  // the same MR for a read-only window is fine
  EXPECT_EQ(x.t.bind_mw(x.pd, kQpn, b), WcStatus::kSuccess);
  const uint32_t w1_now = b.rkey;
  EXPECT_TRUE(refused(x.bind(w1_now, next_key(w1_now), 8000, 256)));
  EXPECT_TRUE(refused(x.bind(w1_now, next_key(w1_now), 0, 64, kAccessZeroBased)));
  EXPECT_TRUE(refused(x.bind(w1_now, next_key(w1_now), 0, 64, kAccessMwBind)));
  // After the refusals the window still has its last binding.
  uint8_t* p = nullptr;
  EXPECT_EQ(x.t.check_remote(x.pd, kQpn, w1_now, read_only.addr, 64, kAccessRemoteRead, &p),
            AccessError::kOk);

  // Type 2: a zero-length bind is refused (o10-37.2.40), so is binding a bound window
  // (o10-37.2.30).
  EXPECT_TRUE(refused(x.bind(w2, next_key(w2), 0, 0)));
  ASSERT_EQ(x.t.bind_mw(x.pd, kQpn, x.bind(w2, next_key(w2), 0, 64)), WcStatus::kSuccess);
  EXPECT_TRUE(refused(x.bind(next_key(w2), next_key(next_key(w2)), 64, 64)));
}

TEST(MemoryWindow, Type2IsBoundToItsQpAndFreedByInvalidation) {
  Table x;
  const uint32_t w = x.t.alloc_mw(x.pd, MwType::kType2).value();
  const uint32_t k = next_key(w);
  ASSERT_EQ(x.t.bind_mw(x.pd, kQpn, x.bind(w, k, 0, 4096)), WcStatus::kSuccess);
  EXPECT_EQ(x.remote(kQpn, k, 0, 4096, kAccessRemoteWrite), AccessError::kOk);
  EXPECT_EQ(x.remote(kOtherQpn, k, 0, 8, kAccessRemoteWrite), AccessError::kBadKey);

  // Remote invalidation only arrives on its QP, with its exact key.
  EXPECT_FALSE(x.t.invalidate_remote(x.pd, kOtherQpn, k));
  EXPECT_FALSE(x.t.invalidate_remote(x.pd, kQpn, w));
  EXPECT_TRUE(x.t.invalidate_remote(x.pd, kQpn, k));
  EXPECT_EQ(x.remote(kQpn, k, 0, 8, kAccessRemoteWrite), AccessError::kBadKey);
  EXPECT_FALSE(x.t.invalidate_remote(x.pd, kQpn, k));  // already free
  EXPECT_TRUE(x.t.dereg_mr(x.mr.lkey).code() == 0);    // nothing bound any more
}

TEST(MemoryWindow, LocalInvalidateTakesType2WindowsOnlyNeverType1OrMrs) {
  Table x;
  const uint32_t w1 = x.t.alloc_mw(x.pd, MwType::kType1).value();
  const uint32_t w2 = x.t.alloc_mw(x.pd, MwType::kType2).value();
  ASSERT_EQ(x.t.bind_mw(x.pd, kQpn, x.bind(w1, next_key(w1), 0, 64)), WcStatus::kSuccess);
  ASSERT_EQ(x.t.bind_mw(x.pd, kQpn, x.bind(w2, next_key(w2), 0, 64)), WcStatus::kSuccess);
  EXPECT_FALSE(x.t.invalidate_local(x.pd, next_key(w1)));
  EXPECT_FALSE(x.t.invalidate_local(x.pd, x.mr.rkey));
  EXPECT_FALSE(x.t.invalidate_local(x.t.alloc_pd().value(), next_key(w2)));
  EXPECT_TRUE(x.t.invalidate_local(x.pd, next_key(w2)));
  EXPECT_EQ(x.remote(kQpn, next_key(w1), 0, 8, kAccessRemoteRead), AccessError::kOk);
  EXPECT_EQ(x.remote(kQpn, next_key(w2), 0, 8, kAccessRemoteRead), AccessError::kBadKey);
  // A freed type 2 window binds again, under the next key byte.
  const uint32_t again = next_key(next_key(w2));
  ASSERT_EQ(x.t.bind_mw(x.pd, kQpn, x.bind(next_key(w2), again, 128, 64)), WcStatus::kSuccess);
  EXPECT_EQ(x.remote(kQpn, again, 128, 64, kAccessRemoteRead), AccessError::kOk);
}

TEST(MemoryWindow, DestroyingTheQpOrDeallocatingFreesWindowsAndTheirMr) {
  Table x;
  const uint32_t w2 = x.t.alloc_mw(x.pd, MwType::kType2).value();
  ASSERT_EQ(x.t.bind_mw(x.pd, kQpn, x.bind(w2, next_key(w2), 0, 64)), WcStatus::kSuccess);
  EXPECT_EQ(x.t.rereg_mr(x.mr.lkey, x.pd, x.buf.data(), 64, kAccessLocalWrite).status().code(),
            EBUSY);
  x.t.unbind_qp(kOtherQpn);
  EXPECT_EQ(x.remote(kQpn, next_key(w2), 0, 8, kAccessRemoteRead), AccessError::kOk);
  x.t.unbind_qp(kQpn);
  EXPECT_EQ(x.remote(kQpn, next_key(w2), 0, 8, kAccessRemoteRead), AccessError::kBadKey);

  const uint32_t w1 = x.t.alloc_mw(x.pd, MwType::kType1).value();
  ASSERT_EQ(x.t.bind_mw(x.pd, kQpn, x.bind(w1, next_key(w1), 0, 64)), WcStatus::kSuccess);
  // The PD is held by its windows; dealloc takes any key the window has had.
  EXPECT_EQ(x.t.dealloc_pd(x.pd).code(), EBUSY);
  EXPECT_TRUE(x.t.dealloc_mw(w1).is_ok());
  EXPECT_EQ(x.remote(kQpn, next_key(w1), 0, 8, kAccessRemoteRead), AccessError::kBadKey);
  EXPECT_EQ(x.t.dealloc_mw(w1).code(), EINVAL);
  EXPECT_TRUE(x.t.dealloc_mw(next_key(w2)).is_ok());
  EXPECT_TRUE(x.t.dereg_mr(x.mr.lkey).is_ok());
  EXPECT_TRUE(x.t.dealloc_pd(x.pd).is_ok());
}

TEST(MemoryWindow, TypesOtherThanOneAndTwoAndTheLimitAreRefused) {
  DeviceLimits limits;
  limits.max_mw = 2;
  MemoryTable t(limits, 7);
  const PdId pd = t.alloc_pd().value();
  EXPECT_EQ(t.alloc_mw(pd, static_cast<MwType>(3)).status().code(), EINVAL);
  EXPECT_EQ(t.alloc_mw(PdId{99}, MwType::kType1).status().code(), EINVAL);
  const uint32_t a = t.alloc_mw(pd, MwType::kType1).value();
  ASSERT_TRUE(t.alloc_mw(pd, MwType::kType2).is_ok());
  EXPECT_EQ(t.alloc_mw(pd, MwType::kType1).status().code(), ENOMEM);
  ASSERT_TRUE(t.dealloc_mw(a).is_ok());
  // The slot comes back under another tag: the freed window's keys stay dead.
  const uint32_t b = t.alloc_mw(pd, MwType::kType1).value();
  EXPECT_NE(b >> 8, a >> 8);
  EXPECT_EQ(t.dealloc_mw(a).code(), EINVAL);
}

TEST(MemoryWindow, WindowAndMrKeysAreDistinctAndSpreadOverAll32Bits) {
  MemoryTable t(DeviceLimits{}, 42);
  const PdId pd = t.alloc_pd().value();
  std::vector<uint8_t> buf(64);
  std::set<uint32_t> keys;
  uint32_t high_bits = 0;
  for (int i = 0; i < 1000; ++i) {
    const MrInfo mr = t.reg_mr(pd, buf.data(), buf.size(), kAccessLocalWrite).value();
    const uint32_t mw = t.alloc_mw(pd, i % 2 == 0 ? MwType::kType1 : MwType::kType2).value();
    EXPECT_TRUE(keys.insert(mr.rkey).second);
    EXPECT_TRUE(keys.insert(mw).second);
    high_bits |= mw;
  }
  EXPECT_EQ(keys.size(), 2000u);
  EXPECT_EQ(high_bits, 0xFFFFFFFFu) << "window keys use every bit";
}

}  // namespace
}  // namespace uroce::test
