// Helpers for the wire cross-check tests: temp dirs, running tools, random headers, and
// reading every RoCE packet of a capture file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "wire/frame.hpp"
#include "wire/packet.hpp"
#include "wire/pcap_file.hpp"

namespace uroce::wire::test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs `command` through /bin/sh; returns its stdout, sets `exit_status`.
std::string run_command(const std::string& command, int& exit_status);
[[nodiscard]] bool have_program(const std::string& name);

// Lower-case hex digits of `bytes`, two per byte, as scapy and tshark print them.
[[nodiscard]] std::string hex(std::span<const uint8_t> bytes);

// Every *.pcap in tests/data/rxe (the Soft-RoCE captures), sorted.
std::vector<std::filesystem::path> capture_files();

// One RoCE frame of a capture: its number and the decapsulated frame. The spans are valid
// during the callback only.
struct CaptureRoce {
  uint64_t number;
  const RoceFrame& frame;
};
// Calls `fn` for every frame decap_frame() recognises as RoCE; returns the frame count read
// (all frames). Fails the current test if the file cannot be read.
uint64_t for_each_roce_frame(const std::filesystem::path& file,
                             const std::function<void(const CaptureRoce&)>& fn);

// Headers with every field of `opcode`'s headers random (DestQP >= 2 so that dissectors do
// not take the packet for a MAD on QP0/QP1), TVer 0 and PadCnt left for build to compute.
Headers random_headers(uint8_t opcode, std::mt19937_64& rng);
// A payload length `opcode` accepts, at most `max_len`.
size_t random_payload_len(uint8_t opcode, std::mt19937_64& rng, size_t max_len);
std::vector<uint8_t> random_bytes(size_t n, std::mt19937_64& rng);

}  // namespace uroce::wire::test
