// Two hosts, as a new user sets them up: two network namespaces joined by a veth pair (each
// with lo up and a default route through the peer), and for each a ToolEnv without any
// uroce variable, with its own XDG_RUNTIME_DIR (a generic variable, not a uroce one) so the
// reuseport registries of the two sides stay apart. Names and addresses are derived from
// `tag` and the pid, so parallel runs never meet; the UDP port is the default 4791, which is
// private to each namespace. Root only: create() reports a skip reason otherwise.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "ibverbs_test_util.hpp"

extern char** environ;

namespace uroce::ibtest {

inline int sh(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str());
}

class NetnsPair {
 public:
  // Empty on success, else why the test must be skipped. Fails the test (ASSERT) when a
  // command that should work does not.
  // Addresses are 10.<octet>.<pid % 250>.1 (A) and .2 (B).
  std::string create(const std::string& tag, int octet) {
    if (geteuid() != 0) return "needs root to create network namespaces";
    if (sh("ip -V") != 0) return "iproute2 (ip) not installed";
    // No uroce variable may leak in from the caller's environment.
    std::vector<std::string> uroce_vars;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (entry.starts_with("UROCE_")) uroce_vars.push_back(entry.substr(0, entry.find('=')));
    }
    for (const std::string& v : uroce_vars) unsetenv(v.c_str());

    const int id = getpid() % 100000;
    ns_a = "uroce-" + tag + "a-" + std::to_string(id);
    ns_b = "uroce-" + tag + "b-" + std::to_string(id);
    va = "ur" + tag + "a" + std::to_string(id);
    vb = "ur" + tag + "b" + std::to_string(id);
    const std::string net = "10." + std::to_string(octet) + "." + std::to_string(id % 250) + ".";
    addr_a = net + "1";
    addr_b = net + "2";
    tcp = static_cast<uint16_t>(20000 + id % 20000);
    created_ = true;
    for (const std::string& cmd : {
             "ip netns add " + ns_a,
             "ip netns add " + ns_b,
             "ip link add " + va + " type veth peer name " + vb,
             "ip link set " + va + " netns " + ns_a,
             "ip link set " + vb + " netns " + ns_b,
             "ip -n " + ns_a + " addr add " + addr_a + "/24 dev " + va,
             "ip -n " + ns_b + " addr add " + addr_b + "/24 dev " + vb,
             "ip -n " + ns_a + " link set " + va + " up",
             "ip -n " + ns_b + " link set " + vb + " up",
             "ip -n " + ns_a + " link set lo up",
             "ip -n " + ns_b + " link set lo up",
             "ip -n " + ns_a + " route add default via " + addr_b,
             "ip -n " + ns_b + " route add default via " + addr_a,
         }) {
      EXPECT_EQ(sh(cmd), 0) << cmd;
      if (::testing::Test::HasFailure()) return {};
    }
    for (auto* env : {&env_a, &env_b}) {
      env->vars.erase("UROCE_PORT");  // ToolEnv's private port: not wanted here
      char tmpl[] = "/tmp/uroce-netns-pair-XXXXXX";
      EXPECT_NE(mkdtemp(tmpl), nullptr);
      env->vars["XDG_RUNTIME_DIR"] = tmpl;
      dirs_.push_back(tmpl);
    }
    return {};
  }

  ~NetnsPair() {
    if (created_) {
      sh("ip netns del " + ns_a);
      sh("ip netns del " + ns_b);
    }
    for (const std::string& d : dirs_) sh("rm -rf " + d);
  }

  // `argv` run in namespace `ns`.
  [[nodiscard]] static std::vector<std::string> in(const std::string& ns,
                                                   std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"ip", "netns", "exec", ns});
    return argv;
  }

  std::string ns_a, ns_b, va, vb, addr_a, addr_b;
  uint16_t tcp = 0;  // a TCP port for out-of-band exchanges
  ToolEnv env_a, env_b;

 private:
  bool created_ = false;
  std::vector<std::string> dirs_;
};

}  // namespace uroce::ibtest
