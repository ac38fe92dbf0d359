"""Shared paths of the pytest tests (python/tests/)."""
import os
import pathlib
import shutil
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"


@pytest.fixture
def cli():
    """The dlsched command line: DLSCHED (CI gives its build of the binary), else
    target/release/dlsched, else the `dlsched` command this package installed
    beside this Python, else PATH's."""
    installed = pathlib.Path(sys.executable).parent / "dlsched"
    for c in [os.environ.get("DLSCHED"), ROOT / "target" / "release" / "dlsched", installed, shutil.which("dlsched")]:
        if c and pathlib.Path(c).is_file():
            return str(c)
    pytest.skip("no dlsched command: install the package (`pip install .`), `cargo build --release`, or set DLSCHED")


@pytest.fixture
def binary():
    """The Rust binary itself (DLSCHED, else target/release/dlsched, else
    target/ci/dlsched), for the tests of the installed command against it."""
    for c in [os.environ.get("DLSCHED"), ROOT / "target" / "release" / "dlsched", ROOT / "target" / "ci" / "dlsched"]:
        if c and pathlib.Path(c).is_file():
            return str(c)
    pytest.skip("no dlsched binary: run `cargo build --release` (or set DLSCHED) to compare the installed command with it")


@pytest.fixture
def example_trace():
    return dict(trace=str(ROOT / "traces" / "example_jobs.csv"), vcs=str(ROOT / "traces" / "example_vcs.csv"))
