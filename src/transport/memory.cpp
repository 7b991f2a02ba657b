// PD/MR tables and the one memory checker (see memory.hpp).
#include "transport/memory.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "transport/memory_detail.hpp"

namespace uroce::transport {
namespace {

using detail::feistel_round;
using detail::range_inside;

constexpr uint32_t kPdFree = UINT32_MAX;

}  // namespace

MemoryTable::MemoryTable(const DeviceLimits& limits, uint64_t seed)
    : limits_(limits),
      rng_(seed),
      index_bits_(
          static_cast<uint32_t>(std::bit_width(limits.max_mr > 1 ? limits.max_mr - 1 : 1u))),
      mrs_(limits.max_mr),
      mw_index_bits_(
          static_cast<uint32_t>(std::bit_width(std::clamp(limits.max_mw, 2u, 1u << 24) - 1))),
      mws_(std::min(limits.max_mw, 1u << 24)),
      pd_refs_(limits.max_pd, kPdFree) {
  for (uint32_t& k : round_keys_) k = static_cast<uint32_t>(rng_.next());
  for (SlotCacheEntry& c : slot_cache_) c = {0, slot_of_uncached(0)};
}

uint32_t MemoryTable::encrypt(uint32_t plain) const {
  uint32_t l = plain >> 16;
  uint32_t r = plain & 0xFFFF;
  for (uint32_t k : round_keys_) {
    const uint32_t next = l ^ feistel_round(r, k);
    l = r;
    r = next;
  }
  return l << 16 | r;
}

uint32_t MemoryTable::decrypt(uint32_t key) const {
  uint32_t l = key >> 16;
  uint32_t r = key & 0xFFFF;
  for (size_t i = round_keys_.size(); i-- > 0;) {
    const uint32_t prev = r ^ feistel_round(l, round_keys_[i]);
    r = l;
    l = prev;
  }
  return l << 16 | r;
}

uint32_t MemoryTable::slot_of_uncached(uint32_t key) const {
  const uint32_t plain = decrypt(key);
  return index_bits_ >= 32 ? plain : plain & ((1u << index_bits_) - 1);
}

uint32_t MemoryTable::slot_of(uint32_t key) const {
  SlotCacheEntry& c = slot_cache_[key & (slot_cache_.size() - 1)];
  if (c.key != key) c = {key, slot_of_uncached(key)};
  return c.slot;
}

Result<PdId> MemoryTable::alloc_pd() {
  for (uint32_t i = 0; i < pd_refs_.size(); ++i) {
    if (pd_refs_[i] == kPdFree) {
      pd_refs_[i] = 0;
      return PdId{i};
    }
  }
  return Status(ENOMEM, "alloc_pd: max_pd protection domains already allocated");
}

bool MemoryTable::pd_valid(PdId pd) const {
  const auto i = static_cast<uint32_t>(pd);
  return i < pd_refs_.size() && pd_refs_[i] != kPdFree;
}

void MemoryTable::pd_ref(PdId pd, int delta) {
  pd_refs_[static_cast<uint32_t>(pd)] += static_cast<uint32_t>(delta);
}

Status MemoryTable::dealloc_pd(PdId pd) {
  if (!pd_valid(pd)) return Status(EINVAL, "dealloc_pd: no such protection domain");
  if (pd_refs_[static_cast<uint32_t>(pd)] != 0) {
    return Status(EBUSY, "dealloc_pd: MRs, SRQs or QPs still use this protection domain");
  }
  pd_refs_[static_cast<uint32_t>(pd)] = kPdFree;
  return Status::ok();
}

Status MemoryTable::check_registration(PdId pd, void* addr, size_t length, uint32_t access) const {
  if (!pd_valid(pd)) return Status(EINVAL, "reg_mr: no such protection domain");
  constexpr uint32_t kKnown = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                              kAccessRemoteAtomic | kAccessMwBind | kAccessFlushGlobal;
  if ((access & kAccessFlushPersistent) != 0) {
    // rxe refuses IB_ACCESS_FLUSH_PERSISTENT on pages that are not persistent memory; uroce
    // registers ordinary process memory, so it refuses it always (docs/engine.md, FLUSH).
    return Status(EINVAL,
                  "reg_mr: FLUSH_PERSISTENT needs persistent memory; uroce MRs are ordinary "
                  "process memory (register with FLUSH_GLOBAL for global-visibility FLUSH)");
  }
  if ((access & ~kKnown) != 0) {
    return Status(EINVAL, "reg_mr: unsupported access flag (zero-based MRs are not supported)");
  }
  // ibv_reg_mr(3): remote write or atomic access requires local write access.
  if ((access & (kAccessRemoteWrite | kAccessRemoteAtomic)) != 0 &&
      (access & kAccessLocalWrite) == 0) {
    return Status(EINVAL, "reg_mr: REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE too");
  }
  if (length > limits_.max_mr_size) return Status(EINVAL, "reg_mr: length exceeds max_mr_size");
  if (addr == nullptr && length != 0) return Status(EINVAL, "reg_mr: null address");
  const auto base = reinterpret_cast<uint64_t>(addr);
  if (base + length < base) return Status(EINVAL, "reg_mr: range wraps the address space");
  return Status::ok();
}

Result<MrInfo> MemoryTable::reg_mr(PdId pd, void* addr, size_t length, uint32_t access) {
  if (Status st = check_registration(pd, addr, length, access); !st) return st;
  if (mr_count_ >= mrs_.size()) return Status(ENOMEM, "reg_mr: max_mr regions already registered");
  // Next free slot after the last one handed out, so a freed slot is reused late.
  uint32_t idx = next_mr_;
  while (mrs_[idx].valid) idx = (idx + 1) % static_cast<uint32_t>(mrs_.size());
  next_mr_ = (idx + 1) % static_cast<uint32_t>(mrs_.size());

  Mr& mr = mrs_[idx];
  mr.valid = true;
  mr.pd = pd;
  mr.addr = reinterpret_cast<uint64_t>(addr);
  mr.length = length;
  mr.access = access;
  // Two generations per registration: lkey even, rkey odd, so they never coincide. A
  // generation whose rkey a bound or allocated window holds is skipped (keys stay unique).
  const auto plain = [&](uint32_t g) { return index_bits_ >= 32 ? idx : g << index_bits_ | idx; };
  uint32_t gen = mr.generation;
  while (is_mw_rkey(encrypt(plain(gen + 1)))) gen += 2;
  mr.generation = gen + 2;
  mr.lkey = encrypt(plain(gen));
  mr.rkey = encrypt(plain(gen + 1));
  ++mr_count_;
  pd_ref(pd, +1);
  return MrInfo{mr.lkey, mr.rkey, mr.addr, mr.length, mr.access};
}

Result<MrInfo> MemoryTable::rereg_mr(uint32_t lkey, PdId pd, void* addr, size_t length,
                                     uint32_t access) {
  const Mr* found = lookup(lkey);
  if (found == nullptr || found->lkey != lkey) {
    return Status(EINVAL, "rereg_mr: no MR with this lkey");
  }
  if (Status st = check_registration(pd, addr, length, access); !st) return st;
  Mr& mr = mrs_[slot_of(lkey)];
  if (mr.bound_mws != 0) {
    return Status(EBUSY, "rereg_mr: memory windows are bound to this MR (unbind them first)");
  }
  pd_ref(mr.pd, -1);
  pd_ref(pd, +1);
  mr.pd = pd;
  mr.addr = reinterpret_cast<uint64_t>(addr);
  mr.length = length;
  mr.access = access;
  return MrInfo{mr.lkey, mr.rkey, mr.addr, mr.length, mr.access};
}

const Mr* MemoryTable::lookup(uint32_t key) const {
  const uint32_t idx = slot_of(key);
  if (idx >= mrs_.size() || !mrs_[idx].valid) return nullptr;
  return &mrs_[idx];
}

Status MemoryTable::dereg_mr(uint32_t lkey) {
  const Mr* found = lookup(lkey);
  if (found == nullptr || found->lkey != lkey)
    return Status(EINVAL, "dereg_mr: no MR with this lkey");
  Mr& mr = mrs_[slot_of(lkey)];
  if (mr.bound_mws != 0) {
    return Status(EBUSY, "dereg_mr: memory windows are bound to this MR (unbind them first)");
  }
  pd_ref(mr.pd, -1);
  mr = Mr{.generation = mr.generation};
  --mr_count_;
  return Status::ok();
}

bool MemoryTable::is_mr_rkey(uint32_t key) const {
  const Mr* mr = lookup(key);
  return mr != nullptr && mr->rkey == key;
}

AccessError MemoryTable::check_remote(PdId pd, uint32_t qpn, uint32_t rkey, uint64_t va,
                                      uint64_t len, uint32_t access, uint8_t** out) const {
  const Mr* mr = lookup(rkey);
  if (mr != nullptr && mr->rkey == rkey) {
    if (mr->pd != pd) return AccessError::kBadPd;
    if (!range_inside(mr->addr, mr->length, va, len)) return AccessError::kOutOfRange;
    if ((mr->access & access) != access) return AccessError::kNoAccess;
  } else {
    // A window: its MR cannot be deregistered or moved while it is bound, so inside the
    // window is inside registered memory.
    const Mw* mw = mw_by_rkey(rkey);
    if (mw == nullptr || !mw->bound) return AccessError::kBadKey;
    if (mw->pd != pd) return AccessError::kBadPd;
    if (mw->type == MwType::kType2 && mw->qpn != qpn) return AccessError::kBadKey;
    if (!range_inside(mw->addr, mw->length, va, len)) return AccessError::kOutOfRange;
    if ((mw->access & access) != access) return AccessError::kNoAccess;
  }
  if ((access & kAccessRemoteAtomic) != 0 && (va & 7) != 0) return AccessError::kMisaligned;
  *out = reinterpret_cast<uint8_t*>(va);
  return AccessError::kOk;
}

AccessError MemoryTable::check_remote_region(PdId pd, uint32_t rkey, uint32_t access) const {
  const Mr* mr = lookup(rkey);
  if (mr == nullptr || mr->rkey != rkey) {
    // A window grants no FLUSH right (its access is REMOTE_READ/WRITE/ATOMIC only).
    return mw_by_rkey(rkey) != nullptr ? AccessError::kNoAccess : AccessError::kBadKey;
  }
  if (mr->pd != pd) return AccessError::kBadPd;
  if ((mr->access & access) != access) return AccessError::kNoAccess;
  return AccessError::kOk;
}

AccessError MemoryTable::check_local(PdId pd, uint32_t lkey, uint64_t addr, uint64_t len,
                                     uint32_t access, uint8_t** out) const {
  const Mr* mr = lookup(lkey);
  if (mr == nullptr || mr->lkey != lkey) return AccessError::kBadKey;
  if (mr->pd != pd) return AccessError::kBadPd;
  if (!range_inside(mr->addr, mr->length, addr, len)) return AccessError::kOutOfRange;
  if ((mr->access & access) != access) return AccessError::kNoAccess;
  *out = reinterpret_cast<uint8_t*>(addr);
  return AccessError::kOk;
}

AccessError MemoryTable::check_sges(PdId pd, std::span<const Sge> sges, uint32_t access) const {
  for (const Sge& sge : sges) {
    if (sge.length == 0) continue;
    uint8_t* p = nullptr;
    const AccessError e = check_local(pd, sge.lkey, sge.addr, sge.length, access, &p);
    if (e != AccessError::kOk) return e;
  }
  return AccessError::kOk;
}

const uint8_t* MemoryTable::source(PdId pd, std::span<const Sge> sges, uint64_t offset,
                                   uint64_t len) const {
  for (const Sge& sge : sges) {
    if (offset >= sge.length) {
      offset -= sge.length;
      continue;
    }
    if (sge.length - offset < len) return nullptr;  // spans two SGEs
    uint8_t* p = nullptr;
    return check_local(pd, sge.lkey, sge.addr + offset, len, 0, &p) == AccessError::kOk ? p
                                                                                        : nullptr;
  }
  return nullptr;
}

AccessError MemoryTable::gather(PdId pd, std::span<const Sge> sges, uint64_t offset,
                                std::span<uint8_t> dst) const {
  size_t done = 0;
  for (const Sge& sge : sges) {
    if (done == dst.size()) break;
    if (offset >= sge.length) {
      offset -= sge.length;
      continue;
    }
    const uint64_t n = std::min<uint64_t>(sge.length - offset, dst.size() - done);
    uint8_t* p = nullptr;
    const AccessError e = check_local(pd, sge.lkey, sge.addr + offset, n, 0, &p);
    if (e != AccessError::kOk) return e;
    std::memcpy(dst.data() + done, p, n);
    done += n;
    offset = 0;
  }
  return done == dst.size() ? AccessError::kOk : AccessError::kOutOfRange;
}

AccessError MemoryTable::scatter(PdId pd, std::span<const Sge> sges, uint64_t offset,
                                 std::span<const uint8_t> src) const {
  size_t done = 0;
  for (const Sge& sge : sges) {
    if (done == src.size()) break;
    if (offset >= sge.length) {
      offset -= sge.length;
      continue;
    }
    const uint64_t n = std::min<uint64_t>(sge.length - offset, src.size() - done);
    uint8_t* p = nullptr;
    const AccessError e = check_local(pd, sge.lkey, sge.addr + offset, n, kAccessLocalWrite, &p);
    if (e != AccessError::kOk) return e;
    std::memcpy(p, src.data() + done, n);
    done += n;
    offset = 0;
  }
  return done == src.size() ? AccessError::kOk : AccessError::kOutOfRange;
}

}  // namespace uroce::transport
