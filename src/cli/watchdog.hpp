// --timeout for the commands that wait on a peer: after `seconds` the process prints one line
// ("uroce perf: timed out after 30 s") and exits with status 1, whatever it is blocked in.
#pragma once

namespace uroce::cli {

// No-op for seconds <= 0. `command` must outlive the process (a string literal).
void arm_watchdog(const char* command, double seconds);

}  // namespace uroce::cli
