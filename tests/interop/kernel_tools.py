"""Guest stage: uroce's diagnosis tools on the guest's own kernel RDMA device (rxe0).

`uroce gids`, `uroce devinfo -v`, `uroce stat --json` and `uroce doctor` run inside the guest
against rxe0 (the binary and the libraries it links reach the guest in the per-run overlay,
interop.py build_overlay), and their output is checked against what the same guest says
through `ibv_devinfo -v` and `cat /sys/class/infiniband/rxe0/...`. The doctor case plants an
MTU mismatch with the host side (guest eth0 MTU 1500 against br0's 9000) for that case only
and restores it. Cases are named kernel_tools-*; they need no capture.
"""
import json
import re
import subprocess
import time

SYS = "/sys/class/infiniband/rxe0/ports/1"


def _sysfs_gids(guest):
    """{index: (gid, type, ndev)} of the non-zero GIDs, read with cat in the guest."""
    # One grep over the 1024 entries (a cat per file takes ~20 s in a TCG guest), then the
    # attributes of the non-zero ones.
    r = guest.run("cd %s && for i in $(cd gids && grep -v -x -H 0000:0000:0000:0000:0000:0000:0000:0000 * "
                  "| cut -d: -f1); do echo \"$i $(cat gids/$i) $(cat gid_attrs/ndevs/$i) "
                  "$(cat gid_attrs/types/$i)\"; done" % SYS, 20)
    out = {}
    for line in r["out"].splitlines():
        i, g, ndev, typ = line.split(" ", 3)
        out[int(i)] = (g, typ, ndev)
    return out


def _ibv_port_lines(text):
    """ibv_devinfo's port lines that uroce devinfo prints too: {field: value}."""
    fields = {}
    for line in text.splitlines():
        m = re.match(r"^\s+(state|max_mtu|active_mtu|link_layer|phys_state|node_guid|sys_image_guid|"
                     r"GID\[\s*\d+\]):\s+(.*)$", line)
        if m:
            fields[re.sub(r"\s+", "", m.group(1))] = m.group(2).strip()
    return fields


class GuestCheck:
    """A case that only runs commands (in the guest, and maybe a helper on the host)."""
    guest_only = True
    loss_percent = 0

    def __init__(self, name, fn, timeout=60):
        self.name = name
        self.fn = fn
        self.timeout = timeout

    def run(self, guest, harness):
        return self.fn(guest, harness)


def check_gids(guest, harness):
    problems = []
    r = guest.run("uroce gids -d rxe0", 30)
    if r["rc"] != 0:
        return ["uroce gids exit %d: %s" % (r["rc"], r["err"].strip())]
    sysfs = _sysfs_gids(guest)
    rows = [l.split("\t") for l in r["out"].splitlines() if l.startswith("rxe0\t")]
    seen = {}
    for row in rows:
        dev, port, index, gid, ipv4, ver, ndev = row
        seen[int(index)] = (gid, "RoCE v2" if ver == "v2" else "IB/RoCE v1", ndev)
    if seen != sysfs:
        problems.append("uroce gids rows %r differ from sysfs %r" % (seen, sysfs))
    if "n_gids_found=%d\n" % len(sysfs) not in r["out"]:
        problems.append("n_gids_found is not %d" % len(sysfs))
    v2 = [i for i, (g, t, nd) in sorted(sysfs.items())
          if t == "RoCE v2" and nd == "eth0" and g.startswith("0000:0000:0000:0000:0000:ffff:")]
    want = ("rxe0 port 1 (eth0): RoCE v2 over IPv4 is GID index %d (10.77.0.2): ib_write_bw -d rxe0 "
            "-i 1 -x %d, ibv_rc_pingpong -d rxe0 -i 1 -g %d" % (v2[0], v2[0], v2[0])) if v2 else None
    if want is None or want not in r["out"]:
        problems.append("no (or another) RoCE v2 IPv4 advice line; want %r in %r" % (want, r["out"]))
    # ibv_devinfo -v lists the same GIDs with the same types.
    iv = guest.run("ibv_devinfo -d rxe0 -v", 30)["out"]
    for i, (g, t, _) in sysfs.items():
        if not re.search(r"GID\[\s*%d\]:\s+\S+, %s" % (i, re.escape(t)), iv):
            problems.append("ibv_devinfo -v has no GID[%d] of type %s" % (i, t))
    return problems


def check_devinfo(guest, harness, state=""):
    problems = []
    u = guest.run("uroce devinfo -d rxe0 -v", 30)
    i = guest.run("ibv_devinfo -d rxe0 -v", 30)
    if u["rc"] != 0 or i["rc"] != 0:
        return ["uroce devinfo exit %s / ibv_devinfo exit %s: %s %s"
                % (u["rc"], i["rc"], u["err"].strip(), i["err"].strip())]
    mine, theirs = _ibv_port_lines(u["out"]), _ibv_port_lines(i["out"])
    for field in ("state", "max_mtu", "active_mtu", "link_layer", "phys_state", "node_guid",
                  "sys_image_guid") + tuple(k for k in theirs if k.startswith("GID[")):
        if mine.get(field) != theirs.get(field):
            problems.append("%s%s: uroce devinfo %r, ibv_devinfo %r"
                            % (state, field, mine.get(field), theirs.get(field)))
    if "\tkernel_driver:\t\t\trxe\n" not in u["out"]:
        problems.append("uroce devinfo does not name the rxe driver")
    return problems


def check_stat(guest, harness):
    def sysfs_counters():
        r = guest.run("cd %s/hw_counters && for f in *; do [ $f = lifespan ] || echo \"$f $(cat $f)\"; done"
                      % SYS, 20)
        return {l.split()[0]: int(l.split()[1]) for l in r["out"].splitlines()}
    before = sysfs_counters()
    r = guest.run("uroce stat -d rxe0 --json", 30)
    after = sysfs_counters()
    if r["rc"] != 0:
        return ["uroce stat exit %d: %s" % (r["rc"], r["err"].strip())]
    snap = json.loads(r["out"])
    if len(snap) != 1 or snap[0]["device"] != "rxe0" or snap[0]["kernel_driver"] != "rxe":
        return ["uroce stat --json: not one rxe0 entry: %s" % r["out"][:300]]
    counters = snap[0]["counters"]
    problems = []
    if set(counters) != set(before):
        problems.append("uroce stat names %s, sysfs hw_counters %s" % (sorted(counters), sorted(before)))
    for name, v in before.items():
        if not before[name] <= counters.get(name, -1) <= after[name]:
            problems.append("%s: uroce stat %s, sysfs %d then %d" % (name, counters.get(name), v, after[name]))
    # The earlier cases moved rxe's counters: the text shows them under rxe's names.
    t = guest.run("uroce stat -d rxe0", 30)["out"]
    if not t.startswith("link rxe0/1 kernel (rxe)\n") or (after.get("sent_pkts", 0) and "sent_pkts " not in t):
        problems.append("uroce stat text: %r" % t[:300])
    return problems


def check_doctor_mtu_mismatch(guest, harness):
    """guest eth0 MTU 1500 (rxe0 active_mtu 1024) against the host's br0 MTU 9000 (4096)."""
    problems = []
    # On the host (its netns): answers the guest's probes on UDP 4791 until 20 s pass quietly.
    listener = subprocess.Popen(["uroce", "doctor", "--listen", "--timeout", "20"], env=harness.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        guest.run("ip link set dev eth0 mtu 1500", 10)
        time.sleep(1)
        problems += check_devinfo(guest, harness, state="eth0 MTU 1500: ")
        r = guest.run("uroce doctor -d rxe0 --peer 10.77.0.1 --json", 60)
    finally:
        guest.run("ip link set dev eth0 mtu 9000", 10)
        time.sleep(1)
    listener.terminate()
    listener.wait()
    try:
        checks = {c["check"]: c for c in json.loads(r["out"])}
    except ValueError:
        return problems + ["uroce doctor --json exit %d: %s %s" % (r["rc"], r["out"][:300], r["err"][:300])]
    peer = checks.get("rxe0/1 mtu_peer")
    if not peer or peer["level"] != "WARN" or not peer["detail"].startswith(
            "active_mtu 1024 here (rxe0 on eth0), 4096 at 10.77.0.1 (MTU 9000)"):
        problems.append("rxe0/1 mtu_peer: %r" % (peer,))
    elif peer.get("fix") != "ip link set dev eth0 mtu 9000 (here) or the peer's MTU to 1104":
        problems.append("rxe0/1 mtu_peer fix: %r" % peer.get("fix"))
    mtu = checks.get("rxe0/1 mtu")
    if not mtu or mtu["level"] != "PASS" or "active_mtu 1024 (max_mtu 4096); eth0 MTU 1500" not in mtu["detail"]:
        problems.append("rxe0/1 mtu: %r" % (mtu,))
    for name in ("rxe0/1 state", "rxe0/1 gid"):
        if checks.get(name, {}).get("level") != "PASS":
            problems.append("%s: %r" % (name, checks.get(name)))
    if "GID index 1 (10.77.0.2)" not in checks.get("rxe0/1 gid", {}).get("detail", ""):
        problems.append("rxe0/1 gid does not name index 1: %r" % checks.get("rxe0/1 gid"))
    # Restored: the later cases see rxe0 at 4096 again.
    back = guest.run("ibv_devinfo -d rxe0", 20)["out"]
    if not re.search(r"active_mtu:\s+4096", back):
        problems.append("eth0 MTU not restored: %s" % back)
    return problems


def cases():
    return [GuestCheck("kernel_tools-gids", check_gids),
            GuestCheck("kernel_tools-devinfo", check_devinfo),
            GuestCheck("kernel_tools-stat", check_stat),
            GuestCheck("kernel_tools-doctor-mtu_mismatch", check_doctor_mtu_mismatch, timeout=120)]
