"""Run the code under test in a process that cannot reach back.

A code world's hidden tests import this module (it sits next to them in
/tests) and never import the code under test themselves: run() starts it in
a process of its own, and the test compares what it printed.

- Importing this module makes the test runner non-dumpable
  (PR_SET_DUMPABLE 0): no other process of the clause reads or writes its
  memory or its descriptors through /proc/PID/mem or /proc/PID/fd, or
  attaches to it.
- run() starts the child through the sandbox's confine tool
  (/opt/apodex/confine -hide /tests -hide /report): a Landlock layer of its
  own that cannot read, list or run the hidden tests (/tests) or the report
  directory (/report) and, being a nested Landlock domain, cannot ptrace
  the runner or open its /proc files; on Linux 6.12 and later it cannot
  signal it either.
- Without Landlock (or outside an Apodex sandbox) confine is missing or
  refuses, and the child never runs: the hidden tests could not be hidden.

The verifier's sandbox adds its own refusals (ptrace, process_vm_readv and
_writev, pidfd_getfd; /proc read-only) for every clause.
"""
import ctypes
import subprocess

CONFINE = "/opt/apodex/confine"
HIDDEN = ("/tests", "/report")

if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    raise OSError(ctypes.get_errno(), "isolate: PR_SET_DUMPABLE")


def run(argv, hidden=HIDDEN, timeout=120):
    """Runs argv as the code under test and returns its CompletedProcess
    (stdout and stderr as text)."""
    cmd = [CONFINE]
    for h in hidden:
        cmd += ["-hide", h]
    return subprocess.run(cmd + ["--"] + list(argv), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout, cwd="/tmp")
