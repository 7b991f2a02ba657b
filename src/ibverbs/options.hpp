// Environment options of the libibverbs shim. ibverbs has no way to pass options to a
// provider, so an unmodified program is steered by its environment: the variables of
// src/config/env_table.cpp (docs/configuration.md), parsed by config::HostOptions exactly as
// the `uroce` CLI and the C++ API parse them.
#pragma once

#include <string>

#include "net/udp_device.hpp"

namespace uroce::ibverbs {

// Reads the environment. Returns false with `error` set when a variable is malformed.
bool options_from_env(net::UdpDeviceOptions& options, std::string& error);

// Prints "uroce: <message>" on stderr unless UROCE_QUIET=1: ibverbs only has errno to
// report failures, and an errno alone does not say which variable or netdev is wrong.
void report(const std::string& message);

}  // namespace uroce::ibverbs
