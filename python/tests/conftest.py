"""Shared paths of the pytest tests (python/tests/)."""
import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"


@pytest.fixture
def cli():
    """The dlsched binary (DLSCHED, else target/release/dlsched, else PATH): the independent route."""
    for c in [os.environ.get("DLSCHED"), ROOT / "target" / "release" / "dlsched", shutil.which("dlsched")]:
        if c and pathlib.Path(c).is_file():
            return str(c)
    pytest.skip("no dlsched binary: run `cargo build --release` (or set DLSCHED) to compare with the CLI")


@pytest.fixture
def example_trace():
    return dict(trace=str(ROOT / "traces" / "example_jobs.csv"), vcs=str(ROOT / "traces" / "example_vcs.csv"))
