#include "wire_test_util.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include "wire/header_layout.hpp"

namespace uroce::wire::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/uroce-wire-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string run_command(const std::string& command, int& exit_status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    exit_status = -1;
    return out;
  }
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

bool have_program(const std::string& name) {
  int status = 0;
  run_command("command -v " + name + " >/dev/null 2>&1", status);
  return status == 0;
}

std::string hex(std::span<const uint8_t> bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::vector<std::filesystem::path> capture_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(UROCE_SOURCE_DIR) / "tests/data/rxe")) {
    if (entry.path().extension() == ".pcap") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

uint64_t for_each_roce_frame(const std::filesystem::path& file,
                             const std::function<void(const CaptureRoce&)>& fn) {
  PcapReader reader;
  if (!reader.open(file.string())) {
    ADD_FAILURE() << file << ": " << reader.error();
    return 0;
  }
  CapturedFrame captured;
  uint64_t frames = 0;
  while (reader.next(captured)) {
    ++frames;
    RoceFrame frame;
    if (decap_frame(reader.link_type(), captured.bytes, frame) == FrameError::kOk) {
      fn(CaptureRoce{captured.number, frame});
    }
  }
  EXPECT_EQ(reader.error(), "") << file;
  return frames;
}

Headers random_headers(uint8_t opcode, std::mt19937_64& rng) {
  auto u32 = [&] { return static_cast<uint32_t>(rng()); };
  auto bit = [&] { return (rng() & 1) != 0; };
  Headers h;
  h.bth.opcode = opcode;
  h.bth.se = bit();
  h.bth.migreq = bit();
  h.bth.pkey = static_cast<uint16_t>(rng());
  h.bth.fecn = bit();
  h.bth.becn = bit();
  h.bth.dqpn = 2 + u32() % (0xFFFFFF - 1);
  h.bth.ackreq = bit();
  h.bth.psn = Psn(u32());
  h.deth = {u32(), u32() & 0xFFFFFF};
  h.feth.bits = u32();
  h.reth = {rng(), u32(), u32()};
  h.atomic_eth = {rng(), u32(), rng(), rng()};
  h.aeth = {static_cast<uint8_t>(rng()), u32() & 0xFFFFFF};
  h.atomic_ack_eth.orig = rng();
  h.immdt = u32();
  h.ieth_rkey = u32();
  return h;
}

size_t random_payload_len(uint8_t opcode, std::mt19937_64& rng, size_t max_len) {
  const OpcodeInfo& info = opcode_info(opcode);
  if (info.fixed_payload_len != 0) return info.fixed_payload_len;
  if ((info.flags & kPayload) == 0) return 0;
  return rng() % (max_len + 1);
}

std::vector<uint8_t> random_bytes(size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

}  // namespace uroce::wire::test
