#include "call_counter.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

// glibc's own entry points: the stand-ins below count, then forward to them.
extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* ptr, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* ptr);
}

namespace {

std::atomic<bool> counting{false};
std::atomic<uint64_t> allocations{0};
std::atomic<uint64_t> mutex_locks{0};
std::atomic<bool> tracing{false};
thread_local bool in_trace = false;
std::atomic_flag trace_busy = ATOMIC_FLAG_INIT;

// The caller's stack on stderr, for finding where a counted call comes from. backtrace()
// allocates on its first call (it loads libgcc_s): set_tracing() makes that call first.
void trace(const char* what) {
  if (!tracing.load(std::memory_order_relaxed) || in_trace) return;
  in_trace = true;
  void* frames[24];
  const int n = backtrace(frames, 24);
  // One stack at a time on stderr (threads trace at once); not a pthread mutex: it counts.
  while (trace_busy.test_and_set(std::memory_order_acquire)) {
  }
  (void)!write(2, what, __builtin_strlen(what));
  backtrace_symbols_fd(frames, n, 2);
  trace_busy.clear(std::memory_order_release);
  in_trace = false;
}

void note_allocation() {
  if (counting.load(std::memory_order_relaxed)) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    trace("-- allocation\n");
  }
}

void note_lock() {
  if (counting.load(std::memory_order_relaxed)) {
    mutex_locks.fetch_add(1, std::memory_order_relaxed);
    trace("-- mutex lock\n");
  }
}

using LockFn = int (*)(pthread_mutex_t*);

// The next definition after this executable's: libc's. Looked up on first use, which may
// come before main (static constructors take locks); dlsym takes no pthread mutex itself.
LockFn next_lock(const char* name, std::atomic<LockFn>& cache) {
  LockFn f = cache.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<LockFn>(dlsym(RTLD_NEXT, name));
    cache.store(f, std::memory_order_release);
  }
  return f;
}

std::atomic<LockFn> libc_lock{nullptr};
std::atomic<LockFn> libc_trylock{nullptr};

}  // namespace

extern "C" {

void* malloc(size_t size) {
  note_allocation();
  return __libc_malloc(size);
}

void* calloc(size_t count, size_t size) {
  note_allocation();
  return __libc_calloc(count, size);
}

void* realloc(void* ptr, size_t size) {
  note_allocation();
  return __libc_realloc(ptr, size);
}

void* memalign(size_t alignment, size_t size) {
  note_allocation();
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(size_t alignment, size_t size) {
  note_allocation();
  return __libc_memalign(alignment, size);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  note_allocation();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

void free(void* ptr) {
  __libc_free(ptr);
}

int pthread_mutex_lock(pthread_mutex_t* m) {
  note_lock();
  return next_lock("pthread_mutex_lock", libc_lock)(m);
}

int pthread_mutex_trylock(pthread_mutex_t* m) {
  note_lock();
  return next_lock("pthread_mutex_trylock", libc_trylock)(m);
}

}  // extern "C"

namespace uroce::bench {

void set_tracing(bool on) {
  if (on) {
    void* frame[1];
    (void)backtrace(frame, 1);
  }
  tracing.store(on);
}

void start_counting() {
  allocations.store(0);
  mutex_locks.store(0);
  counting.store(true);
}

CallCounts stop_counting() {
  counting.store(false);
  return CallCounts{allocations.load(), mutex_locks.load()};
}

}  // namespace uroce::bench
