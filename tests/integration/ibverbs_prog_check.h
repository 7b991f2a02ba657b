/* CHECK(cond, what) for the C verbs programs the drop-in tests run: on failure one "FAIL:" line
 * with errno, and exit status 1, so the test shows what broke. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, what)                                                \
  do {                                                                   \
    if (!(cond)) {                                                       \
      printf("FAIL: %s (errno %d: %s)\n", what, errno, strerror(errno)); \
      exit(1);                                                           \
    }                                                                    \
  } while (0)
