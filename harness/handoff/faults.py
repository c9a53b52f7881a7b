"""What went wrong in a configuration, said precisely.

- `error_kind`: the class of a failure (`ERROR_KINDS`), recorded in the `error_kind` column.
- A rank whose measurement raises writes its own record (the error line, its kind, the memory
  it had reached, the full traceback) into `failures/<config_id>/` of the run folder, then
  leaves the launch: the other ranks may be waiting for it inside a collective, and only
  tearing the launch down frees them. The launcher turns that record into the failed row.
- `DDPBENCH_FAULT` injects a fault into one rank, so that the tests (and a user who doubts
  the harness) can watch every failure path on purpose; see `Fault`.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.config.faults import CONDITIONS, FAULT_KINDS, FaultRule
from harness.handoff.rank_result import error_line
from harness.results.files import atomic_write, read_json, write_json
from harness.results.layout import RunFolder
from harness.results.migrate import looks_like_oom

if TYPE_CHECKING:
    import torch

# exception: a Python exception in a strategy, workload or the harness; oom: an allocation
# failed; killed: a rank died without a Python exception (a signal, a hard exit);
# timeout: no progress for --timeout seconds; launch: the launch itself never got going.
ERROR_KINDS = ("exception", "oom", "killed", "timeout", "launch")


def error_kind(exc: BaseException) -> str:
    """oom for CUDA's out-of-memory error, Python's MemoryError and the CPU allocator's refusal."""
    return "oom" if isinstance(exc, _oom_types()) else kind_from_text(str(exc))


def _oom_types() -> tuple[type[BaseException], ...]:
    # torch imported here, not with the module: `bench` reaches its launcher (which reads failures) before it
    # imports torch, so that on the CPU the ranks' imports start first (`torchrun.start_worker_early`); a rank that
    # raises one of these has torch imported already.
    import torch

    found = (getattr(torch, "OutOfMemoryError", None), getattr(torch.cuda, "OutOfMemoryError", None), MemoryError)
    return tuple(t for t in found if t)


def kind_from_text(text: str) -> str:
    """The same, from an exception's text alone (all that torchrun's error file keeps)."""
    return "oom" if looks_like_oom(text) else "exception"


def rank_failure_paths(run: Path, config_id: str, rank: int) -> tuple[Path, Path]:
    folder = RunFolder(run).failures(config_id)
    return folder / f"rank{rank}.json", folder / f"rank{rank}.traceback.txt"


def write_rank_failure(run: Path, config_id: str, rank: int, exc: BaseException, memory: dict[str, Any]) -> None:
    """This rank's account of its failure, for the launcher to record once the launch is down."""
    record_path, traceback_path = rank_failure_paths(run, config_id, rank)
    text = "".join(traceback.format_exception(exc))
    atomic_write(traceback_path, lambda tmp: tmp.write_text(text))
    write_json(
        record_path,
        {
            "rank": rank,
            "at": time.time(),  # the earliest record is the root cause; later ones are its echoes
            "error_kind": error_kind(exc),
            "error": error_line(exc),
            "error_file": str(traceback_path.relative_to(run)),
            "memory": memory,
            "fails_alike": fails_alike(exc),
        },
    )


def fails_alike(exc: BaseException) -> bool:
    """Whether the same configuration, run again, would raise the same: a Python exception of the strategy's,
    the workload's or the harness's own code. Not an out-of-memory (what else holds the memory changes), nor a
    communication error (a peer's death, the network, a collective's timeout), which may not come again."""
    import torch.distributed as dist

    passing = (getattr(dist, "DistError", ()), ConnectionError, TimeoutError, OSError)
    said = str(exc).lower()
    return (error_kind(exc) == "exception" and not isinstance(exc, passing)
            and not any(word in said for word in ("gloo", "nccl", "connection", "timed out")))  # fmt: skip


def failure_that_repeats(run: Path, config_id: str) -> str | None:
    """The error of `config_id`'s failure where it would repeat alike (`fails_alike`, as its first record
    says); None where it may not, or no rank recorded it (a rank killed, a hang)."""
    first = next(iter(read_rank_failures(run, config_id)), None)
    return f"rank {first['rank']}: {first['error']}" if first and first.get("fails_alike") else None


def read_rank_failures(run: Path, config_id: str) -> list[dict[str, Any]]:
    """The records that ranks wrote for this configuration, earliest first.

    When one rank fails and leaves, its peers' collectives fail next ("connection closed by
    peer"): the first record is the cause, the others its consequences."""
    folder = RunFolder(run).failures(config_id)
    records = []
    for path in sorted(folder.glob("rank*.json")) if folder.is_dir() else []:
        try:
            records.append(read_json(path))
        except (OSError, ValueError):
            continue  # a record half-written when its rank was killed says nothing reliable
    return sorted(records, key=lambda r: (r.get("at", 0.0), r["rank"]))


def traceback_files(run: Path, config_id: str) -> list[tuple[int, str]]:
    """(rank, path relative to the run folder) of each whole traceback a rank wrote for this configuration, by rank:
    a rank stopped between its traceback and its record (torchrun's SIGTERM, as a peer's death tears the launch
    down) leaves the traceback alone, which read_rank_failures does not see (a half-written one is a hidden .tmp)."""
    folder = RunFolder(run).failures(config_id)
    paths = folder.glob("rank*.traceback.txt") if folder.is_dir() else []
    return sorted((int(path.name.removeprefix("rank").split(".")[0]), str(path.relative_to(run))) for path in paths)


@dataclasses.dataclass(frozen=True)
class Fault(FaultRule):
    """A FaultRule as a rank injects it: `fire` (or, for slow, `delay_backward`) where it `applies`."""

    def delay_backward(self) -> None:
        """`slow`: the rank's backward waits `ms` before it starts (called right before backward)."""
        time.sleep(self.ms / 1000.0)

    def fire(self, device: torch.device) -> None:
        # When it fired, for benchmarks/faults.py to measure how long the launcher takes to notice.
        if self.kind == "slow":
            return
        print(f"DDPBENCH_FAULT {self.kind} fired at {time.time():.3f}", file=sys.stderr, flush=True)
        if self.kind == "raise":
            raise RuntimeError(f"fault injected by DDPBENCH_FAULT at step {self.step}")
        if self.kind == "oom":
            import torch

            torch.empty(1 << 50, dtype=torch.uint8, device=device)  # 1 PiB: refused by any allocator
        if self.kind == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        if self.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "exit":
            os._exit(3)
        # slow fires nowhere here: it delays each backward (delay_backward)


def fault_site(cfg, *, rank: int) -> dict[str, Any]:
    """A configuration's rank as `Fault.applies` takes it (cfg: a harness.config.grid.Configuration)."""
    return {"impl": cfg.impl, "world": cfg.world_size, "repeat": cfg.repeat, "cap": cfg.bucket_cap_mb, "rank": rank}


def faults_from_environment() -> list[Fault]:
    """DDPBENCH_FAULT: one fault, or several separated by ';'. The commands that launch ranks parse it
    first (`check_fault_environment`), so a rank never meets one it cannot read."""
    return [Fault.parse(text.strip()) for text in os.environ.get("DDPBENCH_FAULT", "").split(";") if text.strip()]


FAULT_FORM = (
    f"the form is KIND[:CONDITION=VALUE,…] (';' between several), kinds {', '.join(FAULT_KINDS)}, "
    f"conditions {', '.join(CONDITIONS)}"
)


def check_fault_environment() -> None:
    """DDPBENCH_FAULT parsed before anything is written: ValueError with one line naming it and the valid
    kinds and conditions (a typo would otherwise fail every configuration of a run)."""
    try:
        faults_from_environment()
    except ValueError as exc:
        raise ValueError(f"{exc} (DDPBENCH_FAULT={os.environ.get('DDPBENCH_FAULT')!r}; {FAULT_FORM})") from None


def arm_served_module(module: torch.nn.Module, injected: list[Fault], *, device: torch.device, **where: Any) -> None:
    """Make the faults meant for this parameter server fire in the served module's forward.

    `where` is the configuration and rank (`fault_site`: impl, world, repeat, cap, rank) as `Fault.applies` takes
    them; the forward calls count as steps. A fault, once due, fires on every later call too: a
    broken server fails every trainer alike, so that no trainer whose own call happened to succeed
    is left waiting in a collective for a failed peer. A hook, not a wrapper, so the module's state
    keeps its names.
    """
    calls = itertools.count()
    due: list[Fault] = []

    def fire_due_faults(_module, _inputs) -> None:
        call = next(calls)
        due.extend(fault for fault in injected if fault.applies(step=call, **where))
        for fault in due:
            fault.fire(device)

    if injected:
        module.register_forward_pre_hook(fire_due_faults)
