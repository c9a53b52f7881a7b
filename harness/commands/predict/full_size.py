"""Each strategy's memory per rank for `ddpbench predict`: from what the run's ranks held, at the run's own size, or,
for a run of a smaller size than the one to train, re-counted at the full size (its parameters, gradients and
activations counted on the meta device: harness.measure.modelinfo.counts_on_meta; each rank's share as the run
measured it: harness.perfmodel.memory.at_full_size); and the warning that a smaller profile's communication is
not the whole model's.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from harness.commands import console
from harness.commands.console import invoked
from harness.config.bench import ConfigError


def memory_rows(run_dir: Path, configs, setup: dict, *, batch_size: int | None = None, options: dict | None = None,
                terse: bool = False, gpu=None):  # fmt: skip
    """`_memory_rows`, their activations counted in the dtype `gpu` (a cluster) trains in where a CPU run's fp32 is
    not it (trained_dtype.judged_in; else, where counted in fp32, what bf16 would keep), with the activations of each
    strategy that computes in another dtype than the run's (FSDP2's param_dtype=bf16) counted in its own on the meta
    device, at the rows' size and batch (`compute_activation_mb`).
    `options`: the workload options of the model you will train (--train-wopt over the run's), where not the run's;
    `terse`: the note as the console says it (the what-if page's in full). Each row says the half precision `gpu`
    autocasts in (`gpu_half_dtype`: precision.trains_in's, fp16 on a V100), which the choice's hint names."""
    from harness.commands.predict.trained_dtype import gpu_dtype, judged_in
    from harness.config.precision import trains_in
    from harness.perfmodel.memory import compute_dtype

    rows, note = _memory_rows(run_dir, configs, setup, batch_size=batch_size, options=options, terse=terse)
    spec, trained = trained_source(configs, setup, options)
    trained_in = gpu_dtype(run_dir, configs, setup, gpu) if len(rows) else ""
    rows, judged = judged_in(rows, setup, spec, trained, trained_in, gpu, terse=terse)
    rows = rows.assign(gpu_half_dtype=trains_in("bf16", getattr(gpu, "description", None)))
    note = "; ".join(part for part in (note, judged) if part)
    dtypes = rows["impl_options"].map(compute_dtype) if "impl_options" in rows else []
    if not any(dtypes):
        return rows, note
    counts = [_counted_in(spec, json.dumps(trained, sort_keys=True), str(size), int(batch), dtype) if dtype else None
              for size, batch, dtype in zip(rows["size"], rows["batch_size"], dtypes, strict=True)]  # fmt: skip
    return rows.assign(compute_activation_mb=[(c or {}).get("activation_mb") for c in counts],
                       compute_activation_top=[(c or {}).get("activation_top") for c in counts]), note  # fmt: skip


@functools.cache
def _counted_in(spec: str, options: str, size: str, batch_size: int, param_dtype: str) -> dict | None:
    from harness.measure import meta_counts

    return meta_counts.computing_in(spec, size, json.loads(options), batch_size=batch_size, param_dtype=param_dtype)


def _memory_rows(run_dir: Path, configs, setup: dict, *, batch_size: int | None = None, options: dict | None = None,
                 terse: bool = False):  # fmt: skip
    """(the setup's rows to count memory from, what size they are said to be of): the run's own, or re-counted at
    the full size where the run's is smaller and --size scales the workload (a file of yours is as written), and at
    `batch_size` a rank where that is not the run's (--batch-size with --local-step-ms: the batch you will train
    at), or with `options` (--train-wopt's); where that cannot be counted on the meta device, the run's own, said to
    be of the smaller size."""
    from harness.commands.predict.counted_here import counted_words, with_cpu_activations
    from harness.perfmodel.measured import of_setup
    from harness.perfmodel.sharded import at_full_size
    from harness.perfmodel.unused_state import short_of, whole_where_unused
    from harness.results import store

    rows, size, measured = of_setup(configs, setup), setup.get("size"), int(setup.get("batch_size") or 1)
    batch = batch_size or measured
    scales = options is not None or (size not in ("full", None) and store.size_scales(store.read_run_meta(run_dir),
                                                                                        setup))  # fmt: skip
    if not scales and batch == measured and short_of(rows) is None:  # idle experts: re-counted, their state whole
        return rows, ""
    full = with_cpu_activations(full_size_counts(setup, configs, batch_size=batch, options=options),
                                *trained_source(configs, setup, options), batch, setup.get("dtype"))  # fmt: skip
    added = _sample_added(setup, configs, batch, options, full) if full else None  # what one more sample adds
    scaled = at_full_size(rows, full).assign(batch_size=batch, activation_sample_added_mb=added) if full else None
    scaled, whole = whole_where_unused(scaled, rows) if scaled is not None else (scaled, "")
    if scaled is None or scaled.empty:  # no meta build, or rows
        if options is not None:  # (--size full does nothing for a file of yours)
            return rows, "the run's model, not the one you will train (not counted on the meta device): bench that one"
        whose = f"the {size} size's model, not the full size's" if scales else f"batch {measured}, the run's"
        flags = "--size full" * bool(scales) + f" --batch-size {batch}" * bool(batch != measured)
        return rows, f"{whose}: bench {flags.strip()} for the one you will train"
    counted = counted_words(full, batch) + f"; {whole}" * bool(whole)
    from harness.analysis import roles

    zero = ", ZeRO-1's optimizer state by torch's partition of them" * bool(
        roles.sharded_optimizer_over_allreduce(rows).any()
    )  # sharded.at_full_size's table: not the run's share
    other = f" (the run measured batch {measured})" if batch != measured else ""
    if options is not None:  # --train-wopt: the model you will train, whatever the run's size, named as it is
        named = scaled.assign(workload=trained_name(configs, setup, options))
        return named, (f"the model you will train ({trained_text(configs, setup, options)}): its parameters and "
                       f"activations counted on the meta device at batch {batch} a rank{other}, each rank's share of "
                       f"them as the run measured it{zero}{counted}")  # fmt: skip
    if not scales:  # the run's own size (the full one, or a file of yours as written), at another batch
        if full.get("activation_mb") is None:
            return rows, f"at batch {measured}, the run's: batch {batch}'s activations could not be counted"
        said = f"at batch {batch} a rank: its activations counted on the meta device{other}{counted}"
        return scaled.assign(size=size), said
    if terse:
        return scaled, f"at the full size, counted on the meta device at batch {batch} a rank{other}{counted}"
    return scaled, (f"at the full size: its parameters and activations counted on the meta device at batch {batch} a "
                    f"rank{other}, each rank's share of them as the {size} run measured it{zero}{counted}")  # fmt: skip


def _sample_added(setup: dict, configs, batch: int, options: dict | None, full: dict) -> float | None:
    """What one more sample a rank adds to the activations `full` counted at `batch`: the count at `batch` + 1 less
    it, both on the meta device (the total over the batch is no such figure: a bf16 run keeps copies of its weights
    for backward once, at any batch); None where either could not be counted."""
    from harness.commands.predict.trained_dtype import counted

    if full.get("activation_cpu_batches"):  # counted on this CPU: what the second sample added, counted there
        return full.get("activation_sample_added_mb")
    spec, options = trained_source(configs, setup, options)
    more = counted(spec, json.dumps(options, sort_keys=True), "full", batch + 1, str(setup.get("dtype") or "fp32"))
    if full.get("activation_mb") is None or more is None:
        return None
    return more["activation_mb"] - full["activation_mb"]


def said_state(run_dir: Path, configs, setup: dict, worlds: list[int], gpu, *, batch_size: int | None = None,
               options: dict | None = None):  # fmt: skip
    """The model state per rank (perfmodel.memory.state_per_rank) at the world sizes the run measured and at
    `worlds`, of `memory_rows` (at `batch_size`, with `options`, in the dtype `gpu` trains in), said with what fits
    `gpu`; returned."""
    from harness.commands.console.predict import memory
    from harness.perfmodel.memory import state_per_rank

    rows, note = memory_rows(run_dir, configs, setup, batch_size=batch_size, options=options, terse=True, gpu=gpu)
    state = state_per_rank(rows, worlds)
    memory.model_state(state, worlds, gpu, size_note=note)
    if state.empty and not rows.empty:  # one world size measured: once no word, and no choice after it either
        memory.no_state(run_dir, rows)
    return state


def warn_not_whole_model(
    setup: dict, profile, *, configs=None, scaled: bool = True, options: dict | None = None, said: bool = True
) -> bool:
    """A profile of a smaller size than the one to train keeps the smaller model's gradients, so every all-reduce
    would be the smaller model's, whether --local-step-ms (`scaled`: the user's whole model's step) scales its
    compute or not (memory is counted at the full size either way). Unsaid where the full size has the profile's
    gradients (a model of your own file, which --size does not scale, unless `options`: --train-wopt's); whether
    it is not the whole model (said unless not `said`: no step to warn of, predict_cluster.steps_known)."""
    from harness.perfmodel.memory import mib_text

    counts = full_size_counts(setup, configs, options=options) or {}
    whole, alike = counts.get("grad_bytes"), _alike_tensors(counts, profile)
    if whole == profile.grad_bytes or alike or not said:  # alike: said in the profile's line (alike_words)
        return whole != profile.grad_bytes and not alike
    trained = "the model you will train" if options is not None else ""  # its options: said with its memory, above
    full = f"; {trained or 'the full size'}'s are {mib_text(whole / 2**20)}" if whole else ""
    size = "benched" if trained and configs is not None else setup["size"]  # --workload's: the size profiled here
    profiled = (f"this profile is {setup['workload']}'s {size} {'model' if size == 'benched' else 'size'} "
                f"({mib_text(profile.grad_bytes / 2**20)} of gradients{full})")  # fmt: skip
    floors = ". The floors below are the full size's communication" if whole else ""
    # benched small and counted with --train-wopt is what docs/your-model.md advises: nothing more to ask then
    advice = "" if trained else (". Profile the model you will train (--size full, on a GPU), or give the options it "
                                 "differs by, --train-wopt KEY=VALUE, to count it on the meta device")  # fmt: skip
    console.warning((f"--local-step-ms is one GPU's step of the whole model, but {profiled}: its compute is scaled to "
                     f"your step, its communication stays the {size} model's" if scaled else
                     f"{profiled}: the steps below are the {size} model's, its compute and its communication, while "
                     "each strategy's memory is counted at the full size; --local-step-ms MS (one GPU's step of the "
                     "model you will train) scales the compute") + floors + advice)  # fmt: skip
    return True


def alike_words(setup: dict | None, profile, configs=None, *, options: dict | None = None) -> str:
    """', as many as the full size's (330 MiB): its caps hold for it' where a smaller size's profile stands for the
    full size's gradients (sharded.alike_tensors), for the profile's line; '' where not."""
    from harness.perfmodel.memory import mib_text

    if setup is None or (setup.get("size") == "full" and options is None):
        return ""
    counts = full_size_counts(setup, configs, options=options) or {}
    if not _alike_tensors(counts, profile):
        return ""
    whose = "the model you will train" if options is not None else "the full size"
    return f", as many as {whose}'s ({mib_text(counts['grad_bytes'] / 2**20)}): its caps hold for it"


def _alike_tensors(counts: dict, profile) -> int:
    """sharded.alike_tensors of the full size's parameters in `counts`: one rule for the console and the page."""
    from harness.perfmodel.schedule import parameters_of
    from harness.perfmodel.sharded import alike_tensors

    return alike_tensors(profile, parameters_of(counts["parameters"])) if counts.get("parameters") else 0


def full_size_counts(setup: dict, configs=None, *, batch_size: int | None = None, options: dict | None = None):
    """The full size's model counted on the meta device (no memory, no time: modelinfo.counts_on_meta, its
    activations at the setup's batch, or `batch_size`, and dtype), built from what the run built the workload from
    (its spec and --wopt options, where its rows say; `options` in their place: --train-wopt's); None where it
    cannot be."""
    spec, options = trained_source(configs, setup, options)
    batch = int(batch_size or setup.get("batch_size") or 1)
    return _counted_on_meta(spec, json.dumps(options, sort_keys=True), batch, str(setup.get("dtype") or "fp32"))


@functools.cache
def _counted_on_meta(spec: str, options: str, batch_size: int, dtype: str) -> dict | None:
    """modelinfo.counts_on_meta of the full size, kept in the user's cache (harness.measure.meta_counts)."""
    from harness.measure import meta_counts

    return meta_counts.counts(spec, "full", json.loads(options), batch_size=batch_size, dtype=dtype)


def full_parameters(setup: dict, configs, profile_grad_bytes: int, *, options: dict | None = None):
    """The full size's parameters (schedule.Parameters: registration order, bytes, dtypes and blocks, counted on the
    meta device) where their gradients are not the profile's; None where the profile is of the full size (and no
    `options`, --train-wopt's, change it), has its gradients, or they cannot be counted."""
    from harness.perfmodel.schedule import parameters_of

    other = setup.get("size") != "full" or options is not None
    full = full_size_counts(setup, configs, options=options) if other else None
    if not full or not full.get("parameters") or full["grad_bytes"] == profile_grad_bytes:
        return None
    return parameters_of(full["parameters"])


def with_floors(frames: list, setup: dict, profile, *, configs, link, fsdp_profile,
                fsdp_own_s: float = 0.0, zero_own_s: float = 0.0, options: dict | None = None,
                said: bool = True) -> list:  # fmt: skip
    """Where the profile is a smaller size's (said by `warn_not_whole_model`): each strategy's step floor per GPU
    count and cap with the full size's parameters (`sharded.with_full_size_floors`: counted on the meta device, on
    the profile's compute as scaled; FSDP2's on `fsdp_profile`), said as a table and added to `frames`
    (`full_size_*`, `zero_full_size_*`, `fsdp_full_size_*` columns, `full_size_mb` its gradients) for --out, said
    unless not `said` (no step to floor); `frames` as they were where the full size cannot be counted."""
    from harness.commands.console.predict import steps
    from harness.perfmodel.memory import mib_text
    from harness.perfmodel.sharded import with_full_size_floors

    params = full_parameters(setup, configs, profile.grad_bytes, options=options)
    if params is None:
        return frames
    gradients = f"{mib_text(params.grad_bytes / 2**20)} of gradients in {len(params.trained)} tensors"
    if said:  # what the floors are, once, above the table that shows them
        steps.say_floors(f"{setup['workload']}'s parameters ({gradients}, counted on the meta device)",
                         trained=options is not None, size=setup["size"], benched=configs is not None)  # fmt: skip
    return [with_full_size_floors(frame, profile, params, link=link, world_size=int(frame["world_size"].iloc[0]),
                                  fsdp_profile=fsdp_profile, fsdp_own_s=fsdp_own_s, zero_own_s=zero_own_s)
            .assign(full_size_mb=params.grad_bytes / 2**20)
            for frame in frames]  # fmt: skip  # said beside the steps (console.steps.cluster_table)


FLOORED = {"DDP": ("step_ms", "full_size_step_floor_ms"), "ZeRO-1": ("zero_step_ms", "zero_full_size_step_floor_ms"),
           "FSDP2": ("fsdp_step_ms", "fsdp_full_size_step_floor_ms")}  # fmt: skip
"""Each strategy's predicted step and its full-size floor, as a cluster frame holds them."""


def floor_words(frames: list, label: str = "DDP") -> str:
    """'at the full size DDP's step is at least 433.8 ms at w64 at 100 MiB, where the choice ranks it, 350 ms here (the
    floors above)', for the brackets of `label`'s answer (DDP, ZeRO-1, FSDP2), where `with_floors` added the floors,
    at the cap the choice ranks it at (perfmodel.ranked); '' where it did not (or FSDP2's is unknown)."""
    from harness.analysis import agreement
    from harness.perfmodel.pick import ranked

    step, floor = FLOORED[label]
    if not frames or floor not in frames[-1]:
        return ""
    row = ranked.ranked_row(frames[-1], step, floor, label)
    if row[floor] != row[floor]:  # NaN: not modelled
        return ""
    cap = f" at {row['bucket_cap_mb']:g} MiB, where the choice ranks it" if label != "FSDP2" else ""
    here = f"{row[step]:.4g} ms here" if label != "ZeRO-1" else f"which ranks it ({row[step]:.4g} ms here)"
    said = (f"at the full size {label}'s step is at least {row[floor]:.4g} ms at w{int(row['world_size'])}{cap}, "
            f"{here} (the floors above)")  # fmt: skip
    named = agreement.answer_row(frames[-1])
    if label == "DDP" and named["bucket_cap_mb"] != row["bucket_cap_mb"]:  # the small profile named another cap
        said += (f"; at {named['bucket_cap_mb']:g} MiB, the small profile's cap, at least {named[floor]:.4g} ms: "
                 "predict from a run of the full size to choose the cap")  # fmt: skip
    return said


def full_size_lead(frames: list, whose: str, *, backward_ms: float) -> str:
    """Where DDP's full-size floor binds (above its prediction at the cap the small profile names, at some GPU
    count), DDP's answer for the model to train, led with: 'for the model you will train: bucket_cap_mb 100, the cap
    its floors favour; w16 to w64: step at least 41.33 → 46.45 ms, scaling efficiency at most 0.968 → 0.861. Why at
    w64: at 100 MiB its all-reduces take at least …'; '' where no floor binds. (A floor is a lower bound: the
    table's ≥ columns say so, and the what-if page in full.)"""
    from harness.perfmodel.pick import ranked

    if not frames or not any(ranked.floors_bind(frame) for frame in frames):
        return ""
    rows = [ranked.ddp_ranked_row(frame) for frame in frames]
    least = [ranked.ranked_value(r["step_ms"], r["full_size_step_floor_ms"]) for r in rows]
    most = [r["scaling_efficiency"] * r["step_ms"] / ms for r, ms in zip(rows, least, strict=True)]  # 1 GPU's / step
    caps = [(int(r["world_size"]), f"{r['bucket_cap_mb']:g} MiB") for r in rows]  # each its unit: '25 MiB from w8; …'
    merged = [cap for k, cap in enumerate(caps) if k == 0 or cap[1] != caps[k - 1][1]]
    cap_text = merged[0][1] if len(merged) == 1 else "; ".join(f"{cap} from w{world}" for world, cap in merged)
    first, last = rows[0], rows[-1]
    span = (f"w{int(first['world_size'])} to w{int(last['world_size'])}: step at least {least[0]:.4g} → "
            f"{least[-1]:.4g} ms, scaling efficiency at most {most[0]:.3f} → {most[-1]:.3f}" if len(rows) > 1 else
            f"at w{int(last['world_size'])}: step at least {least[-1]:.4g} ms, scaling efficiency at most "
            f"{most[-1]:.3f}")  # fmt: skip
    why = ranked.full_size_why(
        last, backward_ms, last["bucket_cap_mb"], terse=True, against=ranked.runner_up_words(frames[-1], backward_ms)
    )
    tie = len(merged) == 1 and all(ranked.caps_tie(frame) for frame in frames)  # why this cap: least_row's rule
    leads = [ranked.floors_lead(frame) for frame in frames] if len(merged) == 1 else []  # a lower cap, not told apart
    lead = max(leads, key=lambda found: found[0], default=(0.0, []))
    favour = (": " if tie else ", ") + ranked.floors_cap_words(float(rows[0]["bucket_cap_mb"]), tie, lead)
    favour += ranked.kept_default_words(frames) if len(merged) > 1 else ""
    return (f"for {whose}, by its floors: bucket_cap_mb {cap_text}{favour}; {span}. Why at "
            f"w{int(last['world_size'])}: {why}{ranked.algorithm_changes(rows, 'full_size_algorithm')}")  # fmt: skip


def trained_source(configs, setup: dict, options: dict | None) -> tuple[str, dict]:
    """(the workload's spec, the options of the model you will train): `options` (--train-wopt's over the run's),
    else the run's own as its rows say (predict.source_in_rows)."""
    from harness.perfmodel.predict import source_in_rows

    spec, own = source_in_rows(configs, setup) if configs is not None else (setup["workload"], {})
    return spec, own if options is None else options


def trained_text(configs, setup: dict, options: dict) -> str:
    """'d_model=4096, n_heads=32': the options --train-wopt changed from the run's."""
    _, own = trained_source(configs, setup, None)
    return ", ".join(f"{key}={value}" for key, value in options.items() if own.get(key) != value) or "the run's own"


def trained_name(configs, setup: dict, options: dict) -> str:
    """'hf:llama[hidden_size=2048 num_hidden_layers=18 …]': the model you will train as rows name a workload (the
    run's name would say its own options beside the trained model's memory)."""
    import workloads
    from harness.results.values import options_words

    spec, _ = trained_source(configs, setup, options)
    return f"{workloads.resolve(spec).name}[{options_words(options)}]" if options else workloads.resolve(spec).name


def check_train_wopt(given) -> None:
    """--train-wopt's refusals that need neither the run nor the workload (a key given twice, several values), said
    before either is read: a typo in a long command is answered at once."""
    if twice := sorted({key for key, _ in given or () if [k for k, _ in given].count(key) > 1}):
        raise ConfigError(f"--train-wopt gives {', '.join(twice)} more than once; the model you will train has one "
                          "value of each: give each once")  # fmt: skip
    for key, values in given or ():
        if len(values) != 1:
            raise ConfigError(f"--train-wopt {key}={','.join(values)} gives {len(values)} values; the model you will "
                              "train has one: give one value (bench sweeps several with --wopt)")  # fmt: skip


def in_train_wopt(said: str) -> str:  # a workload's words on --wopt in --train-wopt's, a bench command cited bench's
    program = invoked.ddpbench_command()  # as typed: a hint pasted into the same shell
    return re.sub(r"(--workloads \S+ )?--wopt ",
                  lambda m: f"{program} bench {m[1]}--wopt " if m[1] else "--train-wopt ", said)  # fmt: skip


def train_options(given, configs, setup: dict) -> dict | None:
    """--train-wopt KEY=VALUE (argparse's (key, values) pairs) over the run's own workload options: the options of the
    model you will train, each typed and checked as bench checks --wopt (ConfigError naming the bad one, and the
    model built once with them on the meta device: a class that raises is bad input); None where none is given."""
    if not given:
        return None
    import workloads

    check_train_wopt(given)
    spec, options = trained_source(configs, setup, None)
    source = workloads.resolve(spec)
    for key, values in given:
        try:
            value = workloads.parse_options(spec, {key: values[0]})[key]
            source.check_options({**options, key: value})
        except ConfigError as exc:  # in the flag's own name: the workload's words say --wopt
            said = in_train_wopt(str(exc))
            if f"--train-wopt {key}=" in said:  # the workload's words name the value already: said once
                raise ConfigError(said) from None
            raise ConfigError(f"--train-wopt {key}={values[0]} is not valid for {setup['workload']} ({said})") from None
        options = {**options, key: value}
    from harness.measure.modelinfo import META

    try:
        with META:  # built as counted: on the meta device (no memory), where its own checks of the options run
            workload = source.create(size="full", options=options)
            source.check_workload(workload)  # as bench checks it: heads that do not divide, say
            workload.build_model()
    except ConfigError as exc:
        raise ConfigError(in_train_wopt(f"--train-wopt: {exc}")) from None
    except Exception as exc:  # a class of yours may raise anything: said in one line
        said = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"--train-wopt: {setup['workload']} cannot be built with "
                          f"{trained_text(configs, setup, options)}: {said}") from None  # fmt: skip
    return options
