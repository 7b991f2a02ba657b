// Helpers of the device integration tests: a private UDP port and reuseport registry per
// test, GIDs as hex text for the side channel, a deterministic byte pattern and its hash, a
// child process (fork+exec) spoken to line by line over pipes, and completion waits.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_port.hpp"
#include "uroce/connect.hpp"
#include "uroce/verbs.hpp"

namespace uroce::itest {

inline constexpr uint32_t kAllAccess =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

// A port no other test uses (never 4791; test_port.hpp).
inline uint16_t pick_udp_port() {
  return test::reserve_port();
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/uroce-itest-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string gid_hex(const Gid& g) {
  std::string s;
  char b[3];
  for (uint8_t v : g) {
    std::snprintf(b, sizeof b, "%02x", v);
    s += b;
  }
  return s;
}

inline Gid gid_from_hex(const std::string& s) {
  Gid g{};
  for (size_t i = 0; i < 16 && 2 * i + 1 < s.size(); ++i) {
    g[i] = static_cast<uint8_t>(std::stoul(s.substr(2 * i, 2), nullptr, 16));
  }
  return g;
}

inline uint8_t pattern_byte(uint64_t i, uint32_t seed) {
  return static_cast<uint8_t>((i * 131 + seed * 17 + (i >> 8)) & 0xFF);
}

inline void fill_pattern(uint8_t* p, size_t len, uint32_t seed) {
  for (size_t i = 0; i < len; ++i) p[i] = pattern_byte(i, seed);
}

inline uint64_t fnv1a(const uint8_t* p, size_t len) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

inline std::string join(const std::vector<uint32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

inline std::vector<uint32_t> split_u32(const std::string& s) {
  std::vector<uint32_t> v;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(static_cast<uint32_t>(std::stoul(item)));
  return v;
}

// Polls until `count` completions arrived or `timeout` passed; returns what arrived.
inline std::vector<Wc> wait_wcs(CompletionQueue& cq, size_t count,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  std::vector<Wc> out;
  const auto end = std::chrono::steady_clock::now() + timeout;
  Wc wc[32];
  while (out.size() < count && std::chrono::steady_clock::now() < end) {
    int n = cq.poll(std::span<Wc>(wc, std::min<size_t>(32, count - out.size())));
    for (int i = 0; i < n; ++i) out.push_back(wc[i]);
    if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return out;
}

// A child process spoken to over its stdin/stdout, one line per message.
class Child {
 public:
  // argv[0] is the program path; `prefix` is put before it (e.g. ip netns exec NS).
  explicit Child(std::vector<std::string> argv) {
    int in[2];
    int out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Child() {
    if (to_ >= 0) close(to_);
    if (from_ >= 0) close(from_);
    kill_now();
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }

  bool send(const std::string& line) {
    std::string l = line + "\n";
    return write(to_, l.data(), l.size()) == static_cast<ssize_t>(l.size());
  }

  // The next line, or nullopt after `timeout` or at EOF.
  std::optional<std::string> read_line(
      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{from_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char b[4096];
      ssize_t n = read(from_, b, sizeof b);
      if (n <= 0) return std::nullopt;
      buf_.append(b, static_cast<size_t>(n));
    }
  }

  std::optional<std::string> request(const std::string& line) {
    if (!send(line)) return std::nullopt;
    return read_line();
  }

  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }

  // Waits for a clean exit; the exit status, or -1.
  int wait_exit() {
    if (pid_ <= 0) return -1;
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
  std::string buf_;
};

inline std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> w;
  std::stringstream in(line);
  std::string s;
  while (in >> s) w.push_back(s);
  return w;
}

}  // namespace uroce::itest

namespace uroce::itest {

// One opened device with a PD, a CQ and a registered buffer.
struct Side {
  Side(Device d, size_t buf_bytes)
      : dev(std::move(d)),
        pd(std::move(dev.alloc_pd().value())),
        cq(std::move(dev.create_cq(16384).value())),
        buf(buf_bytes),
        mr(std::move(pd.reg_mr(buf.data(), buf.size(), kAllAccess).value())) {}

  QueuePair make_qp(QpType type) {
    QpInitAttr init;
    init.qp_type = type;
    init.send_cq = cq.id();
    init.recv_cq = cq.id();
    init.cap = QpCap{256, 1024, 2, 2, 64};
    return std::move(pd.create_qp(init).value());
  }

  Gid gid() const {
    Gid g{};
    (void)dev.query_gid(1, 1, g);
    return g;
  }

  Device dev;
  ProtectionDomain pd;
  CompletionQueue cq;
  std::vector<uint8_t> buf;
  MemoryRegion mr;
};

inline SendWr make_wr(uint64_t wr_id, WrOpcode op, const Sge* sge, size_t n_sge) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.send_flags = kSendSignaled;
  wr.sg_list = std::span<const Sge>(sge, n_sge);
  return wr;
}

inline OpenOptions loopback_options(uint16_t port, const std::string& registry) {
  OpenOptions o;
  o.netdevs = {"lo"};
  o.bind = {"127.0.0.1"};
  o.udp_port = port;
  o.registry_dir = registry;
  return o;
}

}  // namespace uroce::itest
