// Memory windows (IBA 10.6.7; the rules rxe_mw.c applies): allocation, BIND_MW, LOCAL_INV,
// remote invalidation and their keys. The remote access check itself is MemoryTable::
// check_remote (memory.cpp), the one memory checker.
#include <algorithm>
#include <cerrno>

#include "transport/memory.hpp"
#include "transport/memory_detail.hpp"

namespace uroce::transport {
namespace {

constexpr uint32_t kTagBits = 24;
constexpr uint32_t kHalfMask = 0xFFF;  // the permutation's 12-bit halves
// What a bind may grant. LOCAL_WRITE is accepted and means nothing for a window (pyverbs and
// rxe pass it through); ZERO_BASED windows are not supported, like zero-based MRs.
constexpr uint32_t kBindable =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

}  // namespace

uint32_t MemoryTable::mw_tag(uint32_t plain) const {
  uint32_t l = (plain >> 12) & kHalfMask;
  uint32_t r = plain & kHalfMask;
  for (uint32_t k : round_keys_) {
    const uint32_t next = l ^ (detail::feistel_round(r, k >> 16) & kHalfMask);
    l = r;
    r = next;
  }
  return l << 12 | r;
}

uint32_t MemoryTable::mw_plain(uint32_t tag) const {
  uint32_t l = (tag >> 12) & kHalfMask;
  uint32_t r = tag & kHalfMask;
  for (size_t i = round_keys_.size(); i-- > 0;) {
    const uint32_t prev = r ^ (detail::feistel_round(l, round_keys_[i] >> 16) & kHalfMask);
    r = l;
    l = prev;
  }
  return l << 12 | r;
}

Mw* MemoryTable::mw_by_tag(uint32_t rkey) {
  const uint32_t tag = rkey >> 8;
  const uint32_t idx = mw_plain(tag) & ((1u << mw_index_bits_) - 1);
  if (idx >= mws_.size() || !mws_[idx].allocated || (mws_[idx].rkey >> 8) != tag) return nullptr;
  return &mws_[idx];
}

const Mw* MemoryTable::mw_by_rkey(uint32_t rkey) const {
  const uint32_t idx = mw_plain(rkey >> 8) & ((1u << mw_index_bits_) - 1);
  if (idx >= mws_.size() || !mws_[idx].allocated || mws_[idx].rkey != rkey) return nullptr;
  return &mws_[idx];
}

bool MemoryTable::is_mw_rkey(uint32_t key) const {
  return mw_by_rkey(key) != nullptr;
}

Result<uint32_t> MemoryTable::alloc_mw(PdId pd, MwType type) {
  if (!pd_valid(pd)) return Status(EINVAL, "alloc_mw: no such protection domain");
  if (type != MwType::kType1 && type != MwType::kType2) {
    return Status(EINVAL, "alloc_mw: the window type must be 1 or 2");
  }
  if (mw_count_ >= mws_.size()) return Status(ENOMEM, "alloc_mw: max_mw windows already allocated");
  uint32_t idx = next_mw_;
  while (mws_[idx].allocated) idx = (idx + 1) % static_cast<uint32_t>(mws_.size());
  next_mw_ = (idx + 1) % static_cast<uint32_t>(mws_.size());

  Mw& mw = mws_[idx];
  const uint32_t gen_bits = kTagBits - mw_index_bits_;
  const auto tag_of = [&](uint32_t g) {
    return mw_tag(((g & ((1u << gen_bits) - 1)) << mw_index_bits_) | idx);
  };
  // A key byte from the engine's generator (rxe starts from a random one too), and no key an
  // MR already has: each lookup must find one object.
  uint32_t key = static_cast<uint32_t>(rng_.next()) & 0xFF;
  for (int tries = 0; is_mr_rkey(tag_of(mw.generation) << 8 | key); ++tries) {
    if (tries == 0xFF) return Status(ENOMEM, "alloc_mw: no free R_Key for this window");
    key = (key + 1) & 0xFF;
  }
  mw = Mw{.allocated = true,
          .type = type,
          .pd = pd,
          .rkey = tag_of(mw.generation) << 8 | key,
          .generation = mw.generation + 1};
  ++mw_count_;
  pd_ref(pd, +1);
  return mw.rkey;
}

void MemoryTable::unbind(Mw& mw) {
  if (mw.bound) --mrs_[mw.mr_slot].bound_mws;
  mw.bound = false;
  mw.addr = 0;
  mw.length = 0;
  mw.access = 0;
  mw.qpn = 0;
}

Status MemoryTable::dealloc_mw(uint32_t rkey) {
  Mw* mw = mw_by_tag(rkey);
  if (mw == nullptr) return Status(EINVAL, "dealloc_mw: no such memory window");
  unbind(*mw);
  pd_ref(mw->pd, -1);
  *mw = Mw{.generation = mw->generation};
  --mw_count_;
  return Status::ok();
}

WcStatus MemoryTable::bind_mw(PdId qp_pd, uint32_t qpn, const MwBind& b) {
  Mw* mw = mw_by_tag(b.mw_rkey);
  // The new key keeps the window's tag (o10-37.2.24: only the key byte is the consumer's).
  if (mw == nullptr || (b.rkey >> 8) != (mw->rkey >> 8)) return WcStatus::kMwBindErr;
  if (mw->pd != qp_pd) return WcStatus::kMwBindErr;  // C10-72
  if (mw->type == MwType::kType2) {
    if (mw->bound || b.length == 0) return WcStatus::kMwBindErr;  // o10-37.2.30, o10-37.2.40
  }
  if ((b.access & ~kBindable) != 0) return WcStatus::kMwBindErr;
  uint32_t mr_slot = 0;
  if (b.length != 0) {
    const Mr* mr = lookup(b.mr_lkey);
    if (mr == nullptr || mr->lkey != b.mr_lkey || mr->pd != mw->pd) return WcStatus::kMwBindErr;
    if ((mr->access & kAccessMwBind) == 0) return WcStatus::kMwBindErr;  // C10-73
    // C10-74: a window that can be written remotely needs an MR the HCA may write.
    if ((b.access & (kAccessRemoteWrite | kAccessRemoteAtomic)) != 0 &&
        (mr->access & kAccessLocalWrite) == 0) {
      return WcStatus::kMwBindErr;
    }
    if (!detail::range_inside(mr->addr, mr->length, b.addr, b.length)) {
      return WcStatus::kMwBindErr;  // C10-75
    }
    mr_slot = slot_of(b.mr_lkey);
  }
  if (b.rkey != mw->rkey && is_mr_rkey(b.rkey)) return WcStatus::kMwBindErr;

  unbind(*mw);  // a type 1 window may be rebound while bound
  mw->rkey = b.rkey;
  if (b.length == 0) return WcStatus::kSuccess;  // type 1 unbind
  mw->bound = true;
  mw->mr_slot = mr_slot;
  ++mrs_[mr_slot].bound_mws;
  mw->addr = b.addr;
  mw->length = b.length;
  mw->access = b.access & ~kAccessLocalWrite;
  mw->qpn = mw->type == MwType::kType2 ? qpn : 0;
  return WcStatus::kSuccess;
}

bool MemoryTable::invalidate_local(PdId pd, uint32_t rkey) {
  const Mw* found = mw_by_rkey(rkey);
  if (found == nullptr || found->type != MwType::kType2 || !found->bound || found->pd != pd) {
    return false;
  }
  unbind(mws_[static_cast<size_t>(found - mws_.data())]);
  return true;
}

bool MemoryTable::invalidate_remote(PdId pd, uint32_t qpn, uint32_t rkey) {
  const Mw* found = mw_by_rkey(rkey);
  if (found == nullptr || found->type != MwType::kType2 || !found->bound || found->pd != pd ||
      found->qpn != qpn) {
    return false;
  }
  unbind(mws_[static_cast<size_t>(found - mws_.data())]);
  return true;
}

void MemoryTable::unbind_qp(uint32_t qpn) {
  for (Mw& mw : mws_) {
    if (mw.allocated && mw.bound && mw.type == MwType::kType2 && mw.qpn == qpn) unbind(mw);
  }
}

}  // namespace uroce::transport
