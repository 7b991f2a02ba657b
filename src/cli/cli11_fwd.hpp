// A forward declaration of CLI11's parser for headers that only pass it by reference.
// <CLI/CLI.hpp> is header-only and costs about 9 s of -O3 compile time in every file that
// includes it; only the files that declare options include it themselves.
#pragma once

namespace CLI {
class App;
}  // namespace CLI
