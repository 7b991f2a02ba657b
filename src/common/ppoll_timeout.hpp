// ppoll_timeout: ppoll's timeout argument for a wait of `timeout` (negative: no limit, so a
// null pointer), written into `storage`.
#pragma once

#include <time.h>

#include "uroce/vocab/time.hpp"

namespace uroce::common {

inline const timespec* ppoll_timeout(Nanos timeout, timespec& storage) {
  if (timeout.count() < 0) return nullptr;
  storage.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  storage.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  return &storage;
}

}  // namespace uroce::common
