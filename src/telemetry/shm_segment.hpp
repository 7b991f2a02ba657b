// Writing and reading the shared-memory counters segment (layout: shm_layout.hpp).
//
//   auto pub = ShmPublisher::create("uroce_eth0", &error);   //
//   /dev/shm/uroce-<pid>-netns-<n>-uroce_eth0 pub->publish(snapshot); // progress thread only for
//   (auto& s : read_segments({.pid = 1234})) ...     // any process of the same user
//
// A segment whose pid is gone (or was reused by another program: the process start time
// differs) is stale: readers skip it and, when asked to clean, unlink it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/shm_layout.hpp"
#include "telemetry/snapshot.hpp"

namespace uroce::telemetry {

// $UROCE_STAT_DIR, or /dev/shm.
[[nodiscard]] std::string shm_dir();

// uroce-<pid>-netns-<netns>-<device>: segments are keyed by network namespace (the inode of
// /proc/self/ns/net) because /dev/shm is shared by all namespaces while a device's addresses,
// port and peers exist in one: `uroce stat` lists only its own namespace's processes.
[[nodiscard]] std::string segment_name(int pid, uint64_t netns, const std::string& device);
inline constexpr std::string_view kSegmentPrefix = "uroce-";  // how every segment's name starts

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); 0 when unreadable.
[[nodiscard]] uint64_t proc_start_ticks(int pid);

// What `uroce stat` names a process by: the base name of argv[0] from /proc/<pid>/cmdline,
// with argv[1] added for `uroce` (the subcommand: "uroce perf") and for interpreters
// ("python3 rc_pingpong.py"); "" when unreadable.
[[nodiscard]] std::string process_program(int pid);
// The same from a raw cmdline (NUL-separated arguments).
[[nodiscard]] std::string program_from_cmdline(const std::string& cmdline);

class ShmPublisher {
 public:
  // Creates <shm_dir>/segment_name(pid, netns, device) (or with .<n> when this process already
  // published a device of that name). counter_names: the order publish() values come in.
  static std::unique_ptr<ShmPublisher> create(const std::string& device,
                                              const std::vector<std::string>& counter_names,
                                              std::string* error);
  ~ShmPublisher();  // unmaps and unlinks
  ShmPublisher(const ShmPublisher&) = delete;
  ShmPublisher& operator=(const ShmPublisher&) = delete;

  void publish(const DeviceSnapshot& snap);
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  ShmPublisher() = default;
  ShmSegment* seg_ = nullptr;
  std::string path_;
};

struct ReadOptions {
  std::optional<int> pid;   // only this process
  std::string device;       // only this device name ("" = all)
  bool clean_stale = true;  // unlink segments of dead processes (when permitted)
};

// Every live segment of this network namespace in shm_dir(), sorted by pid then device. Segments
// that are not ours to read (another user's, without root) or of an unknown version are skipped;
// `notes`, when given, gets one line per skipped or cleaned segment.
[[nodiscard]] std::vector<DeviceSnapshot> read_segments(const ReadOptions& options,
                                                        std::vector<std::string>* notes = nullptr);

// Follows this network namespace's segments for a reader that must not lose what a process
// counted before it exited (`uroce exec`'s hw_counters files): each segment is held open from
// the first poll() that sees it, so after its process exits and unlinks it, one last read
// through the open file gets its final counters, which poll() then keeps returning.
// A process could start and end between two polls; new_segments_fd() (inotify on shm_dir())
// becomes readable when a segment is created, so a reader that polls on it too holds every
// segment from its first moments.
class SegmentFollower {
 public:
  SegmentFollower();
  ~SegmentFollower();
  SegmentFollower(const SegmentFollower&) = delete;
  SegmentFollower& operator=(const SegmentFollower&) = delete;

  // The latest counters of every segment seen so far, live or ended, in the order first seen.
  std::vector<DeviceSnapshot> poll();
  // Readable when a file was created in shm_dir(); -1 without inotify (then only the
  // caller's own pace finds new segments). take_created() reads what it reported.
  [[nodiscard]] int new_segments_fd() const { return inotify_fd_; }
  // Whether a uroce segment was among the files created since the last call (other
  // programs' files in /dev/shm wake the fd too: they are not worth a poll()).
  bool take_created();

 private:
  struct Held {
    std::string name;
    int pid = 0;
    int fd = -1;  // -1 once the process has ended and its last counters were read
    std::optional<DeviceSnapshot> last;
  };
  std::vector<Held> held_;
  int inotify_fd_ = -1;
};

// One segment by path; nullopt (and *error) when it cannot be read consistently.
[[nodiscard]] std::optional<DeviceSnapshot> read_segment(const std::string& path,
                                                         std::string* error);

}  // namespace uroce::telemetry
