#!/usr/bin/python3
"""A FUSE file system whose FLUSH is never answered, for tests/e2e/hardening.sh.

usage: fuse_hang.py MOUNTPOINT FLAG_FILE [ANSWER_UID]
One file, /f (one byte), readable by everyone (allow_other). FLUSH, which the
kernel sends at every close() of an fd of it, appends a line to FLAG_FILE and
then waits for 600 s: whoever closes such an fd waits with it, whatever the
signals, until this process ends (its end aborts the connection: every
waiting request ends with an error). With ANSWER_UID, attributes are never
cached and a GETATTR of /f from anyone but that uid waits too (an fstat of
such an fd by lyhd would hang it). Runs in the foreground until killed."""
import errno
import stat
import sys
import time

from fusepy import FUSE, Operations, fuse_get_context


class Hang(Operations):
    def __init__(self, flag, answer_uid):
        self.flag = flag
        self.answer_uid = answer_uid

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path == "/f":
            if self.answer_uid is not None and fuse_get_context()[0] != self.answer_uid:
                with open(self.flag + ".getattr", "a") as f:
                    f.write("getattr uid %d\n" % fuse_get_context()[0])
                time.sleep(600)
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=1)
        raise OSError(errno.ENOENT, "")

    def readdir(self, path, fh):
        return [".", "..", "f"]

    def open(self, path, flags):
        return 0

    def read(self, path, size, offset, fh):
        return b"x"[offset:offset + size]

    def flush(self, path, fh):
        with open(self.flag, "a") as f:
            f.write("flush\n")
        time.sleep(600)
        return 0


if __name__ == "__main__":
    uid = int(sys.argv[3]) if len(sys.argv) > 3 else None
    opts = dict(attr_timeout=0, entry_timeout=0) if uid is not None else {}
    FUSE(Hang(sys.argv[2], uid), sys.argv[1], foreground=True, allow_other=True,
         nothreads=False, **opts)
