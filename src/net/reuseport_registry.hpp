// The registry of one UDP port number's reuseport groups: which process (and which UdpPort in
// it) owns which QPN slot on which address, and at which position the kernel keeps its socket.
//
// One small text file per port number and network namespace, in a per-user directory
// ($XDG_RUNTIME_DIR/uroce, else /tmp/uroce-<uid>, mode 0700; every member of a reuseport group
// has the same effective UID anyway): <dir>/netns-<inode>/port-<port>.reg, guarded with
// flock(LOCK_EX). The kernel keeps one reuseport group per namespace, so a process in another
// namespace on the same port must not appear in ours: its position would shift every
// position computed here, and steering would send our packets to a socket that is not there. Every
// change of a group (bind, close, program attach) happens while the lock is held, so the file
// mirrors the kernel's socks[] array:
//   - bind appends: a new member's position is the number of live members on its address;
//   - close moves the last member into the closed one's position (reuseport_detach_sock).
// A member killed without cleanup is found dead (its pid is gone, a zombie, or belongs to a
// newer process) when anyone joins, leaves or repairs; it is removed with the same rule and
// the epoch goes up, which tells the survivors to re-check their positions with probes.
//
// File format (one record per line, whitespace separated):
//   uroce-reuseport 1
//   epoch <n>
//   member <pid> <start_time> <token-hex> <slot> <address> <position> <verified_epoch> [cm]
//          [listen=<service-id-hex>]...
// The optional trailing fields (QP1 steering: the member runs a CM agent, and the CM Service
// IDs it listens on; docs/cm.md) go on the member's own line, so they go wherever the member
// goes (a dead member's listeners are pruned with it), a file without them still parses, and
// an older uroce, which ignores what follows a member's seventh field, still reads the file
// instead of taking it for corrupt (it drops the fields when it rewrites the file; their
// owners put them back at their next maintain()). Unknown trailing fields are ignored.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/ip_addr.hpp"
#include "net/result.hpp"

namespace uroce::net {

struct RegistryMember {
  pid_t pid = 0;
  uint64_t start_time = 0;  // /proc/<pid>/stat field 22, guards against pid reuse
  uint64_t token = 0;       // tells UdpPorts of one process apart
  uint32_t slot = 0;
  IpAddr addr;
  uint32_t position = 0;
  uint64_t verified_epoch = 0;    // epoch at which this member last proved its position
  bool cm_capable = false;        // runs a CM agent: may receive the QP1 datagrams nobody claims
  std::vector<uint64_t> listens;  // CM Service IDs it listens on (unique on its address)
  friend bool operator==(const RegistryMember&, const RegistryMember&) = default;
};

struct RegistryState {
  uint64_t epoch = 0;
  std::vector<RegistryMember> members;
  friend bool operator==(const RegistryState&, const RegistryState&) = default;
};

[[nodiscard]] std::string serialize_registry(const RegistryState& s);
// nullopt for a file that is not a registry; an empty string is an empty registry.
[[nodiscard]] std::optional<RegistryState> parse_registry(std::string_view text);

// Removes members[index] the way the kernel detaches a socket: the member with the highest
// position on the same address takes over the removed one's position.
void remove_member_like_kernel(RegistryState& s, size_t index);

// Members on `addr`, sorted by position.
[[nodiscard]] std::vector<RegistryMember> members_on(const RegistryState& s, const IpAddr& addr);

// The member on `addr` other than the one with `token` that listens on `service_id`, if any.
[[nodiscard]] const RegistryMember* listener_on(const RegistryState& s, const IpAddr& addr,
                                                uint64_t service_id, uint64_t except_token);
// CM Service IDs listened on `addr`, all members together.
[[nodiscard]] size_t listener_count_on(const RegistryState& s, const IpAddr& addr);

// A slot for a new member on `addr`: `requested` (>= 0) if no member on `addr` has it;
// otherwise (requested < 0) the lowest slot no member on any address has, so that one device
// can usually get the same slot on all its addresses; then the lowest slot free on `addr`.
[[nodiscard]] std::optional<uint32_t> choose_slot(const RegistryState& s, const IpAddr& addr,
                                                  int requested);

// Liveness of a registered process: exists, is not a zombie, and started at `start_time`.
using AliveFn = bool (*)(pid_t pid, uint64_t start_time);
[[nodiscard]] bool process_alive(pid_t pid, uint64_t start_time);
[[nodiscard]] uint64_t process_start_time(pid_t pid);  // 0 when unknown

// Removes every dead member (highest position first on each address) and bumps the epoch if
// any was removed. Returns the number removed.
size_t prune_dead_members(RegistryState& s, AliveFn alive = &process_alive);

// The locked registry file of one port number.
class RegistryFile {
 public:
  // Opens (creating) path_for(dir, <this process' network namespace>, port); `dir` empty
  // means the default directory.
  [[nodiscard]] static NetResult<RegistryFile> open(const std::string& dir, uint16_t port);
  [[nodiscard]] static std::string default_dir();
  // <dir>/netns-<netns>, and the registry file of `port` in it.
  [[nodiscard]] static std::string namespace_dir(const std::string& dir, uint64_t netns);
  [[nodiscard]] static std::string path_for(const std::string& dir, uint64_t netns, uint16_t port);

  RegistryFile(RegistryFile&& other) noexcept;
  RegistryFile& operator=(RegistryFile&& other) noexcept;
  RegistryFile(const RegistryFile&) = delete;
  RegistryFile& operator=(const RegistryFile&) = delete;
  ~RegistryFile();

  // RAII exclusive lock (flock), held while a group is changed.
  class Lock {
   public:
    explicit Lock(int fd);
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
    ~Lock();

   private:
    int fd_;
  };
  [[nodiscard]] Lock lock() const { return Lock(fd_); }

  // Call with the lock held. A corrupt file reads as empty (and is rewritten on store).
  [[nodiscard]] RegistryState load() const;
  // Writes `s` if it differs from what load() returned last, so idle members never make each
  // other re-read the file.
  void store(const RegistryState& s);
  // Change detection without the lock: true when someone wrote the file since our last
  // load/store (or is writing it right now). Allocates nothing: a busy device's progress
  // thread asks up to once a millisecond.
  [[nodiscard]] bool changed_since_last_seen() const;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  RegistryFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  // The whole file into `text`, in the storage it has.
  void read_into(std::string& text) const;

  int fd_ = -1;
  std::string path_;
  mutable std::string last_text_;
};

}  // namespace uroce::net
