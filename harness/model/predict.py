"""Predicted step time per bucket cap at world sizes you cannot run: DDP's bucket schedule, simulated.

Three inputs, each measured or given:

- a gradient-ready profile (`harness.rank.gradprofile`): forward, backward and optimizer times at
  world size 1 and when each gradient is ready during backward;
- a network model per world size: an all-reduce of S bytes takes `t(S) = α + S × f(n) / busbw`,
  f(n) = 2(n−1)/n (nccl-tests' bus factor), fitted from `ddpbench collectives` or given;
- optionally, contention: how much compute and communication slow each other down while they
  overlap (measured by `ddpbench collectives`; on the CPU gloo's threads share the cores).

The simulation assigns gradients to buckets as DDP's reducer does after its rebuild (in the
order gradients became ready, a first bucket capped at the first-bucket size, per dtype, never
splitting a parameter), starts a bucket's all-reduce when its last gradient is ready and the
previous all-reduce has finished, and gives step = forward + max(end of backward, end of the
last all-reduce) + optimizer.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from harness import bucketing
from harness.protocols import ConfigError
from harness.rank.gradprofile import PROFILE_STEPS
from harness.results import store

MB = 1024 * 1024


def allreduce_bus_factor(world_size: int) -> float:
    return 2 * (world_size - 1) / world_size


# ---------------------------------------------------------------- the network


@dataclasses.dataclass(frozen=True)
class Link:
    """All-reduce cost at one world size: t(S) = alpha_s + S × 2(n−1)/n / busbw_bytes_per_s."""

    alpha_s: float
    busbw_bytes_per_s: float
    source: str = "given"

    def allreduce_s(self, nbytes: float, world_size: int) -> float:
        if world_size <= 1 or nbytes <= 0:
            return 0.0  # one rank has nothing to exchange
        return self.alpha_s + nbytes * allreduce_bus_factor(world_size) / self.busbw_bytes_per_s


def fit_link(sizes_bytes: Sequence[float], times_s: Sequence[float], *, world_size: int, source: str = "fit") -> Link:
    """Least squares of t(S) = α + S·f/busbw on relative error (each size counts alike, small
    ones included), with α ≥ 0 and 1/busbw ≥ 0 (scipy's non-negative least squares)."""
    from scipy.optimize import nnls

    sizes = np.asarray(sizes_bytes, dtype=float)
    times = np.asarray(times_s, dtype=float)
    if len(sizes) < 2:
        raise ValueError("fitting α and β needs at least two message sizes")
    design = np.column_stack([np.ones_like(sizes), sizes * allreduce_bus_factor(world_size)]) / times[:, None]
    (alpha, inverse_busbw), _ = nnls(design, np.ones_like(times))
    return Link(alpha_s=float(alpha), busbw_bytes_per_s=1.0 / inverse_busbw if inverse_busbw > 0 else float("inf"),
                source=source)  # fmt: skip


def links_from_collectives(frame: pd.DataFrame, *, source: str = "collectives") -> dict[int, Link]:
    """One fitted link per world size from the all-reduce rows that passed their check."""
    rows = frame[(frame["op"] == "all_reduce") & frame["correct"].astype(bool)]
    links = {}
    for world, group in rows.groupby("world_size"):
        if len(group) >= 2:
            links[int(world)] = fit_link(group["bytes"], group["time_us"] / 1e6, world_size=int(world), source=source)
    return links


def link_for(links: dict[int, Link], world_size: int) -> Link:
    """The link measured at this world size, else the nearest measured one (an extrapolation:
    a ring all-reduce's bus bandwidth is roughly flat in n, its latency is not)."""
    if world_size in links:
        return links[world_size]
    nearest = min(links, key=lambda n: (abs(np.log2(n) - np.log2(world_size)), -n))
    link = links[nearest]
    return dataclasses.replace(link, source=f"{link.source} at world size {nearest}, extrapolated")


# ---------------------------------------------------------------- the profile and DDP's buckets


@dataclasses.dataclass(frozen=True)
class Grad:
    index: int  # registration order
    nbytes: int
    dtype: str
    ready_s: float  # after backward began


@dataclasses.dataclass(frozen=True)
class Profile:
    forward_s: float
    backward_s: float
    optimizer_s: float
    grads: tuple[Grad, ...]  # in the order they became ready

    @property
    def grad_bytes(self) -> int:
        return sum(g.nbytes for g in self.grads)

    @property
    def local_step_s(self) -> float:
        return self.forward_s + self.backward_s + self.optimizer_s


def profile_from_rows(rows: pd.DataFrame) -> Profile:
    """A stored profile (one row per parameter, see harness.results.store.GRADPROFILE_SCHEMA) as a Profile."""
    trainable = rows[rows["requires_grad"].astype(bool)]
    ordered = trainable.sort_values(["ready_ms", "param_index"], ascending=[True, False])
    grads = tuple(
        Grad(int(r.param_index), int(r.bytes), str(r.param_dtype), float(r.ready_ms) / 1e3)
        for r in ordered.itertuples()
    )
    first = rows.iloc[0]
    return Profile(first["forward_ms"] / 1e3, first["backward_ms"] / 1e3, first["optimizer_ms"] / 1e3, grads)


# ---------------------------------------------------------------- the simulation


@dataclasses.dataclass(frozen=True)
class Contention:
    """Overlapped work runs slower: compute by `compute_slowdown` while an all-reduce is in
    flight, an all-reduce by `comm_slowdown` while backward computes (1.0, 1.0: none)."""

    compute_slowdown: float = 1.0
    comm_slowdown: float = 1.0


NO_CONTENTION = Contention()


@dataclasses.dataclass(frozen=True)
class StepPrediction:
    step_s: float
    backward_end_s: float  # after backward began
    comm_end_s: float
    buckets: int
    comm_s: float  # sum of all-reduce times without contention

    @property
    def exposed_comm_s(self) -> float:
        return max(0.0, self.comm_end_s - self.backward_end_s)


def simulate(
    profile: Profile,
    buckets: Sequence[Sequence[Grad]],
    *,
    link: Link,
    world_size: int,
    contention: Contention = NO_CONTENTION,
) -> StepPrediction:
    """One training step: backward progresses through its gradients while the buckets'
    all-reduces run one after another, each starting when its last gradient is ready and
    the previous one is done. With contention, whichever of the two overlaps the other runs
    at 1/slowdown of its own speed, so time advances event by event."""
    # A gradient cannot be ready after backward ends (medians of separate steps can say so).
    ready = [min(profile.backward_s, max(g.ready_s for g in bucket)) for bucket in buckets]
    costs = [link.allreduce_s(sum(g.nbytes for g in bucket), world_size) for bucket in buckets]
    backward_end, comm_end = _overlap(profile.backward_s, ready, costs, contention)
    step = profile.forward_s + max(backward_end, comm_end) + profile.optimizer_s
    return StepPrediction(step, backward_end, comm_end, len(buckets), sum(costs))


EPS = 1e-12


def _overlap(backward_s: float, ready: list[float], costs: list[float], contention: Contention) -> tuple[float, float]:
    """(end of backward, end of the last all-reduce) in wall time after backward began.

    `ready` is in backward's own time (its progress when it runs alone), `costs` are solo
    all-reduce times; buckets launch in their order, one in flight at a time.
    """
    now, progress = 0.0, 0.0  # wall clock; backward's progress in its own seconds
    backward_end = 0.0 if backward_s <= 0 else None
    comm_end = 0.0
    pending = list(zip(ready, costs, strict=True))
    in_flight: float | None = None  # solo seconds left of the all-reduce in flight
    while pending or in_flight is not None:
        if in_flight is None and pending[0][0] <= progress + EPS:  # its last gradient is ready: launch
            in_flight = pending.pop(0)[1]
            continue
        computing = progress < backward_s - EPS
        compute_rate = 1.0 / contention.compute_slowdown if in_flight is not None else 1.0
        comm_rate = 1.0 / contention.comm_slowdown if computing else 1.0
        horizons = []
        if computing:  # to the end of backward, or to the next launch when nothing is in flight
            goal = backward_s if in_flight is not None else min(pending[0][0], backward_s)
            horizons.append((goal - progress) / compute_rate)
        if in_flight is not None:
            horizons.append(in_flight / comm_rate)
        dt = min(horizons)
        now += dt
        if computing:
            progress += dt * compute_rate
            if progress >= backward_s - EPS:
                progress, backward_end = backward_s, now
        if in_flight is not None:
            in_flight -= dt * comm_rate
            if in_flight <= EPS:
                in_flight, comm_end = None, now
    if backward_end is None:
        backward_end = now + (backward_s - progress)
    return backward_end, comm_end


def predict_cap(
    profile: Profile, *, cap_mb: float, link: Link, world_size: int, contention: Contention = NO_CONTENTION
) -> StepPrediction:
    cap_bytes = int(cap_mb * MB)
    grads = profile.grads
    layout = bucketing.assign_buckets(
        [g.nbytes for g in grads], [g.dtype for g in grads],
        cap_bytes=cap_bytes, first_cap_bytes=bucketing.first_bucket_bytes(cap_bytes),
    )  # fmt: skip
    buckets = [[grads[i] for i in bucket] for bucket in layout]
    return simulate(profile, buckets, link=link, world_size=world_size, contention=contention)


def predict_caps(
    profile: Profile,
    *,
    caps_mb: Sequence[float],
    link: Link,
    world_size: int,
    contention: Contention = NO_CONTENTION,
) -> pd.DataFrame:
    """Predicted step per cap, with scaling efficiency against the profile's one-rank step."""
    rows = []
    for cap in caps_mb:
        step = predict_cap(profile, cap_mb=cap, link=link, world_size=world_size, contention=contention)
        rows.append(
            {
                "bucket_cap_mb": float(cap),
                "buckets": step.buckets,
                "step_ms": step.step_s * 1e3,
                "exposed_comm_ms": step.exposed_comm_s * 1e3,
                "comm_ms": step.comm_s * 1e3,
                "scaling_efficiency": profile.local_step_s / step.step_s,
            }
        )
    return pd.DataFrame(rows)


@dataclasses.dataclass(frozen=True)
class Calibration:
    """What a plain model's profile at world size 1 cannot see, measured in the same run without communication.

    compute_scale: the `local` step at this world size over the profile's step (on one machine,
    ranks slow each other's compute: shared memory bandwidth, caches, hyper-threads).
    reducer_s: DDP's own cost with nothing to communicate (`stock` minus `local` at world size 1:
    copying gradients into buckets and back, its hooks), spent during backward.
    """

    compute_scale: float = 1.0
    reducer_s: float = 0.0


def calibrate(profile: Profile, calibration: Calibration) -> Profile:
    """The profile with compute scaled and backward stretched by the reducer's cost (ready times alike)."""
    scale = calibration.compute_scale
    backward = profile.backward_s * scale
    stretch = (backward + calibration.reducer_s) / backward if backward > 0 else 1.0
    grads = tuple(dataclasses.replace(g, ready_s=g.ready_s * scale * stretch) for g in profile.grads)
    return Profile(profile.forward_s * scale, backward + calibration.reducer_s, profile.optimizer_s * scale, grads)


# ---------------------------------------------------------------- user input


def parse_bandwidth(text: str) -> float:
    """'90GB/s', '400Gb/s', '1.5 GB/s' → bytes per second (GB = 1e9, as nccl-tests reports busbw)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([GMK])([Bb])(?:/s|ps)?\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise ConfigError(f"--busbw {text!r} is not a bandwidth; give e.g. 90GB/s, 400Gb/s or 800MB/s")
    value = float(match.group(1)) * {"G": 1e9, "M": 1e6, "K": 1e3}[match.group(2)]
    return value / 8 if match.group(3) == "b" else value


def parse_latency(text: str) -> float:
    """'30us', '0.5ms', '2e-5s' → seconds."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*(us|µs|ms|ns|s)\s*", text)
    if not match:
        raise ConfigError(f"--latency {text!r} is not a time; give e.g. 30us, 0.2ms or 5e-6s")
    return float(match.group(1)) * {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}[match.group(2)]


def parse_caps(text: str) -> list[float]:
    try:
        caps = sorted({float(c) for c in text.split(",") if c.strip()})
    except ValueError:
        caps = []
    if not caps or caps[0] <= 0:
        raise ConfigError(f"--caps {text!r} is not valid; give bucket caps in MiB > 0, e.g. 1,5,10,25,50,100")
    return caps


# ---------------------------------------------------------------- a run's network, profile and model tables


@dataclasses.dataclass(frozen=True)
class Network:
    links: dict[int, Link]
    contention: dict[int, Contention]
    source: str


def given_network(*, busbw_bytes_per_s: float, latency_s: float) -> Network:
    link = Link(latency_s, busbw_bytes_per_s, source=f"given: busbw {busbw_bytes_per_s / 1e9:g} GB/s, "
                f"latency {latency_s * 1e6:g} µs")  # fmt: skip
    return Network({0: link}, {}, link.source)


def network_link(network: Network, world_size: int) -> Link:
    return network.links[0] if 0 in network.links else link_for(network.links, world_size)


def matching_collectives(results: Path, meta: dict) -> Path | None:
    """The newest collectives run in `results` made on the same machine, device and backend as the run."""
    key = (meta.get("environment", {}).get("hostname"), meta.get("device"), meta.get("backend"))
    for run in store.list_collectives_runs(results):
        other = store.read_json(store.collectives_dir(run) / "run.json")
        if (other.get("hostname"), other.get("device"), other.get("backend")) == key:
            return run
    return None


def measured_network(collectives_run: Path) -> Network:
    frame = store.read_collectives(collectives_run)
    links = links_from_collectives(frame, source=f"collectives run {collectives_run.name}")
    contention = {
        int(r.world_size): Contention(float(r.compute_slowdown), float(r.comm_slowdown))
        for r in store.read_contention(collectives_run).itertuples()
    }
    return Network(links, contention, f"collectives run {collectives_run.name}")


def network_for_run(results: Path, run: Path) -> Network | None:
    """--busbw given to bench (stored in run.json), else a matching collectives run, else None."""
    meta = store.read_json(run / "run.json")
    config = meta.get("config", {})
    if config.get("busbw"):
        return given_network(busbw_bytes_per_s=parse_bandwidth(config["busbw"]),
                             latency_s=parse_latency(config.get("latency") or "0us"))  # fmt: skip
    collectives_run = matching_collectives(results, meta)
    return measured_network(collectives_run) if collectives_run is not None else None


SETUP_KEYS = ["workload", "size", "batch_size", "dtype", "optimizer"]
# Rows written before a column existed hold null there; these were the only values then.
SETUP_DEFAULTS = {"dtype": "fp32", "optimizer": "sgd"}


def _profile_for(profiles: pd.DataFrame, setup: dict) -> Profile | None:
    rows = profiles
    for key, value in setup.items():
        rows = rows[rows[key] == value]
    return profile_from_rows(rows) if not rows.empty else None


def _ddp_defaults_but_cap(options_json: str) -> bool:
    """The model simulates DDP's reducer with its defaults; a sweep with a comm hook or other knob is not modelled."""
    options = json.loads(options_json or "{}")
    options.pop("bucket_cap_mb", None)
    return not options


def _median_step(configs: pd.DataFrame, setup: dict, *, world: int, impl: str, cap: float | None = None):
    rows = configs[(configs["impl"] == impl) & (configs["world_size"] == world)]
    for key, value in setup.items():
        rows = rows[rows[key] == value]
    if cap is not None:
        rows = rows[rows["bucket_cap_mb"] == cap]
    return float(rows["step_ms_median"].median()) / 1e3 if not rows.empty else None


def run_calibration(configs: pd.DataFrame, setup: dict, *, world: int, profile: Profile) -> Calibration:
    """From the run's own configurations: its `local` step at this world size and at 1, and DDP at 1.

    DDP's own cost is pooled over every cap measured at one rank (median of stock − local): it is
    mostly copying gradients into buckets and back, the same bytes whatever the cap, and the
    difference of two noisy medians per cap would be mostly noise. Whatever is missing leaves
    that part uncalibrated.
    """
    local_n = _median_step(configs, setup, world=world, impl="local")
    local_1 = _median_step(configs, setup, world=1, impl="local")
    stock_1 = _median_step(configs, setup, world=1, impl="stock")
    scale = local_n / profile.local_step_s if local_n else 1.0
    reducer = max(0.0, stock_1 - local_1) * (local_n or local_1) / local_1 if stock_1 and local_1 else 0.0
    return Calibration(compute_scale=scale, reducer_s=reducer)


def sweep_predictions(configs: pd.DataFrame, profiles: pd.DataFrame, network: Network) -> list[dict]:
    """Per stock bucket-cap configuration at world size ≥ 2 with a profile: measured against predicted,
    raw (the profile as measured), calibrated (see Calibration), and calibrated with contention."""
    configs = configs.fillna(SETUP_DEFAULTS)
    configs = configs[(configs["status"] == "ok") & configs["impl_options"].map(_ddp_defaults_but_cap)]
    sweeps = configs[(configs["impl"] == "stock") & configs["bucket_cap_mb"].notna() & (configs["world_size"] > 1)]
    rows = []
    for keys, group in sweeps.groupby([*SETUP_KEYS, "world_size"]):
        setup = dict(zip(SETUP_KEYS, keys[:-1], strict=True))
        world = int(keys[-1])
        profile = _profile_for(profiles, setup)
        if profile is None or not network.links:
            continue
        link = network_link(network, world)
        contention = network.contention.get(world)
        calibration = run_calibration(configs, setup, world=world, profile=profile)
        calibrated = calibrate(profile, calibration)
        for cap, measured_ms in group.groupby("bucket_cap_mb")["step_ms_median"].median().items():
            raw = predict_cap(profile, cap_mb=cap, link=link, world_size=world)
            plain = predict_cap(calibrated, cap_mb=cap, link=link, world_size=world)
            contended = (predict_cap(calibrated, cap_mb=cap, link=link, world_size=world, contention=contention)
                         if contention else None)  # fmt: skip
            rows.append({
                "workload": setup["workload"], "size": setup["size"], "impl": "stock", "world_size": world,
                "bucket_cap_mb": float(cap), "measured_ms": float(measured_ms),
                "predicted_raw_ms": raw.step_s * 1e3, "predicted_ms": plain.step_s * 1e3,
                "predicted_contention_ms": contended.step_s * 1e3 if contended else None,
                "compute_scale": calibration.compute_scale, "reducer_ms": calibration.reducer_s * 1e3,
                "buckets": plain.buckets, "network": link.source,
            })  # fmt: skip
    return rows


def floor_rows(configs: pd.DataFrame, network: Network) -> list[dict]:
    """Per configuration at world size ≥ 2: all its gradient bytes all-reduced once at the
    network's bandwidth, and the floor max(local step, that all-reduce)."""
    configs = configs.fillna(SETUP_DEFAULTS)
    ok = configs[(configs["status"] == "ok") & (configs["world_size"] > 1) & configs["grad_bytes"].notna()]
    local = ok[ok["impl"] == "local"].groupby([*SETUP_KEYS, "world_size"])["step_ms_median"].median()
    rows = []
    for r in ok.itertuples():
        link = network_link(network, int(r.world_size))
        allreduce_ms = link.allreduce_s(int(r.grad_bytes), int(r.world_size)) * 1e3
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
    predictions = sweep_predictions(configs, store.read_gradprofiles(run), network)
    floor = floor_rows(configs, network)
    if predictions or floor:
        store.write_model_tables(run, predictions=predictions, floor=floor)
    return predictions, floor


def update_all_model_tables(results: Path) -> int:
    """Before a report: refresh every run's model tables (a collectives run may have come later)."""
    return sum(bool(update_model_tables(results, run)[0]) for run in store.list_runs(results))


# ---------------------------------------------------------------- what `ddpbench predict` reads


def resolve_run(text: str, results: Path) -> Path:
    """A run folder given as a path, or as a run id inside `results`."""
    for candidate in (Path(text), Path(results) / text):
        if (candidate / "run.json").is_file():
            return candidate
    known = ", ".join(p.name for p in store.list_runs(results)[:5]) or "none"
    raise ConfigError(f"--results {text!r} is not a run folder or a run id in {str(results)!r} (newest runs: {known})")


def run_setups(run: Path) -> list[dict]:
    """The workload setups a run measured successfully, in run order."""
    configs = store.read_configs(run).fillna(SETUP_DEFAULTS)
    ok = configs[configs["status"] == "ok"]
    return [
        dict(zip(SETUP_KEYS, keys, strict=True)) for keys in ok[SETUP_KEYS].drop_duplicates().itertuples(index=False)
    ]


def measure_profile(
    setup: dict, *, device, seed: int = 0, threads: int | None = None, steps: int = PROFILE_STEPS
) -> list[dict]:
    """Profile a workload setup in this process (world size 1 needs no process group); on the
    CPU with the run's threads per rank, so that compute runs as fast as in one of its ranks."""
    import torch

    import workloads
    from harness.rank import gradprofile

    if threads:
        torch.set_num_threads(int(threads))

    workload = workloads.create(setup["workload"], size=setup["size"])
    reason = workload.unavailable_reason(device=device.type)
    if reason:
        raise ConfigError(f"--workload {setup['workload']!r} cannot run here: {reason}")
    rows = gradprofile.measure(workload, batch_size=setup["batch_size"], device=device, dtype=setup["dtype"],
                               optimizer=setup["optimizer"], seed=seed, steps=steps)  # fmt: skip
    return [{**setup, **row} for row in rows]


def profile_for_run(run: Path, setup: dict, *, device) -> tuple[Profile, str]:
    """The run's stored profile for this setup, else one measured now and stored with the run."""
    profile = _profile_for(store.read_gradprofiles(run), setup)
    if profile is not None:
        return profile, f"profile stored with run {run.name}"
    meta = store.read_json(run / "run.json")
    rows = measure_profile(setup, device=device, threads=meta.get("threads_per_rank") if device.type == "cpu" else None)
    context = {
        "run_id": meta.get("run_id", run.name),
        "device": device.type,
        "threads_per_rank": meta.get("threads_per_rank"),
    }
    store.write_gradprofile(store.gradprofile_path(run, **setup), [{**context, **row} for row in rows])
    return profile_from_rows(pd.DataFrame(rows)), f"profile measured now (run {run.name} had none) and stored with it"


# The model's variants as the report and `ddpbench predict` show them: (column, label).
VARIANTS = (
    ("predicted_raw_ms", "raw profile"),
    ("predicted_ms", "calibrated on the run's local steps"),
    ("predicted_contention_ms", "calibrated, with measured contention"),
)
