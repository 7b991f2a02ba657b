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
  Status dereg_mr(uint32_t lkey);

  // The remote check (RETH / AtomicETH): rkey valid and in `pd`, [va, va+len) inside the
  // MR, `access` (kAccessRemote*) granted. On success `*out` points at va.
  [[nodiscard]] AccessError check_remote(PdId pd, uint32_t rkey, uint64_t va, uint64_t len,
                                         uint32_t access, uint8_t** out) const;
  // The same check for a FLUSH of a whole MR (IBA 1.5 selectivity "memory region"): the
  // R_Key valid and in `pd` with `access`; no range.
  [[nodiscard]] AccessError check_remote_region(PdId pd, uint32_t rkey, uint32_t access) const;
  // The local check of one SGE range: lkey valid and in `pd`, range inside, `access`
  // (0 for a source, kAccessLocalWrite for a destination) granted.
  [[nodiscard]] AccessError check_local(PdId pd, uint32_t lkey, uint64_t addr, uint64_t len,
                                        uint32_t access, uint8_t** out) const;

  // Checks a whole SGE list for `access` (a WQE's source or destination).
  [[nodiscard]] AccessError check_sges(PdId pd, std::span<const Sge> sges, uint32_t access) const;
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

  DeviceLimits limits_;
  SplitMix64 rng_;
  uint32_t index_bits_;
  std::array<uint32_t, 4> round_keys_{};
  std::vector<Mr> mrs_;
  std::vector<uint32_t> pd_refs_;  // UINT32_MAX: slot free
  uint32_t mr_count_ = 0;
  uint32_t next_mr_ = 0;
};

}  // namespace uroce::transport
