// Mount namespace and overlays of `uroce exec` (exec_mounts.hpp).
#include "cli/exec_mounts.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace uroce::cli {
namespace fs = std::filesystem;
namespace {

std::string errno_text() {
  return std::strerror(errno);
}

bool write_proc(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

std::string enter_namespaces(bool root) {
  if (root) {
    if (unshare(CLONE_NEWNS) != 0) {
      return fmt::format("cannot create a mount namespace: {}", errno_text());
    }
    return "";
  }
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
    return fmt::format(
        "cannot create a user namespace ({}): run uroce exec as root, or allow unprivileged "
        "user namespaces (sysctl user.max_user_namespaces > 0; on Debian also "
        "kernel.unprivileged_userns_clone=1)",
        errno_text());
  }
  // A process without CAP_SETGID in the parent namespace must deny setgroups before it may
  // write its gid_map (user_namespaces(7)).
  if (!write_proc("/proc/self/setgroups", "deny") ||
      !write_proc("/proc/self/uid_map", fmt::format("{} {} 1\n", uid, uid)) ||
      !write_proc("/proc/self/gid_map", fmt::format("{} {} 1\n", gid, gid))) {
    return fmt::format("cannot map the user into its user namespace: {}", errno_text());
  }
  return "";
}

std::string mount_overlay(const std::string& lower, const std::string& upper,
                          const std::string& work, const std::string& target) {
  const std::string options = fmt::format("lowerdir={},upperdir={},workdir={}", lower, upper, work);
  if (mount("overlay", target.c_str(), "overlay", 0, options.c_str()) != 0) {
    return fmt::format("cannot mount an overlay of {} ({}): the kernel needs overlayfs{}", lower,
                       errno_text(),
                       geteuid() == 0 ? "" : " with unprivileged mounts (Linux 5.11 or later)");
  }
  return "";
}

std::string bind_mount(const std::string& from, const std::string& to, unsigned long flags) {
  if (mount(from.c_str(), to.c_str(), nullptr, MS_BIND | flags, nullptr) != 0) {
    return fmt::format("cannot bind {} into the view: {}", from, errno_text());
  }
  return "";
}

// A new /dev in `view` (a tmpfs) with every entry of the real one, reached through `real` (a
// recursive bind of /dev): directories and files bound (so /dev/pts, /dev/shm and the device
// nodes are the host's, and in a user namespace the nodes keep working: a bind keeps the
// flags of the mount it comes from, where a new mount there would be "nodev"), symlinks
// copied. An overlay of /dev would do as root, but overlayfs refuses devtmpfs as a lower
// layer in a user namespace.
std::string populate_dev(const std::string& real, const std::string& view) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(real, ec)) {
    const std::string name = e.path().filename().string();
    const std::string to = view + "/" + name;
    struct stat st {};
    if (lstat(e.path().c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      std::error_code lec;
      const fs::path target = fs::read_symlink(e.path(), lec);
      if (!lec) fs::create_symlink(target, to, lec);
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      if (mkdir(to.c_str(), st.st_mode & 07777) != 0) continue;
      if (std::string err = bind_mount(e.path(), to, MS_REC); !err.empty()) return err;
      continue;
    }
    const int fd = open(to.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) continue;
    close(fd);
    // Best effort: a node that cannot be bound (e.g. gone meanwhile) is left out.
    (void)bind_mount(e.path(), to, 0);
  }
  return ec ? fmt::format("cannot list /dev: {}", ec.message()) : "";
}

}  // namespace

std::string enter_view_namespace() {
  const bool root = geteuid() == 0;
  if (std::string e = enter_namespaces(root); !e.empty()) return e;
  // Nothing mounted from here on may propagate back to the host's namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return fmt::format("cannot make the mount namespace private: {}", errno_text());
  }
  // A scratch tmpfs for the overlays' upper and work directories. It is detached (and its
  // directory removed) once the overlays hold it, so nothing of it is left on the host.
  char scratch[] = "/tmp/uroce-exec-XXXXXX";
  if (mkdtemp(scratch) == nullptr) {
    return fmt::format("cannot create a directory in /tmp: {}", errno_text());
  }
  const std::string s = scratch;
  std::string error;
  if (mount("uroce-exec", scratch, "tmpfs", MS_NOSUID, "mode=0755") != 0) {
    error = fmt::format("cannot mount a tmpfs: {}", errno_text());
  }
  for (const char* d : {"/sys", "/sys-work", "/dev-real", "/dev-view"}) {
    if (error.empty() && mkdir((s + d).c_str(), 0755) != 0) {
      error = fmt::format("cannot create {}{}: {}", s, d, errno_text());
    }
  }
  if (error.empty()) error = mount_overlay("/sys/class", s + "/sys", s + "/sys-work", "/sys/class");
  if (error.empty()) error = bind_mount("/dev", s + "/dev-real", MS_REC);
  if (error.empty() &&
      mount("uroce-exec-dev", (s + "/dev-view").c_str(), "tmpfs", MS_NOSUID, "mode=0755") != 0) {
    error = fmt::format("cannot mount a tmpfs for /dev: {}", errno_text());
  }
  if (error.empty()) error = populate_dev(s + "/dev-real", s + "/dev-view");
  if (error.empty() && mount((s + "/dev-view").c_str(), "/dev", nullptr, MS_MOVE, nullptr) != 0) {
    error = fmt::format("cannot move the new /dev into place: {}", errno_text());
  }
  umount2(scratch, MNT_DETACH);
  rmdir(scratch);
  return error;
}

std::string write_view(const std::string& root, const std::vector<ViewFile>& files) {
  for (const ViewFile& f : files) {
    const fs::path path = fs::path(root) / f.path;
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) return fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message());
    if (f.symlink) {
      fs::remove(path, ec);
      fs::create_symlink(f.content, path, ec);
      if (ec) return fmt::format("cannot create {}: {}", path.string(), ec.message());
      continue;
    }
    const std::string tmp = path.string() + ".uroce-tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << f.content;
      if (!out) return fmt::format("cannot write {}: {}", tmp, errno_text());
    }
    if (rename(tmp.c_str(), path.c_str()) != 0) {
      return fmt::format("cannot write {}: {}", path.string(), errno_text());
    }
  }
  return "";
}

std::string write_dev_view(const std::string& dev_root, const std::vector<ViewFile>& files,
                           bool in_view_namespace) {
  for (size_t n = 0; n < files.size(); ++n) {
    const fs::path path = fs::path(dev_root) / files[n].path;
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) return fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message());
    if (fs::exists(path, ec)) continue;
    // Read-write for everyone, as udev makes the kernel's (UCX checks access(R_OK | W_OK)).
    const dev_t dev = makedev(kUverbsMajor, kUverbsMinorBase + static_cast<unsigned>(n));
    if (mknod(path.c_str(), S_IFCHR | 0666, dev) == 0) {
      chmod(path.c_str(), 0666);  // past the umask
      continue;
    }
    // No mknod (a user namespace): UCX accepts only a character device it may open, so
    // /dev/null stands in, bound over an empty file. Nothing opens it: the drop-in talks to no
    // kernel driver.
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return fmt::format("cannot create {}: {}", path.string(), errno_text());
    close(fd);
    if (in_view_namespace) (void)bind_mount("/dev/null", path.string(), 0);
  }
  return "";
}

}  // namespace uroce::cli
