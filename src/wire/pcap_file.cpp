// Capture files through libpcap, which reads pcap (micro- and nanosecond) and pcapng alike.
// Timestamps are always asked for in nanoseconds so no precision is lost either way.
#include "wire/pcap_file.hpp"

#include <pcap/pcap.h>

#include <algorithm>
#include <vector>

namespace uroce::wire {
namespace {

constexpr int kWriterSnapLen = 65535;
constexpr int64_t kNanosPerSecond = 1'000'000'000;

LinkType link_type_of_dlt(int dlt) {
  switch (dlt) {
    case DLT_EN10MB:
      return LinkType::kEthernet;
    case DLT_RAW:  // libpcap maps LINKTYPE_RAW (101) to the platform's DLT_RAW
      return LinkType::kRawIp;
    case DLT_LINUX_SLL:
      return LinkType::kLinuxSll;
    case DLT_LINUX_SLL2:
      return LinkType::kLinuxSll2;
    case DLT_IPV4:
      return LinkType::kIpv4;
    case DLT_IPV6:
      return LinkType::kIpv6;
    default:
      // Passed through so decap_frame() answers kUnsupportedLink for it.
      return static_cast<LinkType>(dlt);
  }
}

}  // namespace

struct PcapReader::Impl {
  pcap_t* pcap = nullptr;
  std::string path;
  uint64_t frames_read = 0;
  bool done = false;

  ~Impl() {
    if (pcap != nullptr) pcap_close(pcap);
  }
};

PcapReader::PcapReader() : impl_(std::make_unique<Impl>()) {}
PcapReader::~PcapReader() = default;

bool PcapReader::open(const std::string& path) {
  impl_ = std::make_unique<Impl>();
  impl_->path = path;
  error_.clear();
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  impl_->pcap =
      pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (impl_->pcap == nullptr) {
    error_ = errbuf;
    // libpcap names the file for an open() failure but not for a bad format.
    if (error_.find(path) == std::string::npos) error_ = path + ": " + error_;
    impl_->done = true;
    return false;
  }
  return true;
}

LinkType PcapReader::link_type() const {
  if (impl_->pcap == nullptr) return LinkType{0};
  return link_type_of_dlt(pcap_datalink(impl_->pcap));
}

bool PcapReader::next(CapturedFrame& out) {
  if (impl_->done || impl_->pcap == nullptr) return false;
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  const int rc = pcap_next_ex(impl_->pcap, &header, &data);
  if (rc == 1) {
    ++impl_->frames_read;
    out.number = impl_->frames_read;
    out.time = TimePoint(static_cast<int64_t>(header->ts.tv_sec) * kNanosPerSecond +
                         static_cast<int64_t>(header->ts.tv_usec));
    out.original_len = header->len;
    out.bytes = std::span<const uint8_t>(data, header->caplen);
    return true;
  }
  impl_->done = true;
  if (rc == PCAP_ERROR_BREAK) return false;  // a clean end of file
  error_ = impl_->path + ": damaged or truncated after frame " +
           std::to_string(impl_->frames_read) + " (reading frame " +
           std::to_string(impl_->frames_read + 1) + "): " + pcap_geterr(impl_->pcap);
  return false;
}

struct PcapWriter::Impl {
  pcap_t* pcap = nullptr;
  pcap_dumper_t* dumper = nullptr;
  std::vector<uint8_t> frame;

  void close() {
    if (dumper != nullptr) pcap_dump_close(dumper);
    if (pcap != nullptr) pcap_close(pcap);
    dumper = nullptr;
    pcap = nullptr;
  }
  ~Impl() { close(); }
};

PcapWriter::PcapWriter() : impl_(std::make_unique<Impl>()) {}
PcapWriter::~PcapWriter() = default;

bool PcapWriter::open(const std::string& path) {
  impl_->close();
  error_.clear();
  impl_->pcap =
      pcap_open_dead_with_tstamp_precision(DLT_EN10MB, kWriterSnapLen, PCAP_TSTAMP_PRECISION_NANO);
  if (impl_->pcap == nullptr) {
    error_ = path + ": cannot create a pcap handle";
    return false;
  }
  impl_->dumper = pcap_dump_open(impl_->pcap, path.c_str());
  if (impl_->dumper == nullptr) {
    error_ = pcap_geterr(impl_->pcap);
    if (error_.find(path) == std::string::npos) error_ = path + ": " + error_;
    impl_->close();
    return false;
  }
  return true;
}

bool PcapWriter::write_roce(TimePoint time, const IpContext& ip, uint8_t tos,
                            std::span<const uint8_t> roce) {
  constexpr uint8_t kTtl = 64;  // what Linux and uroce put on the wire
  if (impl_->dumper == nullptr) {
    error_ = "the pcap writer is not open";
    return false;
  }
  impl_->frame.resize(frame_size(ip, roce.size()));
  const size_t len = encap_frame(ip, tos, kTtl, roce, impl_->frame);
  if (len == 0) {
    error_ = "RoCE packet of " + std::to_string(roce.size()) + " bytes does not fit in a frame";
    return false;
  }
  write_frame(time, std::span<const uint8_t>(impl_->frame).first(len));
  return true;
}

void PcapWriter::write_frame(TimePoint time, std::span<const uint8_t> frame) {
  if (impl_->dumper == nullptr) return;
  pcap_pkthdr header{};
  const int64_t ns = time.count();
  header.ts.tv_sec = static_cast<time_t>(ns / kNanosPerSecond);
  // With nanosecond precision libpcap stores tv_usec as nanoseconds.
  header.ts.tv_usec = static_cast<suseconds_t>(ns % kNanosPerSecond);
  header.len = static_cast<uint32_t>(frame.size());
  header.caplen = static_cast<uint32_t>(std::min<size_t>(frame.size(), kWriterSnapLen));
  pcap_dump(reinterpret_cast<u_char*>(impl_->dumper), &header, frame.data());
}

void PcapWriter::flush() {
  if (impl_->dumper != nullptr) pcap_dump_flush(impl_->dumper);
}

void PcapWriter::close() {
  impl_->close();
}

}  // namespace uroce::wire
