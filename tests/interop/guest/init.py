#!/usr/bin/python3
"""PID 1 of the interop guest: brings up rdma_rxe on eth0, then serves commands over TCP.

The kernel command line carries the settings (uroce.ip=A/N uroce.mtu=M uroce.agent=PORT).
Protocol: one JSON request per TCP connection, one JSON answer back, newline-terminated.
  {"op": "run", "cmd": "...", "timeout": s}     -> {"rc", "out", "err", "timed_out"}
  {"op": "spawn", "cmd": "..."}                 -> {"id"}
  {"op": "wait", "id": n, "timeout": s}         -> {"rc", "out", "err", "timed_out"}
A command that outlives its timeout is killed (SIGKILL) and answered with timed_out true.
No login, no shell on the console: nothing in the guest waits for a person.
"""
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading

ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
       "LANG": "C.UTF-8"}


def console(msg):
    sys.stdout.write("uroce-guest: " + msg + "\n")
    sys.stdout.flush()


def sh(cmd):
    r = subprocess.run(cmd, shell=True, env=ENV, capture_output=True, text=True)
    if r.returncode != 0:
        console("FAILED (%d): %s\n%s%s" % (r.returncode, cmd, r.stdout, r.stderr))
    return r


def boot():
    os.environ.update(ENV)
    for fs, where in (("proc", "/proc"), ("sysfs", "/sys"), ("devtmpfs", "/dev"), ("tmpfs", "/run")):
        subprocess.run(["busybox", "mount", "-t", fs, fs, where], env=ENV)
    args = dict(a.split("=", 1) for a in open("/proc/cmdline").read().split() if "=" in a)
    for mod in open("/etc/uroce-modules").read().split():
        sh("insmod " + mod)
    ip, mtu = args.get("uroce.ip", "10.77.0.2/24"), args.get("uroce.mtu", "9000")
    sh("ip link set lo up")
    sh("ip link set eth0 mtu %s up" % mtu)
    sh("ip addr add %s dev eth0" % ip)
    sh("rdma link add rxe0 type rxe netdev eth0")
    console("kernel " + os.uname().release)
    console(sh("rdma link show").stdout.strip())
    return int(args.get("uroce.agent", "7070"))


class Jobs:
    def __init__(self):
        self.lock = threading.Lock()
        self.procs = {}
        self.next_id = 1

    def spawn(self, cmd):
        p = subprocess.Popen(cmd, shell=True, env=ENV, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        with self.lock:
            jid = self.next_id
            self.next_id += 1
            self.procs[jid] = p
        return jid

    def wait(self, jid, timeout):
        with self.lock:
            p = self.procs.pop(jid)
        timed_out = False
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, 9)
            out, err = p.communicate()
        return {"rc": p.returncode, "out": out, "err": err, "timed_out": timed_out}


JOBS = Jobs()


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        req = json.loads(self.rfile.readline())
        if req["op"] == "run":
            ans = JOBS.wait(JOBS.spawn(req["cmd"]), req.get("timeout", 60))
        elif req["op"] == "spawn":
            ans = {"id": JOBS.spawn(req["cmd"])}
        elif req["op"] == "wait":
            ans = JOBS.wait(req["id"], req.get("timeout", 60))
        else:
            ans = {"error": "unknown op " + str(req["op"])}
        self.wfile.write((json.dumps(ans) + "\n").encode())


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main():
    port = boot()
    with Server(("0.0.0.0", port), Handler) as srv:
        console("READY agent on port %d" % port)
        srv.serve_forever()


if __name__ == "__main__":
    try:
        main()
    except BaseException as e:  # PID 1 must not exit: the kernel would panic and hide the error.
        console("init failed: %r" % (e,))
        while True:
            threading.Event().wait(3600)
