// The UROCE_IMPAIR grammar: every key's accepted forms and values, the canonical text, and
// every malformed case with the exact one-line error a user sees.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "fault/impair_spec.hpp"

namespace uroce::fault {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

ImpairSpec parse_ok(const std::string& text) {
  ImpairSpec s;
  const std::string err = parse_impair_spec("UROCE_IMPAIR", text, s);
  EXPECT_EQ(err, "") << text;
  return s;
}

std::string parse_err(const std::string& text) {
  ImpairSpec s;
  s.loss = 123;  // must stay as it was on error
  const std::string err = parse_impair_spec("UROCE_IMPAIR", text, s);
  EXPECT_EQ(s.loss, 123u) << text;
  return err;
}

TEST(ImpairSpec, EmptyIsInactive) {
  const ImpairSpec s = parse_ok("");
  EXPECT_FALSE(s.active());
  EXPECT_FALSE(s.impairs_tx());
  EXPECT_EQ(format_impair_spec(s), "");
  // A seed or direction alone impairs nothing either.
  EXPECT_FALSE(parse_ok("seed=4,dir=both").active());
}

TEST(ImpairSpec, Percentages) {
  EXPECT_EQ(parse_ok("loss=2%").loss, 20'000'000u);
  EXPECT_EQ(parse_ok("loss=0%").loss, 0u);
  EXPECT_EQ(parse_ok("loss=100%").loss, kCertain);
  EXPECT_EQ(parse_ok("loss=0.1%").loss, 1'000'000u);
  EXPECT_EQ(parse_ok("loss=0.0000001%").loss, 1u);
  EXPECT_EQ(parse_ok("loss=12.5%").loss, 125'000'000u);
  EXPECT_EQ(parse_ok("dup=3%").dup, 30'000'000u);
  EXPECT_EQ(parse_ok("corrupt=1%").corrupt, 10'000'000u);
  EXPECT_EQ(parse_ok("ce=5%").ce, 50'000'000u);
  EXPECT_EQ(parse_ok("delay=1ms,reorder=25%").reorder, 250'000'000u);
  EXPECT_TRUE(parse_ok("loss=2%").active());
  EXPECT_TRUE(parse_ok("ce=5%").active());
}

TEST(ImpairSpec, Durations) {
  EXPECT_EQ(parse_ok("delay=50us").delay, microseconds(50));
  EXPECT_EQ(parse_ok("delay=700ns").delay, nanoseconds(700));
  EXPECT_EQ(parse_ok("delay=2ms").delay, milliseconds(2));
  EXPECT_EQ(parse_ok("delay=1s").delay, seconds(1));
  EXPECT_EQ(parse_ok("delay=10s").delay, seconds(10));
  EXPECT_EQ(parse_ok("delay=1.5ms").delay, microseconds(1500));
  EXPECT_EQ(parse_ok("delay=0.25us").delay, nanoseconds(250));
  EXPECT_EQ(parse_ok("delay=0.000000001s").delay, nanoseconds(1));
  const ImpairSpec s = parse_ok("delay=50us,jitter=10us");
  EXPECT_EQ(s.jitter, microseconds(10));
  EXPECT_EQ(parse_ok("delay=50us,jitter=50us").jitter, microseconds(50));
  EXPECT_FALSE(parse_ok("delay=0us").active());
}

TEST(ImpairSpec, GilbertElliott) {
  const ImpairSpec s = parse_ok("ge_p=1%,ge_r=30%");
  ASSERT_TRUE(s.ge.has_value());
  EXPECT_EQ(s.ge->p, 10'000'000u);
  EXPECT_EQ(s.ge->r, 300'000'000u);
  EXPECT_EQ(s.ge->bad_loss, kCertain);
  EXPECT_EQ(s.ge->good_loss, 0u);
  EXPECT_TRUE(s.active());
  const ImpairSpec t = parse_ok("ge_r=10%,ge_good_loss=0.5%,ge_p=2%,ge_bad_loss=80%");
  ASSERT_TRUE(t.ge.has_value());
  EXPECT_EQ(t.ge->bad_loss, 800'000'000u);
  EXPECT_EQ(t.ge->good_loss, 5'000'000u);
}

TEST(ImpairSpec, SeedDirLimit) {
  EXPECT_EQ(parse_ok("loss=1%,seed=0").seed, 0u);
  EXPECT_EQ(parse_ok("loss=1%,seed=18446744073709551615").seed, UINT64_MAX);
  EXPECT_FALSE(parse_ok("loss=1%").seed.has_value());
  EXPECT_EQ(parse_ok("loss=1%").dir, ImpairDir::kTx);
  EXPECT_EQ(parse_ok("loss=1%,dir=tx").dir, ImpairDir::kTx);
  const ImpairSpec rx = parse_ok("loss=1%,dir=rx");
  EXPECT_FALSE(rx.impairs_tx());
  EXPECT_TRUE(rx.impairs_rx());
  const ImpairSpec both = parse_ok("loss=1%,dir=both");
  EXPECT_TRUE(both.impairs_tx());
  EXPECT_TRUE(both.impairs_rx());
  EXPECT_EQ(parse_ok("loss=1%").limit, 1000u);
  EXPECT_EQ(parse_ok("loss=1%,limit=1").limit, 1u);
  EXPECT_EQ(parse_ok("loss=1%,limit=65536").limit, 65536u);
}

TEST(ImpairSpec, CanonicalTextRoundTrips) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ce=5%,jitter=10us,delay=50us,loss=2%", "loss=2%,delay=50us,jitter=10us,ce=5%"},
      {"delay=1500us", "delay=1500us"},
      {"delay=2000us", "delay=2ms"},
      {"delay=1.25ms,reorder=0.5%", "delay=1250us,reorder=0.5%"},
      {"ge_p=1%,ge_r=30%,ge_bad_loss=100%", "ge_p=1%,ge_r=30%"},
      {"ge_p=1%,ge_r=30%,ge_bad_loss=90%,ge_good_loss=0.01%",
       "ge_p=1%,ge_r=30%,ge_bad_loss=90%,ge_good_loss=0.01%"},
      {"dup=1%,corrupt=0.0000001%,seed=7,dir=both,limit=20",
       "dup=1%,corrupt=0.0000001%,seed=7,dir=both,limit=20"},
      {"loss=1%,dir=tx,limit=1000", "loss=1%"},
      {"loss=1%,dir=rx", "loss=1%,dir=rx"},
  };
  for (const auto& [in, canonical] : cases) {
    const ImpairSpec s = parse_ok(in);
    EXPECT_EQ(format_impair_spec(s), canonical) << in;
    const ImpairSpec again = parse_ok(canonical);
    EXPECT_EQ(format_impair_spec(again), canonical);
  }
}

TEST(ImpairSpec, MalformedItemsAndKeys) {
  EXPECT_EQ(parse_err("loss"),
            "UROCE_IMPAIR: 'loss' is not key=value; write e.g. loss=2%,delay=50us");
  EXPECT_EQ(parse_err("loss=1%,,dup=1%"),
            "UROCE_IMPAIR: empty item (two commas in a row, or a comma at an end)");
  EXPECT_EQ(parse_err("loss=1%,"),
            "UROCE_IMPAIR: empty item (two commas in a row, or a comma at an end)");
  EXPECT_EQ(parse_err(",loss=1%"),
            "UROCE_IMPAIR: empty item (two commas in a row, or a comma at an end)");
  EXPECT_EQ(
      parse_err("lost=1%"),
      "UROCE_IMPAIR: unknown key 'lost'; known keys: loss, ge_p, ge_r, ge_bad_loss, "
      "ge_good_loss, delay, jitter, reorder, dup, corrupt, ce, seed, dir, limit, rate, queue, "
      "kmin, kmax, pmax");
  EXPECT_EQ(
      parse_err("LOSS=1%"),
      "UROCE_IMPAIR: unknown key 'LOSS'; known keys: loss, ge_p, ge_r, ge_bad_loss, "
      "ge_good_loss, delay, jitter, reorder, dup, corrupt, ce, seed, dir, limit, rate, queue, "
      "kmin, kmax, pmax");
  EXPECT_EQ(
      parse_err(" loss=1%"),
      "UROCE_IMPAIR: unknown key ' loss'; known keys: loss, ge_p, ge_r, ge_bad_loss, "
      "ge_good_loss, delay, jitter, reorder, dup, corrupt, ce, seed, dir, limit, rate, queue, "
      "kmin, kmax, pmax");
  EXPECT_EQ(
      parse_err("=1%"),
      "UROCE_IMPAIR: unknown key ''; known keys: loss, ge_p, ge_r, ge_bad_loss, "
      "ge_good_loss, delay, jitter, reorder, dup, corrupt, ce, seed, dir, limit, rate, queue, "
      "kmin, kmax, pmax");
  EXPECT_EQ(parse_err("loss=1%,loss=2%"), "UROCE_IMPAIR: loss is given twice");
  // Control bytes are shown escaped: the error stays one line.
  EXPECT_EQ(
      parse_err("lo\nss=1%"),
      "UROCE_IMPAIR: unknown key 'lo\\x0Ass'; known keys: loss, ge_p, ge_r, ge_bad_loss, "
      "ge_good_loss, delay, jitter, reorder, dup, corrupt, ce, seed, dir, limit, rate, queue, "
      "kmin, kmax, pmax");
}

TEST(ImpairSpec, Bottleneck) {
  const ImpairSpec s = parse_ok("rate=50mbit,queue=200KB,kmin=20KB,kmax=100KB,pmax=0.2");
  ASSERT_TRUE(s.bottleneck);
  EXPECT_TRUE(s.active());  // a bottleneck alone impairs
  EXPECT_TRUE(s.impairs_tx());
  EXPECT_EQ(s.bottleneck->rate, 6'250'000u);  // bytes/s
  EXPECT_EQ(s.bottleneck->queue, 204'800u);
  EXPECT_EQ(s.bottleneck->kmin, 20'480u);
  EXPECT_EQ(s.bottleneck->kmax, 102'400u);
  EXPECT_EQ(s.bottleneck->pmax, 200'000'000u);
  EXPECT_EQ(format_impair_spec(s), "rate=50mbit,queue=200KB,kmin=20KB,kmax=100KB,pmax=20%");
  // pmax as a fraction or a percentage; the same units as `uroce switch` (src/fabric/units).
  EXPECT_EQ(parse_ok("rate=1gbit,kmin=1,kmax=2,pmax=20%").bottleneck->pmax, 200'000'000u);
  EXPECT_EQ(parse_ok("rate=1gbit,kmin=1,kmax=2,pmax=1").bottleneck->pmax, kCertain);
  EXPECT_EQ(parse_ok("rate=1gbit,kmin=1,kmax=2,pmax=0.000000001").bottleneck->pmax, 1u);
  EXPECT_EQ(parse_ok("rate=1gbit").bottleneck->rate, 125'000'000u);
  EXPECT_EQ(parse_ok("rate=1gbit").bottleneck->queue, 512u * 1024);  // the default
  EXPECT_EQ(parse_ok("rate=1gbit").bottleneck->pmax, 0u);            // no RED
  EXPECT_EQ(parse_ok("rate=500kbit").bottleneck->rate, 62'500u);
  EXPECT_EQ(parse_ok("rate=125mbps").bottleneck->rate, 125'000'000u);  // bytes/s, as tc
  EXPECT_EQ(parse_ok("rate=1000000bit").bottleneck->rate, 125'000u);
  EXPECT_EQ(parse_ok("rate=1gbit,queue=2MB").bottleneck->queue, 2u << 20);
  EXPECT_EQ(parse_ok("rate=1gbit,queue=1500").bottleneck->queue, 1500u);
  // kmax may equal queue.
  EXPECT_EQ(parse_ok("rate=1gbit,queue=100KB,kmin=0,kmax=100KB,pmax=0.5").bottleneck->kmax,
            102'400u);
  for (const char* text :
       {"rate=50mbit", "rate=125kbit", "rate=1234kbit", "rate=1000008bit", "rate=2gbit,queue=1500",
        "rate=1gbit,queue=3MB,kmin=0,kmax=3MB,pmax=0.0000001%", "loss=1%,dir=both,rate=10mbit"}) {
    ImpairSpec a;
    ASSERT_EQ(parse_impair_spec("UROCE_IMPAIR", text, a), "") << text;
    EXPECT_EQ(format_impair_spec(a), text);
  }
}

TEST(ImpairSpec, MalformedBottleneck) {
  EXPECT_EQ(parse_err("rate=fast"),
            "UROCE_IMPAIR: rate: 'fast' is not a rate; write rate=R above 0 and at most 10tbit "
            "like tc: 1gbit, 100mbit, 500kbit, or bytes/s as 125mbps");
  for (const char* v : {"0", "unlimited", "1bit", "-1mbit", "1gbits", "11tbit", ""}) {
    EXPECT_NE(parse_err(std::string("rate=") + v).find("is not a rate"), std::string::npos) << v;
  }
  EXPECT_EQ(parse_err("rate=1gbit,queue=lots"),
            "UROCE_IMPAIR: queue: 'lots' is not a size; write queue=N in bytes with an optional "
            "KB or MB (e.g. queue=200KB)");
  EXPECT_EQ(parse_err("rate=1gbit,queue=0"),
            "UROCE_IMPAIR: queue: 0 bytes holds no packet; give at least one packet's size");
  EXPECT_EQ(parse_err("rate=1gbit,kmin=1,kmax=2,pmax=0"),
            "UROCE_IMPAIR: pmax: '0' is not a probability above 0; write pmax=F with F in (0, 1] "
            "or P% (e.g. pmax=0.2 or pmax=20%)");
  for (const char* v : {"1.5", "101%", "0%", "-0.1", ".2", "0.2x", "1e-1"}) {
    EXPECT_NE(
        parse_err(std::string("rate=1gbit,kmin=1,kmax=2,pmax=") + v).find("is not a probability"),
        std::string::npos)
        << v;
  }
  for (const char* key : {"queue", "kmin", "kmax", "pmax"}) {
    EXPECT_EQ(parse_err(std::string("loss=1%,") + key + "=1"),
              std::string("UROCE_IMPAIR: ") + key +
                  " needs rate: it belongs to the bottleneck queue (e.g. "
                  "rate=100mbit,queue=200KB,kmin=20KB,kmax=100KB,pmax=0.2)");
  }
  EXPECT_EQ(parse_err("rate=1gbit,kmin=20KB,pmax=0.2"),
            "UROCE_IMPAIR: kmax is missing: RED/ECN marking needs kmin, kmax and pmax together "
            "(e.g. kmin=20KB,kmax=100KB,pmax=0.2)");
  EXPECT_EQ(parse_err("rate=1gbit,kmax=20KB,pmax=0.2"),
            "UROCE_IMPAIR: kmin is missing: RED/ECN marking needs kmin, kmax and pmax together "
            "(e.g. kmin=20KB,kmax=100KB,pmax=0.2)");
  EXPECT_EQ(parse_err("rate=1gbit,kmin=100KB,kmax=20KB,pmax=0.2"),
            "UROCE_IMPAIR: kmin: 102400 bytes is not below kmax (20480 bytes); marking ramps "
            "from kmin up to kmax");
  EXPECT_EQ(parse_err("rate=1gbit,kmin=20KB,kmax=20KB,pmax=0.2"),
            "UROCE_IMPAIR: kmin: 20480 bytes is not below kmax (20480 bytes); marking ramps "
            "from kmin up to kmax");
  EXPECT_EQ(parse_err("rate=1gbit,queue=100KB,kmin=20KB,kmax=200KB,pmax=0.2"),
            "UROCE_IMPAIR: kmax: 204800 bytes exceeds queue (102400 bytes); make kmax at most "
            "queue");
  EXPECT_EQ(parse_err("rate=1gbit,rate=2gbit"), "UROCE_IMPAIR: rate is given twice");
  // Control bytes in a value stay escaped: one line.
  EXPECT_EQ(parse_err("rate=1\ngbit").find('\n'), std::string::npos);
}

TEST(ImpairSpec, MalformedPercentages) {
  for (const char* v : {"5", "5 %", "-1%", "+1%", "101%", "100.0000001%", "1e1%", "%", ".5%", "5.%",
                        "0.00000001%", "", "abc", "0x10%", "5%%"}) {
    EXPECT_EQ(parse_err(std::string("loss=") + v),
              std::string("UROCE_IMPAIR: loss: '") + v +
                  "' is not a percentage; write loss=P% with P from 0 to 100 and at most 7 "
                  "decimals (e.g. loss=2%)")
        << v;
  }
  // Every percentage key says its own name.
  for (const char* key :
       {"ge_p", "ge_r", "ge_bad_loss", "ge_good_loss", "reorder", "dup", "corrupt", "ce"}) {
    EXPECT_EQ(parse_err(std::string(key) + "=x"),
              std::string("UROCE_IMPAIR: ") + key + ": 'x' is not a percentage; write " + key +
                  "=P% with P from 0 to 100 and at most 7 decimals (e.g. " + key + "=2%)");
  }
}

TEST(ImpairSpec, MalformedDurations) {
  for (const char* v : {"50", "50 us", "50usec", "-5us", "5m", "11s", "10.000000001s", "0.5ns",
                        "1.0001us", "us", "ms", "s", "", "1e3us", "5US", "10001ms"}) {
    EXPECT_EQ(parse_err(std::string("delay=") + v),
              std::string("UROCE_IMPAIR: delay: '") + v +
                  "' is not a duration; write delay=N with a unit ns, us, ms or s, at most 10s "
                  "(e.g. delay=50us)")
        << v;
  }
  EXPECT_EQ(parse_err("delay=1ms,jitter=7"),
            "UROCE_IMPAIR: jitter: '7' is not a duration; write jitter=N with a unit ns, us, ms "
            "or s, at most 10s (e.g. jitter=50us)");
}

TEST(ImpairSpec, MalformedSeedDirLimit) {
  const std::string seed_err =
      "' is not a seed; write seed=N with N from 0 to 18446744073709551615";
  for (const char* v : {"", "-1", "x", "18446744073709551616", "1.5", " 1"}) {
    EXPECT_EQ(parse_err(std::string("seed=") + v),
              std::string("UROCE_IMPAIR: seed: '") + v + seed_err)
        << v;
  }
  for (const char* v : {"", "TX", "up", "tx "}) {
    EXPECT_EQ(parse_err(std::string("dir=") + v),
              std::string("UROCE_IMPAIR: dir: '") + v +
                  "' is not a direction; write dir=tx, dir=rx or dir=both");
  }
  for (const char* v : {"0", "65537", "-1", "", "1k", "1000000000000"}) {
    EXPECT_EQ(parse_err(std::string("limit=") + v),
              std::string("UROCE_IMPAIR: limit: '") + v +
                  "' is not a packet count; write limit=N with N from 1 to 65536")
        << v;
  }
}

TEST(ImpairSpec, InconsistentCombinations) {
  EXPECT_EQ(parse_err("jitter=10us"),
            "UROCE_IMPAIR: jitter needs delay: packets are held delay +- jitter (e.g. "
            "delay=1ms,jitter=100us)");
  EXPECT_EQ(parse_err("delay=10us,jitter=11us"),
            "UROCE_IMPAIR: jitter=11us exceeds delay=10us; a hold cannot be negative: make "
            "jitter at most delay");
  EXPECT_EQ(parse_err("reorder=5%"),
            "UROCE_IMPAIR: reorder needs delay: reordered packets skip the delay and overtake "
            "the others (e.g. delay=1ms,reorder=5%)");
  EXPECT_EQ(parse_err("ge_p=1%"),
            "UROCE_IMPAIR: Gilbert-Elliott loss needs both ge_p and ge_r (e.g. ge_p=1%,ge_r=30%)");
  EXPECT_EQ(parse_err("ge_r=1%,ge_bad_loss=50%"),
            "UROCE_IMPAIR: Gilbert-Elliott loss needs both ge_p and ge_r (e.g. ge_p=1%,ge_r=30%)");
  EXPECT_EQ(parse_err("ge_p=1%,ge_r=0%"),
            "UROCE_IMPAIR: ge_r: 0% never leaves the bad state; give more than 0%");
  EXPECT_EQ(parse_err("loss=1%,ge_p=1%,ge_r=30%"),
            "UROCE_IMPAIR: loss and ge_* are two loss models; give one of them");
}

TEST(ImpairSpec, ErrorsNameTheFlagWhenGivenOnTheCommandLine) {
  ImpairSpec s;
  EXPECT_EQ(parse_impair_spec("--impair", "loss=2", s),
            "--impair: loss: '2' is not a percentage; write loss=P% with P from 0 to 100 and at "
            "most 7 decimals (e.g. loss=2%)");
}

}  // namespace
}  // namespace uroce::fault
