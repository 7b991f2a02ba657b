/* Linked against the libmlx5.so.1 / libefa.so.1 stand-ins (build/lib), run by
 * ibverbs_standins_test.cpp: calls functions of each family and prints what they answer. */
#include <errno.h>
#include <infiniband/efadv.h>
#include <infiniband/mlx5dv.h>
#include <stdio.h>
#include <string.h>

static const char* err(int e) {
  return e == EOPNOTSUPP ? "EOPNOTSUPP" : strerror(e);
}

int main(void) {
  printf("mlx5dv_is_supported: %d\n", mlx5dv_is_supported(NULL) ? 1 : 0);
  mlx5dv_devx_destroy_event_channel(NULL); /* void: returns, touches nothing */
  printf("mlx5dv_devx_destroy_event_channel: returned\n");
  int rc;
  errno = 0;
  struct ibv_qp* qp = efadv_create_driver_qp(NULL, NULL, 0);
  printf("efadv_create_driver_qp: %s errno %s\n", qp == NULL ? "NULL" : "object", err(errno));
  errno = 0;
  struct mlx5dv_devx_event_channel* ch = mlx5dv_devx_create_event_channel(NULL, 0);
  printf("mlx5dv_devx_create_event_channel: %s errno %s\n", ch == NULL ? "NULL" : "object",
         err(errno));
  errno = 0;
  rc = mlx5dv_query_device(NULL, NULL);
  printf("mlx5dv_query_device: %s errno %s\n", err(rc), err(errno));
  errno = 0;
  rc = efadv_query_ah(NULL, NULL, 0);
  printf("efadv_query_ah: %s errno %s\n", err(rc), err(errno));
  errno = 0;
  ssize_t n = mlx5dv_devx_get_event(NULL, NULL, 0);
  printf("mlx5dv_devx_get_event: %zd errno %s\n", n, err(errno));
  errno = 0;
  rc = mlx5dv_vfio_get_events_fd(NULL);
  printf("mlx5dv_vfio_get_events_fd: %d errno %s\n", rc, err(errno));
  errno = 0;
  rc = mlx5dv_init_obj(NULL, 0);
  printf("mlx5dv_init_obj: %s errno %s\n", err(rc), err(errno));
  /* Hand-written (perftest): unchanged. */
  errno = 0;
  struct ibv_context* ctx = mlx5dv_open_device(NULL, NULL);
  printf("mlx5dv_open_device: %s errno %s\n", ctx == NULL ? "NULL" : "object", err(errno));
  return 0;
}
