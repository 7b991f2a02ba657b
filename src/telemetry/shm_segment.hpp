// Writing and reading the shared-memory counters segment (layout: shm_layout.hpp).
//
//   auto pub = ShmPublisher::create("uroce_eth0", &error);   // /dev/shm/uroce-<pid>-uroce_eth0
//   pub->publish(snapshot);                              // progress thread only
//   for (auto& s : read_segments({.pid = 1234})) ...     // any process of the same user
//
// A segment whose pid is gone (or was reused by another program: the process start time
// differs) is stale: readers skip it and, when asked to clean, unlink it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "telemetry/shm_layout.hpp"
#include "telemetry/snapshot.hpp"

namespace uroce::telemetry {

// $UROCE_STAT_DIR, or /dev/shm.
[[nodiscard]] std::string shm_dir();

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); 0 when unreadable.
[[nodiscard]] uint64_t proc_start_ticks(int pid);

class ShmPublisher {
 public:
  // Creates <shm_dir>/uroce-<pid>-<device> (or -<device>.<n> when this process already
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

// Every live segment in shm_dir(), sorted by pid then device. Segments that are not ours to
// read (another user's, without root) or of an unknown version are skipped; `notes`, when
// given, gets one line per skipped or cleaned segment.
[[nodiscard]] std::vector<DeviceSnapshot> read_segments(const ReadOptions& options,
                                                        std::vector<std::string>* notes = nullptr);

// One segment by path; nullopt (and *error) when it cannot be read consistently.
[[nodiscard]] std::optional<DeviceSnapshot> read_segment(const std::string& path,
                                                         std::string* error);

}  // namespace uroce::telemetry
