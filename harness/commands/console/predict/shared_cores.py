"""What `predict --run` says where a world size's ranks outnumber the cores the run's ranks had: the compute slowed
(`perfmodel.predict.core_share`), by the run's own measured slowdown or, unmeasured, by ranks / cores alone, and
whether the step priced is a step or only a floor."""

from __future__ import annotations

from harness.commands import console


def share_words(share) -> str:
    """How the compute was slowed for `share`'s ranks on its cores, and by what measurement (or none)."""
    sharing = f"{share.world} ranks share {share.cores} cores"
    floor = f"×{share.floor:.3g} (ranks / cores: each rank's share of a core)"
    if share.carried is None:
        missing = "one rank" if share.measured_world else "a world size ≥ 2"
        return (f"{sharing}: compute slowed {floor}, the least it can be: a floor, not a step (to see how much more "
                "ranks sharing memory slow it, the run needs its baseline at one rank and at a world size ≥ 2; it "
                f"has none at {missing})")  # fmt: skip
    further = share.world / max(share.measured_world, share.cores)
    carried = f" × {further:.3g} (ranks per core beyond it)" if further != 1 else ""
    return (f"{sharing}: compute slowed ×{share.carried:.3g}, measured: the run's baseline at "
            f"w{share.measured_world} over its one-rank step (×{share.measured_ratio:.3g}){carried}; "
            f"{floor} alone would be the floor")  # fmt: skip


def share_at(run_dir, setup: dict, world: int):
    """The core share of `world` ranks on the cores `run_dir`'s ranks had (None: no run, or a rank to a core)."""
    from harness.perfmodel import predict
    from harness.results import store

    if run_dir is None:
        return None
    return predict.core_share(store.read_configs(run_dir), setup, world=world, cores=predict.run_cores(run_dir))


def against_one_rank(frame, profile):
    """The frame's scaling efficiencies against the one-rank step `profile` prices, not the slowed compute's."""
    return frame.assign(scaling_efficiency=profile.local_step_s * 1e3 / frame["step_ms"])


def say(share, frame) -> None:
    """Said under the world size's table: how its compute was slowed and, unmeasured, that its steps are floors."""
    if share is None:
        return
    console.say(f"  w{share.world}: {share_words(share)}")
    if share.carried is None:
        best = frame["step_ms"].min()
        bench = "--gpus 1 (its one-rank step)" if share.measured_world else "--gpus 2"
        console.warning(f"w{share.world}: each step above is a floor: the step is at least {best:.2f} ms at its "
                        f"best cap, more by what {share.world} ranks sharing memory bandwidth cost; bench "
                        f"{bench} measures that")  # fmt: skip


def range_words(row) -> str:
    """--against's range verdict for one row: inside or outside the bounds the shared cores give, or no range."""
    if "core_share" not in row:
        return "no range: one rank to a core, the forecast is one step"
    low, high, measured = row["low_ms"], row["high_ms"], row["measured_ms"]
    inside = "inside" if low <= measured <= high else "outside"
    ends = "between the ranks / cores floor's step and the measured slowdown's"
    return f"range {low:.2f}-{high:.2f} ms ({ends}): measured {inside}"
