"""Run the code under test in a process that cannot reach back.

A code world's hidden tests import this module (it sits next to them in
/tests) and never import the code under test themselves: run() starts it in
a process of its own, and the test compares what it printed.

- Importing this module makes the test runner non-dumpable
  (PR_SET_DUMPABLE 0): no other process of the clause reads or writes its
  memory or its descriptors through /proc/PID/mem or /proc/PID/fd, or
  attaches to it.
- run() gives the child a Landlock layer of its own that cannot read the
  hidden tests (/tests) or the report directory (/report) and, being a
  nested Landlock domain, cannot ptrace the runner; on Linux 6.12 and
  later (Landlock ABI 6) it cannot signal it either.
- Without Landlock run() raises: the hidden tests could not be hidden.

The verifier's sandbox adds its own refusals (ptrace, process_vm_readv and
_writev, pidfd_getfd; /proc read-only) for every clause.
"""
import ctypes
import os
import struct
import subprocess

HIDDEN = ("/tests", "/report")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
if _libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    raise OSError(ctypes.get_errno(), "isolate: PR_SET_DUMPABLE")

_CREATE, _ADD, _RESTRICT = 444, 445, 446  # the same numbers on every architecture
_EXECUTE, _READ_FILE, _READ_DIR = 1, 4, 8
_SCOPE = 1 | 2  # abstract unix sockets, signals (ABI 6)


def _call(nr, *args):
    r = _libc.syscall(ctypes.c_long(nr), *[a if isinstance(a, ctypes.Array) else ctypes.c_long(a) for a in args])
    if r < 0:
        raise OSError(ctypes.get_errno(), "isolate: landlock system call %d" % nr)
    return r


def _ruleset(hidden):
    """A ruleset that reads and executes beneath every top-level entry but
    the hidden ones."""
    try:
        abi = _call(_CREATE, 0, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    except OSError as e:
        raise OSError(e.errno, "isolate: this kernel has no Landlock: the hidden tests cannot be hidden from the code under test") from None
    handled = _EXECUTE | _READ_FILE | _READ_DIR
    attr = struct.pack("=QQQ", handled, 0, _SCOPE) if abi >= 6 else struct.pack("=Q", handled)
    rs = _call(_CREATE, ctypes.create_string_buffer(attr, len(attr)), len(attr), 0)
    for name in sorted(os.listdir("/")):
        path = "/" + name
        if path in hidden:
            continue
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            access = handled if os.path.isdir(path) else _EXECUTE | _READ_FILE
            _call(_ADD, rs, 1, ctypes.create_string_buffer(struct.pack("=Qi", access, fd), 12), 0)
        finally:
            os.close(fd)
    return rs


def run(argv, hidden=HIDDEN, timeout=120):
    """Runs argv as the code under test and returns its CompletedProcess
    (stdout and stderr as text)."""
    rs = _ruleset(hidden)

    def restrict():
        if _libc.prctl(38, 1, 0, 0, 0) != 0 or _libc.syscall(ctypes.c_long(_RESTRICT), ctypes.c_long(rs), ctypes.c_long(0)) != 0:
            os._exit(126)  # never run the code under test unrestricted

    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, preexec_fn=restrict, cwd="/tmp")
    finally:
        os.close(rs)
