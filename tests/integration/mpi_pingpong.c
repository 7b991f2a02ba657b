/* An MPI ping-pong for uroce's Open MPI test (ucx_netns_test.cpp): two ranks bounce messages
 * of 1 B to 1 MiB, check every byte of every message that arrives, and print one line per
 * size: "size <bytes> iters <n> half_rtt_us <t> MBps <bw>". Rank 0 prints; the exit status is
 * non-zero (through MPI_Abort) when a byte is wrong. The pattern depends on the size, the
 * iteration and the sender, so a stale or misplaced buffer cannot pass. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pattern(int size, int iter, int from, int i) {
  return (unsigned char)(i * 131 + iter * 7 + size + from * 59);
}

static void fill(unsigned char* buf, int size, int iter, int from) {
  for (int i = 0; i < size; ++i) buf[i] = pattern(size, iter, from, i);
}

static void check(const unsigned char* buf, int size, int iter, int from) {
  for (int i = 0; i < size; ++i) {
    if (buf[i] != pattern(size, iter, from, i)) {
      fprintf(stderr, "mpi_pingpong: size %d iteration %d: byte %d is 0x%02x, expected 0x%02x\n",
              size, iter, i, buf[i], pattern(size, iter, from, i));
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks != 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: needs exactly 2 ranks, got %d\n", ranks);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int peer = 1 - rank;
  const int max_size = 1 << 20;
  unsigned char* out = malloc(max_size);
  unsigned char* in = malloc(max_size);
  for (int size = 1; size <= max_size; size *= 4) {
    const int iters = size >= (1 << 17) ? 50 : 1000;
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int it = 0; it < iters; ++it) {
      if (rank == 0) {
        fill(out, size, it, 0);
        MPI_Send(out, size, MPI_BYTE, peer, it, MPI_COMM_WORLD);
        MPI_Recv(in, size, MPI_BYTE, peer, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check(in, size, it, 1);
      } else {
        MPI_Recv(in, size, MPI_BYTE, peer, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check(in, size, it, 0);
        fill(out, size, it, 1);
        MPI_Send(out, size, MPI_BYTE, peer, it, MPI_COMM_WORLD);
      }
    }
    const double half_rtt = (MPI_Wtime() - start) / iters / 2;
    if (rank == 0) {
      printf("size %d iters %d half_rtt_us %.2f MBps %.1f\n", size, iters, half_rtt * 1e6,
             size / half_rtt / 1e6);
      fflush(stdout);
    }
  }
  free(out);
  free(in);
  MPI_Finalize();
  return 0;
}
