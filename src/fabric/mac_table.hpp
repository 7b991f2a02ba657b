// A learning bridge's MAC address table with a fixed number of entries (no allocation after
// construction): learn(source MAC, ingress port, now) on every frame, lookup(destination MAC,
// now) to forward. Entries older than the ageing time are ignored and reused, as a switch
// forgets a host that moved or went away (802.1D's default ageing is 300 s). When the table
// is full, a new address is not learnt and its frames are flooded, which stays correct.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "uroce/vocab/time.hpp"

namespace uroce::fabric {

using Mac = std::array<uint8_t, 6>;

class MacTable {
 public:
  explicit MacTable(size_t capacity = 256, Nanos ageing = std::chrono::seconds(300))
      : entries_(capacity), ageing_(ageing) {}

  void learn(const Mac& mac, uint32_t port, TimePoint now) {
    if (mac[0] & 1) return;  // a group address is never a source
    Entry* aged = nullptr;
    for (size_t i = 0; i < used_; ++i) {
      Entry& e = entries_[i];
      if (e.mac == mac) {
        e.port = port;
        e.seen = now;
        return;
      }
      if (!aged && now - e.seen > ageing_) aged = &e;
    }
    if (!aged && used_ < entries_.size()) aged = &entries_[used_++];
    if (aged) *aged = Entry{.mac = mac, .port = port, .seen = now};
  }

  // The port `mac` was last seen on, unless unknown, aged out or a group address.
  [[nodiscard]] std::optional<uint32_t> lookup(const Mac& mac, TimePoint now) const {
    if (mac[0] & 1) return std::nullopt;
    for (size_t i = 0; i < used_; ++i) {
      const Entry& e = entries_[i];
      if (e.mac == mac) {
        if (now - e.seen > ageing_) return std::nullopt;
        return e.port;
      }
    }
    return std::nullopt;
  }

  [[nodiscard]] size_t size() const { return used_; }

  static Mac mac_at(std::span<const uint8_t> bytes) {
    Mac m{};
    for (size_t i = 0; i < m.size(); ++i) m[i] = bytes[i];
    return m;
  }

 private:
  struct Entry {
    Mac mac{};
    uint32_t port = 0;
    TimePoint seen{};
  };
  // A linear scan: the forwarder joins a handful of hosts; hashing would buy nothing here.
  std::vector<Entry> entries_;
  size_t used_ = 0;  // entries_[0, used_) have been filled; aged ones are reused in place
  Nanos ageing_;
};

}  // namespace uroce::fabric
