// `uroce perf` against Debian's perftest (ib_{write,read,send,atomic}_{bw,lat}, 4.5 /
// "6.06"): which exchange to speak, and the whole test when the peer is perftest.
//
// Every `uroce perf` side starts with perftest's version message (perftest_wire.hpp), the
// client writing first as perftest's client does. A uroce peer marks its message; perftest
// does not. So the server learns what its client is from the client's first 16 bytes, and
// the client learns it from the server's answer; nothing is configured and nothing waits on
// a guess. Against a uroce peer the JSON exchange of perf_protocol.hpp follows; against
// perftest, run_perftest_client/server below speak perftest's lock-step TCP exchange with
// this side's own options (perftest's server takes none from its client either).
//
// perftest 6.06 exchanges no parameters, so mismatches are found from what its messages do
// carry, each reported in one line naming both values, before the data phase where possible:
// QP counts (-q) from the QP numbers of successive key messages, READ/atomic versus write/
// send tests from "outstanding reads", GID families, the BW client's reported size and
// iterations, received message lengths, SENDs arriving where none belong, and a peer that
// goes quiet. docs/perftest-interop.md lists what is caught and what cannot be.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cli/oob_socket.hpp"
#include "cli/perf_context.hpp"
#include "cli/perf_options.hpp"
#include "cli/perftest_wire.hpp"
#include "device/device.hpp"

namespace uroce::cli {

// Client: sends our greeting and reads the server's. Server: reads the client's greeting and,
// when it is a uroce client, answers it (a perftest client gets its answer from
// run_perftest_server). nullopt with `error` when the peer closed or said something else.
[[nodiscard]] std::optional<perftest::PeerVersion> greet_as_client(OobSocket& sock,
                                                                   std::string& error);
[[nodiscard]] std::optional<perftest::PeerVersion> greet_as_server(OobSocket& sock,
                                                                   std::string& error);

// The whole test against perftest; returns the exit code.
[[nodiscard]] int run_perftest_client(PerfOptions& o, std::unique_ptr<device::Device> dev,
                                      OobSocket& sock, const perftest::PeerVersion& peer);
[[nodiscard]] int run_perftest_server(PerfOptions& o, std::unique_ptr<device::Device> dev,
                                      OobSocket& sock, const perftest::PeerVersion& peer);

// Shared with perf_command.cpp (defined there).
[[nodiscard]] PerfSetup make_setup(const PerfOptions& o, uint32_t mtu);
void print_banner(const PerfOptions& o, const PerfSetup& s, const PerfContext& ctx);

}  // namespace uroce::cli
