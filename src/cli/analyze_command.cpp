// `uroce dump --analyze FILE [--json]`: prints the per-connection summary of
// analyze_capture.hpp. Exit status: 0, 1 when the file is damaged part-way (the summary
// covers what was read), 2 when it cannot be opened.
#include <fmt/format.h>

#include <cstdio>

#include "cli/analyze_capture.hpp"
#include "cli/command.hpp"

namespace uroce::cli {

int run_analyze(const std::string& path, bool json, uint16_t roce_port) {
  CaptureAnalysis a;
  if (!analyze_capture(path, a, roce_port)) {
    fmt::print(stderr, "uroce dump --analyze: cannot read {}: {}\n", path, a.error);
    return kExitUsage;
  }
  if (json) {
    fmt::print("{}\n", analysis_json(a).dump(2));
  } else {
    const std::string text = format_analysis_text(a);
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  return a.error.empty() ? kExitOk : kExitFailure;
}

}  // namespace uroce::cli
