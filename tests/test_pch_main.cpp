// The owner of the test targets' shared precompiled header (tests/CMakeLists.txt): a
// GoogleTest program with no tests of its own, never run.
#include <gtest/gtest.h>
