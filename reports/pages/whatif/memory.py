"""The what-if page's memory sections: each strategy's model state per rank carried to the cluster's GPU counts and
whether it fits one GPU there (the choice that joins that with the predicted steps: choice.py); what the network
costs a step whatever computes it (the page of a CPU's profile, which ranks no step); and the banners and headings
that say what every figure rests on (the device the profile was measured on, a step measured on another GPU, the
model you will train and what its floors bound). The cluster profile's sections are profile.py's."""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles
from harness.analysis.verdicts.compare import setup_words
from harness.perfmodel.clusters.cluster import Cluster
from harness.perfmodel.fits import room_words
from harness.perfmodel.memory import mib_text, need_mb, state_per_rank, unrecorded
from harness.perfmodel.memory_words import activation_words, fit_words, fsdp_bf16_counted
from harness.perfmodel.pick import communication
from harness.results.invocation import page_run_words
from harness.results.values import strategy_labels
from reports.pages.html import esc, shared_link, table
from reports.pages.whatif.full_size import has_floors, not_yours


def setup_of(group: pd.DataFrame) -> dict:
    """The setup a group of the what-if page's predicted rows is of (its `setup_*` columns)."""
    return {key.removeprefix("setup_"): group[key].iloc[0] for key in group if key.startswith("setup_")}


MEMORY_SETUP = ["workload", "size", "batch_size", "dtype", "optimizer"]


def memory_section(configs: pd.DataFrame, cluster: Cluster, worlds: list[int], *, size_note: str = "",
                   batch_given: int | None = None, shards_said: bool = False, run: str = "RUN") -> str:  # fmt: skip
    """Model state per rank at the cluster's GPU counts, per setup and strategy the run measured at two world sizes
    or more (harness.perfmodel.memory: held(n) = whole + split / n, fitted to what its ranks held); `size_note`:
    what size the rows are of, where not the run's own (`predict`'s memory_rows); `batch_given`: predict's
    --batch-size, where the page was asked for one (rows counted at it say nothing more of their batch);
    `shards_said`: the page said above that a strategy here shards nothing (_nothing_to_shard), once a page; `run`:
    what names the run after --run (invocation.page_run_words)."""
    state = state_per_rank(configs, worlds)
    if state.empty:
        return ""
    state = state.assign(strategy=strategy_labels(state))
    measured = sorted(int(w) for w in state.loc[state["measured"], "world_size"].unique())
    shown = [*measured, *(w for w in worlds if w not in measured)]
    parts = ["<h2>Model state per rank</h2>"]
    for keys, group in state.groupby([k for k in MEMORY_SETUP if k in state], sort=False, dropna=False):
        most = group[group["world_size"] == worlds[-1]].sort_values("total_mb", kind="stable")
        said = ", ".join(f"{r.strategy} {mib_text(r.total_mb)}" for r in most.itertuples())
        cells = [[esc(strategy), esc(rows["splits"].iloc[0] or "nothing"),
                  *(_state_cell(rows, world) for world in shown)]
                 for strategy, rows in group.groupby("strategy", sort=False)]  # fmt: skip
        ran = "(the run's, scaled)" if size_note else "(measured)"  # re-counted at another size: the run's, scaled
        head = ["strategy", f"splits {ran}", *(f"{w} {ran if w in measured else 'GPUs'}" for w in shown)]
        setup = dict(zip(MEMORY_SETUP, keys, strict=False))
        ran_in = setup.get("dtype")
        if "activation_dtype" in group and group["activation_dtype"].iloc[0]:  # the dtype the fit is judged in
            setup["dtype"] = group["activation_dtype"].iloc[0]
        named = setup_words(setup) + _judged_in(setup.get("dtype"), ran_in)
        batch = _batch_words(group, setup, batch_given, run=run, cluster=cluster.name)
        opening = esc(_first_fit(group, cluster, worlds[0])) + batch
        parts += [f"<p class=takeaway><b>{esc(named)}:</b> {opening}At {worlds[-1]} GPUs each rank "
                  f"holds {esc(said)} of parameters, gradients and optimizer state"
                  f"{esc(_with_activations(most, worlds[-1]) + '.' + _fits(group, cluster, worlds))}"
                  f"{esc('' if shards_said else _nothing_to_shard(group))}</p>",
                  table(head, cells)]  # fmt: skip
    parts.append(f"<p class=caption>{esc(_memory_caption(state, size_note))}</p>")
    return "\n".join(parts)


def _judged_in(judged: str | None, ran_in: str | None) -> str:
    """' (the dtype a GPU trains in; the run was fp32)': where the fit is judged in another dtype than the run's (a
    CPU run in fp32, a GPU's bf16 autocast), so that the heading is not read as the run's own setup."""
    return f" (the dtype a GPU trains in; the run was {ran_in})" if judged and ran_in and judged != ran_in else ""


def _nothing_to_shard(group: pd.DataFrame) -> str:
    """' zero shards only the optimizer's state, …': where the setup's optimizer leaves a sharding strategy nothing
    to shard, its memory is that optimizer's (roles.shards_nothing_words, bench's words)."""
    said = roles.shards_nothing_words(group)
    return f" {said}." if said else ""


def _first_fit(group: pd.DataFrame, cluster: Cluster, world: int) -> str:
    """'At 8 GPUs, in a GPU of 79.11 GiB (dgx-h100): stock fits (450 MiB of 79.11 GiB a rank: 78.7 GiB left for …),
    ….' (fits.room_words): the verdict at the fewest GPUs
    the page predicts, which a team booking one node or two asks first (the whole range follows); '' where no fit
    is said (no GPU memory in the profile, or no activations counted: fit_words' rule)."""
    rows = group[(group["world_size"] == world) & group["activation_mb"].notna()] if "activation_mb" in group else []
    if not cluster.gpu_memory_gib or not len(rows):
        return ""
    need = need_mb(rows)
    ranked = sorted(zip(rows["strategy"], need, strict=True), key=lambda x: x[1])
    said = ", ".join(f"{strategy} {room_words(mb, cluster.gpu_memory_gib)}" for strategy, mb in ranked)
    return f"At {world} GPUs, in a GPU of {cluster.gpu_memory_gib:g} GiB ({cluster.name}): {said}. "


def _batch_words(group: pd.DataFrame, setup: dict, batch_given: int | None, *, run: str, cluster: str) -> str:
    """Where the rows' activations are at the batch the run benched, not one asked for: said, with how to count them
    at yours (they, and so the fit, grow with the batch sample by sample; the state does not), the run and the
    cluster named: only the step and the batch are the reader's."""
    batch = setup.get("batch_size")
    counted = "activation_mb" in group and group["activation_mb"].notna().any()
    if not counted or batch is None or pd.isna(batch) or batch_given == int(batch):
        return ""
    return (
        f"Counted at batch {int(batch)} a rank, the batch the run benched: at yours, "
        f"<code>ddpbench predict --run {esc(run)} --cluster {esc(cluster)} --local-step-ms MS --batch-size N --page "
        "FILE.html</code>, "
        "with <code>--train-wopt KEY=VALUE</code> for the options you will train with (docs/your-model.md). "
    )


def _with_activations(most: pd.DataFrame, world: int) -> str:
    """'; the model's forward keeps … at any GPU count: at 64 GPUs a rank holds … at the step's peak (…)' where the
    run counted them (memory.activation_words): the peak and its parts are `most`'s, at `world` GPUs, and said so
    (a sharded optimizer's temporaries shrink with the GPUs); '' where not."""
    words = activation_words(most, holds=f"at {world} GPUs a rank holds ")
    return f"; {words}" if words else ""


def _fits(group: pd.DataFrame, cluster: Cluster, worlds: list[int]) -> str:
    """' In a GPU of 80 GiB (dgx-h100), before …: stock fits (…); fsdp fits from w64 (…).' where the profile gives
    its GPUs' memory and the run counted activations (memory_words.fit_words); '' else."""
    shown = group[group["world_size"].isin(worlds)]
    words = fit_words(shown, cluster.gpu_memory_gib)
    if not words:
        return ""
    counted = shown[shown["activation_mb"].notna()]
    if _first_fit(group, cluster, worlds[0]) and (need_mb(counted) <= cluster.gpu_memory_gib * 1024).all():
        # Each fit said again, its figures the opening's (a rank needs most at the fewest GPUs): the paragraph said
        # every strategy's room twice (a team lead's reading, gpt2 on dgx-h100). Once, with what was not recorded.
        words = "; ".join(filter(None, [f"every strategy fits at every GPU count to {worlds[-1]}, needing most at "
                                        f"{worlds[0]} (above)", unrecorded(counted)]))  # fmt: skip
    counted = (
        "at the step's peak with the gradient buckets, FSDP's unsharded parameters and gradients, a GPU's "
        "optimizer temporaries and PowerSGD's error feedback and bucket copies"
    )
    return (f" In a GPU of {cluster.gpu_memory_gib:g} GiB ({cluster.name}), {counted}, before buffers and the "
            f"kernels' working memory: {words}.")  # fmt: skip


def _state_cell(rows: pd.DataFrame, world: int) -> str:
    row = rows[rows["world_size"] == world]
    return mib_text(float(row["total_mb"].iloc[0])) if len(row) else "—"


def _memory_caption(state: pd.DataFrame, size_note: str) -> str:
    """What the table holds and leaves out, and the floor under an even split where one applies."""
    floors = state.loc[state["floor_mb"] > 0, ["strategy", "floor_mb"]].drop_duplicates("strategy")
    floor = "; ".join(f"{r.strategy} {mib_text(r.floor_mb)}" for r in floors.itertuples())
    floor = (" A strategy that splits its optimizer state but not its parameters places whole parameters on ranks "
             f"(ZeRO's optimizer does), so one rank keeps at least the largest parameter's state, a floor under the "
             f"even split, applied: {floor}." if floor else "")  # fmt: skip
    return (
        "MiB of parameters, gradients and optimizer state a rank holds after a step: as measured at the run's "
        "world sizes (the largest rank, every repeat), and beyond them held(n) = whole + split / n, each kind's "
        "two parts fitted to the measured ones per strategy, never assumed from its name. Activations: what one "
        "forward at the rank's batch keeps for backward (every tensor saved for it, counted once per setup; "
        "attention as a flash kernel keeps it), the same at every GPU count. The fit counts a rank's state and the "
        "larger of what backward holds beside it (activations, the gradient buckets a strategy keeps beside its "
        "gradients as its ranks laid them out, what FSDP holds whole: the root's parameters and gradients, the "
        "largest block's twice over, every parameter kept after forward) and what the optimizer step does (a GPU's "
        "Adam makes a temporary as large as its second moment; the buckets), and what a communication hook keeps "
        "from step to step (PowerSGD's error feedback, one tensor a bucket) and allocates in backward (PowerSGD's "
        "two copies of a bucket). In none of these: buffers, the kernels' working memory — a GPU run's peak "
        "measures those. "
        + (f"Counted: {size_note}." if size_note else "The model is counted at the run's own size.")
        + floor
    )


BENCHED = "benched"
"""The size a what-if page's rows say where the model you will train is another (--train-wopt): the run's own."""


def size_words(size) -> str:
    """'the small size's', or 'the benched model's' where the memory and floors are another model's (BENCHED)."""
    return "the benched model's" if size == BENCHED else f"the {size} size's"


def trained_banner(trained: str) -> str:
    """Where --train-wopt named the model you will train: which model the memory and floors are of, and which not."""
    return "" if not trained else (
        f'<p class="banner">Memory and each step\'s floor are counted for <b>the model you will train</b> '
        f"({esc(trained)}), on the meta device; the steps, their caps and the own costs they leave out are the "
        "benched model's, as the run built it (<code>--train-wopt</code>).</p>")  # fmt: skip


GIVEN_HTML = "given to <code>predict --local-step-ms</code>, not measured"
"""What the step a page is scaled to is: a reader of a shared page gave nothing ('the step you gave' said so)."""
ESTIMATED_HTML = (
    "given to <code>predict --local-step-ms</code>: the step predict estimated from the model's FLOPs, "
    "not measured on any GPU, a floor more than a forecast"
)
"""GIVEN_HTML where the step given is the one predict offers from the FLOPs (report.write_prediction_page): an index
listed 'at a 1.09 ms GPU step: books stock at 100 MiB' where the 1.09 ms was that estimate."""


def device_banner(meta: dict, cluster: Cluster, local_step_ms: float | None, *, inside: bool = False,
                  ends: str = "", estimates: list[tuple[str, str, float, str]] = ()) -> str:  # fmt: skip
    """`inside`: the run has no baseline step at one rank, so DDP's own cost is inside the compute scaled (and the
    step given stands for one GPU's step with DDP), as the console says; `ends`: where the step given was measured on
    another GPU, its two ends on the cluster's, the one this page is at and the other end's verdict, in words."""
    if ends:  # the step is not the one given but an end of its bound on the cluster's GPU: said so, then the ends
        banner = device_banner(meta, cluster, local_step_ms, inside=inside)
        banner = banner.replace(
            GIVEN_HTML,
            "an end of the bound on this GPU of the step given on another: below",
        )
        return banner + f'<p class="banner">{esc(ends)}</p>'
    device, measured_on = meta.get("device", "?"), _device_words(meta)
    if local_step_ms:
        own = ("DDP's own cost measured there is a CPU's and is left out" if device == "cpu" else
               "DDP's own cost measured there is scaled with it")  # fmt: skip
        if inside:
            own = "the run has no baseline step at one rank, so DDP's own cost is inside the compute scaled"
        step = "with DDP" if inside else "without DDP"
        return (f'<p class="banner">The profile was measured on <b>{esc(measured_on)}</b>; its compute is scaled so '
                f"that one GPU's step {step} is <b>{local_step_ms:g} ms</b> ({GIVEN_HTML}): every prediction below "
                "rests on that scaling, set against "
                f"{esc(cluster.name)}'s communication; {own}.</p>")  # fmt: skip
    if device == "cpu":  # no step to rank by (whatif.steps_known): what holds on any GPU, and where the rest is
        command = (f"ddpbench predict --run {page_run_words(meta)} --cluster {cluster.name} --local-step-ms MS "
                   "--page FILE.html")  # fmt: skip
        return (f'<p class="banner">The profile was measured on <b>{esc(measured_on)}</b>, whose compute hides '
                "communication a GPU's would not and whose optimizer takes another share of the step: so this page "
                "names no step, no strategy to book and no cap, only what holds whatever the GPU computes: the "
                f"communication {esc(cluster.name)}'s network adds to a step and the memory a GPU holds. <code>"
                f"{esc(command)}</code> gives the rest for your GPU's one-GPU step; FILE.html in this site's "
                "folder (beside its index.html), the index, the run's page and this one link it"
                f"{_given(meta)}.{_estimated(meta, cluster, estimates)}</p>")  # fmt: skip
    return (f'<p class="banner">The profile was measured on <b>{esc(measured_on)}</b>: its forward, backward and '
            f"optimizer times are that device's, set here against {esc(cluster.name)}'s "
            "communication.</p>")  # fmt: skip


def _device_words(meta: dict) -> str:
    """'this CPU (Intel Xeon …)', 'NVIDIA H100 80GB HBM3': the device the run measured on, as a reader says it
    (a banner read 'measured on cpu', torch's device string)."""
    environment, device = meta.get("environment") or {}, meta.get("device")
    if device == "cpu":
        model = environment.get("cpu_model")
        return f"this CPU ({model})" if model else "this CPU"
    return environment.get("gpu_name") or ("a GPU" if device == "cuda" else str(device or "an unnamed device"))


def _estimated(meta: dict, cluster: Cluster, estimates: list[tuple[str, str, float, str]]) -> str:
    """' Not knowing it yet, for mlp's full size, an estimate (…): <code>ddpbench predict … --local-step-ms 1.09
    …</code>' per setup the run measured (whose, the flags choosing it, ms, words: report.estimated_steps), each
    step estimated from its own model's FLOPs: a run of mlp and gpt2 offered mlp's step alone, unnamed, to a reader
    of either; '' where none."""
    run = f"ddpbench predict --run {page_run_words(meta)} --cluster {cluster.name}"
    offered = "; ".join(f"for {esc(whose)}, {esc(said)}: <code>{esc(run)}{' ' * bool(flags)}{esc(flags)} "
                        f"--local-step-ms {step_ms:g} --page FILE.html</code>"
                        for whose, flags, step_ms, said in estimates)  # fmt: skip
    return f" Not knowing it yet, {offered}." if offered else ""


def _given(meta: dict) -> str:
    """': ' and the pages `predict --page` wrote of the run into the site (site.write_run), linked with what each
    books (html.shared_link); '' for none."""
    links = "; ".join(shared_link(p, up="../") for p in meta.get("predict_pages") or [])
    return f": {links}" if links else ""


def communicated(group: pd.DataFrame) -> pd.DataFrame:
    """communication.communicated of a setup's rows: the full size's collectives where the rows hold its floors."""
    return communication.communicated(group, full=has_floors(group))


def communication_section(group: pd.DataFrame, cluster: Cluster, *, sized: bool = True, caveats: str = "",
                          default: str = "", hooks: dict | None = None, counts=None,
                          unpriced: list[str] = ()) -> str:  # fmt: skip
    """What the network costs a step on `cluster`, whatever computes it (the page of a CPU's profile, which ranks no
    step): per GPU count, DDP's all-reduces at each cap and the last of them, after backward; ZeRO-1's broadcasts,
    after its optimizer; FSDP2's gathers and reduce-scatters; of the model to train where its floors are in the
    rows (`full_size_mb`); `sized`: whether --size scaled the model (a file of yours: not); `caveats`: the node
    counts no published table checked, as the step answer says them; `default`: full_size.default_configuration's;
    `hooks`: the 2-byte compression hooks the run benched, by cap (compressed.benched_hooks), DDP's beside;
    `counts`: the setup's rows as predict counts its memory, whose model sizes give FSDP2's bytes at bf16;
    `unpriced`: the run's strategies no step model prices (communication.unpriced), named under the table as the
    console names them."""
    comm, first = communicated(group), group.iloc[0]
    profiled = size_words(esc(first["size"])) if sized else "the model's"
    counted = "counted on the meta device" + (f"; the full size is {not_yours(default)}" if default else "")
    whose = (f"the full size's {first['full_size_mb']:,.0f} MiB of gradients ({esc(counted)})"
             if has_floors(group) else f"{profiled} {first['grad_mb']:.4g} MiB of gradients"
             + ("" if sized else ", as the run built it (--size scales no file)"))  # fmt: skip
    most = comm[comm["world_size"] == comm["world_size"].max()]
    ddp = ", ".join(f"{r['DDP']:.4g} ms at {r.bucket_cap_mb:g} MiB" for _, r in most.iterrows())
    last, row = most["DDP last"], most.iloc[0]
    fsdp = "" if pd.isna(row["FSDP2 gathers"]) else (
        f"; FSDP2's all-gathers {row['FSDP2 gathers']:.4g} ms and reduce-scatters {row['FSDP2 reduce-scatters']:.4g} "
        f"ms, each block's beside its compute, the gathers in fp32{esc(fsdp_bf16_counted(counts))}")  # fmt: skip
    said = (f'<p class="headline"><b>What {esc(cluster.name)}\'s network costs a step</b>, whatever computes it, '
            f"with {whose}: at {int(row.world_size)} GPUs on {int(row.nodes)} nodes DDP's all-reduces take {ddp}, "
            f"overlapping backward but for the last bucket's ({last.min():.3g} to {last.max():.3g} ms, after "
            f"backward's last gradient: {communication.LAST_BUCKET_LEAST}); ZeRO-1's broadcasts "
            f"{row['ZeRO-1']:.4g} ms, after its optimizer, overlapping nothing{fsdp}. How much of the rest a step "
            f"shows depends on the GPU's compute, which this run did not measure.{caveats}</p>")  # fmt: skip
    caps = sorted(comm["bucket_cap_mb"].unique())
    hooked = {cap: label for cap, label in (hooks or {}).items() if cap in {round(c, 6) for c in caps}}
    heads = ["GPUs", "nodes", *(f"DDP's all-reduces at {cap:g} MiB (the last)" for cap in caps),
             *(f"{esc(label)}'s all-reduces at {cap:g} MiB (the last)" for cap, label in hooked.items()),
             "ZeRO-1's broadcasts", "FSDP2's all-gathers", "FSDP2's reduce-scatters"]  # fmt: skip
    cells = []
    for world, rows in comm.groupby("world_size", sort=True):
        by_cap = rows.set_index("bucket_cap_mb")
        cells.append(
            [
                str(world),
                str(int(rows["nodes"].iloc[0])),
                *(f"{by_cap.at[cap, 'DDP']:.4g} ({by_cap.at[cap, 'DDP last']:.3g})" for cap in caps),
                *(f"{by_cap.at[cap, 'hook']:.4g} ({by_cap.at[cap, 'hook last']:.3g})" for cap in hooked),
                *(_ms(rows[name].iloc[0]) for name in ("ZeRO-1", "FSDP2 gathers", "FSDP2 reduce-scatters")),
            ]
        )
    caption = ("ms a step of each strategy's collectives, as NCCL's algorithms run them on this profile's bandwidths "
               "(docs/clusters.md): the bytes and the network alone, whatever the GPU computes. DDP's all-reduces "
               "run beside backward but for the last bucket's (in brackets)"
               + ("; under a comm_hook, the same all-reduces in 2-byte floats, the casts left out" * bool(hooked))
               + "; ZeRO-1's broadcasts (one a parameter, "
               "as NCCL all-gathers carry them) follow its optimizer; FSDP2's gathers and reduce-scatters overlap "
               "its blocks' forward and backward. None of these is a step: the step, the strategy to book and the "
               "cap need the GPU's one-GPU step (the banner above).")  # fmt: skip
    left_out = communication.unpriced_words(list(unpriced))  # a strategy of the run's missing without a word: said
    caption += f" {left_out[0].upper()}{left_out[1:]}." if left_out else ""
    return said + table(heads, cells) + f"<p class=caption>{esc(caption)}</p>"


def _ms(value: float) -> str:
    return "not modelled: no block times" if pd.isna(value) else f"{value:.4g}"
