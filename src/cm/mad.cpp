// The MAD common header (mad.hpp): offsets from the kernel's struct ib_mad_hdr.
#include "cm/mad.hpp"

#include "wire/byte_order.hpp"

namespace uroce::cm {

using wire::load_be16;
using wire::load_be32;
using wire::load_be64;
using wire::store_be16;
using wire::store_be32;
using wire::store_be64;

void encode_mad_header(const MadHeader& h, std::span<uint8_t, kMadHeaderSize> out) {
  uint8_t* p = out.data();
  p[0] = h.base_version;
  p[1] = h.mgmt_class;
  p[2] = h.class_version;
  p[3] = h.method;
  store_be16(p + 4, h.status);
  store_be16(p + 6, h.class_specific);
  store_be64(p + 8, h.tid);
  store_be16(p + 16, h.attr_id);
  store_be16(p + 18, 0);
  store_be32(p + 20, h.attr_mod);
}

MadHeader decode_mad_header(std::span<const uint8_t, kMadHeaderSize> in) {
  const uint8_t* p = in.data();
  MadHeader h;
  h.base_version = p[0];
  h.mgmt_class = p[1];
  h.class_version = p[2];
  h.method = p[3];
  h.status = load_be16(p + 4);
  h.class_specific = load_be16(p + 6);
  h.tid = load_be64(p + 8);
  h.attr_id = load_be16(p + 16);
  h.attr_mod = load_be32(p + 20);
  return h;
}

}  // namespace uroce::cm
