"""What one NCCL collective costs on a cluster, following NCCL's own tuner (src/graph/tuning.cc).

NCCL estimates, for every algorithm × protocol, `time = latency + bytes / algorithm bandwidth` and
runs the cheapest (`ncclTopoGetAlgoTime`). This module keeps that structure and NCCL's constants
(NCCL master, 2026: `ncclTunerConstantsDefaults`), with three changes, each said where it is made:

- the bandwidths come from the cluster profile's measured peaks (nccl-tests' bus bandwidth of one
  node, of NVLS, between nodes) instead of NCCL's topology search, so that a profile is a few
  numbers a person can read and check;
- the predicted time adds the pipeline fill the tuner leaves out: a message moves in chunks, and a
  transfer pipelined with the best chunk size costs (√α + √(S/B))² = α + S/B + 2√(α·S/B) (Hockney's
  pipelined transfer); α is NCCL's own per-step hardware latency. The choice of algorithm is NCCL's
  (without that term), as NCCL makes it;
- NVLS's bus bandwidth becomes an algorithm bandwidth as nccl-tests made it (× n/nsteps), not by
  NCCL's 5/6: the profile's NVLS peak is an nccl-tests figure (`algorithm_bandwidth`).

Modelled: ring, tree, NVLS, NVLS tree, each with LL, LL128 and Simple where NCCL allows them.
Not modelled: CollNet (SHARP in the switch) and PAT (one GPU per node). Times in µs, bandwidths in
GB/s (1e9 bytes per second, as nccl-tests prints them).
"""

from __future__ import annotations

import dataclasses
import math

from harness.perfmodel.clusters.cluster import Cluster

ALGORITHMS = ("tree", "ring", "nvls", "nvlstree")
PROTOCOLS = ("LL", "LL128", "Simple")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
GENERATIONS = ("volta", "ampere", "hopper", "blackwell")  # NCCL's compute-capability index

# tuning.cc `baseLatencies` (µs), per protocol LL, LL128, Simple.
BASE_LATENCY = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls": (0, 0, 0), "nvlstree": (0, 0, 0)}
# tuning.cc `hwLatencies` (µs per step), by the hardware a step crosses.
HW_LATENCY = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "nvls": (0, 0, 25), "nvlstree": (0, 0, 25)},
    "pcie": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "nvls": (0, 0, 0), "nvlstree": (0, 0, 0)},
    "net": {"tree": (5.0, 8.5, 14), "ring": (2.7, 4.0, 14.0), "nvls": (0, 0, 18), "nvlstree": (0, 0, 20.9)},
}
# tuning.cc `llMaxBws`: one node by GPU generation; several by CPU vendor (Intel row 0, AMD row 1);
# the columns are 1, 2 and ≥ 3 nodes.
LL_MAX_BW = {"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0), "hopper": (141.0, 45.0, 35.0),
             "blackwell": (282.0, 90.0, 70.0)}  # fmt: skip
LL_MAX_BW_NODES = {"intel": LL_MAX_BW["volta"], "amd": LL_MAX_BW["ampere"]}
# tuning.cc per-channel caps (GB/s per channel), by generation, for 1, 2, ≥ 3 nodes.
PER_CHANNEL_RING_LL128 = {"volta": (20.0,) * 3, "ampere": (20.0,) * 3, "hopper": (36.7,) * 3, "blackwell": (40.0,) * 3}
PER_CHANNEL_TREE_LL128 = {"volta": (20.0,) * 3, "ampere": (20.0,) * 3, "hopper": (36.7, 36.7, 29.0),
                          "blackwell": (55.6, 31.67, 20.0)}  # fmt: skip
PER_CHANNEL_TREE = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0),
                    "blackwell": (70.0, 42.8, 24.0)}  # fmt: skip
PER_CHANNEL_NVLS_TREE = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (0.0, 57.7, 45.5),
                         "blackwell": (0.0, 96.0, 80.0)}  # fmt: skip
NVLS_CHANNELS = 16  # enqueue.cc: "NVLS should not need more than 16 channels to get peak BW"
# search.cc's inter-node search speeds (GB/s per channel): speedArrayInter, sm90…, sm100SpeedArrayInter.
_INTER_SPEEDS_PRE_HOPPER = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4,
                            1.2, 0.24, 0.12)  # fmt: skip
INTER_SPEEDS = {"volta": _INTER_SPEEDS_PRE_HOPPER, "ampere": _INTER_SPEEDS_PRE_HOPPER,
                "hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
                           0.12),
                "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0,
                              6.0, 3.0, 2.4, 1.2, 0.24, 0.12)}  # fmt: skip
NVLINK_GBPS = {"volta": 20.0, "ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}  # topo.h SM*_NVLINK_BW, per link
MAX_GRAPH_CHANNELS = 32  # init.cc: a graph's maxChannels = MAXCHANNELS / 2
# tuning.cc `treeCorrectionFactor[protocol][log2(bytes / 64)]`, 64 B to 256 MiB: trees stray from the model there.
# fmt: off
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
}
# fmt: on
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}  # tuning.cc getNetOverhead: a network post, ×3 for Simple
ALGORITHM_NAMES = {"tree": "tree", "ring": "ring", "nvls": "NVLS", "nvlstree": "NVLS-tree"}  # as NCCL_ALGO spells them


@dataclasses.dataclass(frozen=True)
class Choice:
    """One collective of `nbytes` (each rank's buffer, as nccl-tests counts its size) on `ranks` GPUs."""

    collective: str
    nbytes: int
    ranks: int
    nodes: int
    algorithm: str
    protocol: str
    time_us: float

    @property
    def algbw_gbps(self) -> float:
        return self.nbytes / (self.time_us * 1e3) if self.time_us > 0 else 0.0

    @property
    def busbw_gbps(self) -> float:
        return self.algbw_gbps * bus_factor(self.collective, self.ranks)


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests' busbw = algbw × factor (its doc/PERFORMANCE.md): 2(n−1)/n for all-reduce,
    (n−1)/n for all-gather and reduce-scatter."""
    if ranks <= 1:
        return 0.0
    return (2 if collective == "all_reduce" else 1) * (ranks - 1) / ranks


def _steps(collective: str, ranks: int) -> int:
    """tuning.cc `nsteps`: a ring all-reduce takes 2(n−1) steps, all-gather and reduce-scatter n−1."""
    return 2 * (ranks - 1) if collective == "all_reduce" else ranks - 1


def _node_index(nodes: int) -> int:
    return min(nodes, 3) - 1  # tuning.cc index2: 1, 2, ≥ 3 nodes


def allowed(cluster: Cluster, collective: str, nodes: int) -> list[tuple[str, str]]:
    """The (algorithm, protocol) pairs NCCL would consider (tuning.cc's skips and disables)."""
    pairs = []
    for algorithm in ALGORITHMS:
        if algorithm not in cluster.algorithms:
            continue
        if collective != "all_reduce" and algorithm not in ("ring", "nvls"):
            continue  # all-gather / reduce-scatter: ring, NVLS (and PAT, CollNet: not modelled)
        if algorithm == "nvlstree" and nodes == 1:
            continue  # "Disable NVLS Tree on a single node"
        if algorithm == "nvls" and (nodes > 1 or not cluster.nvls_busbw_gbps):
            continue  # NVLS across nodes needs CollNet (off by default); none without NVSwitch multicast
        if algorithm == "nvlstree" and not cluster.nvls_busbw_gbps:
            continue
        for protocol in PROTOCOLS:
            if algorithm in ("nvls", "nvlstree") and protocol != "Simple":
                continue
            if protocol == "LL128" and cluster.fabric == "pcie":
                continue  # LL128 only where GPUs meet over NVLink: `pEnable &= (graphs[a]->typeIntra <= PATH_NVB)`
            pairs.append((algorithm, protocol))
    return pairs


def level_bandwidths(cluster: Cluster, algorithm: str, nodes: int) -> dict[str, float]:
    """The links `algorithm`'s busBw starts from, by level (GB/s): the slowest bounds it, before protocols and
    per-channel caps lower it (`bus_bandwidth`; clusters.bound names the link). A ring's or a tree's: the node's
    fabric ('intra') and, across nodes, the network ('inter'); NVLS the node's NVSwitch ('nvls'); NVLS-tree the
    NVSwitch and the network, which carries twice at 2 nodes ("Handle 2 node case of NVLSTree")."""
    if algorithm == "nvls":
        return {"nvls": cluster.nvls_busbw_gbps}
    if algorithm == "nvlstree":
        return {"nvls": cluster.nvls_busbw_gbps, "inter": cluster.inter_busbw_gbps * (2 if nodes <= 2 else 1)}
    return {"intra": cluster.intra_busbw_gbps, **({"inter": cluster.inter_busbw_gbps} if nodes > 1 else {})}


def bus_bandwidth(cluster: Cluster, collective: str, algorithm: str, protocol: str, nodes: int) -> float:
    """NCCL's `busBw` for one algorithm × protocol (GB/s), before the bus-to-algorithm conversion.

    Where NCCL multiplies a per-channel graph bandwidth by its channels, this takes the profile's
    measured peak of that level (the change said above); NCCL's refinements apply unchanged."""
    gen, index = cluster.tuner_generation, _node_index(nodes)
    channels = graph_channels(cluster, nodes)
    ring_bw = min(level_bandwidths(cluster, algorithm, nodes).values())
    if algorithm == "nvls":
        return ring_bw
    if algorithm == "nvlstree":
        return min(ring_bw, PER_CHANNEL_NVLS_TREE[gen][index] * NVLS_CHANNELS)
    ll_max = LL_MAX_BW[gen][index] if nodes == 1 else LL_MAX_BW_NODES[cluster.cpu][index]
    bw = ring_bw
    if algorithm == "ring":
        if protocol == "LL":
            bw = min(ll_max, bw * 0.5)
        elif protocol == "LL128":
            bw = min(bw * 0.92, channels * PER_CHANNEL_RING_LL128[gen][index])  # 120/128 of each line is data
        return bw
    if collective == "all_reduce":  # tree
        bw = min(bw * 0.92, channels * PER_CHANNEL_TREE[gen][index])
    if protocol == "LL":
        bw = min(bw / 3.8, ll_max)
    elif protocol == "LL128":
        bw = min(bw * (7 / 9 if nodes == 1 else 120 / 128), channels * PER_CHANNEL_TREE_LL128[gen][index])
    if nodes > 1 and gen in ("hopper", "blackwell") and cluster.nics >= cluster.gpus_per_node:
        # Our reading of search.cc, not checked against a log: with a NIC per GPU (each under its own
        # PCIe switch) no balanced tree reaches its NIC, so the search on Hopper and later "tries a
        # simpler tree" (NCCL_TOPO_PATTERN_TREE), which tuning.cc penalises: `busBw *= .85`. With fewer
        # NICs than GPUs a balanced tree can share a NIC between two GPUs, and nothing is penalised.
        bw *= 0.85
    return bw


def graph_channels(cluster: Cluster, nodes: int) -> int:
    """The channels of NCCL's ring and tree graphs, which its per-channel caps multiply (`graphs[a]->nChannels`).

    Inside one node, the profile's NVLink channels. Across nodes every channel leaves through a NIC
    (search.cc `ncclTopoCompute`): the search starts at the first speed of its inter-node array at or
    below the NIC's rate (topo.cc reads a port's Mb/s / 8000 as GB/s: 400 Gb/s → 50, so 48), gives
    each NIC as many channels as fit in its rate, stops once the channels carry the GPU's NVLink total,
    then `ncclTopoDupChannels` doubles them unless the speed is below 25 GB/s, or below 50 GB/s with
    more than 4 channels on Hopper and later. A DGX H100 (8 × 400 Gb/s) gets 8, a DGX A100 (8 × 200 Gb/s)
    8. The communicator's own channels (`Channel 00/16`) are these doubled; the tuner reads these."""
    if nodes == 1:
        return cluster.channels
    nic = cluster.nic_gbps / 8
    speeds = INTER_SPEEDS[cluster.tuner_generation]
    speed = next((s for s in speeds if s <= nic), speeds[-1])
    channels = max(1, cluster.nics) * max(1, int(nic // speed))
    if cluster.nvlinks > 0:  # no NVLink (PCIe alone): nothing to stop at but the NICs and the maximum
        channels = min(channels, math.ceil(cluster.nvlinks * NVLINK_GBPS[cluster.tuner_generation] / speed))
    channels = min(channels, MAX_GRAPH_CHANNELS)
    if speed >= 25 and not (cluster.tuner_generation in ("hopper", "blackwell") and speed < 50 and channels > 4):
        channels = min(2 * channels, MAX_GRAPH_CHANNELS)
    return channels


def algorithm_bandwidth(cluster: Cluster, collective: str, algorithm: str, protocol: str, *, ranks: int,
                        nodes: int) -> float:  # fmt: skip
    """tuning.cc "Convert bus BW to algorithm BW": ring × n/nsteps, tree × 1/2. NVLS and NVLS tree × n/nsteps
    too, where NCCL has 5/6 (or 0.7·nodes/2(nodes−1)): the profile's NVLS figure is an nccl-tests bus
    bandwidth, which nccl-tests makes from the algorithm bandwidth by nsteps/n whatever the algorithm."""
    bus = bus_bandwidth(cluster, collective, algorithm, protocol, nodes)
    ratio = ranks / _steps(collective, ranks) if algorithm in ("ring", "nvls", "nvlstree") else 0.5
    return bus * ratio


def latency_us(cluster: Cluster, collective: str, algorithm: str, protocol: str, *, ranks: int, nodes: int) -> float:
    """tuning.cc `latencies[coll][a][p]`, times the profile's `latency_scale` (1: NCCL's constants;
    a fit to measurements may move it)."""
    return cluster.latency_scale * _nccl_latency_us(cluster, collective, algorithm, protocol, ranks=ranks, nodes=nodes)


def _nccl_latency_us(cluster: Cluster, collective: str, algorithm: str, protocol: str, *, ranks: int,
                     nodes: int) -> float:  # fmt: skip
    """tuning.cc `latencies[coll][a][p]`: a base per algorithm × protocol plus the steps' hardware latencies."""
    p = PROTOCOLS.index(protocol)
    per_node = ranks // nodes
    intra_lat = HW_LATENCY[cluster.intra_hw][algorithm][p]
    # "With ppn=1 latencies are fully exposed, use the Tree network latency"
    inter_lat = HW_LATENCY["net"]["tree" if per_node == 1 else algorithm][p] + cluster.inter_latency_us
    if protocol == "Simple":
        inter_lat += cluster.inter_latency_us  # "Also add the flush extra latency"
    base = BASE_LATENCY[algorithm][p]
    log_nodes = int(math.log2(nodes)) if nodes > 1 else 0  # NCCL's log2i rounds down
    if algorithm == "ring":
        steps = _steps(collective, ranks)
        overhead = NET_OVERHEAD_US[cluster.cpu] * (3 if protocol == "Simple" else 1) if nodes > 1 else 0.0
        intra_lat = max(intra_lat, overhead)  # "Inter-node rings still have to launch nsteps * net overhead"
        inter_steps = 0 if nodes == 1 else (2 * (nodes - 1) if collective == "all_reduce" else nodes - 1)
        return base + (steps - inter_steps) * intra_lat + inter_steps * inter_lat
    if algorithm == "tree":
        return base + 2 * ((per_node - 1) * intra_lat + log_nodes * inter_lat)
    if algorithm == "nvls":
        return intra_lat + (inter_lat if nodes > 1 else 0.0)
    return base + intra_lat + 2 * log_nodes * inter_lat  # nvlstree


def tuner_time_us(cluster: Cluster, collective: str, algorithm: str, protocol: str, nbytes: int, *, ranks: int,
                  nodes: int) -> float:  # fmt: skip
    """enqueue.cc/tuning.cc `ncclTopoGetAlgoTime`: the time NCCL's tuner compares (one operation)."""
    bw = algorithm_bandwidth(cluster, collective, algorithm, protocol, ranks=ranks, nodes=nodes)
    lat = latency_us(cluster, collective, algorithm, protocol, ranks=ranks, nodes=nodes)
    if bw <= 0:
        return math.inf
    log_size = int(math.log2(nbytes >> 6)) if nbytes >= 64 else -1
    if algorithm == "tree" and collective == "all_reduce" and 0 <= log_size < 23:
        bw *= TREE_CORRECTION[protocol][log_size]
    if (algorithm == "ring" and protocol == "Simple" and nodes > 1 and collective == "all_reduce"
            and nbytes / (2 * graph_channels(cluster, nodes) * ranks) >= 64):  # fmt: skip
        lat *= 1.9 if cluster.tuner_generation == "volta" else 1.4  # "Plateau effect of ring"
    return lat + nbytes / (1e3 * bw)


def pipeline_fill_us(cluster: Cluster, collective: str, algorithm: str, protocol: str, nbytes: int, *, ranks: int,
                     nodes: int) -> float:  # fmt: skip
    """Our addition: 2√(α·S/B), the fill of a pipelined transfer at its best chunk size, α the
    hardware latency of one point-to-point step (a ring's step: NCCL's `hwLatencies` for rings) on
    the level the data crosses; NVLS moves its chunks over NVLink too (its own 25 µs is a whole
    operation's latency, not a step's). NCCL's tree correction already bends the tree's curve, so
    the tree gets none."""
    if algorithm == "tree":
        return 0.0
    level = "net" if nodes > 1 and algorithm != "nvls" else cluster.intra_hw
    alpha = HW_LATENCY[level]["ring"][PROTOCOLS.index(protocol)]
    transfer = nbytes / (1e3 * algorithm_bandwidth(cluster, collective, algorithm, protocol, ranks=ranks, nodes=nodes))
    return 2 * math.sqrt(alpha * transfer)


def choose(cluster: Cluster, collective: str, nbytes: int, *, nodes: int, ranks: int | None = None,
           protocols: tuple[str, ...] = PROTOCOLS) -> Choice:  # fmt: skip
    """The algorithm × protocol NCCL's tuner would pick, and the time we predict for it, on `nodes`
    nodes with `ranks` GPUs in all (default: every GPU of those nodes), among `protocols` alone
    (NCCL_PROTO's counterpart, as the profile's `algorithms` is NCCL_ALGO's)."""
    if collective not in COLLECTIVES:
        raise ValueError(f"collective {collective!r}: choose one of {', '.join(COLLECTIVES)}")
    ranks = ranks or nodes * cluster.gpus_per_node
    if ranks <= 1:
        return Choice(collective, nbytes, ranks, nodes, "none", "none", 0.0)
    pairs = [pair for pair in allowed(cluster, collective, nodes) if pair[1] in protocols]
    if not pairs:
        raise ValueError(f"no algorithm of {cluster.name} runs {collective} with protocols {', '.join(protocols)}")
    algorithm, protocol = min(
        pairs, key=lambda pair: tuner_time_us(cluster, collective, *pair, nbytes, ranks=ranks, nodes=nodes)
    )
    time = tuner_time_us(cluster, collective, algorithm, protocol, nbytes, ranks=ranks, nodes=nodes)
    time += pipeline_fill_us(cluster, collective, algorithm, protocol, nbytes, ranks=ranks, nodes=nodes)
    return Choice(collective, nbytes, ranks, nodes, algorithm, protocol, time)


@dataclasses.dataclass(frozen=True)
class ClusterLink:
    """The all-reduce cost DDP's bucket schedule asks for (`allreduce_s`) on a cluster: a world size
    fills whole nodes first (8 GPUs of an 8-GPU node: one node; 16: two)."""

    cluster: Cluster
    # each (collective, bytes, world size) priced once: a model's layers repeat their sizes, every cap its broadcasts
    _seconds: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def source(self) -> str:
        return f"cluster {self.cluster.name}, NCCL's algorithms"

    def nodes(self, world_size: int) -> int:
        return -(-world_size // self.cluster.gpus_per_node)

    def allreduce_s(self, nbytes: float, world_size: int) -> float:
        if world_size <= 1 or nbytes <= 0:
            return 0.0
        return self._chosen_s("all_reduce", int(nbytes), world_size)

    def collective_s(self, op: str, nbytes: float, world_size: int) -> float:
        """`op` (nccl-tests' size: an all-gather's output, a reduce-scatter's input) as NCCL's tuner picks it."""
        if world_size <= 1 or nbytes <= 0:
            return 0.0
        return self._chosen_s(op, int(nbytes), world_size)

    def _chosen_s(self, op: str, nbytes: int, world_size: int) -> float:
        key = (op, nbytes, world_size)
        if key not in self._seconds:
            nodes = self.nodes(world_size)
            self._seconds[key] = choose(self.cluster, op, nbytes, nodes=nodes, ranks=world_size).time_us / 1e6
        return self._seconds[key]

    def algorithms(self, sizes, world_size: int, op: str = "all_reduce") -> tuple[str, str]:
        """How NCCL runs `op`s of these `sizes` (a step's buckets; ZeRO-1's broadcasts, as `broadcast_s` prices them;
        FSDP2's all-gathers, reduce-scatters) on `world_size` GPUs: the words the why says after their cost
        ('NVLS-tree/Simple'; 'NVLS-tree/Simple ×12, tree/LL128 ×1', a count each, where they differ, the pair that
        carries most of their time first) and that pair alone; ('', '') on one GPU."""
        nodes, carried = self.nodes(world_size), {}
        for nbytes in sizes:
            if world_size > 1 and nbytes > 0:
                c = choose(self.cluster, *_as_sent(op, nbytes, world_size), nodes=nodes, ranks=world_size)
                count, time = carried.get((c.algorithm, c.protocol), (0, 0.0))
                carried[(c.algorithm, c.protocol)] = (count + 1, time + c.time_us)
        pairs = sorted(carried, key=lambda pair: -carried[pair][1])
        named = [f"{ALGORITHM_NAMES[algorithm]}/{protocol}" for algorithm, protocol in pairs]
        if len(named) <= 1:
            return (named[0], named[0]) if named else ("", "")
        return ", ".join(f"{n} ×{carried[p][0]}" for p, n in zip(pairs, named, strict=True)), named[0]

    def broadcast_s(self, nbytes: float, world_size: int) -> float:
        """A broadcast of `nbytes` as the all-gather whose every link carries as much: NCCL broadcasts along a
        ring, each byte over each link once, as an all-gather of n/(n−1) times the bytes moves them (the
        profile has no broadcast of its own: an approximation, named where a step uses it)."""
        if world_size <= 1 or nbytes <= 0:
            return 0.0
        return self._chosen_s(*_as_sent("broadcast", nbytes, world_size), world_size)


def _as_sent(op: str, nbytes: float, world_size: int) -> tuple[str, int]:
    """The collective NCCL is priced as and its bytes: a broadcast as the all-gather of n/(n−1) times the bytes
    (ClusterLink.broadcast_s), any other as it is."""
    if op == "broadcast":
        return "all_gather", int(nbytes * world_size / (world_size - 1))
    return op, int(nbytes)
