// The event fds handed to applications (ibv_comp_channel::fd, ibv_context::async_fd). The
// device's queues are eventfds that the device itself reads without blocking, so they must
// stay O_NONBLOCK; an application that sets or clears O_NONBLOCK on the fd it was given (UCX
// sets it on the completion channel and loops on ibv_get_cq_event until EAGAIN) must not
// change that. So the application gets its own open file: an epoll fd watching the queue's
// eventfd (level-triggered). It is readable exactly while the eventfd is, so poll/epoll/select
// on it work as before, and its O_NONBLOCK flag is the application's alone: the get-event
// verbs read it to choose between EAGAIN and waiting, as a read of the kernel's uverbs fd does.
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>

#include "ibverbs/objects.hpp"

namespace uroce::ibverbs {

int make_app_fd(int queue_fd) {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return -errno;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = queue_fd;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, queue_fd, &ev) != 0) {
    const int err = errno;
    close(ep);
    return -err;
  }
  return ep;
}

void close_app_fd(int fd) {
  if (fd >= 0) close(fd);
}

int app_fd_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return errno;
  return (flags & O_NONBLOCK) != 0 ? EAGAIN : 0;
}

int wait_app_fd(int fd) {
  if (int rc = app_fd_nonblocking(fd); rc != 0) return rc;
  return wait_readable(fd);
}

}  // namespace uroce::ibverbs
