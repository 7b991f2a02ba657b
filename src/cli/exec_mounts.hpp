// The private mount namespace of `uroce exec`: /sys/class becomes an overlay of itself and
// /dev a tmpfs with the real /dev's entries bound in, so uroce's view (exec_view.hpp) can be
// added to both, visible to this process and its children only. Nothing on the host changes:
// the overlay's upper layer and the new /dev live in tmpfs of the namespace, and mounts do not
// propagate out (the namespace's mounts are made private).
//
// As root: unshare(CLONE_NEWNS). As another user: a user namespace first (mapping the user to
// itself), where the kernel allows unprivileged user namespaces (and overlayfs in them).
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
// devices 231:192+N, mode 0666, where mknod is allowed (root); else empty files, over which
// /dev/null is bound when `in_view_namespace` (UCX takes only a character device it may
// open and write, and nothing opens it).
[[nodiscard]] std::string write_dev_view(const std::string& dev_root,
                                         const std::vector<ViewFile>& files,
                                         bool in_view_namespace);

}  // namespace uroce::cli
