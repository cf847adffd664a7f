"""Command line: ``jaxmb gait`` (the quick-start job), ``jaxmb reach``, ``jaxmb optimal``
and ``jaxmb identify``, one module each (:mod:`.gait`, :mod:`.reach`, :mod:`.optimal`,
:mod:`.identify`, each with its ``add_command(subparsers)``), and the output-folder
writer they share (:mod:`._output`). ``jaxmb bench`` only says that the benchmarks run
from a source checkout (``python -m benchmarks``): they are not installed with the
package.

The command line switches float64 on for its own computations, and JAX's persistent
compilation cache (see :func:`_compile_cache`); the library does neither on import.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import sys
import threading
import warnings

import jax

from .. import reaching
from . import gait, identify, optimal, reach, residuals

__all__ = ["main", "default_cache_dir"]

# the modules of the subcommands added after ``reach`` and ``bench``, each with its
# ``add_command(subparsers)``: a subcommand's arguments and work live in its module
_COMMANDS = (gait, identify, optimal, residuals)

#: the movement times (s) that ``jaxmb reach`` and ``jaxmb optimal`` accept: the
#: fastest human reaches take about 0.1 s, slow ones tens of seconds
_DURATION = (0.05, 60.0)


def _cmd_bench(args):
    """``jaxmb bench``, removed: the benchmarks are the ``benchmarks/`` folder of a source
    checkout, which is not installed with the package (the command could never find it
    from the installed ``jaxmb``); say where they run instead of running anything."""
    print("jaxmb bench: error: removed: the benchmarks are not installed with the package; in a source "
          "checkout (pip install -e \".[bench]\"), run them from its root: python -m benchmarks "
          "(python -m benchmarks --help; benchmarks/README.md)", file=sys.stderr)
    return 2


def default_cache_dir() -> str:
    """Where the command line keeps compiled programs: ``$JAXMB_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/jaxmb/xla``, else ``~/.cache/jaxmb/xla``."""
    path = os.environ.get("JAXMB_CACHE_DIR")
    if path:
        return path
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxmb", "xla")


def _compile_cache(path: str | None, explicit: bool = False) -> str | None:
    """Switch on JAX's persistent compilation cache for this command-line process.

    The same command run again (on other files of the same shapes, or with options
    that do not change the programs) then loads its compiled programs from disk
    instead of compiling them again (the times, cold and warm, are in the
    documentation's performance page).

    ``path`` None (``--no-cache``): JAX's cache is switched off, even one set by
    ``JAX_COMPILATION_CACHE_DIR``. Otherwise a cache that JAX was already given
    (that variable, or a caller's ``jax.config``) is kept, unless ``explicit``
    (``--cache-dir``). Every program is stored however short its compile, unless
    ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` says otherwise. A folder that
    cannot be created or written means no cache and a note on stderr, never a
    failure. Returns the folder in use, or None."""
    if path is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    if jax.config.jax_compilation_cache_dir and not explicit:
        return jax.config.jax_compilation_cache_dir
    try:
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.W_OK):
            raise OSError("not writable")
    except OSError as e:
        print(f"jaxmb: no compilation cache ({path}: {e})", file=sys.stderr)
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return path


def _plain(text: str) -> str:
    """reST roles and literals as plain text (``:func:`jaxmb.x``` and ````x```` -> x)."""
    return re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text).replace("``", "")


def _parser() -> argparse.ArgumentParser:
    """The argparse tree: the cache options, then each command's module adds its own."""
    parser = argparse.ArgumentParser(
        prog="jaxmb", description="Planar multibody dynamics in JAX",
        epilog="Compiled programs are kept in a cache folder between runs (default "
               f"{default_cache_dir()}; JAXMB_CACHE_DIR sets it); --no-cache switches that off.",
    )  # fmt: skip
    parser.add_argument("--cache-dir", default=None,
                        help="folder of the persistent compilation cache (default: $JAX_COMPILATION_CACHE_DIR when "
                             "JAX was given one, else $JAXMB_CACHE_DIR, else $XDG_CACHE_HOME/jaxmb/xla, "
                             "else ~/.cache/jaxmb/xla)")  # fmt: skip
    parser.add_argument("--no-cache", action="store_true", help="compile everything afresh; keep nothing on disk")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{gait,reach,optimal,identify,residuals}")
    reach.add_command(sub)
    # not listed in --help (it only points elsewhere): sub's metavar names the others
    b = sub.add_parser("bench", add_help=False, prefix_chars="+")  # any arguments (--help, --only ...): the pointer, not a usage error
    b.add_argument("rest", nargs="*")
    b.set_defaults(func=_cmd_bench)
    for command in _COMMANDS:  # each module's add_command(sub) adds its subcommand
        command.add_command(sub)
    for p in sub.choices.values():  # descriptions from docstrings: no reST markup in --help
        if p.description:
            p.description = _plain(p.description)
    return parser


def _shared_problem(args):
    """The problem with the options that the reach and optimal commands share, or None.

    Both move a human arm: a duration outside 0.05 to 60 s is no arm movement (at
    1e-9 s the default reach had peak hand speeds of 9e8 m/s), most likely a typo."""
    duration, gravity = getattr(args, "duration", 1.0), getattr(args, "gravity", 0.0)
    library = "jaxmb.reaching.reaching_torques" if args.command == "reach" else "jaxmb.optimize"
    return ("--duration must be a finite number > 0 (s)" if not (math.isfinite(duration) and duration > 0) else
            f"--duration must be between {_DURATION[0]:g} and {_DURATION[1]:g} s for a human arm's movement, "
            f"got {duration:g} s ({library} takes any)"
            if not _DURATION[0] <= duration <= _DURATION[1] else
            "--gravity must be a finite number (m/s^2)" if not math.isfinite(gravity) else
            "--samples must be >= 3" if getattr(args, "samples", 3) < 3 else None)  # fmt: skip


def _run(argv, ran: dict) -> int:
    """Parse ``argv``, set up JAX for the command (float64, the compilation cache),
    check the shared options and run the command; returns its exit status."""
    args = _parser().parse_args(argv)
    ran["command"] = args.command
    if args.command != "bench":
        jax.config.update("jax_enable_x64", True)  # the command line computes in float64
        _compile_cache(None if args.no_cache else (args.cache_dir or default_cache_dir()), bool(args.cache_dir))
    problem = _shared_problem(args)
    if problem:  # a one-line error, exit 2
        print(f"jaxmb {args.command}: error: {problem}", file=sys.stderr)
        return 2
    return args.func(args)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C's KeyboardInterrupt is: the same
    clean-up (a set of output files is left complete or as it was), then exit 143."""


def _terminate(signum, frame):
    _RECEIVED.append("SIGTERM")
    raise _Terminated()


def _interrupt(signum, frame):
    _RECEIVED.append("SIGINT")
    raise KeyboardInterrupt


#: the signals received during this command: an interrupt raised where Python ignores
#: exceptions (a garbage-collection callback of JAX's printed "Exception ignored" and
#: the command ran on to exit 0) still ends the command with its status
_RECEIVED: list = []


def main(argv=None) -> int:
    """Run the ``jaxmb`` command line (``argv``: its arguments, default
    ``sys.argv[1:]``); returns the exit status (141 when its output pipe closes:
    ``jaxmb reach | head -1``, without a traceback). Ctrl-C (SIGINT) or SIGTERM ends it
    with one line on stderr, ``jaxmb <command>: interrupted (SIGINT)``, and the
    status 130 (SIGTERM: 143), not a traceback; output files being written are left
    as the earlier set or the complete new one (:func:`jaxmb.cli._output._write_outputs`)."""
    ran = {"command": None}
    main_thread = threading.current_thread() is threading.main_thread()
    del _RECEIVED[:]
    previous = {}
    if main_thread:
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, _terminate)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where SIGINT is ignored
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, _interrupt)
    try:
        status = _run(argv, ran)
        if not _RECEIVED:
            return status
        name = _RECEIVED[0]  # raised where Python swallowed it: the command ran on
    except KeyboardInterrupt as e:
        name = "SIGTERM" if isinstance(e, _Terminated) else "SIGINT"
    except BrokenPipeError:
        # stdout closed by its reader (jaxmb reach | head -1): no traceback; Python's
        # flush at exit would raise again, so stdout goes to /dev/null
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a process killed by it
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print(f"jaxmb{' ' + ran['command'] if ran['command'] else ''}: interrupted ({name})", file=sys.stderr)
    return 143 if name == "SIGTERM" else 130


def __getattr__(name):
    """``jaxmb.cli.reaching_torques``: moved to :mod:`jaxmb.reaching` (the command line is
    no library); the old name works, with a warning, for one release."""
    if name == "reaching_torques":
        warnings.warn("jaxmb.cli.reaching_torques is deprecated: use jaxmb.reaching.reaching_torques",
                      DeprecationWarning, stacklevel=2)
        return reaching.reaching_torques
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
