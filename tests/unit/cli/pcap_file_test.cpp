// PcapWriter -> PcapReader round trips, link types, pcapng, and damaged files.
#include "wire/pcap_file.hpp"

#include <gtest/gtest.h>

#include "run_command.hpp"
#include "temp_dir.hpp"
#include "test_frames.hpp"

namespace uroce::wire {
namespace {

using test::Bytes;

const Bytes kRoce = {0x11, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x27, 0x00, 0x00,
                     0x00, 0x05, 0x1F, 0x00, 0x00, 0x01, 0xDE, 0xAD, 0xBE, 0xEF};

IpContext context(bool ipv6) {
  IpContext ip;
  ip.ipv6 = ipv6;
  if (!ipv6) ip.src[10] = ip.src[11] = ip.dst[10] = ip.dst[11] = 0xFF;
  ip.src[15] = 3;
  ip.dst[15] = 2;
  ip.sport = 0xC123;
  return ip;
}

constexpr TimePoint kT0{1'732'870'000'123'456'789};

// Three frames: IPv4 RoCE, IPv6 RoCE, and an arbitrary frame written as is.
void write_sample(const std::string& path) {
  PcapWriter w;
  ASSERT_TRUE(w.open(path)) << w.error();
  ASSERT_TRUE(w.write_roce(kT0, context(false), 0x02, kRoce));
  ASSERT_TRUE(w.write_roce(kT0 + Nanos(1), context(true), 0x03, kRoce));
  w.write_frame(kT0 + Nanos(1'000'000'001), Bytes(60, 0x5A));
  w.close();
}

TEST(PcapFile, WriterReaderRoundTrip) {
  test::TempDir dir;
  const std::string path = dir.file("sample.pcap");
  write_sample(path);

  PcapReader r;
  ASSERT_TRUE(r.open(path)) << r.error();
  EXPECT_EQ(r.link_type(), LinkType::kEthernet);
  CapturedFrame f;
  RoceFrame roce;

  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(f.number, 1u);
  EXPECT_EQ(f.time, kT0);
  EXPECT_EQ(f.original_len, 14u + 20 + 8 + kRoce.size());
  Bytes expected(frame_size(context(false), kRoce.size()));
  ASSERT_EQ(encap_frame(context(false), 0x02, 64, kRoce, expected), expected.size());
  EXPECT_EQ(Bytes(f.bytes.begin(), f.bytes.end()), expected);

  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(f.number, 2u);
  EXPECT_EQ(f.time, kT0 + Nanos(1));
  ASSERT_EQ(decap_frame(r.link_type(), f.bytes, roce), FrameError::kOk);
  EXPECT_TRUE(roce.ip.ipv6);
  EXPECT_EQ(roce.tos, 0x03);
  EXPECT_EQ(Bytes(roce.roce.begin(), roce.roce.end()), kRoce);

  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(f.number, 3u);
  EXPECT_EQ(f.time, kT0 + Nanos(1'000'000'001));
  EXPECT_EQ(Bytes(f.bytes.begin(), f.bytes.end()), Bytes(60, 0x5A));

  EXPECT_FALSE(r.next(f));
  EXPECT_EQ(r.error(), "");
  EXPECT_FALSE(r.next(f));
}

TEST(PcapFile, PcapngReadsTheSame) {
  test::TempDir dir;
  const std::string pcap = dir.file("sample.pcap");
  const std::string pcapng = dir.file("sample.pcapng");
  write_sample(pcap);
  const auto conv = test::run("editcap -F pcapng " + test::quote(pcap) + " " + test::quote(pcapng));
  ASSERT_EQ(conv.exit_code, 0) << conv.err;

  PcapReader a;
  PcapReader b;
  ASSERT_TRUE(a.open(pcap)) << a.error();
  ASSERT_TRUE(b.open(pcapng)) << b.error();
  EXPECT_EQ(b.link_type(), LinkType::kEthernet);
  CapturedFrame fa;
  CapturedFrame fb;
  int n = 0;
  while (a.next(fa)) {
    ASSERT_TRUE(b.next(fb));
    EXPECT_EQ(fb.number, fa.number);
    EXPECT_EQ(fb.time, fa.time);
    EXPECT_EQ(Bytes(fb.bytes.begin(), fb.bytes.end()), Bytes(fa.bytes.begin(), fa.bytes.end()));
    ++n;
  }
  EXPECT_EQ(n, 3);
  EXPECT_FALSE(b.next(fb));
  EXPECT_EQ(b.error(), "");
}

TEST(PcapFile, LinkTypes) {
  test::TempDir dir;
  const std::pair<uint32_t, LinkType> cases[] = {
      {1, LinkType::kEthernet},    {101, LinkType::kRawIp}, {113, LinkType::kLinuxSll},
      {276, LinkType::kLinuxSll2}, {228, LinkType::kIpv4},  {229, LinkType::kIpv6},
  };
  for (const auto& [linktype, expected] : cases) {
    const std::string path = dir.file("link" + std::to_string(linktype) + ".pcap");
    test::write_file(path, test::pcap_file(linktype, {Bytes(40, 0x45)}));
    PcapReader r;
    ASSERT_TRUE(r.open(path)) << r.error();
    EXPECT_EQ(r.link_type(), expected) << linktype;
  }
}

// Offset of each record in a classic pcap file (24-byte file header, 16-byte record headers).
std::vector<size_t> record_offsets(const Bytes& file) {
  std::vector<size_t> offsets;
  size_t off = 24;
  while (off + 16 <= file.size()) {
    offsets.push_back(off);
    const uint32_t caplen = static_cast<uint32_t>(file[off + 8] | file[off + 9] << 8 |
                                                  file[off + 10] << 16 | file[off + 11] << 24);
    off += 16 + caplen;
  }
  return offsets;
}

TEST(PcapFile, TruncatedInAFrameKeepsTheEarlierFrames) {
  test::TempDir dir;
  const std::string full = dir.file("full.pcap");
  write_sample(full);
  const Bytes bytes = test::read_file(full);
  const auto offsets = record_offsets(bytes);
  ASSERT_EQ(offsets.size(), 3u);

  struct Cut {
    size_t at;
    const char* what;
  };
  const Cut cuts[] = {{offsets[2] + 16 + 30, "in frame 3's data"},
                      {offsets[2] + 7, "in frame 3's record header"}};
  for (const Cut& cut : cuts) {
    SCOPED_TRACE(cut.what);
    const std::string path = dir.file("cut.pcap");
    test::write_file(path, Bytes(bytes.begin(), bytes.begin() + static_cast<long>(cut.at)));
    PcapReader r;
    ASSERT_TRUE(r.open(path)) << r.error();
    CapturedFrame f;
    ASSERT_TRUE(r.next(f));
    const Bytes first(f.bytes.begin(), f.bytes.end());
    ASSERT_TRUE(r.next(f));
    EXPECT_EQ(f.number, 2u);
    EXPECT_FALSE(r.next(f));
    EXPECT_NE(r.error().find(path), std::string::npos) << r.error();
    EXPECT_NE(r.error().find("after frame 2"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find("truncated"), std::string::npos) << r.error();
    EXPECT_FALSE(r.next(f));
  }

  // Cut exactly between records: a shorter file, not a damaged one.
  const std::string path = dir.file("two.pcap");
  test::write_file(path, Bytes(bytes.begin(), bytes.begin() + static_cast<long>(offsets[2])));
  PcapReader r;
  ASSERT_TRUE(r.open(path));
  CapturedFrame f;
  EXPECT_TRUE(r.next(f));
  EXPECT_TRUE(r.next(f));
  EXPECT_FALSE(r.next(f));
  EXPECT_EQ(r.error(), "");
}

TEST(PcapFile, OpenFailuresNameTheFile) {
  test::TempDir dir;
  PcapReader r;
  const std::string missing = dir.file("missing.pcap");
  EXPECT_FALSE(r.open(missing));
  EXPECT_NE(r.error().find(missing), std::string::npos) << r.error();
  CapturedFrame f;
  EXPECT_FALSE(r.next(f));

  const std::string text = dir.file("notes.txt");
  test::write_file(text, Bytes(100, 'x'));
  EXPECT_FALSE(r.open(text));
  EXPECT_NE(r.error().find(text), std::string::npos) << r.error();

  PcapWriter w;
  const std::string nowhere = dir.file("no/such/dir/out.pcap");
  EXPECT_FALSE(w.open(nowhere));
  EXPECT_NE(w.error().find(nowhere), std::string::npos) << w.error();
  EXPECT_FALSE(w.write_roce(kT0, context(false), 0, kRoce));
}

}  // namespace
}  // namespace uroce::wire
