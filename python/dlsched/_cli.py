"""The ``dlsched`` command the package installs: the same command line as
the Rust binary (``dlsched --help``), run in this process by the package's
extension (``dlsched._core.cli_main``)."""

import os
import shutil
import signal
import sys


def _program(argv0: str) -> str:
    """The program's name as it was typed, as far as it can be known: Python
    runs a console script by its full path, so when ``dlsched`` on PATH is this
    very script, the name is ``dlsched`` (the "next" hints repeat it)."""
    name = os.path.basename(argv0)
    found = shutil.which(name)
    if found and os.path.abspath(found) == os.path.abspath(argv0):
        return name
    return argv0


def main() -> None:
    # A native program's signal actions: Ctrl-C stops the command at once
    # (Python's handler would wait for the engine to return to Python), and a
    # closed pipe (`dlsched ... | head`) ends it quietly.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    from . import _core

    sys.stdout.flush()
    argv = [_program(sys.argv[0])] + sys.argv[1:]
    sys.exit(_core.cli_main(argv))


if __name__ == "__main__":
    main()
