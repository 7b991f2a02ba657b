// Small rules the responder's validation (responder.cpp) and its executors
// (responder_execute.cpp) share.
#pragma once

#include <algorithm>
#include <cstdint>

#include "uroce/vocab/verbs_types.hpp"
#include "wire/packet.hpp"

namespace uroce::transport {

inline uint32_t read_packets(uint32_t length, uint32_t mtu) {
  return std::max<uint32_t>(1, (length + mtu - 1) / mtu);
}

// The MR rights a FLUSH of this placement type needs (rxe check_rkey).
inline uint32_t flush_access(const wire::Feth& f) {
  uint32_t access = 0;
  if ((f.placement() & kFlushGlobal) != 0) access |= kAccessFlushGlobal;
  if ((f.placement() & kFlushPersistent) != 0) access |= kAccessFlushPersistent;
  return access;
}

// A FLUSH the QP may execute: a known placement type (rxe check_qp_attr_access: each type
// needs its right in qp_access_flags) and selectivity. rxe treats a FETH with no placement
// bit, reserved bits or selectivity 2..3 as a no-op or a range FLUSH; uroce, stricter, calls
// them the invalid requests they are (IBA 1.5 FETH: those values are reserved).
inline bool flush_allowed(const wire::Feth& f, uint32_t qp_access) {
  constexpr uint32_t kKnownPlacement = kFlushGlobal | kFlushPersistent;
  const uint32_t reserved = f.bits & ~(wire::Feth::kPlacementMask | wire::Feth::kSelectivityMask);
  if (f.placement() == 0 || (f.placement() & ~kKnownPlacement) != 0 || reserved != 0) return false;
  if (f.selectivity() != kFlushRange && f.selectivity() != kFlushMr) return false;
  const uint32_t need = flush_access(f);
  return (qp_access & need) == need;
}

}  // namespace uroce::transport
