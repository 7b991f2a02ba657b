#include "fault/impair_spec.hpp"

#include <array>
#include <charconv>
#include <cstdio>

#include "fabric/units.hpp"

namespace uroce::fault {
namespace {

enum class Kind : uint8_t { kPercent, kDuration, kSeed, kDir, kLimit, kRate, kSize, kFraction };

struct Key {
  std::string_view name;
  Kind kind;
};

// In the order format_impair_spec prints them.
constexpr std::array<Key, 19> kKeys = {{
    {"loss", Kind::kPercent},
    {"ge_p", Kind::kPercent},
    {"ge_r", Kind::kPercent},
    {"ge_bad_loss", Kind::kPercent},
    {"ge_good_loss", Kind::kPercent},
    {"delay", Kind::kDuration},
    {"jitter", Kind::kDuration},
    {"reorder", Kind::kPercent},
    {"dup", Kind::kPercent},
    {"corrupt", Kind::kPercent},
    {"ce", Kind::kPercent},
    {"seed", Kind::kSeed},
    {"dir", Kind::kDir},
    {"limit", Kind::kLimit},
    {"rate", Kind::kRate},
    {"queue", Kind::kSize},
    {"kmin", Kind::kSize},
    {"kmax", Kind::kSize},
    {"pmax", Kind::kFraction},
}};
constexpr uint64_t kMaxRate = 1'250'000'000'000;  // bytes/s: 10 Tbit/s

// Indices into kKeys of the keys checked together after parsing.
constexpr size_t kGeP = 1, kGeR = 2, kJitter = 6, kReorder = 7, kRate = 14, kQueue = 15, kKmin = 16,
                 kKmax = 17, kPmax = 18;

std::string known_keys() {
  std::string s;
  for (const Key& k : kKeys) {
    if (!s.empty()) s += ", ";
    s += k.name;
  }
  return s;
}

// Control and non-ASCII bytes as \xNN, so an error about any input stays one printable line.
std::string shown(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7F) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02X", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// "I" or "I.F" with at most `max_decimals` decimals, as I * 10^max_decimals + F (scaled).
// No sign, exponent, spaces or empty parts: "1.", ".5", "+1", "1e3" are refused.
std::optional<uint64_t> parse_fixed(std::string_view s, int max_decimals, uint64_t max_int) {
  const size_t dot = s.find('.');
  const std::string_view ip = s.substr(0, dot);
  const std::string_view fp =
      dot == std::string_view::npos ? std::string_view{} : s.substr(dot + 1);
  if (!all_digits(ip) || ip.size() > 12) return std::nullopt;
  if (dot != std::string_view::npos &&
      (!all_digits(fp) || fp.size() > static_cast<size_t>(max_decimals))) {
    return std::nullopt;
  }
  uint64_t i = 0;
  std::from_chars(ip.data(), ip.data() + ip.size(), i);
  if (i > max_int) return std::nullopt;
  uint64_t f = 0;
  for (int d = 0; d < max_decimals; ++d) {
    f = f * 10 + (static_cast<size_t>(d) < fp.size() ? static_cast<uint64_t>(fp[d] - '0') : 0);
  }
  uint64_t scale = 1;
  for (int d = 0; d < max_decimals; ++d) scale *= 10;
  return i * scale + f;
}

std::optional<Ppb> parse_percent(std::string_view v) {
  if (v.size() < 2 || v.back() != '%') return std::nullopt;
  const auto scaled = parse_fixed(v.substr(0, v.size() - 1), 7, 100);  // 10^-7 % = 1 ppb
  if (!scaled || *scaled > kCertain) return std::nullopt;
  return static_cast<Ppb>(*scaled);
}

struct Unit {
  std::string_view suffix;
  uint64_t ns;
  int decimals;  // what the unit can say exactly in whole nanoseconds
};
constexpr std::array<Unit, 4> kUnits = {{
    {"ns", 1, 0},
    {"us", 1'000, 3},
    {"ms", 1'000'000, 6},
    {"s", 1'000'000'000, 9},
}};

std::optional<Nanos> parse_duration(std::string_view v) {
  for (const Unit& u : kUnits) {
    if (v.size() <= u.suffix.size() || !v.ends_with(u.suffix)) continue;
    const std::string_view num = v.substr(0, v.size() - u.suffix.size());
    // "5ms" also ends with "s": the number part must then be all digits and dots.
    const auto scaled = parse_fixed(num, u.decimals, kMaxDelay.count() / u.ns);
    if (!scaled) return std::nullopt;
    uint64_t per = 1;
    for (int d = 0; d < u.decimals; ++d) per *= 10;
    const uint64_t ns = *scaled * (u.ns / per);
    if (ns > static_cast<uint64_t>(kMaxDelay.count())) return std::nullopt;
    return Nanos(static_cast<int64_t>(ns));
  }
  return std::nullopt;
}

std::string format_percent(Ppb p) {
  const uint32_t whole = p / 10'000'000;
  uint32_t frac = p % 10'000'000;
  std::string s = std::to_string(whole);
  if (frac != 0) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%07u", frac);
    std::string f = buf;
    while (!f.empty() && f.back() == '0') f.pop_back();
    s += "." + f;
  }
  return s + "%";
}

std::string format_duration(Nanos d) {
  const auto ns = static_cast<uint64_t>(d.count());
  for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
    if (ns % it->ns == 0) return std::to_string(ns / it->ns) + std::string(it->suffix);
  }
  return std::to_string(ns) + "ns";
}

// Bytes/s as tc's bit units when exact (parse_rate reads each form back to the same value).
std::string format_rate(uint64_t bytes_per_sec) {
  const uint64_t bits = bytes_per_sec * 8;
  if (bits % 1'000'000'000 == 0) return std::to_string(bits / 1'000'000'000) + "gbit";
  if (bits % 1'000'000 == 0) return std::to_string(bits / 1'000'000) + "mbit";
  if (bits % 1'000 == 0) return std::to_string(bits / 1'000) + "kbit";
  return std::to_string(bits) + "bit";
}

std::string format_size(uint64_t bytes) {
  if (bytes != 0 && bytes % (1024 * 1024) == 0) return std::to_string(bytes >> 20) + "MB";
  if (bytes != 0 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KB";
  return std::to_string(bytes);
}

std::string bad_value(std::string_view what, std::string_view key, std::string_view v, Kind kind) {
  const std::string head = std::string(what) + ": " + std::string(key) + ": '" + shown(v) + "' ";
  const std::string k(key);
  switch (kind) {
    case Kind::kPercent:
      return head + "is not a percentage; write " + k +
             "=P% with P from 0 to 100 and at most 7 decimals (e.g. " + k + "=2%)";
    case Kind::kDuration:
      return head + "is not a duration; write " + k +
             "=N with a unit ns, us, ms or s, at most 10s (e.g. " + k + "=50us)";
    case Kind::kSeed:
      return head + "is not a seed; write seed=N with N from 0 to 18446744073709551615";
    case Kind::kDir:
      return head + "is not a direction; write dir=tx, dir=rx or dir=both";
    case Kind::kLimit:
      return head + "is not a packet count; write limit=N with N from 1 to 65536";
    case Kind::kRate:
      return head +
             "is not a rate; write rate=R above 0 and at most 10tbit like tc: 1gbit, 100mbit, "
             "500kbit, or bytes/s as 125mbps";
    case Kind::kSize:
      return head + "is not a size; write " + k + "=N in bytes with an optional KB or MB (e.g. " +
             k + "=200KB)";
    case Kind::kFraction:
      return head +
             "is not a probability above 0; write pmax=F with F in (0, 1] or P% (e.g. "
             "pmax=0.2 or pmax=20%)";
  }
  return head;
}

// "0.2" (at most 9 decimals) or "20%", as parts per billion in (0, 1e9].
std::optional<Ppb> parse_fraction(std::string_view v) {
  std::optional<uint64_t> p;
  if (!v.empty() && v.back() == '%') {
    p = parse_percent(v);
  } else {
    p = parse_fixed(v, 9, 1);
  }
  if (!p || *p == 0 || *p > kCertain) return std::nullopt;
  return static_cast<Ppb>(*p);
}

// The value of one key into `spec`; false when malformed.
bool apply(std::string_view key, Kind kind, std::string_view v, ImpairSpec& spec,
           GilbertElliott& ge, Bottleneck& bn) {
  switch (kind) {
    case Kind::kPercent: {
      const auto p = parse_percent(v);
      if (!p) return false;
      if (key == "loss") spec.loss = *p;
      if (key == "ge_p") ge.p = *p;
      if (key == "ge_r") ge.r = *p;
      if (key == "ge_bad_loss") ge.bad_loss = *p;
      if (key == "ge_good_loss") ge.good_loss = *p;
      if (key == "reorder") spec.reorder = *p;
      if (key == "dup") spec.dup = *p;
      if (key == "corrupt") spec.corrupt = *p;
      if (key == "ce") spec.ce = *p;
      return true;
    }
    case Kind::kDuration: {
      const auto d = parse_duration(v);
      if (!d) return false;
      (key == "delay" ? spec.delay : spec.jitter) = *d;
      return true;
    }
    case Kind::kSeed: {
      uint64_t s = 0;
      if (!all_digits(v)) return false;
      const auto r = std::from_chars(v.data(), v.data() + v.size(), s);
      if (r.ec != std::errc{} || r.ptr != v.data() + v.size()) return false;
      spec.seed = s;
      return true;
    }
    case Kind::kDir:
      if (v == "tx") {
        spec.dir = ImpairDir::kTx;
      } else if (v == "rx") {
        spec.dir = ImpairDir::kRx;
      } else if (v == "both") {
        spec.dir = ImpairDir::kBoth;
      } else {
        return false;
      }
      return true;
    case Kind::kLimit: {
      uint64_t n = 0;
      if (!all_digits(v) || v.size() > 6) return false;
      std::from_chars(v.data(), v.data() + v.size(), n);
      if (n < 1 || n > kMaxLimit) return false;
      spec.limit = static_cast<uint32_t>(n);
      return true;
    }
    case Kind::kRate: {
      // The one parser of rates (`uroce switch --rate` uses it too); its own message is
      // replaced by one that names the key and shows the value printable.
      std::string ignored;
      const auto r = fabric::parse_rate(v, ignored);
      if (!r || *r == 0 || *r > kMaxRate) return false;
      bn.rate = *r;
      return true;
    }
    case Kind::kSize: {
      std::string ignored;
      const auto b = fabric::parse_size(v, ignored);
      if (!b) return false;
      (key == "queue" ? bn.queue : key == "kmin" ? bn.kmin : bn.kmax) = *b;
      return true;
    }
    case Kind::kFraction: {
      const auto p = parse_fraction(v);
      if (!p) return false;
      bn.pmax = *p;
      return true;
    }
  }
  return false;
}

// "" or the one-line error about how the bottleneck keys go together.
std::string check_bottleneck(const std::string& w, const std::array<bool, kKeys.size()>& seen,
                             const Bottleneck& bn) {
  if (!seen[kRate]) {
    for (const size_t k : {kQueue, kKmin, kKmax, kPmax}) {
      if (seen[k]) {
        return w + ": " + std::string(kKeys[k].name) +
               " needs rate: it belongs to the bottleneck queue (e.g. "
               "rate=100mbit,queue=200KB,kmin=20KB,kmax=100KB,pmax=0.2)";
      }
    }
    return {};
  }
  if (bn.queue == 0) return w + ": queue: 0 bytes holds no packet; give at least one packet's size";
  const int red = int{seen[kKmin]} + int{seen[kKmax]} + int{seen[kPmax]};
  if (red != 0 && red != 3) {
    const size_t missing = !seen[kKmin] ? kKmin : !seen[kKmax] ? kKmax : kPmax;
    return w + ": " + std::string(kKeys[missing].name) +
           " is missing: RED/ECN marking needs kmin, kmax and pmax together (e.g. "
           "kmin=20KB,kmax=100KB,pmax=0.2)";
  }
  if (red == 3) {
    if (bn.kmin >= bn.kmax) {
      return w + ": kmin: " + std::to_string(bn.kmin) + " bytes is not below kmax (" +
             std::to_string(bn.kmax) + " bytes); marking ramps from kmin up to kmax";
    }
    if (bn.kmax > bn.queue) {
      return w + ": kmax: " + std::to_string(bn.kmax) + " bytes exceeds queue (" +
             std::to_string(bn.queue) + " bytes); make kmax at most queue";
    }
  }
  return {};
}

}  // namespace

bool ImpairSpec::active() const {
  return loss != 0 || ge.has_value() || delay.count() != 0 || dup != 0 || corrupt != 0 || ce != 0 ||
         bottleneck.has_value();
}

std::string parse_impair_spec(std::string_view what, std::string_view text, ImpairSpec& out) {
  ImpairSpec spec;
  GilbertElliott ge;
  Bottleneck bn;
  std::array<bool, kKeys.size()> seen{};
  const std::string w(what);
  if (text.empty()) {
    out = spec;
    return {};
  }
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string_view item =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (item.empty()) return w + ": empty item (two commas in a row, or a comma at an end)";
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return w + ": '" + shown(item) + "' is not key=value; write e.g. loss=2%,delay=50us";
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    size_t k = 0;
    while (k < kKeys.size() && kKeys[k].name != key) ++k;
    if (k == kKeys.size()) {
      return w + ": unknown key '" + shown(key) + "'; known keys: " + known_keys();
    }
    if (seen[k]) return w + ": " + std::string(key) + " is given twice";
    seen[k] = true;
    if (!apply(key, kKeys[k].kind, value, spec, ge, bn)) {
      return bad_value(what, key, value, kKeys[k].kind);
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }

  const bool any_ge = seen[kGeP] || seen[kGeR] || seen[3] || seen[4];
  if (any_ge) {
    if (!seen[kGeP] || !seen[kGeR]) {
      return w + ": Gilbert-Elliott loss needs both ge_p and ge_r (e.g. ge_p=1%,ge_r=30%)";
    }
    if (ge.r == 0) return w + ": ge_r: 0% never leaves the bad state; give more than 0%";
    if (seen[0]) return w + ": loss and ge_* are two loss models; give one of them";
    spec.ge = ge;
  }
  if (seen[kJitter] && spec.delay.count() == 0) {
    return w +
           ": jitter needs delay: packets are held delay +- jitter (e.g. delay=1ms,jitter=100us)";
  }
  if (spec.jitter > spec.delay) {
    return w + ": jitter=" + format_duration(spec.jitter) +
           " exceeds delay=" + format_duration(spec.delay) +
           "; a hold cannot be negative: make jitter at most delay";
  }
  if (seen[kReorder] && spec.delay.count() == 0) {
    return w +
           ": reorder needs delay: reordered packets skip the delay and overtake the others "
           "(e.g. delay=1ms,reorder=5%)";
  }
  const std::string bad = check_bottleneck(w, seen, bn);
  if (!bad.empty()) return bad;
  if (seen[kRate]) spec.bottleneck = bn;
  out = spec;
  return {};
}

std::string format_impair_spec(const ImpairSpec& spec) {
  std::string s;
  auto add = [&](std::string_view key, const std::string& v) {
    if (!s.empty()) s += ",";
    s += std::string(key) + "=" + v;
  };
  if (spec.loss != 0) add("loss", format_percent(spec.loss));
  if (spec.ge) {
    add("ge_p", format_percent(spec.ge->p));
    add("ge_r", format_percent(spec.ge->r));
    if (spec.ge->bad_loss != kCertain) add("ge_bad_loss", format_percent(spec.ge->bad_loss));
    if (spec.ge->good_loss != 0) add("ge_good_loss", format_percent(spec.ge->good_loss));
  }
  if (spec.delay.count() != 0) add("delay", format_duration(spec.delay));
  if (spec.jitter.count() != 0) add("jitter", format_duration(spec.jitter));
  if (spec.reorder != 0) add("reorder", format_percent(spec.reorder));
  if (spec.dup != 0) add("dup", format_percent(spec.dup));
  if (spec.corrupt != 0) add("corrupt", format_percent(spec.corrupt));
  if (spec.ce != 0) add("ce", format_percent(spec.ce));
  if (spec.seed) add("seed", std::to_string(*spec.seed));
  if (spec.dir == ImpairDir::kRx) add("dir", "rx");
  if (spec.dir == ImpairDir::kBoth) add("dir", "both");
  if (spec.limit != 1000) add("limit", std::to_string(spec.limit));
  if (spec.bottleneck) {
    const Bottleneck& b = *spec.bottleneck;
    add("rate", format_rate(b.rate));
    if (b.queue != Bottleneck{}.queue) add("queue", format_size(b.queue));
    if (b.pmax != 0) {
      add("kmin", format_size(b.kmin));
      add("kmax", format_size(b.kmax));
      add("pmax", format_percent(b.pmax));
    }
  }
  return s;
}

}  // namespace uroce::fault
