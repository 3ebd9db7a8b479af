"""Three network namespaces in a row, so that a host can vanish without a word.

    near (evalgate, a router)  10.77.1.1 --- 10.77.1.2  mid  10.77.2.1 --- 10.77.2.2  far (engine)

`near` and `far` reach each other through `mid`, which forwards. `cut()` sets far's end of the
link down: mid then drops every packet for far into a dead link, with no ICMP error back (mid
knows far's MAC for good, so it never fails to resolve it and says so): to near, far has
vanished exactly as a node does that loses power, and nothing resets a connection.

Needs root and `ip` (iproute2); `available()` says why not when it cannot make them.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

NEAR_IP, MID_NEAR_IP, MID_FAR_IP, FAR_IP = "10.77.1.1", "10.77.1.2", "10.77.2.1", "10.77.2.2"
IP = shutil.which("ip") or "/usr/sbin/ip"
_MADE = itertools.count()
"""Namespaces made by this process: several may stand at once, each named apart."""


def _ip(*args: str) -> str:
    done = subprocess.run([IP, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def available() -> str | None:
    """None when namespaces can be made here; else why not."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"eg-probe-{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except RuntimeError as exc:
        return f"cannot make a network namespace here ({exc})"
    _ip("netns", "del", probe)
    return None


class Namespaces:
    """near, mid and far, joined by two veth pairs; removed by `close()`."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 100000}{next(_MADE) % 100}"
        self.near, self.mid, self.far = (f"eg{n}-{tag}" for n in ("near", "mid", "far"))
        self.far_link = f"egf{tag}"
        try:
            self._build(tag)
        except BaseException:  # nothing half-made is left behind
            self.close()
            raise

    def _build(self, tag: str) -> None:
        for name in (self.near, self.mid, self.far):
            _ip("netns", "add", name)
        self._join((self.near, f"egn{tag}", NEAR_IP), (self.mid, f"egm{tag}", MID_NEAR_IP))
        self._join((self.mid, f"egx{tag}", MID_FAR_IP), (self.far, self.far_link, FAR_IP))
        for name in (self.near, self.mid, self.far):
            _ip("-n", name, "link", "set", "lo", "up")
        _ip("-n", self.near, "route", "add", "default", "via", MID_NEAR_IP)
        _ip("-n", self.far, "route", "add", "default", "via", MID_FAR_IP)
        _ip("netns", "exec", self.mid, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        far_mac = _ip("-n", self.far, "-br", "link", "show", self.far_link).split()[2]
        _ip("-n", self.mid, "neigh", "replace", FAR_IP, "lladdr", far_mac, "dev", f"egx{tag}",
            "nud", "permanent")  # fmt: skip

    @staticmethod
    def _join(left: tuple[str, str, str], right: tuple[str, str, str]) -> None:
        """A veth pair between two namespaces, each end (namespace, device, address) up."""
        _ip("link", "add", left[1], "netns", left[0], "type", "veth", "peer", right[1], "netns",
            right[0])  # fmt: skip
        for ns, dev, address in (left, right):
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")

    def popen_in(self, ns: str, args: Sequence[str], **kw: Any) -> subprocess.Popen[str]:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen([IP, "netns", "exec", ns, *args], text=True, **kw)

    def python_in(self, ns: str, code: str, **kw: Any) -> subprocess.Popen[str]:
        return self.popen_in(ns, [sys.executable, "-c", code], **kw)

    def cut(self) -> None:
        """Far vanishes: its end of the link goes down, and mid drops what it sends there."""
        _ip("-n", self.far, "link", "set", self.far_link, "down")

    def close(self) -> None:
        for name in (self.near, self.mid, self.far):
            subprocess.run([IP, "netns", "del", name], capture_output=True, check=False)

    def __enter__(self) -> Namespaces:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
