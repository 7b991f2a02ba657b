// Path errors from the socket error queue: see path_errors.hpp.
#include "net/path_errors.hpp"

#include <linux/errqueue.h>
#include <netinet/icmp6.h>
#include <netinet/ip_icmp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace uroce::net {

void PathErrorLog::record(Kind kind, const IpAddr& dst, uint32_t mtu) {
  std::lock_guard lock(mu_);
  Entry* e = nullptr;
  for (Entry& x : entries_) {
    if (x.used && x.dst == dst) e = &x;
  }
  if (e == nullptr) {
    e = &entries_[next_];
    next_ = (next_ + 1) % kPeers;
    *e = Entry{dst, {}, true};
  }
  switch (kind) {
    case Kind::kPortUnreachable:
      ++e->report.port_unreachable;
      ++totals_.icmp_port_unreachable;
      break;
    case Kind::kUnreachable:
      ++e->report.unreachable;
      ++totals_.icmp_unreachable;
      break;
    case Kind::kTooBigIcmp:
      ++totals_.icmp_too_big;
      [[fallthrough]];
    case Kind::kTooBigLocal:
      ++e->report.too_big;
      if (mtu != 0) e->report.mtu = mtu;
      break;
  }
}

void PathErrorLog::record_errno(int err, const IpAddr& dst) {
  record(err == ECONNREFUSED ? Kind::kPortUnreachable : Kind::kUnreachable, dst, 0);
}

void PathErrorLog::count_tx_too_big() {
  std::lock_guard lock(mu_);
  ++totals_.tx_drop_too_big;
}

void PathErrorLog::count_tx_error() {
  std::lock_guard lock(mu_);
  ++totals_.tx_drop_error;
}

device::PathReport PathErrorLog::report(const IpAddr& dst, uint16_t udp_port) const {
  std::lock_guard lock(mu_);
  device::PathReport r;
  for (const Entry& e : entries_) {
    if (e.used && e.dst == dst) r = e.report;
  }
  r.udp_port = udp_port;
  return r;
}

device::IoCounters PathErrorLog::totals() const {
  std::lock_guard lock(mu_);
  return totals_;
}

bool is_reported_icmp_error(int err) {
  return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN ||
         err == ENONET || err == EPROTO || err == EACCES;
}

size_t drain_error_queue(int fd, PathErrorLog* log) {
  size_t n = 0;
  for (;;) {
    uint8_t payload[64];
    sockaddr_storage name{};
    alignas(cmsghdr) uint8_t control[256];
    iovec iov{payload, sizeof payload};
    msghdr h{};
    h.msg_name = &name;
    h.msg_namelen = sizeof name;
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = control;
    h.msg_controllen = sizeof control;
    if (recvmsg(fd, &h, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
      if (errno == EINTR) continue;
      return n;
    }
    ++n;
    if (log == nullptr) continue;
    // msg_name is the destination of the datagram the error is about.
    const auto dst = SockAddr::split(reinterpret_cast<const sockaddr*>(&name));
    if (!dst) continue;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
      const bool v4 = c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR;
      const bool v6 = c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_RECVERR;
      if (!v4 && !v6) continue;
      sock_extended_err ee{};
      std::memcpy(&ee, CMSG_DATA(c), sizeof ee);
      using Kind = PathErrorLog::Kind;
      if (ee.ee_origin == SO_EE_ORIGIN_LOCAL) {
        if (ee.ee_errno == EMSGSIZE) log->record(Kind::kTooBigLocal, dst->first, ee.ee_info);
      } else if (ee.ee_origin == SO_EE_ORIGIN_ICMP) {
        if (ee.ee_type == ICMP_DEST_UNREACH && ee.ee_code == ICMP_PORT_UNREACH) {
          log->record(Kind::kPortUnreachable, dst->first, 0);
        } else if (ee.ee_type == ICMP_DEST_UNREACH && ee.ee_code == ICMP_FRAG_NEEDED) {
          log->record(Kind::kTooBigIcmp, dst->first, ee.ee_info);
        } else if (ee.ee_type == ICMP_DEST_UNREACH) {
          log->record(Kind::kUnreachable, dst->first, 0);
        }
      } else if (ee.ee_origin == SO_EE_ORIGIN_ICMP6) {
        if (ee.ee_type == ICMP6_DST_UNREACH && ee.ee_code == ICMP6_DST_UNREACH_NOPORT) {
          log->record(Kind::kPortUnreachable, dst->first, 0);
        } else if (ee.ee_type == ICMP6_PACKET_TOO_BIG) {
          log->record(Kind::kTooBigIcmp, dst->first, ee.ee_info);
        } else if (ee.ee_type == ICMP6_DST_UNREACH) {
          log->record(Kind::kUnreachable, dst->first, 0);
        }
      }
    }
  }
}

}  // namespace uroce::net
