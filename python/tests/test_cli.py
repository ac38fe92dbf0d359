"""The `dlsched` command the package installs (dlsched._cli) against the
Rust binary (the `binary` fixture: DLSCHED or a build in target/): the same
standard output, standard error, exit status and files."""
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def installed():
    """The installed `dlsched` script beside this Python (the venv's bin/)."""
    p = pathlib.Path(sys.executable).parent / "dlsched"
    if not p.is_file():
        pytest.skip(f"no {p}: the package is not installed in this Python's environment")
    return str(p)


def run(argv, cwd):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["simulate", "--help"], ["simulate", "--bogus"], [],
                                  ["sweep", "no-such-file.toml"]])
def test_the_installed_command_is_the_binary(binary, tmp_path, args):
    py, rust = run([installed()] + args, tmp_path), run([binary] + args, tmp_path)
    assert (py.returncode, py.stdout, py.stderr) == (rust.returncode, rust.stdout, rust.stderr)


def test_a_usage_error_is_exit_2_with_clap_message(tmp_path):
    r = run([installed(), "simulate", "--bogus"], tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert "unexpected argument '--bogus'" in r.stderr and "Usage: dlsched simulate" in r.stderr


def test_simulate_out_writes_the_binary_s_files(binary, tmp_path):
    py = run([installed(), "simulate", "--jobs", "100", "--out", "py"], tmp_path)
    rust = run([binary, "simulate", "--jobs", "100", "--out", "rust"], tmp_path)
    assert py.returncode == rust.returncode == 0, py.stderr + rust.stderr
    # The output names the program as run and its --out: the rest is the same.
    norm = lambda r, prog, out: r.stdout.replace(prog, "PROG").replace(out, "OUT")
    assert norm(py, installed(), "py") == norm(rust, binary, "rust")
    assert py.stderr == rust.stderr
    files = sorted(p.name for p in (tmp_path / "rust").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "py").iterdir()) and "summary.json" in files
    for f in files:
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "rust" / f).read_bytes(), f


def test_the_hint_names_dlsched_when_it_is_the_one_on_path(tmp_path):
    bindir = str(pathlib.Path(installed()).parent)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    r = subprocess.run(["dlsched", "simulate", "--jobs", "50"], cwd=tmp_path, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert "next      dlsched simulate --jobs 50 --out runs/first && dlsched plot runs/first" in r.stdout


@pytest.mark.skipif(not pathlib.Path("/proc/self/maps").exists(), reason="needs /proc to see the extension loaded")
def test_ctrl_c_stops_the_command(tmp_path):
    # A sweep of minutes; SIGINT once the extension is loaded (after the
    # signal actions are set) must end the process by SIGINT, as it ends the
    # binary, not wait for the sweep.
    exp = tmp_path / "long.toml"
    exp.write_text('question = "long"\n[base]\njobs = 200000\n[sweep]\nseed = { from = 1, to = 2000, step = 1 }\n')
    p = subprocess.Popen([installed(), "sweep", str(exp), "--out", str(tmp_path / "out")], cwd=tmp_path,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        maps = pathlib.Path(f"/proc/{p.pid}/maps")
        while p.poll() is None and "_core" not in maps.read_text():
            time.sleep(0.05)
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=120) == -signal.SIGINT
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert not (tmp_path / "out" / "summary.csv").exists()
