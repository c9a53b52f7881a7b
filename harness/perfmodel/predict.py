"""The step-time model against a run: its tables (`predictions.parquet`, `floor.parquet`) and what
`ddpbench predict` reads from a run.

The model itself is `harness.perfmodel.schedule` (DDP's buckets, simulated) over `harness.perfmodel.network` (one
all-reduce's cost). Here: per bucket-cap sweep of a run, measured against predicted (raw, calibrated on the run's
own one-rank steps, and with contention); per configuration, the communication floor; and the run's stored
gradient-ready profile. Measuring a profile runs a workload (the rank layer's `gradprofile`): the face does that.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.analysis import roles, stats
from harness.analysis.verdicts.sweep import (  # the model's layout: a cap given explicitly
    cap_given,
    given_cap,
    swept_cap,
)
from harness.perfmodel.measured import (
    SETUP_DEFAULTS,
    SETUP_KEYS,
    ddp_defaults_but_cap,
    ddp_own_cost_s,
    pooled_step_s,
)
from harness.perfmodel.network import NO_CONTENTION, Network, network_for_run, network_link
from harness.perfmodel.schedule import Calibration, Profile, calibrate, predict_cap, profile_from_rows
from harness.protocols import ConfigError
from harness.results import model_tables, store
from harness.results.values import options_of

DEFAULT_CAPS_MB = (1.0, 5.0, 10.0, 25.0, 50.0, 100.0)  # predicted where a run swept fewer than two caps


def profile_for(profiles: pd.DataFrame, setup: dict) -> Profile | None:
    """The stored profile rows of this setup as a Profile; None where the run stored none."""
    rows = profiles
    for key, value in setup.items():
        rows = rows[rows[key] == value]
    return profile_from_rows(rows) if not rows.empty else None


def run_calibration(configs: pd.DataFrame, setup: dict, *, profile: Profile) -> Calibration:
    """From the run's rows at one rank, where nothing is communicated: the baseline's step (else the
    reference's: `calibration_target`) over the profile's (the run's rows are timed over every repeat; the
    profile over a few steps of its own), and DDP's own cost (the reference minus the baseline). Only
    one-rank rows: what `predict --cluster` has for world sizes never run. Whatever is missing leaves that
    part uncalibrated.

    Ranks sharing one machine slow each other's compute (the baseline at 2 ranks over 1 here: 0.99-1.51);
    scaling to the baseline at the predicted world size instead, over three CPU model runs
    (benchmarks/cpu_model.py), gave 4.1-18.6 % MAPE (mean 8.0) against 4.0-12.3 % (mean 6.9) at one rank
    (docs/measured-cpu.md).
    """
    _, step_s = calibration_target(configs, setup)
    scale = step_s / profile.local_step_s if step_s else 1.0
    return Calibration(compute_scale=scale, reducer_s=ddp_own_cost_s(configs, setup) or 0.0)


def calibration_target(configs: pd.DataFrame, setup: dict) -> tuple[str | None, float | None]:
    """(role, step s) at one rank that the profile's compute is scaled to: the baseline's; where the run has
    none, the reference's, DDP's own cost then inside the scaled compute rather than apart (the profile's
    step alone would predict below the run's own reference: 5-36 % on runs without a baseline row);
    (None, None) where the run has neither."""
    for role in ("baseline", "reference"):
        if (step_s := pooled_step_s(configs, setup, world=1, role=role)) is not None:
            return role, step_s
    return None, None


@dataclass(frozen=True)
class CoreShare:
    """How much slower each rank computes when `world` ranks share a CPU's `cores` cores, beyond the one-rank step
    the compute is calibrated on. `floor`: world / cores, each rank's share of a core alone (memory bandwidth and
    caches, shared too, only slow it further). `carried`: the run's own slowdown, its baseline step at the largest
    world size ≥ 2 it measured (`measured_world`) over its one-rank step (`measured_ratio`), times the further
    sharing of cores beyond it (world / max(measured_world, cores)); None where the run measured none, or its baseline
    at no world size ≥ 2 (`measured_world` None) or at none of one rank (`measured_world` set, its ratio None)."""

    world: int
    cores: int
    floor: float
    carried: float | None = None
    measured_world: int | None = None
    measured_ratio: float | None = None

    @property
    def scale(self) -> float:
        """The scale the step is priced at: the run's own slowdown where measured, else the floor; never below the
        floor (a baseline at w2 read 0.99× its one-rank step here: the launches' noise, not sharing for free)."""
        return self.floor if self.carried is None else max(self.carried, self.floor)

    @property
    def bounds(self) -> tuple[float, float]:
        """The scales whose steps bound the forecast: the floor's and the carried slowdown's (one where unmeasured)."""
        ends = (self.floor, self.scale)
        return min(ends), max(ends)


def core_share(configs: pd.DataFrame, setup: dict, *, world: int, cores: int | None) -> CoreShare | None:
    """A CoreShare where `world` ranks outnumber the `cores` the run's ranks had (run_cores); None where they do not
    (one rank to a core: the one-rank calibration holds, docs/measured-cpu.md) or the cores are unknown."""
    if not cores or world <= cores:
        return None
    share = CoreShare(world, cores, floor=world / cores)
    one_s = pooled_step_s(configs, setup, world=1, role="baseline")
    measured = [w for w in range(world, 1, -1) if pooled_step_s(configs, setup, world=w, role="baseline")]
    if not one_s or not measured:  # which of the two steps is missing, kept for what is said of the floor
        return CoreShare(world, cores, share.floor, measured_world=measured[0] if measured else None)
    ratio = pooled_step_s(configs, setup, world=measured[0], role="baseline") / one_s
    further = world / max(measured[0], cores)
    return CoreShare(world, cores, share.floor, ratio * further, measured[0], ratio)


def run_cores(run: Path) -> int | None:
    """The cores a run's ranks could run on (run.json's usable_cpus, else the machine's count); None where unsaid."""
    environment = store.read_run_meta(run).get("environment") or {}
    return environment.get("usable_cpus") or environment.get("cpu_count")


def with_shared_cores(profile: Profile, share: CoreShare | None, scale: float | None = None) -> Profile:
    """The calibrated profile, its compute slowed by `scale` (share.scale where not given); as is without a share."""
    return profile if share is None else calibrate(profile, Calibration(compute_scale=scale or share.scale))


def scaled_to_local_step(profile: Profile, calibration: Calibration, local_step_s: float | None, *,
                         own_carried: bool = True, optimizer_s: float | None = None,
                         own_s: float | None = None) -> Calibration:  # fmt: skip
    """`calibration` with the compute scaled further, so that the calibrated profile's step without DDP's
    own cost is `local_step_s` (a GPU's one-GPU step the user knows: `--local-step-ms`); DDP's own cost
    is `own_s` where given (`--local-ddp-ms`, that GPU's), else scaled with it, or left out (`own_carried` false: a
    CPU's, whose share of the step is no GPU's — 36 % of a CPU ResNet-50 step over gloo against 3.3-4.0 % on an
    H200). `optimizer_s` (`--local-optimizer-ms`): the optimizer's part of that step, as given; forward and backward
    take the rest, split as the profile splits them. Unchanged where no step is given."""
    if not local_step_s:
        return calibration
    measured_s = profile.local_step_s if optimizer_s is None else profile.forward_s + profile.backward_s
    wanted_s = local_step_s if optimizer_s is None else local_step_s - optimizer_s
    device = wanted_s / (measured_s * calibration.compute_scale) if measured_s > 0 else 1.0
    own_s = own_s if own_s is not None else calibration.reducer_s * device if own_carried else 0.0
    return Calibration(compute_scale=calibration.compute_scale * device, reducer_s=own_s, optimizer_s=optimizer_s)


def sweep_predictions(configs: pd.DataFrame, profiles: pd.DataFrame, network: Network, *,
                      shipped: bool = False, against: pd.DataFrame | None = None,
                      cores: int | None) -> list[dict]:  # fmt: skip
    """Per stock bucket-cap configuration at world size ≥ 2 with a profile: measured against predicted,
    raw (the profile as measured), raw with the collectives run's contention (independent of the run's
    rows), calibrated (see Calibration), and calibrated with contention. `shipped`: stock as torch ships it (no
    cap given: its 1 MiB first bucket, then 25 MiB) instead, the check a run without a cap sweep has.
    `against`: another run's configurations measured instead of the run's own (`predict --against`: the forecast,
    calibrated on this run's one-rank rows, held against a later run's steps). `cores`: the cores the run's ranks
    had (run_cores, asked of every caller: the console, the pages and the stored table price one step); where a world
    size's ranks outnumber them, the calibrated compute is slowed as core_share says (`shared_cores_scale`), and each
    row gains `core_share` and the steps at its bounds (`low_ms`, `high_ms`)."""
    configs = _as_ddp_caps(configs)
    checked = configs if against is None else _as_ddp_caps(against)
    given = checked["impl_options"].map(cap_given).astype(bool)
    sweeps = checked[roles.is_reference(checked) & (~given if shipped else given)
                     & checked["bucket_cap_mb"].notna() & (checked["world_size"] > 1)]  # fmt: skip
    rows = []
    for keys, group in sweeps.groupby([*SETUP_KEYS, "world_size"]):
        setup = dict(zip(SETUP_KEYS, keys[:-1], strict=True))
        world = int(keys[-1])
        profile = profile_for(profiles, setup)
        if profile is None or not network.links:
            continue
        link = network_link(network, world)
        contention = network.contention.get(world)
        calibration = run_calibration(configs, setup, profile=profile)
        share = core_share(configs, setup, world=world, cores=cores)
        calibrated = calibrate(profile, calibration)
        # The repeats pooled as the run page ranks them and the sweep decides: their geometric mean.
        measured = group.groupby("bucket_cap_mb")["step_ms_median"].agg(stats.geometric_mean)
        for cap, measured_ms in measured.items():
            at = {"cap_mb": cap, "link": link, "world_size": world, "cap_given": not shipped}
            raw = predict_cap(profile, **at)
            raw_contended = predict_cap(profile, **at, contention=contention) if contention else None
            plain = predict_cap(with_shared_cores(calibrated, share), **at)
            contended = (predict_cap(with_shared_cores(calibrated, share), **at, contention=contention)
                         if contention else None)  # fmt: skip
            rows.append({
                "workload": setup["workload"], "size": setup["size"], "impl": group["impl"].iloc[0],
                "world_size": world,
                "bucket_cap_mb": float(cap), "measured_ms": float(measured_ms),
                "predicted_raw_ms": raw.step_s * 1e3,
                "predicted_raw_contention_ms": raw_contended.step_s * 1e3 if raw_contended else None,
                "predicted_ms": plain.step_s * 1e3,
                "predicted_contention_ms": contended.step_s * 1e3 if contended else None,
                "compute_scale": calibration.compute_scale, "reducer_ms": calibration.reducer_s * 1e3,
                "buckets": plain.buckets, "network": link.source,
                "shared_cores_scale": share.scale if share else None,
                **_bounds(calibrated, share, at, contention),
            })  # fmt: skip
    return rows


def forecast_ms(row: dict) -> float:
    """The step a sweep_predictions row forecasts, as `predict` says it: with the collectives run's contention where
    it measured that world size, else without."""
    contended = row["predicted_contention_ms"]
    return row["predicted_ms"] if contended is None or pd.isna(contended) else contended


def _bounds(calibrated: Profile, share: CoreShare | None, at: dict, contention) -> dict:
    """Where ranks share cores: the share, and the steps at its bounds' scales (see sweep_predictions); else none."""
    if share is None:
        return {}
    contention = contention or NO_CONTENTION
    low, high = (predict_cap(with_shared_cores(calibrated, share, scale), **at, contention=contention).step_s * 1e3
                 for scale in share.bounds)  # fmt: skip
    return {"core_share": share, "low_ms": low, "high_ms": high}


def _as_ddp_caps(configs: pd.DataFrame) -> pd.DataFrame:
    """The ok rows of DDP as the model simulates it (any cap), each with the cap its buckets were built at."""
    configs = configs.fillna(SETUP_DEFAULTS)
    configs = configs[(configs["status"] == "ok") & ddp_defaults_but_cap(configs)]
    given = configs["impl_options"].map(cap_given).astype(bool)
    cap = swept_cap(configs).where(given, stats.REFERENCE_CAP_MB)  # 0.05 as given, not DDP's whole bytes
    return configs.assign(bucket_cap_mb=cap)


HALF_PRECISION_HOOKS = ("fp16", "bf16")
"""DDP comm hooks that all-reduce every gradient cast to 16 bits; PowerSGD sends low-rank factors whose
size depends on its rank and warm-up, so it gets no floor."""


def allreduced_bytes(row) -> int | None:
    """The bytes of one all-reduce that moves as much as this configuration's step does: every
    gradient byte; 2 bytes an element under an fp16/bf16 hook. None where the strategy has no floor or
    the hook is unknown. A floor is for strategies whose step is at least the baseline's (every rank
    updates every parameter) plus one all-reduce of every gradient byte (`roles.whole_gradient_allreduce`);
    the others have none: the baseline communicates nothing, a single-process strategy gathers inside one
    process, a parameter server takes part of the model away, and sharding strategies update 1/n of the
    parameters on each rank, so the baseline's optimizer step is no lower bound for them."""
    if not row.has_floor or pd.isna(row.grad_bytes):
        return None
    hook = options_of(row.impl_options).get("comm_hook", "none")
    return int(row.grad_bytes) if hook == "none" else _sixteen_bit_bytes(row) if hook in HALF_PRECISION_HOOKS else None


def _sixteen_bit_bytes(row) -> int:
    """Every gradient element at 2 bytes: exactly, where the elements are known; else half of the
    (fp32: the workloads' parameters stay fp32 under autocast) gradient bytes. Never more than sent."""
    elements = getattr(row, "trainable_param_count", None)
    if elements is None or pd.isna(elements):
        return int(row.grad_bytes) // 2
    return min(int(row.grad_bytes), 2 * int(elements))


def floor_rows(configs: pd.DataFrame, network: Network) -> list[dict]:
    """Per configuration at world size ≥ 2 with a floor (`allreduced_bytes`): the bytes it sends
    all-reduced once at the network's α and bandwidth, and the floor max(baseline step, that all-reduce).
    Configurations without such a floor get no row."""
    configs = configs.fillna(SETUP_DEFAULTS)
    ok = configs[(configs["status"] == "ok") & (configs["world_size"] > 1) & configs["grad_bytes"].notna()]
    ok = ok.assign(has_floor=roles.whole_gradient_allreduce(ok))
    local = ok[roles.is_baseline(ok)].groupby([*SETUP_KEYS, "world_size"])["step_ms_median"].agg(stats.geometric_mean)
    rows = []
    for r in ok.itertuples():
        sent = allreduced_bytes(r)
        if sent is None:
            continue
        link = network_link(network, int(r.world_size))
        allreduce_ms = link.allreduce_s(sent, int(r.world_size)) * 1e3
        local_ms = local.get(tuple(getattr(r, k) for k in [*SETUP_KEYS, "world_size"]))
        rows.append({
            "config_id": r.config_id, "world_size": int(r.world_size), "grad_bytes": int(r.grad_bytes),
            "allreduce_ms": allreduce_ms, "local_ms": None if local_ms is None else float(local_ms),
            "floor_ms": max(allreduce_ms, float(local_ms)) if local_ms is not None else allreduce_ms,
            "step_ms": r.step_ms_median, "network": link.source,
        })  # fmt: skip
    return rows


def update_model_tables(results: Path, run: Path, network: Network | None = None) -> tuple[list[dict], list[dict]]:
    """Write the run's predictions.parquet and floor.parquet when a network is known; return their rows."""
    network = network or network_for_run(results, run)
    if network is None or not network.links:
        return [], []
    configs = store.read_configs(run)
    predictions = sweep_predictions(configs, model_tables.read_gradprofiles(run), network, cores=run_cores(run))
    floor = floor_rows(configs, network)
    if predictions or floor:
        # the share itself and its bounds are the console's (--against's range): the table keeps the scale
        consoles = ("core_share", "low_ms", "high_ms")
        stored = [{key: row[key] for key in row if key not in consoles} for row in predictions]
        model_tables.write_model_tables(run, predictions=stored, floor=floor)
    return predictions, floor


def update_all_model_tables(results: Path) -> int:
    """Before a report: refresh every run's model tables (a collectives run may have come later)."""
    return sum(bool(update_model_tables(results, run)[0]) for run in store.list_runs(results))


# ---------------------------------------------------------------- what `ddpbench predict` reads


def resolve_run(text: str, results: Path) -> Path:
    """A run folder given as a path, or as a run id inside `results`."""
    found = store.find_run(text, results)
    if found is not None and store.read_run_meta(found).get("kind") == store.COLLECTIVES_KIND:
        raise ConfigError(f"--run {found.name!r} is a `ddpbench collectives` run; --run takes a bench run (its "
                          f"network is used beside it, or fit a cluster to it: --nccl-tests {found})")  # fmt: skip
    if found is not None:
        return found
    known = store.newest_runs(results)
    raise ConfigError(f"--run {text!r} is not a run folder or a run id in {str(results)!r} (newest runs: {known})")


def run_setups(run: Path) -> list[dict]:
    """The workload setups a run measured successfully, in run order."""
    configs = store.read_configs(run).fillna(SETUP_DEFAULTS)
    ok = configs[configs["status"] == "ok"]
    return [
        dict(zip(SETUP_KEYS, keys, strict=True)) for keys in ok[SETUP_KEYS].drop_duplicates().itertuples(index=False)
    ]


def accumulated(run: Path) -> list[int]:
    """The K>1 a run's rows accumulated gradients over (`bench --grad-accum`): predict prices none of them yet (one
    micro-batch's compute and one sync a step; its keys here, in memory and measured pool K rows with K=1's)."""
    return accumulated_in(store.read_configs(run))


def accumulated_in(configs: pd.DataFrame) -> list[int]:
    """`accumulated` of rows already read (the site's what-if page refuses what predict refuses)."""
    return sorted({int(k) for k in configs.get("grad_accum", pd.Series(dtype=int)).dropna() if k > 1})


def workload_source(run: Path, setup: dict) -> tuple[str, dict]:
    """(spec, options) that the run built this setup's workload from (its rows say: `workload` is only its
    name); the name itself for rows written before specs were recorded."""
    return source_in_rows(store.read_configs(run).fillna(SETUP_DEFAULTS), setup)


def source_in_rows(configs: pd.DataFrame, setup: dict) -> tuple[str, dict]:
    """workload_source from a run's rows already read."""
    rows = configs[(configs["status"] == "ok") & (configs["workload"] == setup["workload"])]
    if rows.empty or "workload_spec" not in rows or pd.isna(rows["workload_spec"].iloc[0]):
        return setup["workload"], {}
    return str(rows["workload_spec"].iloc[0]), options_of(rows["workload_options"].iloc[0])


def swept_caps(configs: pd.DataFrame) -> list[float]:
    """The caps a run swept, each given as an option (DDP's default layout, recorded as 25, is no
    choice the run made), sorted; fewer than two is no sweep."""
    return sorted({cap for text in configs["impl_options"].dropna() if (cap := given_cap(text)) is not None})


def priced_caps(configs: pd.DataFrame) -> list[float]:
    """The caps a run's answer prices: its sweep beside the default list (the per-bucket model prices any cap from
    one profile, so a sweep of 1 and 25 MiB must not hide that 100 MiB is faster), or the default list alone."""
    swept = swept_caps(configs)
    return sorted(set(swept) | set(DEFAULT_CAPS_MB)) if len(swept) >= 2 else list(DEFAULT_CAPS_MB)


def profiles_by_setup(profiles: pd.DataFrame) -> list[tuple[dict, Profile]]:
    """Each setup a run stored a gradient-ready profile for, with that profile, in the stored order."""
    profiles = profiles.fillna(SETUP_DEFAULTS)
    setups = profiles[SETUP_KEYS].drop_duplicates().itertuples(index=False)
    found = [dict(zip(SETUP_KEYS, keys, strict=True)) for keys in setups]
    return [(setup, profile_for(profiles, setup)) for setup in found]


def stored_profile(run: Path, setup: dict) -> Profile | None:
    """The gradient-ready profile stored with the run for this setup, or None."""
    return profile_for(model_tables.read_gradprofiles(run), setup)


def store_profile(run: Path, setup: dict, rows: pd.DataFrame, *, device: str) -> Profile:
    """Keep a profile measured now (`harness.measure.gradprofile.measure`'s rows, one per parameter,
    with the setup's columns) with the run, so that the next `predict` and report find it."""
    meta = store.read_run_meta(run)
    context = {
        "run_id": meta.get("run_id", run.name),
        "device": device,
        "threads_per_rank": meta.get("threads_per_rank"),
    }
    # A DataFrame holds a missing integer (`block`: the root's parameters have none) as NaN; Parquet's is null.
    records = rows.astype(object).where(rows.notna(), None).to_dict("records")
    model_tables.write_gradprofile(model_tables.gradprofile_path(run, **setup), [{**context, **r} for r in records])
    return profile_from_rows(rows)


# The model's variants as the report and `ddpbench predict` show them: (column, label).
VARIANTS = (
    ("predicted_raw_ms", "raw profile"),
    ("predicted_raw_contention_ms", "raw profile, with measured contention"),
    ("predicted_ms", "calibrated on the run's one-rank steps"),
    ("predicted_contention_ms", "calibrated, with measured contention"),
)
