#!/usr/bin/python3
# A real Kazoo 2.8 client (Debian's python3-kazoo) for the interop test:
#   kazoo_peer.py <connect> <path> hold|try <ms>
# hold: Lock.acquire (waiting up to <ms>), print ACQUIRED (or NOT_ACQUIRED and exit), wait for a
#       line or EOF on stdin, release, print RELEASED.
# try:  Lock.acquire(<ms>), print ACQUIRED or NOT_ACQUIRED, release, exit.
# Kazoo's own nodes are <uuid hex>__lock__<seq10>; extra_lock_patterns=["-lock-"] (Kazoo's
# option "for cross-implementation compatibility", since 2.7.1) makes it count Curator's and
# dlock's _c_<uuid>-lock-<seq10> nodes as contenders too.
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout


def main():
    connect, path, action, ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    zk = KazooClient(hosts=connect, timeout=10.0)
    zk.start(timeout=10.0)
    try:
        lock = zk.Lock(path, "kazoo-peer", extra_lock_patterns=["-lock-"])
        try:
            got = lock.acquire(blocking=True, timeout=ms / 1000.0)
        except LockTimeout:
            got = False
        print("ACQUIRED" if got else "NOT_ACQUIRED", flush=True)
        if not got:
            return
        if action == "hold":
            sys.stdin.readline()
        lock.release()
        print("RELEASED", flush=True)
    finally:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    main()
