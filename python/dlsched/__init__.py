"""dlsched from Python: the Rust event-driven GPU-cluster simulator.

    >>> import dlsched
    >>> r = dlsched.simulate(jobs=200, seed=1)        # the CLI's first run, 200 jobs
    >>> r.summary["jct_mean_s"], r.jobs.shape           # a dict, a pandas DataFrame
    >>> dlsched.sweep("experiments/lab16-load.toml", threads=2)   # summary.csv as a DataFrame

Keyword arguments are the keys of an experiment file's ``[base]`` table
(``experiments/README.md``), which are the command line's flags with
underscores (``jobs_per_hour=20`` is ``--jobs-per-hour 20``), and
``policy_opt={"name": value}`` for ``--policy-opt name=value``. Defaults are
``dlsched simulate``'s, so ``dlsched.simulate()`` and ``dlsched simulate``
give the same run. A bad value raises :class:`ConfigError` (a
:class:`DlschedError`) with the command line's message, and says what is
wrong in ``kind`` (``"unknown-name"``, ``"invalid-value"``, ``"conflict"``,
``"empty-workload"``, ``"artefact"``, ``"other"``) and which key in ``key``::

    try:
        dlsched.simulate(policy="fiffo")
    except dlsched.ConfigError as e:
        print(e.kind, e.key)                        # unknown-name policy

A policy written in Python (``simulate(policy=MyPolicy())``) is a class with
``decide(view)`` and, optionally, ``on_arrival(job, view)``,
``on_completion(job, view)`` and ``on_timer(view)``; ``decide`` returns one
decision at a time (:func:`launch`, :func:`colocate`, :func:`preempt`,
:func:`wake_at`, or ``None`` to wait), and the engine calls it again after
applying each one, until it returns ``None``. The :class:`View` it receives
is valid only during that call. ``examples/python/sjf.py`` is a 20-line SJF.

The Gymnasium environment is in :mod:`dlsched.gym`.
"""

from __future__ import annotations

import csv as _csv
import io as _io
import json as _json
import math as _math
import os as _os
import re as _re
import warnings as _warnings
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from . import _core
from ._core import ConfigError, DlschedError, View, __version__

__all__ = [
    "ConfigError",
    "DlschedError",
    "DlschedNote",
    "Result",
    "View",
    "__version__",
    "colocate",
    "launch",
    "preempt",
    "simulate",
    "sweep",
    "wake_at",
    "WAIT",
]

#: The decision "nothing more to do at this instant".
WAIT = None


def launch(job: int, gpus: Sequence[int]) -> tuple:
    """Start (or resume) ``job`` on exactly these free GPUs (ids, as many as it asks for)."""
    return ("launch", int(job), [int(g) for g in gpus])


def colocate(job: int, gpus: Sequence[int]) -> tuple:
    """Start (or resume) ``job`` as a tenant of these GPUs (shared mode; see ``max_tenants``)."""
    return ("colocate", int(job), [int(g) for g in gpus])


def preempt(job: int) -> tuple:
    """Stop running ``job`` now; it keeps its remaining work (plus the checkpoint cost) and waits again."""
    return ("preempt", int(job))


def wake_at(time_s: float) -> tuple:
    """Call the policy's ``on_timer`` at simulated time ``time_s`` (s, later than now)."""
    return ("wake_at", float(time_s))


def _table(data: bytes):
    """CSV bytes as a pandas DataFrame, else a pyarrow Table, else a list of dicts."""
    try:
        import pandas
    except ImportError:
        pass
    else:
        if not data.strip():
            return pandas.DataFrame()
        return pandas.read_csv(_io.BytesIO(data))
    try:
        import pyarrow.csv
    except ImportError:
        return list(_csv.DictReader(_io.StringIO(data.decode())))
    return pyarrow.csv.read_csv(_io.BytesIO(data))


class Result:
    """A finished run.

    Attributes:
        summary: ``summary.json`` as a dict (JCT, queueing delay, makespan in s; utilisation ...).
        jobs: ``jobs.csv``: one row per job (times in s).
        timeline: ``timeline.csv``: the cluster sampled every ``sample_interval`` s.
        vc_timeline: ``vc_timeline.csv``: the same per VC.
        vc_summary: ``vc_summary.csv``: one row per VC.
        skipped: ``skipped.csv``: trace rows not simulated, with the reason.
        files: every table as the CSV bytes the run directory would hold, by file name.
    """

    def __init__(self, summary: str, files: Dict[str, bytes], notes: Sequence[str] = ()):
        self.summary: Dict[str, Any] = _json.loads(summary)
        #: What the run could not use or had to assume (the notes
        #: ``dlsched simulate`` prints), each also raised as a :class:`DlschedNote` warning.
        self.notes: list = list(notes)
        self.files = dict(files)
        self.jobs = _table(files["jobs.csv"])
        self.timeline = _table(files["timeline.csv"])
        self.vc_timeline = _table(files["vc_timeline.csv"])
        self.vc_summary = _table(files["vc_summary.csv"])
        self.skipped = _table(files["skipped.csv"])

    def __repr__(self) -> str:
        s = self.summary
        def h(x):
            return "n/a" if x is None else f"{x / 3600:.2f} h"
        return (
            f"<dlsched.Result {s.get('policy')} on {s.get('cluster')}: "
            f"{s.get('jobs_completed')}/{s.get('jobs_total')} jobs completed, "
            f"mean JCT {h(s.get('jct_mean_s'))}, mean queueing delay {h(s.get('queue_delay_mean_s'))}, "
            f"utilisation {s.get('gpu_utilization', 0):.1%}>"
        )


def simulate(
    *,
    policy: Union[str, Any, None] = None,
    out: Union[str, "_os.PathLike[str]", None] = None,
    output_format: Optional[str] = None,
    **options: Any,
) -> Result:
    """Runs one simulation and returns its tables.

    Args:
        policy: a policy's name (``"sjf"``, as ``--policy``), or an object with
            the policy methods (``decide(view)`` and optional hooks); a Python
            policy uses the ``placement`` key's rule for ``view.place(job)``.
        out: also write the run directory here (as ``dlsched simulate --out``).
        output_format: ``"csv"`` (default), ``"parquet"`` or ``"both"`` for ``out``.
        **options: the experiment file's keys (``jobs``, ``seed``, ``trace``,
            ``cluster``, ``load``, ``backfill``, ...), ``policy_opt={...}``,
            and ``strict=True`` (``backfill=False``) for a strict queue on the
            synthetic workload. The defaults are every builder's, the same as
            ``dlsched simulate``'s and an experiment file's
            (docs/experiments.md, "Defaults").

    Returns:
        A :class:`Result`; nothing is written unless ``out`` is given.

    Raises:
        ConfigError: an invalid configuration (a :class:`DlschedError`;
            ``kind`` and ``key`` say what and where).
        DlschedError: bad input (the message names the file, line and
            field, or the keyword), or an invalid policy decision.
        Exception: whatever a Python policy raised, re-raised as is.

    Warns:
        DlschedNote: each note on the run (``Result.notes``), as ``dlsched
            simulate`` prints them: a trace column no format reads, the
            malformed rows ``skip_malformed=True`` left out, ...
    """
    obj = None
    if isinstance(policy, str):
        options["policy"] = policy
    elif policy is not None:
        if not callable(getattr(policy, "decide", None)):
            raise TypeError("policy=: a policy name or an object with a decide(view) method")
        obj = policy
    summary, files, notes = _core.simulate(policy_object=obj, out=None if out is None else _os.fspath(out),
                                           output_format=output_format, **options)
    _warn(notes)
    return Result(summary, files, notes)


class DlschedNote(UserWarning):
    """A note on a run: input it could not use (a trace column no format
    reads, a VC column on a cluster without VCs) or something it had to assume;
    the text ``dlsched simulate`` prints as ``note: ...``."""


def _warn(notes: Sequence[str]) -> None:
    for n in notes:
        _warnings.warn(n, DlschedNote, stacklevel=3)


_BARE = _re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(k: str) -> str:
    parts = k.split(".")
    if all(_BARE.match(p) for p in parts):
        return k
    return _json.dumps(k)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if _math.isnan(v):
            return "nan"
        if _math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (str, _os.PathLike)):
        return _json.dumps(_os.fspath(v))
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_toml_key(str(k))} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} {v!r} in an experiment")


def _experiment_toml(exp: Mapping[str, Any]) -> str:
    """An experiment dict ({"question": ..., "base": {...}, "sweep": {...}}) as TOML text."""
    lines = []
    for k, v in exp.items():
        if not isinstance(v, Mapping):
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    for k, v in exp.items():
        if isinstance(v, Mapping):
            lines.append(f"[{_toml_key(k)}]")
            lines.extend(f"{_toml_key(str(kk))} = {_toml_value(vv)}" for kk, vv in v.items())
    return "\n".join(lines) + "\n"


def sweep(
    experiment: Union[str, "_os.PathLike[str]", Mapping[str, Any], None] = None,
    *,
    threads: int = 2,
    out: Union[str, "_os.PathLike[str]", None] = None,
    shard: Optional[str] = None,
    resume: bool = False,
    policies: Union[Mapping[str, Any], Sequence[Any], None] = None,
    seeds: Optional[Sequence[int]] = None,
    grid: Optional[Mapping[str, Sequence[Any]]] = None,
    workers: Optional[int] = None,
    question: Optional[str] = None,
    output_format: Optional[str] = None,
    **options: Any,
):
    """Runs a sweep; returns its ``summary.csv``.

    Two routes, one sweep directory (``runs/<run id>/``, ``sweep.json``,
    ``summary.csv`` in the sweep's order, ``failed.csv`` when runs failed):

    - ``sweep(experiment)``: an experiment file (or dict) of registered
      policies, run on the engine's own ``threads``, as ``dlsched sweep``.
    - ``sweep(policies=..., seeds=..., **options)``: Python policies (and
      registered ones) over seeds and a ``grid`` of other keys, each run a
      :func:`simulate` with ``out=`` in one of ``workers`` worker processes
      (``multiprocessing``, spawn). Run ids, order, ``shard`` and ``resume``
      are ``dlsched sweep``'s (a registered policy's run has the id it has in
      an experiment file with the same keys), and ``dlsched merge`` joins its
      shards.

    Args:
        experiment: an experiment file, or a dict of one
            (``{"question": "...", "base": {...}, "sweep": {"seed": [1, 2]}}``;
            its relative paths are read from the working directory).
        threads: worker threads of an experiment's sweep (the results do not depend on it).
        out: the sweep directory (plots are not drawn); a temporary one,
            removed afterwards, when None.
        shard: ``"I/N"``: run only that share of the runs (the runs at
            positions I, I + N, ... in run-id order, as ``--shard I/N``; merge
            with ``dlsched merge``).
        resume: keep the complete runs of an earlier sweep into ``out`` (a run
            directory without ``manifest.json``, written last, is run again,
            and so is one whose trace file changed).
        policies: the policies to sweep: a list of factories, or a dict of
            label to factory. A factory is a top-level callable (a class or a
            function; a worker imports it by name, so not a lambda or a
            local function) returning a policy object, called as
            ``factory(seed=seed)`` when it takes a ``seed`` (an RL agent's
            seed: the run's ``seed``) and else ``factory()``; or a
            ``"module:attr"`` string naming one; or a registered policy's name
            (``"fifo"``). The ``policy`` column holds the label (a callable's
            ``module:qualname``, a string as given).
        seeds: the ``seed`` values (the workload's seed, and the factory's).
        grid: more swept keys, ``{"load": [0.5, 0.8]}``.
        workers: worker processes (default: one per CPU, at most one per
            run; 1 runs them in this process). The results do not depend on it.
        question: the question written to ``sweep.json``.
        output_format: ``"csv"`` (default), ``"parquet"`` or ``"both"`` for
            the run directories and the summary.
        **options: the options every run shares (:func:`simulate`'s keywords).

    Returns:
        The summary table (one row per run) as a DataFrame (see :class:`Result`).

    Raises:
        ConfigError: a bad experiment (a :class:`DlschedError`; the message
            names the key, ``kind`` and ``key`` say what and where).
        DlschedError: failed runs (each one's error is in ``failed.csv``).

    Warns:
        DlschedNote: each distinct note of the runs (as ``dlsched sweep`` prints them), once.
    """
    import tempfile

    python_route = policies is not None or seeds is not None or grid is not None or workers is not None
    if python_route or options:
        if experiment is not None:
            raise TypeError("give an experiment, or policies=/seeds=/grid= and options, not both")
        with tempfile.TemporaryDirectory() as tmp:
            o = tmp if out is None else _os.fspath(out)
            from ._sweep import sweep_python

            data, notes = sweep_python(policies=policies, seeds=seeds, grid=grid, options=options, workers=workers,
                                       out=o, shard=shard, resume=resume, question=question,
                                       output_format=output_format)
        _warn(notes)
        return _table(data)
    if experiment is None:
        raise TypeError("give an experiment (a file or a dict), or policies= (and seeds=, grid=)")
    if output_format is not None:
        raise TypeError("output_format=: an experiment sets it in its [base] table")
    o = None if out is None else _os.fspath(out)
    if isinstance(experiment, Mapping):
        data, notes = _core.sweep(toml=_experiment_toml(experiment), threads=threads, out=o, shard=shard,
                                  resume=resume)
    else:
        data, notes = _core.sweep(path=_os.fspath(experiment), threads=threads, out=o, shard=shard, resume=resume)
    # Each distinct note of the runs once, as a DlschedNote warning.
    _warn(notes)
    return _table(data)
