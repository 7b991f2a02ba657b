// start_library_thread: a thread of the library's own (the device's progress thread, the
// rdma_cm event thread, the metrics exporter) that never takes the signals sent to the
// process. A program's SIGALRM or Ctrl-C then reaches one of its own threads, where it ends
// a blocked ibv_get_cq_event or rdma_get_cm_event with EINTR as it would on a kernel device;
// delivered to a library thread it would interrupt nothing the program waits in. The faults
// a thread raises itself stay unblocked, so that a crash in one still reaches the sanitizers'
// handlers (a blocked SIGSEGV kills the process without them).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace uroce::common {

template <typename F>
std::thread start_library_thread(F&& body) {
  sigset_t all;
  sigset_t before;
  sigfillset(&all);
  for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT}) {
    sigdelset(&all, sig);
  }
  // The new thread inherits the mask in force when it is created.
  pthread_sigmask(SIG_BLOCK, &all, &before);
  std::thread thread(std::forward<F>(body));
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return thread;
}

}  // namespace uroce::common
