"""Sweeps of Python policies (and registered ones) over seeds and other keys,
in worker processes: ``dlsched.sweep(policies=..., seeds=...)``.

The sweep directory is the one ``dlsched sweep`` writes: ``runs/<run id>/``
(each written by :func:`dlsched.simulate` with ``out=``), ``sweep.json`` and
``summary.csv`` (in the sweep's order), ``failed.csv`` when runs failed. Run
ids, their order, the ``shard="I/N"`` split and what ``resume=True`` keeps
come from the Rust side (``dlsched._core.SweepPlan``, the functions of
``dlsched sweep``), so ``dlsched merge`` joins the shards of such a sweep as
it joins a file's.
"""

from __future__ import annotations

import importlib
import inspect
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _core

Factory = Union[str, Callable[..., Any]]


def label_of(factory: Factory) -> str:
    """The name a policy factory goes by in run ids and ``summary.csv``'s
    ``policy`` column: a string as it is (``"module:attr"``, or a registered
    policy's name such as ``"fifo"``), a callable as ``module:qualname``."""
    if isinstance(factory, str):
        return factory
    module, name = getattr(factory, "__module__", None), getattr(factory, "__qualname__", None)
    if not module or not name or "<" in name:
        raise TypeError(f"policies=: {factory!r} is not a top-level callable (a worker process imports it by name); "
                        "give a function or class defined at a module's top level, or a \"module:attr\" string")
    return f"{module}:{name}"


def _resolve(factory: Factory) -> Callable[..., Any]:
    if not isinstance(factory, str):
        return factory
    module, _, attr = factory.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _takes_seed(f: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(f).parameters
    except (TypeError, ValueError):
        return False
    return "seed" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def build_policy(factory: Factory, seed: Optional[int]) -> Any:
    """The policy of one run: a registered policy's name as it is, else the
    factory called (with ``seed=`` when it takes one and the run has a seed)."""
    if isinstance(factory, str) and ":" not in factory:
        return factory
    f = _resolve(factory)
    if seed is not None and _takes_seed(f):
        return f(seed=seed)
    return f()


def run_one(task: Tuple[str, str, Optional[Factory], Dict[str, Any], Optional[str]]) -> Tuple[str, Optional[str], List[str]]:
    """One run, in a worker: (run id, error or None, notes). Writes the run
    directory with ``dlsched.simulate(out=...)``."""
    run_id, run_dir, factory, options, output_format = task
    try:
        options = dict(options)
        obj = None
        if factory is not None:
            policy = build_policy(factory, options.get("seed"))
            if isinstance(policy, str):
                options["policy"] = policy
            else:
                obj = policy
        # The Rust call itself (dlsched.simulate's): no DataFrames are built
        # in the worker, and the notes come back to be raised once.
        _, _, notes = _core.simulate(policy_object=obj, out=run_dir, output_format=output_format, **options)
        return run_id, None, list(notes)
    except BaseException as e:  # noqa: BLE001 - reported as the run's failure, as `dlsched sweep` does
        if isinstance(e, KeyboardInterrupt):
            raise
        return run_id, f"{type(e).__name__}: {e}", []


def sweep_python(
    *,
    policies: Union[Mapping[str, Factory], Sequence[Factory], None],
    seeds: Optional[Sequence[int]],
    grid: Optional[Mapping[str, Sequence[Any]]],
    options: Dict[str, Any],
    workers: Optional[int],
    out: str,
    shard: Optional[str],
    resume: bool,
    question: Optional[str],
    output_format: Optional[str],
) -> Tuple[bytes, List[str]]:
    """Runs the sweep into ``out``; returns ``summary.csv``'s bytes and the
    distinct notes of the runs. See :func:`dlsched.sweep`."""
    factories: Dict[str, Factory] = {}
    if policies is not None:
        if isinstance(policies, (str, bytes)) or callable(policies):
            raise TypeError("policies=: a list of factories, or a dict of label to factory")
        items = policies.items() if isinstance(policies, Mapping) else [(label_of(f), f) for f in policies]
        for label, f in items:
            if not isinstance(label, str):
                raise TypeError(f"policies=: labels are str, not {type(label).__name__}")
            if label in factories:
                raise ValueError(f"policies=: `{label}` is given twice")
            if not isinstance(f, str):
                label_of(f)  # a top-level callable, which a worker can import
            factories[label] = f
        if not factories:
            raise ValueError("policies=: no policy given")
    axes: Dict[str, List[Any]] = {k: list(v) for k, v in (grid or {}).items()}
    for k in ("policy", "seed"):
        if k in axes:
            raise TypeError(f"grid=: give `{k}` as {k}s=")
    if factories:
        axes["policy"] = list(factories)
    if seeds is not None:
        axes["seed"] = [int(s) for s in seeds]
    if "policy" in options and factories:
        raise TypeError("give the policy by policies=, not policy=")
    plan = _core.SweepPlan(question or "a sweep from Python (dlsched.sweep)", options, axes, shard)
    plan.begin(out)
    todo = []
    for run_id, values in plan.runs():
        if resume and plan.kept(out, run_id) == "kept":
            continue
        run_options = dict(options)
        run_options.update(values)
        label = run_options.pop("policy", None)
        factory = factories.get(label, label) if label is not None else None
        todo.append((run_id, os.path.join(out, "runs", run_id), factory, run_options, output_format))
    if workers is None:
        n = min(len(todo), os.cpu_count() or 1)
    elif int(workers) < 1:
        raise ValueError("workers=: at least 1")
    else:
        n = min(int(workers), len(todo))
    if n <= 1:
        results = [run_one(t) for t in todo]
    else:
        # spawn: a clean interpreter per worker (no fork of a process holding
        # threads or the engine's state); factories are imported by name
        # there. A worker that dies (killed, or a script that starts the sweep
        # again when a worker imports it) breaks the pool at once instead of
        # hanging it.
        try:
            with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn")) as pool:
                results = list(pool.map(run_one, todo))
        except BrokenProcessPool as e:
            raise _core.DlschedError(
                f"a worker process of the sweep died ({e}); a script that calls dlsched.sweep(workers=...) must do "
                "so under `if __name__ == \"__main__\":`, since each worker imports the script; the runs finished "
                f"so far are kept in {out} (resume=True)") from e
    failed = [(run_id, e) for run_id, e, _ in results if e is not None]
    notes: List[str] = []
    for _, _, ns in results:
        notes.extend(x for x in ns if x not in notes)
    data, errors = plan.finish(out, failed, output_format)
    if failed:
        run_id, e = failed[0]
        raise _core.DlschedError(f"{len(failed)} of the sweep's runs failed; the first, {run_id}: {e} "
                                 f"(all in {os.path.join(out, 'failed.csv')})")
    if errors:
        raise _core.DlschedError(errors[0])
    return data, notes
