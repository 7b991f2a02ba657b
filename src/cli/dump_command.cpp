// `uroce dump FILE [--json]`: prints every RoCE v2 packet of a pcap or pcapng capture, one
// line each, and counts the other frames on stderr. A damaged file still yields the packets
// before the damage, then an error and exit status 1. Output and options: docs/dump.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/analyze_capture.hpp"
#include "cli/command.hpp"
#include "cli/dump_format.hpp"
#include "wire/frame.hpp"
#include "wire/pcap_file.hpp"

namespace uroce::cli {
namespace {

// Output is formatted into one buffer and written in blocks of about this size.
constexpr size_t kFlushThreshold = 256 * 1024;

struct DumpOptions {
  std::string file;
  bool json = false;
  bool analyze = false;
  uint16_t port = 4791;  // the UDP port RoCE runs on in the capture
};

bool is_supported(wire::LinkType link) {
  switch (link) {
    case wire::LinkType::kEthernet:
    case wire::LinkType::kRawIp:
    case wire::LinkType::kLinuxSll:
    case wire::LinkType::kLinuxSll2:
    case wire::LinkType::kIpv4:
    case wire::LinkType::kIpv6:
      return true;
  }
  return false;
}

void write_out(fmt::memory_buffer& out) {
  std::fwrite(out.data(), 1, out.size(), stdout);
  out.clear();
}

int run_dump(const DumpOptions& options) {
  if (options.analyze) return run_analyze(options.file, options.json, options.port);
  wire::PcapReader reader;
  if (!reader.open(options.file)) {
    fmt::print(stderr,
               "uroce dump: cannot read {}; give a pcap or pcapng capture file: uroce dump "
               "FILE.pcap\n",
               reader.error());
    return kExitUsage;
  }
  const wire::LinkType link = reader.link_type();
  if (!is_supported(link)) {
    fmt::print(stderr,
               "uroce dump: {}: link type {} is not supported; capture on an Ethernet "
               "interface or with Linux cooked (SLL/SLL2) or raw IP framing\n",
               options.file, static_cast<uint32_t>(link));
    return kExitUsage;
  }

  fmt::memory_buffer out;
  out.reserve(kFlushThreshold + 4096);
  wire::CapturedFrame captured;
  wire::RoceFrame frame;
  frame.roce_port = options.port;
  DumpPacket packet;
  uint64_t roce_packets = 0;
  uint64_t other_frames = 0;
  bool have_first = false;
  TimePoint first_time{};
  while (reader.next(captured)) {
    if (!have_first) {
      first_time = captured.time;
      have_first = true;
    }
    const wire::FrameError status = wire::decap_frame(link, captured.bytes, frame);
    if (status != wire::FrameError::kOk && status != wire::FrameError::kRoceCut) {
      ++other_frames;
      continue;
    }
    ++roce_packets;
    decode_roce(captured.number, captured.time, frame, status, packet);
    if (options.json) {
      append_json_line(out, packet);
    } else {
      append_text_line(out, packet, captured.time - first_time);
    }
    if (out.size() >= kFlushThreshold) write_out(out);
  }
  write_out(out);
  std::fflush(stdout);

  fmt::print(stderr, "uroce dump: {} RoCE packets, {} other frames skipped\n", roce_packets,
             other_frames);
  if (!reader.error().empty()) {
    fmt::print(stderr, "uroce dump: {}\n", reader.error());
    return kExitFailure;
  }
  if (std::ferror(stdout)) {
    fmt::print(stderr, "uroce dump: writing the output failed\n");
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

Subcommand add_dump_command(CLI::App& app) {
  auto options = std::make_shared<DumpOptions>();
  CLI::App* sub =
      app.add_subcommand("dump", "Decode the RoCE v2 packets of a pcap or pcapng capture file");
  sub->add_option("FILE", options->file, "Capture file (pcap or pcapng)")->required();
  sub->add_flag("--json", options->json,
                "One JSON object per RoCE packet per line (JSON Lines) instead of text");
  sub->add_option("--port", options->port,
                  "UDP port that carries RoCE in the capture (default 4791; the UROCE_UDP_PORT "
                  "of the devices that were captured)")
      ->check(CLI::Range(1, 65535));
  sub->add_flag("--analyze", options->analyze,
                "Summarise per connection: retransmissions and causes, NAKs, RNR, CNPs, gaps, "
                "throughput");
  return Subcommand{sub, [options] { return run_dump(*options); }};
}

}  // namespace uroce::cli
