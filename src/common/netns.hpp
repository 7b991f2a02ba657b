// The network namespace this process runs in, as a number: the inode of /proc/self/ns/net
// (what `lsns -t net` and `ip netns identify` go by). Everything uroce shares between
// processes through the filesystem or shared memory (the reuseport registry, the telemetry
// segments `uroce stat` reads) is keyed by it, because the kernel keeps sockets, reuseport
// groups and routes per namespace: two processes in different namespaces on the same UDP
// port are unrelated and must not see each other's records. Not for src/wire or
// src/transport (it reads /proc).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

namespace uroce {

// 0 when /proc is not mounted (then every such process shares key 0, as before keying).
[[nodiscard]] inline uint64_t netns_inode() {
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

// "netns-<inode>": the directory or name component that keys shared state.
[[nodiscard]] inline std::string netns_key(uint64_t inode) {
  return "netns-" + std::to_string(inode);
}

}  // namespace uroce
