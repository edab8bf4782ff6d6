"""Ctrl-C and SIGTERM are handled by the main process alone; the processes it starts are deaf to Ctrl-C from birth.

A terminal's Ctrl-C reaches the whole process group. A child that has not yet set up its own handling (a spawned
worker still importing torch or PyBullet) would die of it with a traceback of its own; a parent interrupted while
it hands a child its pickled arguments would leave that child reading a truncated pickle (another traceback).
So inside :func:`children_ignore_interrupts`:

- SIGINT and SIGTERM are *deferred* in the parent: recorded, then raised again when the block ends (with the
  handlers of before: Ctrl-C becomes the KeyboardInterrupt it would have been); a block is a process start, from
  milliseconds to a few seconds (a DataLoader worker reads its arguments while importing torch);
- each ``spawn`` start forks and execs with both *blocked* (multiprocessing's ``spawnv_passfds``, wrapped; the
  pattern of the stdlib's own resource tracker): the signal mask survives ``exec``, so the child cannot be reached
  by them from its first instruction, and the parent loses none (one that arrives meanwhile waits, then reaches
  the deferring handler; ignoring them in the parent for the fork instead would drop one that lands then).

The children call :func:`ignore_interrupts_in_child` first thing: both ignored, then unblocked (a pending one is
dropped). The parent catches the interrupt, stops its
children (they also leave when its pipes close) and says how to resume (``grasp_s2r.cli``). Hand-written: no
library does this; it is a few lines around one stdlib function.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import resource_sharer
from multiprocessing import util as mp_util
from types import TracebackType
from typing import Any

INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def children_ignore_interrupts() -> Iterator[None]:
    """Processes spawned inside this block are born ignoring SIGINT and SIGTERM; one of those that reaches this
    process meanwhile is raised again when the block ends (see the module docstring). Outside the main thread,
    where Python cannot change handlers: nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def defer(signum: int, frame: object) -> None:
        pending.append(signum)

    spawn = mp_util.spawnv_passfds

    def spawn_ignoring_interrupts(path: Any, args: Any, passfds: Any) -> int:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
        try:
            return spawn(path, args, passfds)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    previous = {s: signal.signal(s, defer) for s in INTERRUPTS}
    mp_util.spawnv_passfds = spawn_ignoring_interrupts
    try:
        yield
    finally:
        mp_util.spawnv_passfds = spawn
        for s, handler in previous.items():
            signal.signal(s, handler)
        if pending:  # through the handler of before: Ctrl-C -> KeyboardInterrupt, SIGTERM -> the CLI's, ...
            signal.raise_signal(pending[0])


def ignore_interrupts_in_child(ignore_sigterm: bool = True, *_: object) -> None:
    """First thing in a child process: keep ignoring Ctrl-C, and SIGTERM unless ``ignore_sigterm`` is False (e.g. for
    DataLoader workers, which their parent may stop with SIGTERM: default action). Extra positional arguments are
    accepted so that it can serve as a ``worker_init_fn``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if ignore_sigterm else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)  # blocked since the spawn (see the module docstring)
    threading.excepthook = _quiet_cut_handover
    sys.excepthook = _quiet_cut_handover_sys


def dataloader_worker_init(worker_id: int) -> None:
    """A DataLoader worker's ``worker_init_fn``: deaf to Ctrl-C (its parent handles it), stoppable by SIGTERM, and
    quick to end. A worker writes no file; at its exit the collector need not walk the heap that torch and PyBullet
    built (``gc.freeze`` at exit: about 1 s less on 2 cores), time an interrupted command spends waiting for it."""
    ignore_interrupts_in_child(ignore_sigterm=False)
    end_with_parent()
    atexit.register(gc.freeze)


PR_SET_PDEATHSIG = 1
"""prctl(2)'s option: the signal the kernel sends this process when the thread that started it ends."""


def end_with_parent() -> None:
    """In a child process on Linux: ask the kernel for SIGTERM when the parent ends, even by ``kill -9``. Without it
    a DataLoader worker notices its parent's death only at torch's next status check, up to 5 s later, and runs on
    until then. A child whose parent ended before the call ends at once. Elsewhere: nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:
        os._exit(0)


def _is_cut_handover(exc_type: type[BaseException], tb: TracebackType | None) -> bool:
    """Whether an exception is a descriptor hand-over that the other side hung up on: a connection error raised
    through multiprocessing's ``resource_sharer``."""
    in_sharer = False
    while tb is not None:
        in_sharer |= tb.tb_frame.f_code.co_filename == resource_sharer.__file__
        tb = tb.tb_next
    return in_sharer and issubclass(exc_type, (ConnectionError, EOFError))


def _quiet_cut_handover(args: threading.ExceptHookArgs) -> None:
    """A child hands tensors to its parent by file descriptor (torch's default sharing: multiprocessing's
    ``resource_sharer`` serves them from a thread of the child). A parent interrupted in the middle of taking one
    closes the connection, and the serving thread would print a traceback of its own after the parent's one-line
    message; the hand-over is moot then, so it ends quietly. Any other thread's exception is shown as ever."""
    if not _is_cut_handover(args.exc_type, args.exc_traceback):
        threading.__excepthook__(args)


def _quiet_cut_handover_sys(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """The same for ``sys.excepthook``: the serving thread's loop catches every error of a hand-over itself and shows
    it through ``sys.excepthook`` (``resource_sharer._ResourceSharer._serve``), never reaching the thread hook."""
    if not _is_cut_handover(exc_type, tb):
        sys.__excepthook__(exc_type, exc, tb)
