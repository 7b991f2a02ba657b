#!/usr/bin/python3
"""pyverbs (Debian's python3-pyverbs, unmodified) over uroce's libibverbs.so.1.

Run with LD_LIBRARY_PATH pointing at uroce's build/lib. Opens uroce_lo twice (two contexts,
each its own software device with its own QPN range and UDP sockets, like two hosts sharing
the loopback), registers memory, connects two RC QPs over 127.0.0.1 (GID index 1 on port
1), then checks byte for byte:
  1. an RDMA WRITE lands in the target's MR,
  2. FETCH_AND_ADD returns the old value and adds,
  3. COMPARE_AND_SWAP returns the old value and swaps only on a match,
  4. a UD reply addressed with an AH made from the request's completion and GRH
     (ibv_create_ah_from_wc) reaches the requester.
Prints one "ok: ..." line per check; exits 0 only when all pass.
"""
import struct
import sys
import time

from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR
import pyverbs.enums as e

PORT = 1
GID_INDEX = 1  # ::ffff:127.0.0.1 on lo
SIZE = 4096
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)


class Side:
    def __init__(self):
        self.ctx = Context(name='uroce_lo')
        self.pd = PD(self.ctx)
        self.mr = MR(self.pd, SIZE, ACCESS)
        self.cq = CQ(self.ctx, 64)
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq,
                                         cap=cap))
        self.gid = self.ctx.query_gid(PORT, GID_INDEX)

    def connect(self, peer):
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, cur_qp_state=e.IBV_QPS_RESET)
        attr.pkey_index = 0
        attr.port_num = PORT
        attr.qp_access_flags = ACCESS
        self.qp.to_init(attr)
        attr = QPAttr(qp_state=e.IBV_QPS_RTR)
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = peer.qp.qp_num
        attr.rq_psn = 0
        attr.max_dest_rd_atomic = 4
        attr.min_rnr_timer = 12
        gr = GlobalRoute(dgid=peer.gid, sgid_index=GID_INDEX)
        attr.ah_attr = AHAttr(gr=gr, is_global=1, port_num=PORT)
        self.qp.to_rtr(attr)
        attr = QPAttr(qp_state=e.IBV_QPS_RTS)
        attr.sq_psn = 0
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        attr.max_rd_atomic = 4
        self.qp.to_rts(attr)

    def run(self, wr, what):
        self.qp.post_send(wr)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            n, wcs = self.cq.poll()
            if n > 0:
                wc = wcs[0]
                if wc.status != e.IBV_WC_SUCCESS:
                    sys.exit(f'FAIL {what}: completion status {wc.status}')
                return wc
        sys.exit(f'FAIL {what}: no completion within 10 s')


QKEY = 0x11111111
GRH_BYTES = 40


class UdSide:
    def __init__(self):
        self.ctx = Context(name='uroce_lo')
        self.pd = PD(self.ctx)
        self.mr = MR(self.pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE)
        self.cq = CQ(self.ctx, 16)
        cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=self.cq, rcq=self.cq,
                                         cap=cap))
        attr = QPAttr(qp_state=e.IBV_QPS_INIT)
        attr.pkey_index = 0
        attr.port_num = PORT
        attr.qkey = QKEY
        self.qp.to_init(attr)
        self.qp.to_rtr(QPAttr(qp_state=e.IBV_QPS_RTR))
        attr = QPAttr(qp_state=e.IBV_QPS_RTS)
        attr.sq_psn = 0
        self.qp.to_rts(attr)
        self.gid = self.ctx.query_gid(PORT, GID_INDEX)

    def post_recv(self):
        self.qp.post_recv(RecvWR(wr_id=9, num_sge=1,
                                 sg=[SGE(self.mr.buf, 2048, self.mr.lkey)]))

    def send(self, ah, remote_qpn, payload):
        self.mr.write(payload, len(payload), 3000)
        wr = SendWR(wr_id=8, opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(self.mr.buf + 3000, len(payload), self.mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_ud(ah, remote_qpn, QKEY)
        self.qp.post_send(wr)

    def wait(self, opcode, what):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            n, wcs = self.cq.poll()
            if n > 0 and wcs[0].opcode == opcode:
                if wcs[0].status != e.IBV_WC_SUCCESS:
                    sys.exit(f'FAIL {what}: completion status {wcs[0].status}')
                return wcs[0]
        sys.exit(f'FAIL {what}: no completion within 10 s')


def ud_reply_from_wc():
    a, b = UdSide(), UdSide()
    a.post_recv()
    b.post_recv()
    ah = AH(a.pd, attr=AHAttr(gr=GlobalRoute(dgid=b.gid, sgid_index=GID_INDEX), is_global=1,
                              port_num=PORT))
    a.send(ah, b.qp.qp_num, b'request')
    a.wait(e.IBV_WC_SEND, 'UD send')
    wc = b.wait(e.IBV_WC_RECV, 'UD receive')
    if wc.byte_len != GRH_BYTES + 7 or wc.src_qp != a.qp.qp_num:
        sys.exit(f'FAIL UD receive: byte_len {wc.byte_len} src_qp {wc.src_qp}')
    # pyverbs passes the address of the received GRH area straight to
    # ibv_create_ah_from_wc: for IPv4, 20 zero bytes and then the IPv4 header.
    reply_ah = AH(b.pd, wc=wc, grh=b.mr.buf, port_num=PORT)
    b.send(reply_ah, wc.src_qp, b'reply!')
    b.wait(e.IBV_WC_SEND, 'UD reply send')
    wc = a.wait(e.IBV_WC_RECV, 'UD reply receive')
    got = a.mr.read(6, GRH_BYTES)
    if wc.byte_len != GRH_BYTES + 6 or got != b'reply!':
        sys.exit(f'FAIL UD reply: byte_len {wc.byte_len} payload {got!r}')
    print('ok: UD reply addressed from the request\'s completion and GRH')


def one_sided(src, dst, opcode, length, wr_id):
    sge = SGE(src.mr.buf, length, src.mr.lkey)
    return SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge],
                  send_flags=e.IBV_SEND_SIGNALED)


def main():
    a, b = Side(), Side()
    a.connect(b)
    b.connect(a)

    payload = bytes((i * 7 + 3) & 0xFF for i in range(1024))
    a.mr.write(payload, len(payload), 0)
    wr = one_sided(a, b, e.IBV_WR_RDMA_WRITE, len(payload), 1)
    wr.set_wr_rdma(b.mr.rkey, b.mr.buf)
    a.run(wr, 'RDMA WRITE')
    got = b.mr.read(len(payload), 0)
    if got != payload:
        sys.exit('FAIL RDMA WRITE: target bytes differ')
    print(f'ok: RDMA WRITE of {len(payload)} bytes')

    b.mr.write(struct.pack('<Q', 1000), 8, 2048)
    wr = one_sided(a, b, e.IBV_WR_ATOMIC_FETCH_AND_ADD, 8, 2)
    wr.set_wr_atomic(rkey=b.mr.rkey, addr=b.mr.buf + 2048, compare_add=234, swap=0)
    a.run(wr, 'FETCH_AND_ADD')
    old = struct.unpack('<Q', a.mr.read(8, 0))[0]
    new = struct.unpack('<Q', b.mr.read(8, 2048))[0]
    if (old, new) != (1000, 1234):
        sys.exit(f'FAIL FETCH_AND_ADD: old {old} new {new}, expected 1000 1234')
    print('ok: FETCH_AND_ADD 1000 + 234 = 1234, returned 1000')

    wr = one_sided(a, b, e.IBV_WR_ATOMIC_CMP_AND_SWP, 8, 3)
    wr.set_wr_atomic(rkey=b.mr.rkey, addr=b.mr.buf + 2048, compare_add=999, swap=5)
    a.run(wr, 'CMP_AND_SWP (mismatch)')
    old = struct.unpack('<Q', a.mr.read(8, 0))[0]
    new = struct.unpack('<Q', b.mr.read(8, 2048))[0]
    if (old, new) != (1234, 1234):
        sys.exit(f'FAIL CMP_AND_SWP mismatch: old {old} new {new}, expected 1234 1234')
    wr = one_sided(a, b, e.IBV_WR_ATOMIC_CMP_AND_SWP, 8, 4)
    wr.set_wr_atomic(rkey=b.mr.rkey, addr=b.mr.buf + 2048, compare_add=1234, swap=77)
    a.run(wr, 'CMP_AND_SWP (match)')
    old = struct.unpack('<Q', a.mr.read(8, 0))[0]
    new = struct.unpack('<Q', b.mr.read(8, 2048))[0]
    if (old, new) != (1234, 77):
        sys.exit(f'FAIL CMP_AND_SWP match: old {old} new {new}, expected 1234 77')
    print('ok: CMP_AND_SWP swaps only on a match')
    ud_reply_from_wc()
    return 0


if __name__ == '__main__':
    sys.exit(main())
