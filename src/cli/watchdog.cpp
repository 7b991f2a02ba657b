// Process watchdog: see watchdog.hpp.
#include "cli/watchdog.hpp"

#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>

namespace uroce::cli {
namespace {

// Prepared before arming: a signal handler may only write() and _exit().
char g_message[128];
size_t g_message_len = 0;

void on_alarm(int) {
  (void)!::write(STDERR_FILENO, g_message, g_message_len);
  ::_exit(1);
}

}  // namespace

void arm_watchdog(const char* command, double seconds) {
  if (seconds <= 0) return;
  const int n =
      std::snprintf(g_message, sizeof g_message, "%s: timed out after %g s\n", command, seconds);
  g_message_len = n < 0 ? 0 : std::min(static_cast<size_t>(n), sizeof g_message - 1);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  ::sigaction(SIGALRM, &sa, nullptr);
  itimerval timer{};
  timer.it_value.tv_sec = static_cast<time_t>(seconds);
  timer.it_value.tv_usec = static_cast<suseconds_t>((seconds - std::floor(seconds)) * 1e6);
  ::setitimer(ITIMER_REAL, &timer, nullptr);
}

}  // namespace uroce::cli
