"""The worker's side of gradient parity: which state is judged, against which reference, and the verdict.

On the CPU (its kernels are deterministic) the state after the warm-up's first `REPLAY_STEPS` steps is
judged, written to the run folder as it stands then, so that the reference trains those steps rather than
every step of the run (23 by default); with a shorter warm-up, or for a strategy that shards its state
(gathering it would be a model-sized copy counted in its memory peak), the state after the measured steps
is judged against a reference of as many steps. On a GPU
cuDNN's default algorithms are not, and a small ResNet's two identical trainings drift apart by
up to 0.9 in 20 steps (measured on an H200), so parity is judged on a short replay instead: a
fresh strategy and model, `REPLAY_STEPS` steps under deterministic algorithms, against a reference
computed the same way. The timed steps keep the fast algorithms.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import hashlib
import json
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from harness.config.grid import Configuration
from harness.handoff.rank_result import ParityVerdict, error_line
from harness.parity import movement, reference

REPLAY_STEPS = 3
"""Steps of the GPU replay: enough for every bucket, hook and optimizer state to take part twice."""


def replays(cfg: Configuration, device: torch.device) -> bool:
    """Whether this configuration's parity is judged on a deterministic replay (on GPUs)."""
    return cfg.judges_parity and device.type == "cuda"


def judged_after_warmup(cfg: Configuration, device: torch.device, *, shards_state: bool) -> bool:
    """Whether parity judges the state after the warm-up's first REPLAY_STEPS steps (on the CPU, where the
    warm-up has that many and the strategy keeps whole replicas, whose state is written without a copy)."""
    return cfg.judges_parity and not replays(cfg, device) and cfg.warmup >= REPLAY_STEPS and not shards_state


def replayed(cfg: Configuration) -> Configuration:
    """The configuration whose steps the judged state took, where it is the first `REPLAY_STEPS` (a replay's, or the
    warm-up's first): the reference trains as many."""
    return dataclasses.replace(cfg, warmup=0, steps=REPLAY_STEPS)


def reference_ready(cfg: Configuration, device: torch.device, *, folder: Path, progress=None) -> ParityVerdict | None:
    """The reference made now where it is not yet: before a GPU replay holds its state on the device, which the
    reference's own training would otherwise have to fit beside. None where it is ready; else the failed verdict,
    said once (its traceback printed), for `verdict` to give rather than train the reference again."""
    try:
        cached_reference(cfg, device, folder=folder, progress=progress)
    except Exception as exc:
        return _failed(exc)
    return None


def _failed(exc: Exception) -> ParityVerdict:
    """The parity columns where the check itself failed (the measurement stands: its rows are written)."""
    traceback.print_exc(file=sys.stderr)
    return ParityVerdict(None, None, f"parity check failed: {error_line(exc)}")


def cached_reference(
    cfg: Configuration,
    device: torch.device,
    *,
    folder: Path | None = None,
    progress: Callable[[int], None] | None = None,
):
    """(final, allowance or None, sign-like allowance or None, movements) of the single-process reference, computed once
    per setup: every strategy, bucket cap and repeat of a sweep at one world size shares it. It lives in a file in
    `folder` (default: a temporary folder of this process) and is mapped in while a verdict needs
    it (torch.load with mmap: read from the page cache, and out of the process once dropped; kept
    in memory it would count in every later configuration's peak RSS). Autocast runs are allowed a
    share of each parameter's movement from the initial parameters (`reference.allowances`): those
    figures are kept, computed once here, not the initial parameters (a second model-sized state each
    verdict read and went over again). Under Adam and its kind, the steps at which each element's gradient was
    within rounding of zero (`reference.SignLike`: a byte an element) are kept beside them; how far it moved each
    parameter (`movement.movements`: a float each), 0 for one that rounding alone moves as far (a second, nudged
    reference says which: `movement.beyond_rounding`; under an optimizer linear in the gradient alone)."""
    key = (cfg.workload_spec, cfg.workload, cfg.size, cfg.world_size, cfg.batch_size, cfg.warmup + cfg.steps,
           cfg.seed, str(device), cfg.dtype, cfg.optimizer)  # fmt: skip
    key += (cfg.grad_accum,) if cfg.grad_accum > 1 else ()  # K=1's key as before
    # "-judged": the movements held leave out those rounding moves (`movement.beyond_rounding`); "-moved" held all
    path = (folder or _cache_dir()) / f"reference-judged-{hashlib.sha1(repr(key).encode()).hexdigest()[:16]}.pt"
    if not path.is_file():
        # On the CPU the reference keeps the ranks' own thread count: a product split over more threads
        # rounds otherwise, and ResNet-18/small's BatchNorm over 8 samples of 1×1 maps grows that rounding
        # to 3e-3 in three steps (every strategy at 2 ranks then "failed" parity).
        sign_like: list[reference.SignLike | None] = []
        workload = cfg.make_workload()
        setup = dict(world_size=cfg.world_size, batch_size=cfg.batch_size, steps=cfg.warmup + cfg.steps, seed=cfg.seed,
                     device=device, dtype=cfg.dtype, optimizer=cfg.optimizer, grad_accum=cfg.grad_accum,
                     on_step=progress)  # fmt: skip
        with reference.deterministic_algorithms() if device.type == "cuda" else contextlib.nullcontext():
            final, initial = reference.reference_run(workload, **setup, sign_like=sign_like)
            moved = movement.movements(final, initial)
            if sign_like[0] is None:  # the movement rule judges: not a parameter that rounding alone moves
                nudged, _ = reference.reference_run(workload, **setup, nudged=True)
                moved = movement.beyond_rounding(moved, movement.movements(nudged, final))
                del nudged
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        near_zero = (None, None) if sign_like[0] is None else (sign_like[0].steps, sign_like[0].step_allowance)
        allowance = reference.allowances(final, initial, compute_dtype=cfg.dtype)
        torch.save((final, allowance, *near_zero, moved), partial)
        partial.replace(path)  # whole or absent: a launch that dies mid-save leaves no half file
    final, allowance, steps, step_allowance, moved = torch.load(path, mmap=True, weights_only=True)
    return final, allowance, None if steps is None else reference.SignLike(steps, step_allowance), moved


@functools.cache
def _cache_dir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="ddpbench-parity-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def verdict(
    cfg: Configuration,
    final_state,
    device: torch.device,
    *,
    how: str = "",
    folder: Path | None = None,
    progress: Callable[[int], None] | None = None,
    failed: ParityVerdict | None = None,
    exact: bool = True,
) -> ParityVerdict:
    """The parity columns' values for `final_state` (a broken reference must not hide the timing);
    `how`: which state was judged, when not the one after the measured steps (', on a deterministic replay
    of 3 steps'); `folder`: where the run keeps its references (PARITY_CACHE in the run folder); `failed`:
    `reference_ready`'s failure, given as it is (its reference is not trained again to fail again); `exact`: the
    strategy's `parity_exact`, False for a lossy hook or `local`, whose rows are not judged: the movement rule, whose
    note names a wrong reduction, is not applied to what differs by design."""
    if failed is not None:
        return failed
    try:
        expected, allowance, sign_like, moved = cached_reference(cfg, device, folder=folder, progress=progress)
        outcome = reference.compare(final_state, expected, allowance=allowance, compute_dtype=cfg.dtype,
                                    sign_like=sign_like)  # fmt: skip
        # under a sign-like optimizer every element moves about lr, far past the tolerance: it sees a wrong reduction
        astray = movement.strayed(final_state, expected, moved) if sign_like is None and exact else None
    except Exception as exc:
        return _failed(exc)
    try:
        sums = summing_loss(cfg, device, folder=folder)
    except Exception:  # a batch that cannot be joined, a model of one batch size: the comparison stands
        traceback.print_exc(file=sys.stderr)
        sums = ""
    if sums:  # like the reference, which averages the ranks' gradients too, but not like one process
        return ParityVerdict(outcome.max_abs_diff, False, sums, outcome.allowed)
    if outcome.within_tolerance and astray is not None:  # within the tolerance, but by less than it moved
        return ParityVerdict(outcome.max_abs_diff, False, f"{movement.strayed_note(*astray)}{how}", outcome.allowed)
    # past the tolerance too: the share of a movement says what kind of mistake it is, not only where it is
    why = f"; {movement.strayed_note(*astray)}" if astray is not None else ""
    return ParityVerdict(outcome.max_abs_diff, outcome.within_tolerance,
                         f"{outcome.where()}{how}{why}", outcome.allowed)  # fmt: skip


ZOO = ("torchvision:", "hf:", "timm:")
"""Specs of models ddpbench builds and gives a loss of its own (a mean): nothing of the user's to check."""


def summing_loss(cfg: Configuration, device: torch.device, *, folder: Path | None = None) -> str:
    """'' unless a workload of the user's own code has a loss that sums over samples (reference.loss_growth),
    which the reference, averaging the ranks' gradients as data parallelism does, cannot tell: then why its
    training is not one process's on the whole batch. Measured once per setup (cached beside the reference)."""
    spec = cfg.workload_spec or cfg.workload
    if cfg.world_size < 2 or ":" not in spec or spec.startswith(ZOO):
        return ""
    key = (spec, cfg.workload, cfg.size, cfg.batch_size, cfg.seed, str(device), cfg.dtype)
    path = (folder or _cache_dir()) / f"loss-growth-{hashlib.sha1(repr(key).encode()).hexdigest()[:16]}.json"
    if path.is_file():
        growth = float(json.loads(path.read_text()))
    else:
        growth = reference.loss_growth(cfg.make_workload(), batch_size=cfg.batch_size, seed=cfg.seed, device=device,
                                       dtype=cfg.dtype)  # fmt: skip
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(growth))
    if not growth >= reference.SUMS_FROM:
        return ""
    return (
        f"the loss sums over its batch (two ranks' batches together give {growth:.2f}× their mean loss): data "
        f"parallelism averages the ranks' gradients, so each step is 1/{cfg.world_size} of one process's on the "
        "whole batch; make the loss a mean over the batch (docs/your-model.md)"
    )
