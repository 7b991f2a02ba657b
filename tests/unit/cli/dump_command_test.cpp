// Runs the built `uroce dump` as a subprocess: on every real Soft-RoCE capture (checked
// field by field against tshark), on pcapng, on a damaged file, on packets uroce and scapy
// wrote, and with bad arguments.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_command.hpp"
#include "temp_dir.hpp"
#include "test_frames.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"
#include "wire/pcap_file.hpp"

namespace uroce::cli {
namespace {

using nlohmann::json;
using test::Bytes;
using test::quote;
using test::run;

const std::string kUroce = std::string(UROCE_BINARY_DIR) + "/bin/uroce";
const std::string kCaptures = std::string(UROCE_SOURCE_DIR) + "/tests/data/rxe";

std::vector<std::string> captures() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(kCaptures)) {
    if (entry.path().extension() == ".pcap") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

test::CommandResult dump(const std::string& file, bool as_json = true) {
  return run(kUroce + " dump " + (as_json ? "--json " : "") + quote(file));
}

std::vector<json> parse_lines(const std::string& out) {
  std::vector<json> objects;
  for (const std::string& line : test::lines(out)) objects.push_back(json::parse(line));
  return objects;
}

// tshark's view of the RoCE frames of a capture: one row of fields per frame.
struct TsharkRow {
  uint64_t frame = 0;
  unsigned opcode = 0;
  uint32_t psn = 0;
  uint32_t dqpn = 0;
  std::string msn;  // empty when the packet has no AETH
  std::string dma_len;
  std::string src_qp;
};

std::vector<TsharkRow> tshark_rows(const std::string& file) {
  const auto r = run("tshark -r " + quote(file) +
                     " -Y udp.port==4791 -T fields -E separator=, -E occurrence=f"
                     " -e frame.number -e infiniband.bth.opcode -e infiniband.bth.psn"
                     " -e infiniband.bth.destqp -e infiniband.aeth.msn -e infiniband.reth.dmalen"
                     " -e infiniband.deth.srcqp");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<TsharkRow> rows;
  for (const std::string& line : test::lines(r.out)) {
    std::vector<std::string> f;
    size_t start = 0;
    for (size_t comma; (comma = line.find(',', start)) != std::string::npos; start = comma + 1) {
      f.push_back(line.substr(start, comma - start));
    }
    f.push_back(line.substr(start));
    EXPECT_EQ(f.size(), 7u) << line;
    if (f.size() != 7) continue;
    rows.push_back({std::stoull(f[0]), static_cast<unsigned>(std::stoul(f[1])),
                    static_cast<uint32_t>(std::stoul(f[2])),
                    static_cast<uint32_t>(std::stoul(f[3], nullptr, 0)), f[4], f[5], f[6]});
  }
  return rows;
}

size_t frame_count(const std::string& file) {
  return test::lines(run("tshark -r " + quote(file) + " -T fields -e frame.number").out).size();
}

TEST(DumpCommand, EveryCaptureMatchesTshark) {
  const auto files = captures();
  ASSERT_GE(files.size(), 7u);  // the seven Soft-RoCE captures of tests/data/rxe/README.md
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const auto r = dump(file);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto packets = parse_lines(r.out);
    const auto rows = tshark_rows(file);
    ASSERT_FALSE(rows.empty());
    ASSERT_EQ(packets.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const json& p = packets[i];
      const TsharkRow& t = rows[i];
      SCOPED_TRACE(p.dump());
      EXPECT_FALSE(p.contains("error"));
      EXPECT_EQ(p["frame"], t.frame);
      EXPECT_EQ(p["opcode_value"], t.opcode);
      EXPECT_EQ(p["psn"], t.psn);
      EXPECT_EQ(p["dqpn"], t.dqpn);
      EXPECT_EQ(p["icrc_ok"], true);
      EXPECT_EQ(p["dport"], 4791);
      if (t.msn.empty()) {
        EXPECT_FALSE(p.contains("aeth"));
      } else {
        EXPECT_EQ(p["aeth"]["msn"], std::stoul(t.msn));
      }
      if (!t.dma_len.empty()) {
        EXPECT_EQ(p["reth"]["dma_len"], std::stoul(t.dma_len));
      }
      if (!t.src_qp.empty()) {
        EXPECT_EQ(p["deth"]["src_qp"], std::stoul(t.src_qp, nullptr, 0));
      }
    }
    const size_t others = frame_count(file) - rows.size();
    EXPECT_EQ(r.err, "uroce dump: " + std::to_string(rows.size()) + " RoCE packets, " +
                         std::to_string(others) + " other frames skipped\n");
  }
}

TEST(DumpCommand, TextLines) {
  const std::string file = kCaptures + "/imm.pcap";
  const auto r = dump(file, false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto text = test::lines(r.out);
  ASSERT_EQ(text.size(), parse_lines(dump(file).out).size());
  // Cross-checked with `tshark -r imm.pcap -V`: frame numbers, times since the first frame,
  // immediate data, RETH and AETH fields.
  EXPECT_EQ(text[0],
            "  10 0.060684 10.77.0.3:50673 -> 10.77.0.2:4791 RC_SEND_ONLY_WITH_IMMEDIATE "
            "dqpn=0x000027 psn=6636321 ackreq imm=0x11223344 len=64 icrc=ok");
  EXPECT_EQ(text[1],
            "  11 0.063193 10.77.0.2:50673 -> 10.77.0.3:4791 RC_ACKNOWLEDGE dqpn=0x000027 "
            "psn=6636321 aeth=ACK msn=1 len=0 icrc=ok");
  EXPECT_EQ(text[6],
            "  16 0.077766 10.77.0.3:50673 -> 10.77.0.2:4791 RC_RDMA_WRITE_FIRST dqpn=0x000027 "
            "psn=6636325 va=0x10e3c000 rkey=0x0000190e dma_len=2500 len=1024 icrc=ok");
}

TEST(DumpCommand, PcapngGivesTheSameOutput) {
  test::TempDir dir;
  for (const char* name : {"rc_pingpong", "ud_pingpong"}) {
    const std::string pcap = kCaptures + "/" + name + ".pcap";
    const std::string pcapng = dir.file(std::string(name) + ".pcapng");
    const auto conv = run("editcap -F pcapng " + quote(pcap) + " " + quote(pcapng));
    ASSERT_EQ(conv.exit_code, 0) << conv.err;
    for (bool as_json : {true, false}) {
      const auto a = dump(pcap, as_json);
      const auto b = dump(pcapng, as_json);
      EXPECT_EQ(b.exit_code, 0) << b.err;
      EXPECT_FALSE(b.out.empty());
      EXPECT_EQ(b.out, a.out);
      EXPECT_EQ(b.err, a.err);
    }
  }
}

// Byte offset of each record in a classic pcap file.
std::vector<size_t> record_offsets(const Bytes& file) {
  std::vector<size_t> offsets;
  for (size_t off = 24; off + 16 <= file.size();) {
    offsets.push_back(off);
    off += 16 + (file[off + 8] | file[off + 9] << 8 | file[off + 10] << 16 |
                 static_cast<size_t>(file[off + 11]) << 24);
  }
  return offsets;
}

TEST(DumpCommand, TruncatedFileKeepsEarlierPacketsAndFails) {
  test::TempDir dir;
  const std::string source = kCaptures + "/rc_pingpong.pcap";
  const auto full = parse_lines(dump(source).out);
  ASSERT_GT(full.size(), 10u);
  const uint64_t cut_frame = full[8]["frame"];  // the ninth RoCE packet
  const Bytes bytes = test::read_file(source);
  const auto offsets = record_offsets(bytes);
  const std::string cut = dir.file("cut.pcap");
  test::write_file(cut, Bytes(bytes.begin(),
                              bytes.begin() + static_cast<long>(offsets[cut_frame - 1] + 16 + 50)));

  for (bool as_json : {true, false}) {
    const auto r = dump(cut, as_json);
    EXPECT_EQ(r.exit_code, 1);
    const auto err = test::lines(r.err);
    ASSERT_EQ(err.size(), 2u) << r.err;
    EXPECT_EQ(err[0].rfind("uroce dump: 8 RoCE packets, ", 0), 0u) << err[0];
    EXPECT_NE(err[1].find(cut), std::string::npos) << err[1];
    EXPECT_NE(err[1].find("after frame " + std::to_string(cut_frame - 1)), std::string::npos)
        << err[1];
    EXPECT_NE(err[1].find("truncated"), std::string::npos) << err[1];
    if (as_json) {
      const auto got = parse_lines(r.out);
      EXPECT_EQ(got, std::vector<json>(full.begin(), full.begin() + 8));
    } else {
      EXPECT_EQ(test::lines(r.out).size(), 8u);
    }
  }
}

TEST(DumpCommand, MissingFileAndBadArguments) {
  test::TempDir dir;
  const std::string missing = dir.file("nope.pcap");
  auto r = run(kUroce + " dump " + quote(missing));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(test::lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No such file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("uroce dump FILE.pcap"), std::string::npos) << r.err;

  const std::string text = dir.file("notes.txt");
  test::write_file(text, Bytes(64, 'x'));
  r = run(kUroce + " dump " + quote(text));
  EXPECT_EQ(r.exit_code, 2);
  ASSERT_EQ(test::lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(text), std::string::npos) << r.err;

  r = run(kUroce + " dump");
  EXPECT_NE(r.exit_code, 0);
  ASSERT_EQ(test::lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("FILE is required"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run 'uroce dump --help'"), std::string::npos) << r.err;

  r = run(kUroce + " dump --frobnicate " + quote(kCaptures + "/imm.pcap"));
  EXPECT_NE(r.exit_code, 0);
  ASSERT_EQ(test::lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("--frobnicate"), std::string::npos) << r.err;

  r = run(kUroce);
  EXPECT_NE(r.exit_code, 0);
  ASSERT_EQ(test::lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("run 'uroce --help'"), std::string::npos) << r.err;

  r = run(kUroce + " dump --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--json"), std::string::npos) << r.out;
}

// --- packets written by uroce's own PcapWriter, checked key by key ------------------------

constexpr int64_t kT0Seconds = 1'700'000'000;

std::array<uint8_t, 16> v4(uint8_t last) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 77, 0, last};
}

wire::IpContext v4_context() {
  wire::IpContext ip;
  ip.src = v4(3);
  ip.dst = v4(2);
  ip.sport = 49152;
  return ip;
}

wire::IpContext v6_context() {
  wire::IpContext ip;
  ip.ipv6 = true;
  ip.src = {0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3};
  ip.dst = {0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  ip.sport = 50000;
  return ip;
}

Bytes roce_packet(const wire::Headers& h, const Bytes& payload, const wire::IpContext& ip) {
  Bytes out(wire::packet_size(h.bth.opcode, payload.size()));
  EXPECT_EQ(wire::build_packet(h, payload, out), out.size()) << int{h.bth.opcode};
  wire::write_icrc(ip, out);
  return out;
}

uint32_t carried_icrc(const Bytes& roce) {
  const size_t n = roce.size() - 4;
  return static_cast<uint32_t>(roce[n] | roce[n + 1] << 8 | roce[n + 2] << 16 |
                               static_cast<uint32_t>(roce[n + 3]) << 24);
}

wire::Headers bth(uint8_t opcode, uint32_t dqpn, uint32_t psn) {
  wire::Headers h;
  h.bth.opcode = opcode;
  h.bth.dqpn = dqpn;
  h.bth.psn = Psn(psn);
  return h;
}

struct Written {
  std::string path;
  std::vector<json> expected;  // one per RoCE packet, in file order
  std::vector<std::string> text;
};

// The JSON uroce must print for a packet: the keys every decoded packet has.
json base_json(uint64_t frame, const wire::IpContext& ip, uint8_t tos, const wire::Headers& h,
               std::string_view opcode, size_t payload_len, uint32_t icrc, bool icrc_ok) {
  const bool v6 = ip.ipv6;
  static const char* kEcn[] = {"Not-ECT", "ECT(1)", "ECT(0)", "CE"};
  return json{{"frame", frame},
              {"src", v6 ? "fd00::3" : "10.77.0.3"},
              {"dst", v6 ? "fd00::2" : "10.77.0.2"},
              {"sport", ip.sport},
              {"dport", 4791},
              {"ecn", kEcn[tos & 3]},
              {"dscp", tos >> 2},
              {"opcode", opcode},
              {"opcode_value", h.bth.opcode},
              {"se", h.bth.se},
              {"migreq", h.bth.migreq},
              {"ackreq", h.bth.ackreq},
              {"fecn", h.bth.fecn},
              {"becn", h.bth.becn},
              {"padcnt", (4 - payload_len % 4) % 4},
              {"pkey", h.bth.pkey},
              {"dqpn", h.bth.dqpn},
              {"psn", h.bth.psn.value()},
              {"payload_len", payload_len},
              {"icrc", icrc},
              {"icrc_ok", icrc_ok}};
}

Written write_uroce_pcap(const test::TempDir& dir) {
  Written w;
  w.path = dir.file("uroce.pcap");
  wire::PcapWriter writer;
  EXPECT_TRUE(writer.open(w.path)) << writer.error();
  uint64_t frame = 0;
  auto add = [&](const wire::Headers& h, const Bytes& payload, const wire::IpContext& ip,
                 uint8_t tos, std::string_view name, json extra, bool corrupt = false) {
    Bytes roce = roce_packet(h, payload, ip);
    const uint32_t icrc = carried_icrc(roce);
    if (corrupt) roce[wire::opcode_info(h.bth.opcode).header_len] ^= 0x01;
    ++frame;
    EXPECT_TRUE(
        writer.write_roce(TimePoint(kT0Seconds * 1'000'000'000 + frame * 1000), ip, tos, roce));
    json j = base_json(frame, ip, tos, h, name, payload.size(), icrc, !corrupt);
    if (!extra.is_null()) j.update(extra);
    w.expected.push_back(j);
  };

  wire::Headers h = bth(0x04, 0x11, 4711);  // RC SEND Only, 1021 bytes: PadCnt 3
  h.bth.ackreq = true;
  add(h, Bytes(1021, 0xA5), v4_context(), 0, "RC_SEND_ONLY", {});
  w.text.push_back(
      "   1 0.000000 10.77.0.3:49152 -> 10.77.0.2:4791 RC_SEND_ONLY dqpn=0x000011 psn=4711 "
      "ackreq len=1021 icrc=ok");

  h = bth(0x11, 0x11, 4711);  // ACKNOWLEDGE: NAK PSN sequence error
  h.aeth.syndrome = wire::Aeth::nak(wire::NakCode::kPsnSequenceError);
  h.aeth.msn = 3;
  add(h, {}, v4_context(), 0, "RC_ACKNOWLEDGE",
      {{"aeth", {{"syndrome", 0x60}, {"type", "NAK"}, {"value", 0}, {"msn", 3}}}});
  w.text.push_back(
      "   2 0.000001 10.77.0.3:49152 -> 10.77.0.2:4791 RC_ACKNOWLEDGE dqpn=0x000011 psn=4711 "
      "aeth=NAK(PSN_SEQ_ERR) msn=3 len=0 icrc=ok");

  // A DNS frame between them: skipped, but counted in the frame numbers.
  ++frame;
  writer.write_frame(TimePoint(kT0Seconds * 1'000'000'000 + frame * 1000),
                     test::ethernet(0x0800, test::ipv4({}, test::udp(5353, 53, Bytes(12, 0)))));

  h = bth(0x06, 0x12, 0xFFFFFF);  // WRITE First with FECN and MigReq
  h.bth.fecn = true;
  h.bth.migreq = true;
  h.reth = {0x7F0000001000, 0x1234, 8192};
  add(h, Bytes(1024, 1), v4_context(), 0x02, "RC_RDMA_WRITE_FIRST",
      {{"reth", {{"va", 0x7F0000001000}, {"rkey", 0x1234}, {"dma_len", 8192}}}});
  w.text.push_back(
      "   4 0.000003 10.77.0.3:49152 -> 10.77.0.2:4791 RC_RDMA_WRITE_FIRST dqpn=0x000012 "
      "psn=16777215 migreq fecn ecn=ECT(0) va=0x7f0000001000 rkey=0x00001234 dma_len=8192 "
      "len=1024 icrc=ok");

  h = bth(0x13, 0x12, 5);
  h.atomic_eth = {0x1000, 0x55, 7, 0xFFFFFFFFFFFFFFFF};
  add(h, {}, v4_context(), 0, "RC_COMPARE_SWAP",
      {{"atomic_eth",
        {{"va", 0x1000}, {"rkey", 0x55}, {"swap_add", 7}, {"compare", 0xFFFFFFFFFFFFFFFF}}}});
  w.text.push_back(
      "   5 0.000004 10.77.0.3:49152 -> 10.77.0.2:4791 RC_COMPARE_SWAP dqpn=0x000012 psn=5 "
      "va=0x1000 rkey=0x00000055 swap_add=0x7 compare=0xffffffffffffffff len=0 icrc=ok");

  h = bth(0x12, 0x13, 5);
  h.aeth.syndrome = wire::Aeth::ack(5);
  h.aeth.msn = 9;
  h.atomic_ack_eth.orig = 0x0123456789ABCDEF;
  add(h, {}, v4_context(), 0, "RC_ATOMIC_ACKNOWLEDGE",
      {{"aeth", {{"syndrome", 5}, {"type", "ACK"}, {"value", 5}, {"msn", 9}}},
       {"atomic_ack_eth", {{"orig", 0x0123456789ABCDEF}}}});
  w.text.push_back(
      "   6 0.000005 10.77.0.3:49152 -> 10.77.0.2:4791 RC_ATOMIC_ACKNOWLEDGE dqpn=0x000013 "
      "psn=5 aeth=ACK(credit=5) msn=9 orig=0x123456789abcdef len=0 icrc=ok");

  h = bth(0x65, 0x000001, 77);  // UD SEND Only with Immediate over IPv6, DSCP 26, CE
  h.bth.se = true;
  h.deth = {wire::kGsiQkey, 0xABCDEF};
  h.immdt = 0xDEADBEEF;
  add(h, Bytes(256, 7), v6_context(), 26 << 2 | 3, "UD_SEND_ONLY_WITH_IMMEDIATE",
      {{"deth", {{"qkey", wire::kGsiQkey}, {"src_qp", 0xABCDEF}}}, {"immdt", 0xDEADBEEF}});
  w.text.push_back(
      "   7 0.000006 [fd00::3]:50000 -> [fd00::2]:4791 UD_SEND_ONLY_WITH_IMMEDIATE "
      "dqpn=0x000001 psn=77 se ecn=CE dscp=26 qkey=0x80010000 src_qp=0xabcdef imm=0xdeadbeef "
      "len=256 icrc=ok");

  h = bth(0x17, 0x14, 6);
  h.ieth_rkey = 0xABCDEF01;
  add(h, Bytes(3, 9), v4_context(), 0, "RC_SEND_ONLY_WITH_INVALIDATE",
      {{"ieth", {{"rkey", 0xABCDEF01}}}});
  w.text.push_back(
      "   8 0.000007 10.77.0.3:49152 -> 10.77.0.2:4791 RC_SEND_ONLY_WITH_INVALIDATE "
      "dqpn=0x000014 psn=6 inv_rkey=0xabcdef01 len=3 icrc=ok");

  h = bth(wire::kCnpOpcode, 0x22, 0);
  h.bth.becn = true;
  add(h, {}, v4_context(), 48 << 2, "CNP", {});
  w.text.push_back(
      "   9 0.000008 10.77.0.3:49152 -> 10.77.0.2:4791 CNP dqpn=0x000022 psn=0 becn dscp=48 "
      "len=0 icrc=ok");

  h = bth(0x11, 0x11, 4712);
  h.aeth.syndrome = wire::Aeth::rnr_nak(14);
  h.aeth.msn = 8;
  add(h, {}, v4_context(), 0, "RC_ACKNOWLEDGE",
      {{"aeth", {{"syndrome", 0x2E}, {"type", "RNR_NAK"}, {"value", 14}, {"msn", 8}}}});
  w.text.push_back(
      "  10 0.000009 10.77.0.3:49152 -> 10.77.0.2:4791 RC_ACKNOWLEDGE dqpn=0x000011 psn=4712 "
      "aeth=RNR_NAK(timer=14) msn=8 len=0 icrc=ok");

  h = bth(0x0C, 0x11, 4713);  // READ request on a limited P_Key
  h.bth.pkey = 0x8001;
  h.reth = {0x2000, 0x99, 4096};
  add(h, {}, v4_context(), 0, "RC_RDMA_READ_REQUEST",
      {{"reth", {{"va", 0x2000}, {"rkey", 0x99}, {"dma_len", 4096}}}});
  w.text.push_back(
      "  11 0.000010 10.77.0.3:49152 -> 10.77.0.2:4791 RC_RDMA_READ_REQUEST dqpn=0x000011 "
      "psn=4713 pkey=0x8001 va=0x2000 rkey=0x00000099 dma_len=4096 len=0 icrc=ok");

  h = bth(0x04, 0x11, 4714);  // a payload bit flipped after the ICRC was computed
  const Bytes payload(8, 0x10);
  add(h, payload, v4_context(), 0, "RC_SEND_ONLY", {}, true);
  w.text.push_back(fmt::format(
      "  12 0.000011 10.77.0.3:49152 -> 10.77.0.2:4791 RC_SEND_ONLY dqpn=0x000011 psn=4714 "
      "len=8 icrc=BAD(0x{:08x})",
      w.expected.back()["icrc"].get<uint32_t>()));

  // TVer 1: not a packet uroce can decode; reported with the reason.
  h = bth(0x04, 0x11, 4715);
  h.bth.tver = 1;
  Bytes roce = roce_packet(h, Bytes(4, 0), v4_context());
  ++frame;
  writer.write_roce(TimePoint(kT0Seconds * 1'000'000'000 + frame * 1000), v4_context(), 0, roce);
  w.expected.push_back({{"frame", frame},
                        {"src", "10.77.0.3"},
                        {"dst", "10.77.0.2"},
                        {"sport", 49152},
                        {"dport", 4791},
                        {"ecn", "Not-ECT"},
                        {"dscp", 0},
                        {"opcode_value", 4},
                        {"error", "bad_tver"}});
  w.text.push_back("  13 0.000012 10.77.0.3:49152 -> 10.77.0.2:4791 opcode=0x04 error=bad_tver");
  writer.close();
  return w;
}

TEST(DumpCommand, PcapWrittenByUroce) {
  test::TempDir dir;
  const Written w = write_uroce_pcap(dir);

  const auto r = dump(w.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "uroce dump: 12 RoCE packets, 1 other frames skipped\n");
  const auto lines = test::lines(r.out);
  ASSERT_EQ(lines.size(), w.expected.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i]);
    // The time is printed exactly (nanoseconds); compare it as text, the rest as JSON.
    const uint64_t frame = w.expected[i]["frame"];
    EXPECT_NE(lines[i].find(fmt::format(R"("time":{}.{:09},)", kT0Seconds, frame * 1000)),
              std::string::npos);
    json got = json::parse(lines[i]);
    got.erase("time");
    EXPECT_EQ(got, w.expected[i]) << w.expected[i].dump();
  }

  const auto text = dump(w.path, false);
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_EQ(test::lines(text.out), w.text);

  // tshark, an independent dissector, reads the same opcodes and PSNs from uroce's frames.
  const auto rows = tshark_rows(w.path);
  ASSERT_EQ(rows.size(), w.expected.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].frame, w.expected[i]["frame"]);
    EXPECT_EQ(rows[i].opcode, w.expected[i]["opcode_value"]);
  }
}

// The same packet in every link-layer framing uroce reads gives the same decoded line.
TEST(DumpCommand, EveryLinkType) {
  test::TempDir dir;
  wire::Headers h = bth(0x11, 0x11, 9);
  h.aeth.syndrome = wire::Aeth::nak(wire::NakCode::kRemoteAccessError);
  const wire::IpContext ip = v4_context();
  const Bytes roce = roce_packet(h, {}, ip);
  Bytes eth(wire::frame_size(ip, roce.size()));
  ASSERT_EQ(wire::encap_frame(ip, 0, 64, roce, eth), eth.size());
  const Bytes datagram(eth.begin() + 14, eth.end());
  const Bytes padded =
      test::cat(test::ethernet(0x0800, datagram, {{0x88A8, 5}, {0x8100, 6}}), Bytes(8, 0));
  const std::pair<uint32_t, Bytes> cases[] = {
      {1, padded},
      {113, test::sll(0x0800, datagram)},
      {276, test::sll2(0x0800, datagram)},
      {101, datagram},
      {228, datagram},
  };
  for (const auto& [link, frame] : cases) {
    SCOPED_TRACE(link);
    const std::string path = dir.file("link" + std::to_string(link) + ".pcap");
    test::write_file(path, test::pcap_file(link, {Bytes(30, 0), frame}));
    const auto r = dump(path, false);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out,
              "   2 0.000010 10.77.0.3:49152 -> 10.77.0.2:4791 RC_ACKNOWLEDGE dqpn=0x000011 psn=9 "
              "aeth=NAK(REM_ACCESS_ERR) msn=0 len=0 icrc=ok\n");
    EXPECT_EQ(r.err, "uroce dump: 1 RoCE packets, 1 other frames skipped\n");
  }
}

// A capture taken with a small snap length (tcpdump -s 96) keeps only the start of each
// packet: still a RoCE packet, reported with the reason and counted as one.
TEST(DumpCommand, SnaplenCutPacketIsReported) {
  test::TempDir dir;
  const wire::IpContext ip = v4_context();
  const Bytes roce = roce_packet(bth(0x04, 0x11, 10), Bytes(200, 1), ip);
  Bytes eth(wire::frame_size(ip, roce.size()));
  ASSERT_EQ(wire::encap_frame(ip, 0, 64, roce, eth), eth.size());
  Bytes file = test::pcap_file(1, {Bytes(eth.begin(), eth.begin() + 96)});
  const uint32_t wire_len = static_cast<uint32_t>(eth.size());
  for (int i = 0; i < 4; ++i) file[24 + 12 + i] = static_cast<uint8_t>(wire_len >> (8 * i));
  const std::string path = dir.file("snaplen.pcap");
  test::write_file(path, file);

  const auto r = dump(path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), (json{{"frame", 1},
                                      {"time", 1700000000.00001},
                                      {"src", "10.77.0.3"},
                                      {"dst", "10.77.0.2"},
                                      {"sport", 49152},
                                      {"dport", 4791},
                                      {"ecn", "Not-ECT"},
                                      {"dscp", 0},
                                      {"opcode_value", 4},
                                      {"error", "cut_by_snaplen"}}));
  EXPECT_EQ(r.err, "uroce dump: 1 RoCE packets, 0 other frames skipped\n");
  EXPECT_EQ(dump(path, false).out,
            "   1 0.000000 10.77.0.3:49152 -> 10.77.0.2:4791 opcode=0x04 error=cut_by_snaplen\n");
}

TEST(DumpCommand, PcapWrittenByScapy) {
  test::TempDir dir;
  const std::string path = dir.file("scapy.pcap");
  const std::string script =
      "import sys\n"
      "from scapy.all import Ether, IP, UDP, Raw, wrpcap\n"
      "from scapy.contrib.roce import BTH, AETH, cnp\n"
      "base = Ether()/IP(src='10.0.0.1', dst='10.0.0.2', id=4321, flags='DF', tos=2)"
      "/UDP(sport=49999, dport=4791)\n"
      "pkts = [\n"
      "  base/BTH(opcode='RC_ACKNOWLEDGE', dqpn=0x11, psn=4711)/AETH(syndrome=0x60, msn=3),\n"
      "  base/BTH(opcode='RC_SEND_ONLY', dqpn=0x12, psn=1, ackreq=1, padcount=2)"
      "/Raw(b'hello!' + b'\\x00\\x00'),\n"
      "  base/cnp(0x13),\n"
      "]\n"
      "wrpcap(sys.argv[1], pkts)\n";
  const std::string script_path = dir.file("make.py");
  test::write_file(script_path, Bytes(script.begin(), script.end()));
  const auto gen = run("/usr/bin/python3 " + quote(script_path) + " " + quote(path));
  ASSERT_EQ(gen.exit_code, 0) << gen.err;

  const auto r = dump(path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto packets = parse_lines(r.out);
  ASSERT_EQ(packets.size(), 3u);
  for (const json& p : packets) {
    EXPECT_EQ(p["icrc_ok"], true) << p.dump();
    EXPECT_EQ(p["src"], "10.0.0.1");
    EXPECT_EQ(p["ecn"], "ECT(0)");
  }
  EXPECT_EQ(packets[0]["opcode"], "RC_ACKNOWLEDGE");
  EXPECT_EQ(packets[0]["psn"], 4711);
  EXPECT_EQ(packets[0]["aeth"],
            (json{{"syndrome", 0x60}, {"type", "NAK"}, {"value", 0}, {"msn", 3}}));
  EXPECT_EQ(packets[1]["opcode"], "RC_SEND_ONLY");
  EXPECT_EQ(packets[1]["ackreq"], true);
  EXPECT_EQ(packets[1]["padcnt"], 2);
  EXPECT_EQ(packets[1]["payload_len"], 6);
  EXPECT_EQ(packets[2]["opcode"], "CNP");
  EXPECT_EQ(packets[2]["becn"], true);
  EXPECT_EQ(packets[2]["dqpn"], 0x13);
}

// scapy recomputes the ICRC of every IPv4 packet uroce wrote and finds the one carried.
TEST(DumpCommand, ScapyAgreesWithUroceIcrc) {
  test::TempDir dir;
  const Written w = write_uroce_pcap(dir);
  const std::string script =
      "import sys\n"
      "from scapy.all import rdpcap, IP, UDP\n"
      "from scapy.contrib.roce import BTH\n"
      "ok = bad = 0\n"
      "for p in rdpcap(sys.argv[1]):\n"
      "    if IP not in p or UDP not in p or p[UDP].dport != 4791 or BTH not in p:\n"
      "        continue\n"
      "    carried = bytes(p)[-4:]\n"
      "    if p[BTH].compute_icrc(None) == carried: ok += 1\n"
      "    else: bad += 1\n"
      "print(ok, bad)\n";
  const std::string script_path = dir.file("check.py");
  test::write_file(script_path, Bytes(script.begin(), script.end()));
  const auto r = run("/usr/bin/python3 " + quote(script_path) + " " + quote(w.path));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 12 RoCE packets, one over IPv6 (scapy has no IPv6 ICRC); the corrupted one and the
  // TVer 1 one (whose ICRC is right) are counted by what scapy computes.
  EXPECT_EQ(r.out, "10 1\n");
}

}  // namespace
}  // namespace uroce::cli
