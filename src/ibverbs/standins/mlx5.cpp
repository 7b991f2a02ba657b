// libmlx5.so.1 stand-in: perftest links libmlx5 for its mlx5dv_* extensions (DC, crypto,
// mkeys, DevX). A uroce device is not an mlx5 device, so every call answers "not supported"
// (EOPNOTSUPP), exactly what rdma-core's libmlx5 answers for a non-mlx5 context. Without this
// library Debian's libmlx5 would load, and it needs libibverbs' provider-private ABI.
#include <infiniband/mlx5dv.h>

#include <cerrno>

namespace {

template <typename T>
T* unsupported_ptr() {
  errno = EOPNOTSUPP;
  return nullptr;
}

int unsupported_int() {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

}  // namespace

extern "C" {

ibv_qp* mlx5dv_create_qp(ibv_context*, ibv_qp_init_attr_ex*, mlx5dv_qp_init_attr*) {
  return unsupported_ptr<ibv_qp>();
}

int mlx5dv_devx_general_cmd(ibv_context*, const void*, size_t, void*, size_t) {
  return unsupported_int();
}

ibv_context* mlx5dv_open_device(ibv_device*, mlx5dv_context_attr*) {
  return unsupported_ptr<ibv_context>();
}

mlx5dv_mkey* mlx5dv_create_mkey(mlx5dv_mkey_init_attr*) {
  return unsupported_ptr<mlx5dv_mkey>();
}

int mlx5dv_destroy_mkey(mlx5dv_mkey*) {
  return unsupported_int();
}

mlx5dv_qp_ex* mlx5dv_qp_ex_from_ibv_qp_ex(ibv_qp_ex*) {
  return unsupported_ptr<mlx5dv_qp_ex>();
}

int mlx5dv_crypto_login(ibv_context*, mlx5dv_crypto_login_attr*) {
  return unsupported_int();
}

mlx5dv_dek* mlx5dv_dek_create(ibv_context*, mlx5dv_dek_init_attr*) {
  return unsupported_ptr<mlx5dv_dek>();
}

int mlx5dv_dek_destroy(mlx5dv_dek*) {
  return unsupported_int();
}

}  // extern "C"
