"""The per-rank worker that torchrun starts: runs every configuration of one world size.

    torchrun --standalone --nproc-per-node N -m harness.rank.worker PLAN.json

For each configuration (harness.rank.configuration: build, train, judge parity, profile), gather
every rank's result on rank 0, which writes the rows. A rank whose configuration raises writes down
why (`harness.handoff.faults`) and leaves: its peers may be blocked in a collective it will never join,
and only the end of the launch frees them. The launcher records the configuration `failed`
and runs the rest in a fresh launch.
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from typing import Any

import torch
import torch._dynamo  # every optimizer imports it at its first param group (1 s): an import, not the build
from torch.distributed.elastic.multiprocessing.errors import record

import impls
from harness.config.grid import Configuration
from harness.handoff import costs, faults, neighbours
from harness.handoff.liveness import Responder
from harness.handoff.progress import announce_configuration
from harness.measure import gradprofile
from harness.rank.configuration import RankWatch, measure
from harness.rank.dist import Session, distributed_session, leave_on_failure
from harness.rank.housekeeping import exit_now, freeze_survivors, keep_freed_heap, release_memory
from harness.rank.same_plan import check_same_plan


def model_info(cfg: Configuration, session: Session, cache: dict[tuple, dict | None], run: Path) -> dict | None:
    """Sizes, FLOPs and activations of the configuration's model, once per workload setup in the run (rank 0
    only; counted once per setup, source and device in the user's cache, harness.measure.meta_counts), before the
    configuration starts and with its memory released, so that it counts neither in the configuration's time nor
    in its memory peaks."""
    from harness.measure import meta_counts, modelinfo  # rank 0's alone: the others start without FLOP counting

    key = (cfg.workload_spec, cfg.workload, cfg.size, cfg.batch_size, cfg.dtype)  # dtype: what the forward keeps
    if key in cache:
        return cache[key]
    workload = cfg.make_workload()
    device, batch = session.device, cfg.batch_size
    count = functools.partial(modelinfo.describe, workload, batch_size=batch, device=device, dtype=cfg.dtype)
    kept = functools.partial(meta_counts.described, cfg.workload_spec or cfg.workload, cfg.size, cfg.workload_options,
                             batch_size=batch, dtype=cfg.dtype, device=device_name(device), count=count)  # fmt: skip
    info = modelinfo.describe_once(workload, key=key, batch_size=batch, device=device, run=run, cache=cache,
                                   dtype=cfg.dtype, count=kept)  # fmt: skip
    release_memory(session.device)
    return info


def device_name(device: torch.device) -> str:
    """What a model's count on `device` depends on beyond the libraries' versions: a GPU's name (its attention
    kernels) and the cuDNN loaded (its attention and batch norm keep what it decides; torch's version does not
    fix it where cuDNN is installed apart), else the device's type."""
    if device.type != "cuda":
        return device.type
    return f"{torch.cuda.get_device_name(device)}, cuDNN {torch.backends.cudnn.version()}"


class RowWriter:
    """Rank 0's side of a launch: each configuration's rows assembled from every rank's result and written.

    Only rank 0 makes one, so only rank 0 imports pandas and the store (the other ranks start 0.2 s
    sooner; under load 1-2 s, the `row writer` phase, nearly all of it pandas' import). Writing with pyarrow
    alone would not spare it: pyarrow imports pandas at its first conversion of Python values (`pa.array`,
    `Table.from_pylist`). The rows already written (derived metrics look up world size 1 and the baseline) are read
    once per launch, from the one file the launcher wrote them into (`written_before`; reading every
    part took 0.5-1 s a launch in a run of 100 configurations), then grown by each row this launch
    writes: re-reading every part per configuration grew as n²."""

    def __init__(self, run: Path, context: dict[str, Any], written_before: str | None = None) -> None:
        from harness.results import store

        snapshot = Path(written_before) if written_before else None
        written = store.read_configs_snapshot(snapshot) if snapshot and snapshot.is_file() else store.read_configs(run)
        self.run, self.context, self.written = run, context, written
        store.warm_up()  # pay pyarrow's one-time memory before anything is measured

    def write(self, cfg: Configuration, gathered: list, *, model_info: dict | None, position: int) -> None:
        import pandas as pd

        from harness.handoff import records
        from harness.results import store

        rows = records.assemble(cfg, gathered, run_context=self.context, written=self.written, model_info=model_info,
                                position=position)  # fmt: skip
        store.write_configuration(self.run, cfg.config_id, *rows)
        added = pd.DataFrame([store.read_config_row(self.run, cfg.config_id)])  # as the store reads it back
        self.written = added if self.written.empty else pd.concat([self.written, added], ignore_index=True)


def run_configurations(
    plan: dict[str, Any], session: Session, *, watch: RankWatch | None = None, plan_path: Path | None = None
) -> None:
    """Every configuration of the launch's plan, in turn; rank 0 writes each one's rows. Every rank hands the
    launcher the other processes its GPU sampler saw on its GPU, after each configuration (`plan_path`'s)."""
    run = Path(plan["run_dir"])
    watch = watch or RankWatch()
    configurations = [Configuration.from_json(c) for c in plan["configurations"]]
    infos: dict[tuple, dict | None] = {}
    profiled: set[tuple] = set()
    writer = RowWriter(run, plan["context"], plan.get("written_before")) if session.is_main else None
    watch.clock.lap("row writer")  # rank 0's pandas import and rows read, each launch (other ranks: not kept)
    for position, cfg in enumerate(configurations):
        if cfg.processes != session.world_size:
            raise RuntimeError(f"{cfg.config_id} needs {cfg.processes} ranks, this launch has {session.world_size}")
        if writer is not None:
            announce_configuration(run, cfg.config_id)  # the launcher's clock for this configuration starts
        watch.clock.lap(None)  # the launcher's bookkeeping between configurations is not timed
        info = model_info(cfg, session, infos, run) if writer is not None else None
        watch.clock.lap("model info")
        result = measure(cfg, session, run=run, watch=watch)
        release_memory(session.device)
        watch.clock.lap("release")
        gathered = session.gather_to_main(result)
        if plan_path is not None:
            neighbours.SIGHTINGS.hand_over(plan_path, session.rank)
        watch.clock.lap("gather")
        if writer is not None:
            writer.write(cfg, gathered, model_info=info, position=position)
            watch.clock.lap("write")
            # At world size 1, when gradients become ready in backward (input of `ddpbench predict`).
            gradprofile.record_once(cfg, run=run, device=session.device, context=plan["context"], done=profiled)
            watch.clock.lap("gradient profile")
            release_memory(session.device)
            watch.clock.lap("release")
            watch.clock.save()


# No NCCL or gloo timeout should fire before the launcher's own (--timeout), which names
# the rank the others wait for; this is the last resort if the launcher itself is gone.
COLLECTIVE_TIMEOUT_S = 1800.0


def _leaves_ranks_idle(plan: dict[str, Any]) -> bool:
    """Whether a configuration of this plan runs rank 0 alone while the other ranks wait (dataparallel)."""
    return any(impls.entry(c["impl"]).cls.single_process for c in plan["configurations"])


def main(argv: list[str] | None = None) -> int:
    """Run the plan; a rank that fails leaves at once (`dist.leave_on_failure`)."""
    return leave_on_failure(lambda: _run_recorded(argv))


@record  # an exception that ends this rank lands, with its traceback, in torchrun's error file
def _run_recorded(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="harness.rank.worker", description=__doc__.splitlines()[0])
    parser.add_argument("plan", type=Path, help="JSON plan written by the launcher")
    args = parser.parse_args(argv)
    clock = costs.CostClock(path=costs.costs_path(args.plan)).since_process_start("imports")
    plan = json.loads(args.plan.read_text())
    if plan["device"] == "cpu":
        torch.set_num_threads(plan["context"]["threads_per_rank"])
        keep_freed_heap()  # a step's memory reused, not faulted in again by what ran before: alike in every place
    timeout_s = max(COLLECTIVE_TIMEOUT_S, 2 * (plan.get("timeout_s") or 0))
    with distributed_session(
        device_kind=plan["device"],
        timeout_s=timeout_s,
        backend=plan.get("backend"),
        idle_ranks_wait=_leaves_ranks_idle(plan),
    ) as session:
        watch = RankWatch(Responder(Path(plan["run_dir"]), session.rank).start(), faults.faults_from_environment(),
                          clock if session.is_main else costs.CostClock())  # fmt: skip
        freeze_survivors()  # before the first configuration: garbage collections skip what imports made
        clock.lap("process group")
        check_same_plan(plan, world_size=session.world_size, group=session.records_group)  # several nodes
        run_configurations(plan, session, watch=watch, plan_path=args.plan)
    return 0


if __name__ == "__main__":
    exit_now(main())  # everything is written: the interpreter's finalisation would only cost time
