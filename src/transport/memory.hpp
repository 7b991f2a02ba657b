// Protection domains, memory regions and THE memory checker (architecture rule 3): every
// remote VA/R_Key/length/access/PD check and every local SGE L_Key check of the engine goes
// through MemoryTable::check_remote / check_local, and the SGE copy helpers below are the
// only code that touches registered memory for local SGEs. Remote access never reaches
// memory outside an MR of the QP's PD registered with the right rights (IBTA 10.6, C9-88..).
//
// Keys (docs/robustness.md "R_Keys"): a key is a secret 32-bit permutation (a 4-round
// Feistel network, round keys from the engine's seeded SplitMix64) of
//   plain = generation << index_bits | MR table index
// where the generation counts the slot's registrations (lkey even, rkey odd). So keys look
// random over all 32 bits (a guess hits one given MR with probability 2^-32, whatever the
// attacker knows of the slot order), lookup stays O(1) (decrypt, index, compare), and a slot's
// key repeats only after 2^(31 - index_bits) re-registrations of that slot. It is not a
// cryptographic guarantee: with many known keys the small permutation could be attacked.
//
// Memory windows (memory_window.cpp; IBA 10.6.7): a window's R_Key is
//   tag << 8 | key byte
// where the 24-bit tag is the same kind of secret permutation of (generation, window index)
// and the key byte is the consumer's (ibv_inc_rkey changes it on each bind), so the tag finds
// the window in O(1) and a stale key byte misses. A window R_Key never equals a live MR
// R_Key: registration skips such a generation and a bind to such a key fails.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "transport/rng.hpp"
#include "uroce/vocab/verbs_types.hpp"

namespace uroce::transport {

// Why an access was refused. The callers map it to a NAK code or a WcStatus.
enum class AccessError : uint8_t {
  kOk = 0,
  kBadKey,      // no MR with this key (never registered, or deregistered)
  kBadPd,       // the MR belongs to another PD
  kOutOfRange,  // [va, va+len) not inside the MR (or wraps)
  kNoAccess,    // the MR lacks the access right
  kMisaligned,  // atomic VA not 8-byte aligned
};

struct Mr {
  bool valid = false;
  PdId pd{};
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint32_t generation = 0;  // registrations of this slot so far (kept across dereg)
  uint32_t bound_mws = 0;   // windows bound inside it: it cannot be deregistered or moved
};

struct Mw {
  bool allocated = false;
  bool bound = false;  // usable remotely: [addr, addr + length) with `access`, via `rkey`
  MwType type = MwType::kType1;
  PdId pd{};
  uint32_t rkey = 0;        // tag << 8 | key byte
  uint32_t generation = 0;  // allocations of this slot so far
  uint32_t mr_slot = 0;     // while bound: the MR it lies in
  uint32_t qpn = 0;         // type 2, while bound: the only QP it may be used through
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;
};

class MemoryTable {
 public:
  MemoryTable(const DeviceLimits& limits, uint64_t seed);

  Result<PdId> alloc_pd();
  Status dealloc_pd(PdId pd);
  [[nodiscard]] bool pd_valid(PdId pd) const;
  void pd_ref(PdId pd, int delta);

  Result<MrInfo> reg_mr(PdId pd, void* addr, size_t length, uint32_t access);
  // ibv_rereg_mr: the MR of `lkey` now covers [addr, addr + length) in `pd` with `access`, its
  // lkey and rkey unchanged (peers holding the rkey keep using it); the same checks as reg_mr.
  Result<MrInfo> rereg_mr(uint32_t lkey, PdId pd, void* addr, size_t length, uint32_t access);
  Status dereg_mr(uint32_t lkey);  // EBUSY while windows are bound in it

  // Memory windows (memory_window.cpp). alloc_mw returns the window's first R_Key (a type 1
  // window is usable once bound; a type 2 window is free until a BIND_MW). dealloc_mw takes
  // any R_Key the window has had (its tag names it) and unbinds it first.
  Result<uint32_t> alloc_mw(PdId pd, MwType type);
  Status dealloc_mw(uint32_t rkey);
  // Executes a BIND_MW posted on QP `qpn` of PD `qp_pd`: kSuccess, or kMwBindErr when any
  // rule of IBA 10.6.7.2 / rxe_check_bind_mw fails (the window is then unchanged).
  [[nodiscard]] WcStatus bind_mw(PdId qp_pd, uint32_t qpn, const MwBind& bind);
  // Invalidates the type 2 window `rkey` (LOCAL_INV from a QP of `pd`, or a SEND with
  // Invalidate arriving on QP `qpn`, which must be the QP it is bound to). False when the key
  // names no bound type 2 window of `pd` (an MR key included: uroce has no fast-registration
  // MRs, the only MRs IBA lets a consumer invalidate).
  [[nodiscard]] bool invalidate_local(PdId pd, uint32_t rkey);
  [[nodiscard]] bool invalidate_remote(PdId pd, uint32_t qpn, uint32_t rkey);
  // The QP `qpn` is destroyed: its type 2 windows become free, so a reused QPN cannot
  // inherit them.
  void unbind_qp(uint32_t qpn);

  // The remote check (RETH / AtomicETH) of a request arriving on QP `qpn` of `pd`: rkey names
  // an MR of `pd`, or a bound window of `pd` (type 2: bound to `qpn`); [va, va+len) inside
  // it; `access` (kAccessRemote*) granted. On success `*out` points at va.
  [[nodiscard]] AccessError check_remote(PdId pd, uint32_t qpn, uint32_t rkey, uint64_t va,
                                         uint64_t len, uint32_t access, uint8_t** out) const;
  // The same check for a FLUSH of a whole MR (IBA 1.5 selectivity "memory region"): the
  // R_Key valid and in `pd` with `access`; no range.
  [[nodiscard]] AccessError check_remote_region(PdId pd, uint32_t rkey, uint32_t access) const;
  // The local check of one SGE range: lkey valid and in `pd`, range inside, `access`
  // (0 for a source, kAccessLocalWrite for a destination) granted.
  [[nodiscard]] AccessError check_local(PdId pd, uint32_t lkey, uint64_t addr, uint64_t len,
                                        uint32_t access, uint8_t** out) const;

  // Checks a whole SGE list for `access` (a WQE's source or destination).
  [[nodiscard]] AccessError check_sges(PdId pd, std::span<const Sge> sges, uint32_t access) const;
  // Where `len` bytes starting `offset` bytes into the SGE list lie, when one SGE holds them
  // all and passes the source check; nullptr otherwise (gather then copies or reports).
  [[nodiscard]] const uint8_t* source(PdId pd, std::span<const Sge> sges, uint64_t offset,
                                      uint64_t len) const;
  // Copies `dst.size()` bytes starting `offset` bytes into the SGE list to `dst`.
  [[nodiscard]] AccessError gather(PdId pd, std::span<const Sge> sges, uint64_t offset,
                                   std::span<uint8_t> dst) const;
  // Copies `src` into the SGE list at `offset` (LOCAL_WRITE required).
  [[nodiscard]] AccessError scatter(PdId pd, std::span<const Sge> sges, uint64_t offset,
                                    std::span<const uint8_t> src) const;

 private:
  [[nodiscard]] Status check_registration(PdId pd, void* addr, size_t length,
                                          uint32_t access) const;
  [[nodiscard]] const Mr* lookup(uint32_t key) const;
  [[nodiscard]] uint32_t encrypt(uint32_t plain) const;
  [[nodiscard]] uint32_t decrypt(uint32_t key) const;
  [[nodiscard]] uint32_t slot_of(uint32_t key) const;
  [[nodiscard]] uint32_t slot_of_uncached(uint32_t key) const;
  [[nodiscard]] bool is_mr_rkey(uint32_t key) const;
  // Window keys: the 24-bit tag permutation and the lookups (by tag, by exact R_Key).
  [[nodiscard]] uint32_t mw_tag(uint32_t plain) const;
  [[nodiscard]] uint32_t mw_plain(uint32_t tag) const;
  [[nodiscard]] Mw* mw_by_tag(uint32_t rkey);
  [[nodiscard]] const Mw* mw_by_rkey(uint32_t rkey) const;
  [[nodiscard]] bool is_mw_rkey(uint32_t key) const;
  void unbind(Mw& mw);

  DeviceLimits limits_;
  SplitMix64 rng_;
  uint32_t index_bits_;
  std::array<uint32_t, 4> round_keys_{};
  // The last keys looked up and their slots, by the key's low bits (keys are permuted, so
  // these are random): a data path looks up the same lkey and rkey for every packet, and the
  // permutation's four rounds were 3 % of a 64-byte WRITE's cost on each side. A cached slot
  // is only where the key would point; the callers still compare the MR's key.
  struct SlotCacheEntry {
    uint32_t key = 0;
    uint32_t slot = 0;
  };
  mutable std::array<SlotCacheEntry, 4> slot_cache_{};
  std::vector<Mr> mrs_;
  uint32_t mw_index_bits_;
  std::vector<Mw> mws_;
  uint32_t mw_count_ = 0;
  uint32_t next_mw_ = 0;
  std::vector<uint32_t> pd_refs_;  // UINT32_MAX: slot free
  uint32_t mr_count_ = 0;
  uint32_t next_mr_ = 0;
};

}  // namespace uroce::transport
