// The status type of uroce_net's setup calls: a value or an errno-like code with a one-line
// message a user can act on ("UDP 127.0.0.1:4791 is in use by ... ; run ..."). The data path
// (send_burst / recv_burst) never allocates and reports through counters instead.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace uroce::net {

struct NetError {
  int code = 0;  // an errno value (EADDRINUSE, EACCES, EADDRNOTAVAIL, EINVAL, ...)
  std::string message;
};

template <class T>
class [[nodiscard]] NetResult {
 public:
  NetResult(T value) : v_(std::move(value)) {}         // NOLINT: implicit on purpose
  NetResult(NetError error) : v_(std::move(error)) {}  // NOLINT: implicit on purpose

  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const {
    assert(ok());
    return std::get<0>(v_);
  }
  [[nodiscard]] const NetError& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, NetError> v_;
};

}  // namespace uroce::net
