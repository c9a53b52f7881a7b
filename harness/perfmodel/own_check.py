"""The step models against the run's own steps: how far DDP's, ZeRO-1's and FSDP2's predicted steps were from
the ones the run measured at world size ≥ 2, priced on its machine's network (its collectives run), and that in
words after a cluster's answer, where it is beyond what bears the model out. Pure but for reading the run."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from harness.analysis import roles
from harness.perfmodel.network import collectives_command, network_for_run
from harness.perfmodel.sharding import fsdp, zero


def errors_on_own_run(results_dir: Path, run_dir: Path, setup: dict, *, configs=None) -> dict[str, list[float]] | None:
    """How far this model was from the run's own steps at world size ≥ 2 of `setup`, priced on the run's machine's
    network (its collectives run): per strategy it answers for, each configuration's predicted / measured − 1 —
    DDP's over its bucket-cap sweep, or where the run swept none over stock as torch ships it (calibrated, with the
    contention measured where there is some), ZeRO-1's and FSDP2's as `predict --run` checks them; None where no
    network is beside the run. `configs`: the run's rows, where the caller has read them already."""
    from harness.perfmodel.measured import of_setup
    from harness.perfmodel.predict import forecast_ms, run_cores, sweep_predictions
    from harness.results import model_tables, store

    network = network_for_run(results_dir, run_dir)
    if network is None:
        return None
    configs = of_setup(store.read_configs(run_dir) if configs is None else configs, setup)
    profiles = model_tables.read_gradprofiles(run_dir)
    # its bucket-cap sweep, or where the run swept none, stock as torch ships it
    cores = run_cores(run_dir)  # its compute slowed where ranks outnumber them, as predict --run prices it
    rows = (sweep_predictions(configs, profiles, network, cores=cores)
            or sweep_predictions(configs, profiles, network, shipped=True, cores=cores))  # fmt: skip
    ddp = [forecast_ms(row) / row["measured_ms"] - 1 for row in rows]
    errors = {"DDP": ddp}
    for label, checks in (("ZeRO-1", zero.run_checks), ("FSDP2", fsdp.run_checks)):
        errors[label] = [c["predicted_ms"] / c["measured_ms"] - 1
                         for c in checks(configs, profiles, network, cores=cores)]  # fmt: skip
    return {label: found for label, found in errors.items() if found}


class OwnCheck(NamedTuple):
    """The step models against the run's own steps: in words (`errors_words`), and per model (`errors_on_own_run`)."""

    words: str = ""
    errors: dict[str, list[float]] | None = None


def own_check(results_dir: Path, run_dir: Path, setup: dict, *, configs, cluster: str) -> OwnCheck:
    """`setup`'s step models against the run's own steps, as `predict --cluster` says and weighs them (and the
    what-if pages alike)."""
    from harness.perfmodel.measured import baseline_slowdown

    errors = errors_on_own_run(results_dir, run_dir, setup, configs=configs)
    words = errors_words(errors, cluster=cluster, results_dir=results_dir, slowdown=baseline_slowdown(configs, setup),
                         run_dir=run_dir)  # fmt: skip
    return OwnCheck(words, errors)


UNBORNE_ERROR = 0.4
"""An error on the run's own steps beyond which the model's steps are not borne out there: DDP's calibrated sweeps
on this machine's CPU have a MAPE within 10 % in 18 of 21 (docs/measured-cpu.md), FSDP2's steps are under-predicted
by 15–34 % (docs/measured/fsdp-model-cpu.md); a walkthrough's run, beside a test suite on the same cores, read −50 %."""


def unborne_words(errors: dict[str, list[float]] | None) -> str:
    """'the step models missed this run's own steps by up to 57%: not borne out (below)' where an error is beyond
    UNBORNE_ERROR, said where the answer is read (a walkthrough met the doubt only after the table); '' else."""
    worst = max((abs(error) for found in (errors or {}).values() for error in found), default=0.0)
    return f"the step models missed this run's own steps by up to {worst:.0%}: not borne out" * bool(
        worst > UNBORNE_ERROR
    )


def errors_words(errors: dict[str, list[float]] | None, *, cluster: str, results_dir: Path,
                 slowdown: tuple[int, float] | None = None, run_dir: Path | None = None) -> str:  # fmt: skip
    """The model's error on the run's own steps (`errors_on_own_run`) in words, said after a cluster's answer by the
    console and the page alike: where the strategies' errors differ, so may their order on the cluster; where one is
    beyond UNBORNE_ERROR, that the steps are not borne out, with the likely cause where the run shows it (`slowdown`:
    measured.baseline_slowdown); where no network is beside the run, that the check is missing, and the command that
    measures it (`network.collectives_command`, where `run_dir` is given)."""
    if errors is None:
        how = f"`{collectives_command(run_dir)}`" if run_dir else "one there"
        return (f"not checked against this run's own steps: no `ddpbench collectives` run of its machine in "
                f"{str(results_dir)!r} (run {how} to see the model's error)")  # fmt: skip
    said = "; ".join(f"{label} {min(e):+.0%}" + (f" to {max(e):+.0%}" if len(e) > 1 else "") + f" ({len(e)} "
                     f"configuration{'s' * (len(e) > 1)})" for label, e in errors.items())  # fmt: skip
    if not said:
        return ""
    # DDP's check is its bucket-cap sweep's, or stock's as shipped: a run with neither has none to set beside others'
    said += "" if "DDP" in errors else "; DDP not checked (no stock at its defaults or a cap alone at world size ≥ 2)"
    said = (f"the same model against this run's own steps at world size ≥ 2, on its machine's network (predicted / "
            f"measured − 1): {said}; where these differ, a lead on {cluster} smaller than the difference rests on "
            "the model alone")  # fmt: skip
    worst = max(abs(error) for found in errors.values() for error in found)
    if worst <= UNBORNE_ERROR:
        return said
    world, ratio = slowdown or (0, 0.0)
    beside = (f" ({roles.baseline_name()}, which communicates nothing, took {ratio:.2f}× its one-rank step at "
              f"w{world} in it)" if ratio else "")  # fmt: skip
    # a baseline that kept its one-rank pace had cores enough: a quieter machine would not change what the model missed
    where = ("the cluster's GPUs (its ranks did not slow each other here: a quieter machine would not help)"
             if ratio and ratio < UNCONTENDED else "a quiet machine (or the cluster's GPUs)")  # fmt: skip
    return (f"{said}. Off by up to {worst:.0%}, beyond {UNBORNE_ERROR:.0%}, the model's steps are not borne out by "
            f"this run{beside}: bench again on {where} before booking by them")  # fmt: skip


UNCONTENDED = 1.1
"""A baseline step at the run's widest world size under this many times its one-rank step: its ranks did not slow
each other's compute (a busy machine's read 1.3–2× in walkthroughs; launches of one thing differ by up to 15 % here)."""
