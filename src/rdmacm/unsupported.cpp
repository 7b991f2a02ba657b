// What this librdmacm exports for ABI completeness but does not implement yet: multicast
// (UD multicast groups) and rsockets. Each call fails with ENOSYS and says so once, so a
// program reports "function not implemented" instead of misbehaving.
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>

#include <rdma/rsocket.h>

#include "rdmacm/state.hpp"

using namespace uroce::rdmacm;

namespace {

int unsupported(const char* what) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    report(std::string(what) + " is not supported by uroce's librdmacm yet (ENOSYS)");
  }
  return fail(ENOSYS);
}

}  // namespace

extern "C" {

int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) {
  return unsupported("rdma_join_multicast");
}
int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) {
  return unsupported("rdma_join_multicast_ex");
}
int rdma_leave_multicast(rdma_cm_id*, sockaddr*) {
  return unsupported("rdma_leave_multicast");
}

// rsockets (<rdma/rsocket.h>).
int rsocket(int, int, int) {
  return unsupported("rsockets");
}
int rbind(int, const sockaddr*, socklen_t) {
  return unsupported("rsockets");
}
int rlisten(int, int) {
  return unsupported("rsockets");
}
int raccept(int, sockaddr*, socklen_t*) {
  return unsupported("rsockets");
}
int rconnect(int, const sockaddr*, socklen_t) {
  return unsupported("rsockets");
}
int rshutdown(int, int) {
  return unsupported("rsockets");
}
int rclose(int) {
  return unsupported("rsockets");
}
ssize_t rrecv(int, void*, size_t, int) {
  return unsupported("rsockets");
}
ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) {
  return unsupported("rsockets");
}
ssize_t rrecvmsg(int, msghdr*, int) {
  return unsupported("rsockets");
}
ssize_t rsend(int, const void*, size_t, int) {
  return unsupported("rsockets");
}
ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
  return unsupported("rsockets");
}
ssize_t rsendmsg(int, const msghdr*, int) {
  return unsupported("rsockets");
}
ssize_t rread(int, void*, size_t) {
  return unsupported("rsockets");
}
ssize_t rreadv(int, const iovec*, int) {
  return unsupported("rsockets");
}
ssize_t rwrite(int, const void*, size_t) {
  return unsupported("rsockets");
}
ssize_t rwritev(int, const iovec*, int) {
  return unsupported("rsockets");
}
int rpoll(pollfd*, nfds_t, int) {
  return unsupported("rsockets");
}
int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) {
  return unsupported("rsockets");
}
int rgetpeername(int, sockaddr*, socklen_t*) {
  return unsupported("rsockets");
}
int rgetsockname(int, sockaddr*, socklen_t*) {
  return unsupported("rsockets");
}
int rsetsockopt(int, int, int, const void*, socklen_t) {
  return unsupported("rsockets");
}
int rgetsockopt(int, int, int, void*, socklen_t*) {
  return unsupported("rsockets");
}
int rfcntl(int, int, ...) {
  return unsupported("rsockets");
}
off_t riomap(int, void*, size_t, int, int, off_t) {
  return unsupported("rsockets");
}
int riounmap(int, void*, size_t) {
  return unsupported("rsockets");
}
size_t riowrite(int, const void*, size_t, off_t, int) {
  unsupported("rsockets");
  return 0;
}

}  // extern "C"
