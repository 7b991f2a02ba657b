#!/usr/bin/python3
"""Generates a "not supported" stand-in for a provider library (libmlx5.so.1, libefa.so.1).

Inputs: the real library's exported (symbol, version) pairs -- read from the library with
readelf when it is installed, else from the checked-in list (NAME.symbols) -- the version
definitions in order, the public header for the prototypes, and the hand-written source
whose functions are kept as they are (perftest depends on their behaviour).

Outputs: a version script (every version node, every symbol in its node) and a C++ file
defining every symbol the hand-written source does not, each answering "not supported" in its
family's convention (docs/ibverbs.md has the table):
  void -> nothing; bool -> false; pointer -> NULL with errno = EOPNOTSUPP;
  int and other integers -> EOPNOTSUPP with errno = EOPNOTSUPP (mlx5dv(7)/efadv(7): "0 on
  success or the value of errno"), except the functions in EXCEPTIONS.

  gen_standin.py --lib PATH --symbols FILE --header FILE --keep FILE --map OUT --cpp OUT
  gen_standin.py --lib PATH --dump      (prints the list format of NAME.symbols)
"""
import argparse
import os
import re
import subprocess
import sys

# Functions whose documented failure convention is not "return the errno value".
EXCEPTIONS = {
    "mlx5dv_is_supported": "return false;",  # "not an mlx5 device"
    # man mlx5dv_devx_get_event: "-1 will be returned and errno was set".
    "mlx5dv_devx_get_event": "errno = EOPNOTSUPP;\n  return -1;",
    # Returns a file descriptor: 0 would be a valid one, so -1 with errno.
    "mlx5dv_vfio_get_events_fd": "errno = EOPNOTSUPP;\n  return -1;",
    # man mlx5dv_qp_cancel_posted_send_wrs: "or -errno on error".
    "mlx5dv_qp_cancel_posted_send_wrs": "errno = EOPNOTSUPP;\n  return -EOPNOTSUPP;",
}


def read_library(lib):
    """(versions in definition order, [(symbol, version, is_default)]) from readelf."""
    out = subprocess.run(["readelf", "-V", "-W", lib], check=True, capture_output=True,
                         text=True).stdout
    versions = []
    in_defs = False
    for line in out.splitlines():
        if "Version definition section" in line:
            in_defs = True
        elif "Version needs section" in line or "Version symbols section" in line:
            in_defs = False
        elif in_defs:
            m = re.search(r"Flags: (\S+).*Name: (\S+)", line)
            if m and m.group(1) != "BASE":
                versions.append(m.group(2))
    out = subprocess.run(["readelf", "--dyn-syms", "-W", lib], check=True,
                         capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8 or f[3] != "FUNC" or f[6] == "UND" or f[4] not in ("GLOBAL", "WEAK"):
            continue
        m = re.fullmatch(r"(\w+)(@@?)(\S+)", f[7])
        if m:
            syms.append((m.group(1), m.group(3), m.group(2) == "@@"))
    return versions, sorted(set(syms))


def dump(versions, syms):
    lines = ["version " + v for v in versions]
    lines += [f"{s} {v} {'default' if d else 'compat'}" for s, v, d in syms]
    return "\n".join(lines) + "\n"


def parse_list(text):
    versions, syms = [], []
    for line in text.splitlines():
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        if f[0] == "version":
            versions.append(f[1])
        else:
            syms.append((f[0], f[1], f[2] == "default"))
    return versions, syms


def prototypes(header_text):
    """name -> (return type, parameter list) of every function declared in the header."""
    text = re.sub(r"/\*.*?\*/", " ", header_text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#[^\n]*(\\\n[^\n]*)*", " ", text, flags=re.M)
    protos = {}
    for m in re.finditer(r"([A-Za-z_][\w\s\*]*?)\b(\w+)\s*\(([^;{}]*?)\)\s*;", text):
        ret = " ".join(m.group(1).split())
        name = m.group(2)
        ret = re.sub(r"^(extern|static|inline)\s+", "", ret)
        if not ret or ret in ("return", "else"):
            continue
        protos.setdefault(name, (ret, " ".join(m.group(3).split())))
    return protos


def body_for(name, ret):
    if name in EXCEPTIONS:
        return EXCEPTIONS[name]
    if ret.endswith("*"):
        return "errno = EOPNOTSUPP;\n  return nullptr;"
    if ret == "void":
        return "return;"
    if ret == "bool":
        return "return false;"
    return f"errno = EOPNOTSUPP;\n  return static_cast<{ret}>(EOPNOTSUPP);" if ret != "int" \
        else "errno = EOPNOTSUPP;\n  return EOPNOTSUPP;"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--symbols")
    ap.add_argument("--header")
    ap.add_argument("--include")
    ap.add_argument("--keep")
    ap.add_argument("--map")
    ap.add_argument("--cpp")
    ap.add_argument("--dump", action="store_true")
    a = ap.parse_args()

    if a.dump:
        sys.stdout.write(dump(*read_library(a.lib)))
        return 0
    if os.path.exists(a.lib):
        versions, syms = read_library(a.lib)
        source = a.lib
    else:
        with open(a.symbols) as f:
            versions, syms = parse_list(f.read())
        source = a.symbols
        print(f"gen_standin: {a.lib} not installed, using the checked-in {a.symbols}",
              file=sys.stderr)
    with open(a.header) as f:
        protos = prototypes(f.read())
    with open(a.keep) as f:
        keep = set(re.findall(r"^[^\s/#].*?\b(\w+)\(", f.read(), flags=re.M))

    missing = [s for s, _, _ in syms if s not in protos]
    if missing:
        print(f"gen_standin: no prototype in {a.header} for: {' '.join(missing)}; "
              "install the libibverbs-dev matching the library", file=sys.stderr)
        return 1

    nodes = {v: [] for v in versions}
    for s, v, _ in syms:
        if v not in nodes:
            print(f"gen_standin: {s} has version {v} that the library does not define",
                  file=sys.stderr)
            return 1
        nodes[v].append(s)
    out = [f"/* Generated by gen_standin.py from {os.path.basename(source)}: do not edit. */", ""]
    for i, v in enumerate(versions):
        out.append(f"{v} {{")
        if nodes[v]:
            out.append("\tglobal:")
            out += [f"\t\t{s};" for s in sorted(set(nodes[v]))]
        if i == 0:
            out.append("\tlocal: *;")
        out.append("}" + (f" {versions[i - 1]};" if i else ";"))
        out.append("")
    with open(a.map, "w") as f:
        f.write("\n".join(out))

    cpp = [
        f"// Generated by gen_standin.py from {os.path.basename(source)} and",
        f"// <infiniband/{os.path.basename(a.header)}>: do not edit. Every exported function",
        f"// {os.path.basename(a.keep)} does not define answers \"not supported\" (docs/ibverbs.md).",
        f"#include <infiniband/{os.path.basename(a.header)}>",
        "",
        "#include <cerrno>",
        "",
        "#pragma GCC diagnostic ignored \"-Wunused-parameter\"",
        "",
        "extern \"C\" {",
        "",
    ]
    # A symbol with an older version too is two entry points bound by .symver (name@OLD and
    # name@@DEFAULT), as rdma-core builds it; the map lists the name in both nodes.
    versioned = {s for s, _, default in syms if not default}
    for s, v, default in syms:
        ret, params = protos[s]
        if s not in versioned:
            if s in keep:
                continue
            cpp.append(f"{ret} {s}({params}) {{\n  {body_for(s, ret)}\n}}\n")
            continue
        if s in keep:
            print(f"gen_standin: {s} has several versions; define it here, not in {a.keep}",
                  file=sys.stderr)
            return 1
        alias = f"uroce_{s}_{v.replace('.', '_')}"
        cpp.append(f"__asm__(\".symver {alias},{s}{'@@' if default else '@'}{v}\");")
        cpp.append(f"{ret} {alias}({params}) {{\n  {body_for(s, ret)}\n}}\n")
    cpp.append("}  // extern \"C\"")
    with open(a.cpp, "w") as f:
        f.write("\n".join(cpp) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
