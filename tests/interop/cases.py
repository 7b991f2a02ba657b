"""The interop case matrix: which program runs on which side, and what its output must show.

A case has a server and a client; `server` names the side the server runs on ("guest" = rxe
in the VM with Debian's binaries, "host" = uroce). The host side is either `uroce pingpong`
(dropin False) or Debian's binary over uroce's libibverbs.so.1 (dropin True,
LD_LIBRARY_PATH=build/lib).

`ready` says how the harness knows the server is up before it starts the client: "tcp" waits
for the server's TCP port (every verbs program here exchanges its QP numbers over TCP);
"rdma_cm" is for programs that connect with rdma_cm (rdmacm-utils, perftest -R), whose
servers listen on no TCP port: the harness waits for UDP 4791 on the host (uroce's device is
open) or a short moment in the guest, and runs the client again while it is REJECTED (REJ 8,
"invalid service ID": the CM on the server's side, kernel or uroce, answers it for a port
nobody listens on yet). "{ip}" in a command is the server's address; a client command
without it gets the address appended.
"""
import re

import kernel_tools

GUEST_DEV = "rxe0"
HOST_DEV = "uroce_br0"  # one device per netdev, as rxe_<netdev>; port 1
GID = 1  # rxe-style GID table: index 1 is the IPv4-mapped address on both sides


class Case:
    def __init__(self, name, server, guest_cmd, host_cmd, dropin, tcp_port, checks,
                 timeout=90, loss_percent=0, loss_until_bytes=0, ready="tcp"):
        self.name = name
        self.ready = ready
        self.server = server
        self.guest_cmd = guest_cmd
        self.host_cmd = host_cmd
        self.dropin = dropin
        self.tcp_port = tcp_port
        # [(side, regex)] that must match that side's stdout+stderr; (side, regex, n): exactly
        # n matches (0: never)
        self.checks = checks
        self.timeout = timeout
        self.loss_percent = loss_percent
        # Nonzero: the loss applies to the first this many IP bytes of RoCE traffic in each
        # direction only (an nftables quota), so the end of the run is loss free.
        self.loss_until_bytes = loss_until_bytes

    def server_cmd(self, server_ip):
        return (self.guest_cmd if self.server == "guest" else self.host_cmd).replace("{ip}", server_ip)

    def client_cmd(self, server_ip):
        cmd = self.host_cmd if self.server == "guest" else self.guest_cmd
        return cmd.replace("{ip}", server_ip) if "{ip}" in cmd else cmd + " " + server_ip

    def check(self, server, client):
        problems = []
        for side, regex, *count in self.checks:
            res = server if side == "server" else client
            text = res["out"] + res["err"]
            if count:  # (side, regex, n): exactly n matches
                n = len(re.findall(regex, text, re.M))
                if n != count[0]:
                    problems.append("%s output has /%s/ %d times, not %d" % (side, regex, n, count[0]))
            elif not re.search(regex, text, re.M):
                problems.append("%s output lacks /%s/" % (side, regex))
        return problems


_port = [18600]


def next_port():
    _port[0] += 1
    return _port[0]


def pingpong_loss_window(common, mtu_flag):
    """The IP bytes of RoCE traffic, per direction, that a lossy ibv_*_pingpong case drops in.

    The ibv_*_pingpong programs have no closing handshake: the client exits on its last
    receive completion, right after it ACKed the server's last SEND. If that ACK is lost,
    nobody is left to answer the server's retransmissions: rxe retries for ever (its completer
    treats retry_cnt 7, which the pingpongs set, as "infinite", as for rnr_retry) and a
    hardware or uroce server gives up with RETRY_EXC_ERR after 7 tries. Whatever the
    transport, 5 % loss would fail about one run in twenty at its very last packet. So the
    loss covers the first two thirds of the run (the messages before it still meet 5 % loss
    both ways, with retransmissions checked in the capture) and the closing exchange is
    loss free. Per direction: iters messages of size bytes in packets of at most MTU payload
    bytes plus 44 (IPv4 20, UDP 8, BTH 12, ICRC 4); the ACKs count too and end it a little
    sooner.
    """
    size = int(re.search(r"-s (\d+)", common).group(1))
    iters = int(re.search(r"-n (\d+)", common).group(1))
    mtu = int(mtu_flag.split()[-1]) if mtu_flag.strip() else 1024
    packets = iters * -(-size // mtu)
    return packets * (mtu + 44) * 2 // 3


def pingpong_cases(loss=0, only=None):
    out = []
    # (tool, uroce pingpong flags, common flags)
    tools = [
        ("rc", "--transport rc", "-s 4096 -n 200"),
        ("uc", "--transport uc", "-s 4096 -n 200"),
        ("ud", "--transport ud", "-s 2048 -n 200"),
        ("srq", "--srq -q 4", "-s 4096 -n 100 -q 4"),
    ]
    for tool, uflags, common in tools:
        if only and tool not in only:
            continue
        common_flags = "%s -c -g %d" % (common, GID)
        mtu = "" if tool == "ud" else " -m 1024"
        for host_impl in ("uroce", "dropin"):
            if loss and host_impl == "uroce":
                continue
            for server in ("guest", "host"):
                port = next_port()
                guest = "ibv_%s_pingpong -d %s -p %d %s%s" % (tool, GUEST_DEV, port, common_flags, mtu)
                if host_impl == "uroce":
                    ucommon = common.replace(" -q 4", "")
                    # No -g: uroce picks the GID of the address the TCP side channel uses
                    # (on uroce_br0 that is index 1, the same as -g 1).
                    host = "uroce pingpong %s -d %s -p %d %s -c%s --timeout 60" % (
                        uflags, HOST_DEV, port, ucommon, mtu)
                else:
                    host = "ibv_%s_pingpong -d %s -p %d %s%s" % (tool, HOST_DEV, port, common_flags, mtu)
                name = "%s_pingpong-%s-%s_server%s" % (tool, host_impl, server, "-loss%d" % loss if loss else "")
                checks = [("server", r"\d+ iters in"), ("client", r"\d+ iters in")]
                out.append(Case(name, server, guest, host, host_impl == "dropin", port, checks,
                                timeout=120 if loss else 60, loss_percent=loss,
                                loss_until_bytes=pingpong_loss_window(common, mtu) if loss else 0))
    return out


def perftest_cases(mtus=(1024, 4096), sizes=(8, 65536), tests=None, loss=0, iters=None):
    out = []
    all_tests = [("ib_send_bw", ""), ("ib_write_bw", ""), ("ib_read_bw", ""),
                 ("ib_atomic_bw", "-A CMP_AND_SWAP"), ("ib_atomic_bw", "-A FETCH_AND_ADD"),
                 ("ib_send_lat", ""), ("ib_write_lat", "")]
    for tool, extra in all_tests:
        tag = tool + ("-" + extra.split()[-1].lower() if extra else "")
        if tests and tag not in tests:
            continue
        for mtu in mtus:
            for size in ((8,) if tool == "ib_atomic_bw" else sizes):
                n = iters or (200 if "lat" in tool else (1000 if size <= 8 else 300))
                for server in ("guest", "host"):
                    port = next_port()
                    size_flag = "" if tool == "ib_atomic_bw" else "-s %d" % size
                    common = "-x %d -m %d %s -n %d -p %d -F %s" % (GID, mtu, size_flag, n, port, extra)
                    guest = "%s -d %s %s" % (tool, GUEST_DEV, common)
                    host = "%s -d %s %s" % (tool, HOST_DEV, common)
                    name = "%s-mtu%d-%dB-%s_server%s" % (tag, mtu, size, server,
                                                          "-loss%d" % loss if loss else "")
                    # The result row: "<bytes> <iterations> ..." on the client (perftest's
                    # reporting side for every test; send_bw's server prints one too).
                    row = r"^\s*%d\s+%d\s+\d" % (size, n)
                    checks = [("client", row)]
                    if tool == "ib_send_bw":
                        checks.append(("server", row))
                    out.append(Case(name, server, guest, host, True, port, checks,
                                    timeout=120 if loss else 60, loss_percent=loss))
    return out


def imm_cases(loss=0):
    out = []
    for op in ("send", "write", "mw"):
        for server in ("guest", "host"):
            port = next_port()
            # mw: WRITEs through a type 2 window the server binds, then SEND with Invalidate.
            iters = 50 if op == "mw" else 200
            cmd = "imm_pingpong --op %s --port %d --iters %d --size 5000" % (op, port, iters)
            guest = "imm_pingpong --dev %s %s" % (GUEST_DEV, cmd[len("imm_pingpong "):])
            host = "$UROCE_INTEROP_TOOLS/imm_pingpong --dev %s %s" % (HOST_DEV, cmd[len("imm_pingpong "):])
            if op == "mw":
                name = "mw_write_send_inv-dropin-%s_server%s" % (server, "-loss%d" % loss if loss else "")
                checks = [("server", r"^imm_pingpong: ok 50 RDMA WRITEs .* invalidated by SEND with Invalidate \(rkey"),
                          ("client", r"^imm_pingpong: ok 50 RDMA WRITEs .*; the next WRITE: remote access error")]
            else:
                name = "%s_with_imm-dropin-%s_server%s" % (op, server, "-loss%d" % loss if loss else "")
                checks = [("server", r"^imm_pingpong: ok 200 "), ("client", r"^imm_pingpong: ok 200 ")]
            out.append(Case(name, server, guest, host, True, port, checks,
                            timeout=120 if loss else 60, loss_percent=loss))
    return out


def rdmacm_cases():
    """rdma_cm programs: the host side is Debian's binary over uroce's librdmacm.so.1 and
    libibverbs.so.1 (drop-ins), which speak the IB CM on QP1 themselves; the guest side is
    the kernel's rdma_cm (rdma_ucm) on rxe0. Every connection is REQ/REP/RTU and
    DREQ/DREP (SIDR REQ/REP for udaddy) between the two CMs, in the capture."""
    out = []
    # (name, server command, client command, checks, the sides the server runs on)
    progs = []
    port = next_port()
    # rping: per ping the server RDMA-READs the client's buffer and RDMA-WRITEs it back, and
    # the client compares every byte; -v prints each ping. The server exits 0 once the
    # client has disconnected (DREQ/DREP).
    progs.append(("rping", "rping -s -a {ip} -p %d -C 20" % port,
                  "rping -c -a {ip} -p %d -C 20 -v" % port,
                  [("client", r"^ping data: rdma-ping-\d+: ", 20),
                   ("client", r"^ping data: rdma-ping-19: ", 1),
                   ("server", r"error", 0), ("client", r"error", 0)], ("guest", "host")))
    # perftest -R makes two rdma_cm connections on the same port: one to exchange its QP and
    # memory keys, then the test QP's, for which the server listens again after the exchange.
    # Its client sends that second REQ 0.3-5 ms after the exchange's last packet and does not
    # retry; a server in the TCG guest is often not listening again yet: its kernel CM answers
    # REJ 8 (invalid service ID) and the client gives up ("RDMA_CM_EVENT_REJECTED"). That is
    # perftest's own race, not a CM incompatibility (ib_write_bw lost it in 2 of 7 runs,
    # ib_send_lat in 1 of 1), so perftest -R runs with uroce as server only; rping, ucmatose
    # and udaddy cover the kernel CM as server (docs/interop.md finding 8).
    for tool, size, iters, servers in (("ib_write_bw", 65536, 300, ("host",)),
                                       ("ib_send_lat", 8, 200, ("host",))):
        port = next_port()
        cmd = "%s -R -s %d -n %d -p %d -F" % (tool, size, iters, port)
        checks = [("client", r"^\s*%d\s+%d\s+\d" % (size, iters))]
        progs.append((tool + "-R", cmd, cmd, checks, servers))
    port = next_port()
    # ucmatose: two RC connections, 20 SENDs each way on each.
    ucm = [(side, r"data transfers complete") for side in ("server", "client")]
    ucm += [(side, r"return status 0") for side in ("server", "client")]
    progs.append(("ucmatose", "ucmatose -b {ip} -p %d -c 2 -C 20" % port,
                  "ucmatose -s {ip} -p %d -c 2 -C 20" % port, ucm, ("guest", "host")))
    # udaddy: SIDR REQ/REP resolves the UD QP behind the service (always port 7174).
    progs.append(("udaddy", "udaddy -b {ip} -C 20", "udaddy -s {ip} -C 20", ucm, ("guest", "host")))
    for name, scmd, ccmd, checks, servers in progs:
        for server in servers:
            guest, host = (scmd, ccmd) if server == "guest" else (ccmd, scmd)
            out.append(Case("rdmacm-%s-%s_server" % (name, server), server, guest, host, True,
                            None, checks, timeout=60, ready="rdma_cm"))
    return out


def matrix(subset=False):
    _port[0] = 18600
    if subset:
        return (pingpong_cases(only=("rc", "ud"))
                + perftest_cases(mtus=(1024,), sizes=(65536,),
                                 tests=("ib_write_bw", "ib_read_bw", "ib_atomic_bw-fetch_and_add"))
                + perftest_cases(mtus=(4096,), sizes=(8,), tests=("ib_send_lat",))
                + imm_cases()[:2] + [c for c in imm_cases() if c.name.startswith("mw_")]
                + [c for c in pingpong_cases(loss=5, only=("rc",))]
                + perftest_cases(mtus=(1024,), sizes=(65536,), tests=("ib_write_bw",), loss=5, iters=200)
                # rdma_cm: all but ib_send_lat -R (ib_write_bw -R covers perftest's rdma_cm).
                + [c for c in rdmacm_cases() if "ib_send_lat" not in c.name]
                + kernel_tools.cases())
    return (pingpong_cases() + perftest_cases() + imm_cases()
            + pingpong_cases(loss=5, only=("rc",))
            + perftest_cases(mtus=(1024,), sizes=(65536,), tests=("ib_write_bw", "ib_read_bw"),
                             loss=5, iters=200)
            + imm_cases(loss=5)
            + rdmacm_cases()
            # Last: the earlier cases have moved rxe0's counters for `uroce stat` to show.
            + kernel_tools.cases())
