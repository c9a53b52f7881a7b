"""The gradient-ready profile `predict` rests on: a run's stored one, or one measured now in this process (on the
CPU with a rank's threads, said doubtful where the machine is busy or its steps noisy) and stored with the run."""

from __future__ import annotations

from pathlib import Path

from harness.commands.console import profiling
from harness.config.bench import ConfigError


def _profile_for_run(run_dir: Path, setup: dict, *, device):
    """The run's stored profile for this setup, else one measured now and stored with the run."""
    import pandas as pd

    from harness.perfmodel import predict
    from harness.results import store

    profile = predict.stored_profile(run_dir, setup)
    if profile is not None:
        return profile, f"profile stored with run {run_dir.name}"
    threads = store.read_run_meta(run_dir).get("threads_per_rank") if device.type == "cpu" else None
    source = predict.workload_source(run_dir, setup)
    rows = pd.DataFrame(_measure_profile(setup, device=device, threads=threads, source=source))
    profile = predict.store_profile(run_dir, setup, rows, device=device.type)
    return profile, f"profile measured now (run {run_dir.name} had none) and stored with it"


def _measure_profile(setup: dict, *, device, threads: int | None = None, steps: int | None = None,
                     source: tuple[str, dict] | None = None) -> list[dict]:  # fmt: skip
    """Profile a workload setup in this process (world size 1 needs no process group); on the
    CPU with the run's threads per rank, so that compute runs as fast as in one of its ranks.
    `source`: (spec, options) the workload is built from, where its name alone does not say."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        return _profiled(setup, device=device, steps=steps, source=source)
    finally:
        torch.set_num_threads(before)  # the caller's (a test's process) as it was


def _profiled(setup: dict, *, device, steps: int | None, source: tuple[str, dict] | None) -> list[dict]:
    """The profile's rows, said doubtful where the machine is busy or its steps noisy (CPU)."""
    import torch

    import workloads
    from harness.measure import gradprofile

    spec, options = source or (setup["workload"], {})
    workload = workloads.create(spec, size=setup["size"], options=options)
    reason = workload.unavailable_reason(device=device.type)
    if reason:
        raise ConfigError(f"--workload {setup['workload']!r} cannot run here: {reason}")
    steps = steps or gradprofile.PROFILE_STEPS
    if device.type == "cpu":
        profiling.warn_if_busy()
    progress = profiling.SlowStepProgress()
    rows = gradprofile.measure(workload, batch_size=setup["batch_size"], device=torch.device(device.type),
                               dtype=setup["dtype"], optimizer=setup["optimizer"], seed=0, steps=steps,
                               on_step=progress)  # fmt: skip
    if device.type == "cpu":
        profiling.warn_if_noisy(progress.step_seconds()[-steps:])
    return [{**setup, **row} for row in rows]
