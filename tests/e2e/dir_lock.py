#!/usr/bin/python3
"""Hold a directory's lock for as long as one likes, for tests/e2e/hardening.sh.

usage: dir_lock.py serve MOUNTPOINT FLAG_FILE
           A FUSE file system (allow_other) with one file, /f (4096 bytes),
           whose READ is never answered (fuse_hang.py beside this file): each appends a line to FLAG_FILE and
           waits 600 s. Runs in the foreground until killed; its end aborts
           the connection, and every waiting READ ends with an error.
       dir_lock.py hold DIR FILE
           Open DIR for reading (else print "refused ERRNAME" and exit 3;
           FILE "-": print "opened" and exit 0 then), then getdents64 on it into a private mapping of FILE (the server's
           /f): the kernel takes DIR's lock, shared, for the call, and the
           call waits on the page fault, that is on the READ. Meanwhile an
           mkdir, rmdir or rename in DIR, or an rmdir of DIR itself, waits
           too, whoever makes it, root included. Prints "holding" before the
           call and "released RESULT ERRNO" once it returns (the server gone).
       dir_lock.py rename SRC DST
           rename(SRC, DST): the kernel locks both parent directories before
           it checks any permission but search, so with DST's parent held
           (above) a rename out of any directory one may search holds that
           directory's lock for good. Prints "renamed" or "refused ERRNAME".

Nothing here needs root: a user with fusermount3 can do all of it."""
import ctypes
import errno
import mmap
import os
import platform
import sys
import time

SIZE = 4096


def serve(mountpoint, flag):
    from fusepy import FUSE

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from fuse_hang import Hang

    class Stall(Hang):
        """fuse_hang.py's file system with the roles swapped: FLUSH answered,
        READ never; /f is one page long (what hold maps)."""

        def getattr(self, path, fh=None):
            attrs = super().getattr(path, fh)
            if path == "/f":
                attrs["st_size"] = SIZE
            return attrs

        def read(self, path, size, offset, fh):
            with open(self.flag, "a") as f:
                f.write("read %d %d\n" % (offset, size))
            time.sleep(600)
            return b""

        def flush(self, path, fh):
            return 0

    FUSE(Stall(flag, None), mountpoint, foreground=True, allow_other=True, nothreads=False)


def hold(directory, path):
    nr = {"x86_64": 217, "aarch64": 61}.get(platform.machine())
    if nr is None:
        print("no getdents64 number for", platform.machine(), flush=True)
        sys.exit(2)
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        print("refused", errno.errorcode.get(e.errno, e.errno), flush=True)
        sys.exit(3)
    if path == "-":
        print("opened", flush=True)
        return
    fd = os.open(path, os.O_RDONLY)
    m = mmap.mmap(fd, SIZE, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    buf = (ctypes.c_char * SIZE).from_buffer(m)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    print("holding", flush=True)
    r = libc.syscall(ctypes.c_long(nr), ctypes.c_long(dfd), ctypes.c_void_p(ctypes.addressof(buf)),
                     ctypes.c_long(SIZE))
    print("released", r, ctypes.get_errno(), flush=True)


def rename(src, dst):
    try:
        os.rename(src, dst)
        print("renamed", flush=True)
    except OSError as e:
        print("refused", errno.errorcode.get(e.errno, e.errno), flush=True)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "rename":
        rename(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "hold":
        hold(sys.argv[2], sys.argv[3])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
