// The private mount namespace of `uroce exec`: /sys/class and /dev become overlays of
// themselves with uroce's view added on top (exec_view.hpp), visible to this process and its
// children only. Nothing on the host changes: the overlays' upper layers live in a tmpfs of
// the namespace, and mounts do not propagate out (the namespace's mounts are made private).
//
// As root: unshare(CLONE_NEWNS). As another user: a user namespace first (mapping the user to
// itself), where the kernel allows unprivileged user namespaces; there a new mount is
// "nodev", so the character devices of /dev (null, zero, tty, ...) are bind-mounted into the
// overlay from the real /dev to keep working.
#pragma once

#include <string>
#include <vector>

#include "cli/exec_view.hpp"

namespace uroce::cli {

// Enters a new mount namespace (and user namespace when not root) and mounts the overlays.
// Returns "" on success, else a one-line reason (what failed and how to fix it).
[[nodiscard]] std::string enter_view_namespace();

// Writes `files` under `root` (creating directories); replaces files that exist (atomically,
// through a temporary and rename, so a reader never sees a half-written counter). "" on
// success, else the first error.
[[nodiscard]] std::string write_view(const std::string& root, const std::vector<ViewFile>& files);

// Creates /dev/infiniband/uverbs<N> (`files` from dev_view()) under `dev_root`: character
// devices 231:192+N where mknod is allowed (root), else empty regular files.
[[nodiscard]] std::string write_dev_view(const std::string& dev_root,
                                         const std::vector<ViewFile>& files);

}  // namespace uroce::cli
