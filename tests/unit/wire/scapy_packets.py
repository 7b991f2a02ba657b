#!/usr/bin/python3
"""Builds RoCE v2 packets with scapy.contrib.roce for the uroce wire codec cross-check.

scapy builds the BTH, AETH and CNP padding and computes the ICRC itself (IPv4 only); the
other extended headers are packed here with struct, by the IBTA layouts. IPv6 packets get
their ICRC from an independent implementation of the masking rules below, since scapy
computes none for IPv6.

Usage: scapy_packets.py OUT.pcap OUT.json SEED
Writes Ethernet frames to OUT.pcap and, for each frame, the fields that were set (and the
ICRC) to OUT.json, in order.
"""
import json
import random
import struct
import sys
import zlib

from scapy.compat import raw
from scapy.contrib.roce import AETH, BTH, CNPPadding, CNP_OPCODE
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

# (opcode, extended headers after the BTH, carries payload)
CASES = [
    (0x04, [], True),                      # RC SEND Only
    (0x00, [], True),                      # RC SEND First
    (0x22, [], True),                      # UC SEND Last
    (0x03, ["immdt"], True),               # RC SEND Last with Immediate
    (0x06, ["reth"], True),                # RC RDMA WRITE First
    (0x2B, ["reth", "immdt"], True),       # UC RDMA WRITE Only with Immediate
    (0x0C, ["reth"], False),               # RC RDMA READ Request
    (0x0D, ["aeth"], True),                # RC RDMA READ Response First
    (0x11, ["aeth"], False),               # RC Acknowledge
    (0x12, ["aeth", "atomicack"], False),  # RC Atomic Acknowledge
    (0x13, ["atomic"], False),             # RC Compare & Swap
    (0x14, ["atomic"], False),             # RC Fetch & Add
    (0x17, ["ieth"], True),                # RC SEND Only with Invalidate
    (0x64, ["deth"], True),                # UD SEND Only
    (0x65, ["deth", "immdt"], True),       # UD SEND Only with Immediate
    (CNP_OPCODE, ["cnp"], False),          # RoCE v2 CNP
]


def ipv6_icrc(ip6_udp_roce_without_icrc):
    """ICRC over 8 x 0xFF, IPv6 with class/flow label/hop limit masked, UDP checksum
    masked, BTH byte 4 masked (IBTA Annex A17.3.3)."""
    b = bytearray(ip6_udp_roce_without_icrc)
    b[0] |= 0x0F
    b[1:4] = b"\xff\xff\xff"
    b[7] = 0xFF
    b[46:48] = b"\xff\xff"
    b[48 + 4] = 0xFF
    return zlib.crc32(b"\xff" * 8 + bytes(b)) & 0xFFFFFFFF


def build(rng, opcode, exts, has_payload, ipv6):
    f = {"opcode": opcode}
    payload = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 200))) if has_payload else b""
    pad = (4 - len(payload) % 4) % 4
    bth = BTH(opcode=opcode, solicited=rng.getrandbits(1), migreq=rng.getrandbits(1),
              padcount=pad, pkey=rng.getrandbits(16), fecn=rng.getrandbits(1),
              becn=rng.getrandbits(1), dqpn=rng.randrange(2, 1 << 24),
              ackreq=rng.getrandbits(1), psn=rng.getrandbits(24))
    for k in ("solicited", "migreq", "padcount", "pkey", "fecn", "becn", "dqpn", "ackreq", "psn"):
        f[k] = getattr(bth, k)
    layers = bth
    for e in exts:
        if e == "aeth":
            f["syndrome"], f["msn"] = rng.getrandbits(8), rng.getrandbits(24)
            layers = layers / AETH(syndrome=f["syndrome"], msn=f["msn"])
        elif e == "cnp":
            layers = layers / CNPPadding()
        elif e == "reth":
            f["va"], f["rkey"], f["dma_len"] = rng.getrandbits(64), rng.getrandbits(32), rng.getrandbits(32)
            layers = layers / Raw(struct.pack("!QII", f["va"], f["rkey"], f["dma_len"]))
        elif e == "atomic":
            f["va"], f["rkey"] = rng.getrandbits(64), rng.getrandbits(32)
            f["swap_add"], f["compare"] = rng.getrandbits(64), rng.getrandbits(64)
            layers = layers / Raw(struct.pack("!QIQQ", f["va"], f["rkey"], f["swap_add"], f["compare"]))
        elif e == "atomicack":
            f["orig"] = rng.getrandbits(64)
            layers = layers / Raw(struct.pack("!Q", f["orig"]))
        elif e == "deth":
            f["qkey"], f["src_qp"] = rng.getrandbits(32), rng.getrandbits(24)
            layers = layers / Raw(struct.pack("!IB", f["qkey"], 0) + f["src_qp"].to_bytes(3, "big"))
        elif e == "immdt":
            f["immdt"] = rng.getrandbits(32)
            layers = layers / Raw(struct.pack("!I", f["immdt"]))
        elif e == "ieth":
            f["ieth_rkey"] = rng.getrandbits(32)
            layers = layers / Raw(struct.pack("!I", f["ieth_rkey"]))
    layers = layers / Raw(payload + b"\x00" * pad)
    f["payload"] = payload.hex()
    sport = 0xC000 | rng.getrandbits(14)
    udp = UDP(sport=sport, dport=4791, chksum=rng.getrandbits(16))
    f["sport"] = sport
    if ipv6:
        ip = IPv6(src="fd00::%x" % rng.getrandbits(16), dst="fd00::%x" % rng.getrandbits(16),
                  tc=rng.getrandbits(8), fl=rng.getrandbits(20), hlim=rng.getrandbits(8))
        layers.icrc = 0
        dgram = bytearray(raw(ip / udp / layers))
        icrc = ipv6_icrc(bytes(dgram[:-4]))
        dgram[-4:] = struct.pack("<I", icrc)
        frame = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IPv6(bytes(dgram))
        f["icrc_by"] = "ipv6_icrc"
    else:
        ip = IP(src="10.%d.%d.%d" % (rng.getrandbits(8), rng.getrandbits(8), rng.randrange(1, 255)),
                dst="10.77.0.%d" % rng.randrange(1, 255), id=rng.getrandbits(16),
                flags="DF" if rng.getrandbits(1) else 0, tos=rng.getrandbits(8),
                ttl=rng.randrange(1, 256))
        frame = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / ip / udp / layers
        frame = Ether(raw(frame))  # freeze: scapy computes the ICRC here
        f["icrc_by"] = "scapy"
        f["ipv4_id"], f["ipv4_df"] = ip.id, bool(ip.flags.DF)
    data = raw(frame)
    f["icrc"] = struct.unpack("<I", data[-4:])[0]  # stored least-significant byte first
    f["ipv6"] = ipv6
    return frame, f


def main():
    out_pcap, out_json, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    frames, fields = [], []
    for ipv6 in (False, True):
        for opcode, exts, has_payload in CASES:
            for _ in range(3):
                frame, f = build(rng, opcode, exts, has_payload, ipv6)
                frames.append(frame)
                fields.append(f)
    wrpcap(out_pcap, frames)
    with open(out_json, "w") as out:
        json.dump(fields, out)


if __name__ == "__main__":
    main()
