"""Type stubs of dlsched._core, the PyO3 extension (python/src/lib.rs)."""

from os import PathLike
from typing import Any, Dict, List, Optional, Tuple, Union

__version__: str

class DlschedError(Exception):
    """A run or sweep that dlsched refused or that failed: bad input (the
    message names the file, line and field, or the keyword), an invalid
    configuration, or an invalid policy decision."""

class ConfigError(DlschedError):
    """An invalid configuration (a keyword, an experiment file's key, a
    policy option)."""

    kind: str
    """What is wrong: ``"unknown-name"`` (a policy, format, option or key
    that does not exist), ``"invalid-value"`` (wrong type, out of range),
    ``"conflict"`` (two settings that cannot go together),
    ``"empty-workload"`` (no job can run), ``"artefact"`` (a file the
    configuration names does not fit the run) or ``"other"``."""
    key: Optional[str]
    """The key at fault as an experiment file spells it (``"policy"``,
    ``"policy_opt.theta"``), or None."""

class View:
    """What a Python policy sees during one call; valid only during that call."""

    @property
    def now(self) -> float:
        """Simulated time, s."""
    def waiting(self) -> List[int]:
        """Arrived jobs not running (pending or suspended), by job id."""
    def waiting_count(self) -> int:
        """len(waiting()), without building the list."""
    def running_count(self) -> int:
        """len(running())."""
    def running(self) -> List[int]:
        """Running jobs, by job id."""
    def job(self, job: int) -> Dict[str, Any]:
        """id, name, submit_s, duration_s, gpus, vc, model, state."""
    def duration_s(self, job: int) -> float:
        """The job's trace run time, s (an oracle)."""
    def submit_s(self, job: int) -> float:
        """The job's submission time, s."""
    def gpus(self, job: int) -> int:
        """GPUs the job asks for."""
    def vc(self, job: int) -> int:
        """The job's VC partition index (0 without VCs)."""
    def free_gpus_per_node(self) -> List[int]:
        """Free GPUs of each node, in node order."""
    def free_gpus(self) -> int:
        """Free GPUs of the cluster."""
    def total_gpus(self) -> int:
        """GPUs of the cluster."""
    def place(self, job: int) -> Optional[List[int]]:
        """GPU ids the run's placement rule would give the job now, or None."""
    def predicted_rate(self, job: int, gpus: List[int]) -> float:
        """The run's rate model's speed of the job on these GPUs (1.0 = trace speed)."""

def simulate(
    policy_object: Optional[Any] = None,
    out: Union[str, PathLike, None] = None,
    output_format: Optional[str] = None,
    **kwargs: Any,
) -> Tuple[str, Dict[str, bytes], List[str]]:
    """(summary JSON, {file name: CSV bytes}, notes); see dlsched.simulate."""

def sweep(
    path: Union[str, PathLike, None] = None,
    toml: Optional[str] = None,
    threads: int = 2,
    out: Union[str, PathLike, None] = None,
    shard: Optional[str] = None,
    resume: bool = False,
) -> Tuple[bytes, List[str]]:
    """(the sweep's summary.csv bytes, the runs' distinct notes); see dlsched.sweep."""
