// Shared bits of the raw-UDP baseline programs: argument parsing and the result line.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace uroce::bench {

struct Args {
  std::string host = "127.0.0.1";
  int port = 19999;
  int size = 4112;       // one datagram's payload (a 4096-byte RoCE payload + BTH + ICRC)
  double seconds = 3;    // sender: how long to send; receiver: give up after 2x this idle
  long round_trips = 0;  // udp_pingpong: stop after this many (0: run for --seconds)
  bool help = false;
};

// --host H --port P --size S --seconds T; returns false (after printing why) on a bad one.
inline bool parse_args(int argc, char** argv, Args& a, const char* usage) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") {
      std::printf("%s\n", usage);
      a.help = true;
      return true;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", argv[0], k.c_str());
      return false;
    }
    const char* v = argv[++i];
    if (k == "--host") {
      a.host = v;
    } else if (k == "--port") {
      a.port = std::atoi(v);
    } else if (k == "--size") {
      a.size = std::atoi(v);
    } else if (k == "--seconds") {
      a.seconds = std::atof(v);
    } else if (k == "--round-trips") {
      a.round_trips = std::atol(v);
    } else {
      std::fprintf(stderr, "%s: unknown option %s\n", argv[0], k.c_str());
      return false;
    }
  }
  if (a.port <= 0 || a.port > 65535 || a.size <= 0 || a.size > 65507 || a.seconds <= 0 ||
      a.round_trips < 0) {
    std::fprintf(stderr,
                 "%s: --port 1..65535, --size 1..65507, --seconds > 0, --round-trips >= 0\n",
                 argv[0]);
    return false;
  }
  return true;
}

// host:port as an IPv4 socket address; false (after printing why) if host is not one.
inline bool ipv4_address(const char* program, const std::string& host, int port, sockaddr_in& out) {
  out = sockaddr_in{};
  out.sin_family = AF_INET;
  out.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &out.sin_addr) == 1) return true;
  std::fprintf(stderr, "%s: --host %s is not an IPv4 address (e.g. 127.0.0.1)\n", program,
               host.c_str());
  return false;
}

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// One JSON line: what bench/compare reads.
inline void print_result(const char* role, unsigned long long bytes, unsigned long long datagrams,
                         double seconds) {
  const double mbs = seconds > 0 ? static_cast<double>(bytes) / seconds / (1024.0 * 1024.0) : 0;
  std::printf(
      "{\"role\":\"%s\",\"bytes\":%llu,\"datagrams\":%llu,\"seconds\":%.6f,"
      "\"mbytes_per_sec\":%.2f,\"gbits_per_sec\":%.3f}\n",
      role, bytes, datagrams, seconds, mbs, mbs * 1024.0 * 1024.0 * 8 / 1e9);
}

}  // namespace uroce::bench
