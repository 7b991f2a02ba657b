// Counts the calls that would put a lock or an allocation on the data path: every malloc,
// calloc, realloc and aligned allocation (operator new comes through malloc), and every
// pthread_mutex_lock and pthread_mutex_trylock (std::mutex comes through them), made by
// any thread of the process while counting is on. call_counter.cpp defines those functions
// in the executable, so they stand in front of glibc's for the whole process; it cannot be
// linked into a sanitizer build, whose runtime replaces the same functions.
#pragma once

#include <cstdint>

namespace uroce::bench {

struct CallCounts {
  uint64_t allocations = 0;
  uint64_t mutex_locks = 0;  // lock and trylock calls
};

void start_counting();
// Each counted call also prints its stack on stderr (slow: for finding the callers).
void set_tracing(bool on);
// The counts since start_counting(); counting stops.
CallCounts stop_counting();

}  // namespace uroce::bench
