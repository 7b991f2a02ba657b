// corrupt_packet: the bit flip behind corrupt=P%. It flips one bit after the BTH (extension
// headers, payload or the ICRC itself), so the packet still parses and the receiver's ICRC
// check is what catches it: the receiver counts icrc_errors, as for a packet damaged on the
// wire. The BTH is left alone because a flipped opcode, pad count or version would be counted
// as a parse drop instead, and its resv8a byte is masked out of the ICRC.
#pragma once

#include <cstdint>
#include <span>

#include "wire/icrc.hpp"

namespace uroce::fault {

// `random` chooses the bit. A flip whose CRC difference an IPv4 ID/DF change could explain
// (the receiver would accept the packet modulo the IP ID, docs/wire-facts.md) moves on to the
// next bit, so the result always fails the receiver's check. False (nothing changed) when
// the packet is too short to hold a BTH and an ICRC.
bool corrupt_packet(const wire::IpContext& ip, std::span<uint8_t> roce, uint64_t random);

}  // namespace uroce::fault
