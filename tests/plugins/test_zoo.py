"""Workloads beyond ours: a file or module of the user's, torchvision, transformers and timm models by name.
Each builds at --size tiny and trains; every bad spec is one line, exit 2, nothing written."""

from __future__ import annotations

import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch
from bad_input import refused
from worker_plans import plan_for

import workloads
from harness import cli
from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.handoff import faults
from harness.protocols import ConfigError
from harness.rank import worker
from harness.results import store

ROOT = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")


def one_step(workload) -> float:
    """A training step of the workload, as the harness runs one (on the CPU)."""
    model = workload.build_model()
    generator = torch.Generator().manual_seed(0)
    loss = workload.loss(model, workload.make_batch(2, device=CPU, generator=generator))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    return float(loss.detach())


@pytest.mark.parametrize(
    ("spec", "tokens"),
    [("torchvision:squeezenet1_1", None), ("hf:llama", 32), ("hf:t5", 64), ("hf:bert", 32), ("hf:vit", None)],
)
def test_a_zoo_model_builds_at_tiny_size_and_trains(spec, tokens):
    workload = workloads.create(spec, size="tiny")
    assert torch.isfinite(torch.tensor(one_step(workload)))
    assert workload.tokens_per_sample() == tokens


def test_a_transformers_model_is_scaled_down_its_blocks_are_its_own_and_options_set_its_fields():
    workload = workloads.create("hf:llama", size="tiny", options={"num_hidden_layers": 3})
    config = workload.config()
    assert (config.num_hidden_layers, config.hidden_size, config.vocab_size) == (3, 64, 512)
    assert config.use_cache is False
    model = workload.build_model()
    assert [type(b).__name__ for b in workload.blocks(model)] == ["LlamaDecoderLayer"] * 3  # _no_split_modules
    assert workloads.create("hf:t5", size="tiny").task == "seq2seq"
    clip = workloads.create("hf:clip", size="tiny").config()  # a composite: each of its parts scaled (once 87M)
    assert (clip.text_config.hidden_size, clip.vision_config.hidden_size, clip.vision_config.image_size) == (64, 64, 32)
    assert workloads.create("hf:bert", size="tiny").task == "masked_lm"
    assert workloads.create("hf:gpt2", size="tiny", options={"task": "causal_lm"}).task == "causal_lm"


def test_a_width_or_head_count_given_carries_the_fields_derived_from_them_as_transformers_derives_them():
    """Set one by one on llama's defaults, hidden_size=2048 and num_attention_heads=16 kept 7B's heads of 128 and
    its 32 key/value heads: 1.19B parameters for the 1.04B model described (a user's hand count found it)."""
    described = {"hidden_size": 2048, "num_hidden_layers": 18, "intermediate_size": 5504, "num_attention_heads": 16,
                 "vocab_size": 32000}  # fmt: skip
    config = workloads.create("hf:llama", size="full", options=described).config()
    assert (config.head_dim, config.num_key_value_heads) == (128, 16)
    with torch.device("meta"):
        model = workloads.create("hf:llama", size="full", options=described).build_model()
    per_layer = 4 * 2048 * 2048 + 3 * 2048 * 5504 + 2 * 2048
    assert sum(p.numel() for p in model.parameters()) == 2 * 32000 * 2048 + 18 * per_layer + 2048
    # what the user sets stays; a width the configuration keeps apart, and grouped heads, stay too
    given = workloads.create(
        "hf:llama", size="full", options=dict(hidden_size=2048, num_attention_heads=32, head_dim=128)
    ).config()
    assert (given.head_dim, given.num_key_value_heads) == (128, 32)
    mistral = workloads.create(
        "hf:mistral", size="full", options=dict(hidden_size=2048, num_attention_heads=16)
    ).config()
    assert (mistral.head_dim, mistral.num_key_value_heads) == (128, 8)  # 8 of 32 grouped: still 8
    gemma = workloads.create("hf:gemma", size="full", options=dict(hidden_size=2048)).config()
    assert gemma.head_dim == 256  # gemma's own width, not 3072 / 16
    assert (
        workloads.create("hf:llama", size="small", options=dict(hidden_size=512)).config().head_dim == 128
    )  # small's 4 heads
    # a review's: a width the constructor keeps (qwen3's 128, t5's d_kv), or one set by its other name, stays
    qwen3 = workloads.create(
        "hf:qwen3", size="full", options=dict(hidden_size=1024, num_attention_heads=16, num_key_value_heads=8)
    )
    assert qwen3.config().head_dim == 128  # Qwen3-0.6B
    assert (
        workloads.create("hf:t5", size="full", options=dict(d_model=1024, num_heads=32, head_dim=128)).config().d_kv
        == 128
    )
    assert workloads.create("hf:t5", size="full", options={"num_heads": 16}).config().d_kv == 64


@pytest.mark.parametrize("size", ["full", "small"])
def test_an_option_carries_what_the_constructor_derives_from_it_as_built_with_it(size):
    """T5Config(d_model=768, d_ff=3072, num_layers=12, num_heads=12) is T5-base, 222,903,552 parameters; set one by
    one after the default was built, num_decoder_layers stayed t5-small's 6 (166.3M). A derived field the size set
    apart from the constructor's stays: gemma3n's intermediate size, a list of the size's one a layer."""
    base = dict(d_model=768, d_ff=3072, num_layers=12, num_heads=12)
    t5 = workloads.create("hf:t5", size=size, options=base)
    assert (t5.config().num_layers, t5.config().num_decoder_layers) == (12, 12)
    if size == "full":
        with torch.device("meta"):
            assert sum(p.numel() for p in t5.build_model().parameters()) == 222_903_552
    given = workloads.create("hf:t5", size=size, options={**base, "num_decoder_layers": 3}).config()
    assert given.num_decoder_layers == 3  # one the user gives stays
    gemma3n = workloads.create("hf:gemma3n_text", size="small", options={"num_hidden_layers": 3}).config()
    assert (gemma3n.intermediate_size, len(gemma3n.layer_types)) == ([1024] * 3, 3)


def test_list_says_which_model_an_hf_full_is(tmp_path):
    """`list hf:t5` said 60.5M at full and never that it is t5-small (bert's says BERT-base): the checkpoint
    transformers' docs say its default configuration is like, or the file; options given, said so."""
    assert workloads.create("hf:t5", size="full").full_is == (
        "full is transformers' default T5Config, like google-t5/t5-small (its docs say)"
    )
    assert workloads.create("hf:llama", size="full", options={"num_hidden_layers": 2}).full_is.endswith(
        "like meta-llama/Llama-2-7b-hf (its docs say) with the --wopt given"
    )
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "gpt2", "n_layer": 1}')
    assert workloads.resolve(f"hf:{config}").create(size="full", options={}).full_is == "full is config.json as it is"


def test_a_width_your_config_file_gives_stays_when_options_change_the_heads(tmp_path):
    """LlamaConfig(head_dim=128, hidden_size=2048) keeps 128: so does a file of yours that says head_dim."""
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, '
                      '"num_key_value_heads": 8, "head_dim": 128}')  # fmt: skip
    built = workloads.resolve(f"hf:{config}").create(size="full", options={"hidden_size": 2048}).config()
    assert (built.head_dim, built.num_key_value_heads) == (128, 8)


def test_predict_train_wopt_refuses_heads_that_do_not_divide_as_bench_does():
    """--train-wopt built the model on meta without bench's check of its heads: a model that cannot run, counted."""
    from harness.commands.predict import full_size as predict_full_size

    given = [("hidden_size", ["2048"]), ("num_attention_heads", ["12"])]
    with pytest.raises(
        ConfigError,
        match=r"^--train-wopt: hf:llama at --size full: hidden_size=2048 is not a "
        r"multiple of num_attention_heads=12 \(given --train-wopt hidden_size",
    ):
        predict_full_size.train_options(given, None, {"workload": "hf:llama"})


@pytest.mark.parametrize("value", ["abc", "0"])
def test_predict_train_wopt_says_a_bad_count_once(value):
    """'--train-wopt n_layer=abc is not valid for hf:gpt2 (--train-wopt n_layer=abc is not valid for hf:gpt2; give
    …)': the workload's own words named the value already, and were wrapped in it again. A key the workload lacks
    is still named in the flag's words, before the workload's."""
    from harness.commands.predict import full_size as predict_full_size

    with pytest.raises(ConfigError) as said:
        predict_full_size.train_options([("n_layer", [value])], None, {"workload": "hf:gpt2"})
    assert str(said.value) == f"--train-wopt n_layer={value} is not valid for hf:gpt2; give a whole number ≥ 1"
    with pytest.raises(ConfigError, match=r"^--train-wopt widht=3 is not valid for hf:gpt2 \(hf:gpt2 has no config"):
        predict_full_size.train_options([("widht", ["3"])], None, {"workload": "hf:gpt2"})


def test_a_users_transformers_config_file_is_built_as_it_says(tmp_path):
    config = tmp_path / "my-model" / "config.json"
    config.parent.mkdir()
    config.write_text('{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 3, "n_embd": 48, '
                      '"n_head": 3, "vocab_size": 300, "n_positions": 64}')  # fmt: skip
    source = workloads.resolve(f"hf:{config}")
    assert (source.name, source.path, len(source.sha256)) == ("hf:my-model/config.json", str(config), 64)
    full = source.create(size="full", options={})
    assert (full.config().n_layer, full.config().vocab_size, full.task, full.seq) == (3, 300, "causal_lm", 64)
    small, tiny = (source.create(size=size, options={}) for size in ("small", "tiny"))  # a size scales it down only
    assert (small.config().n_layer, small.config().n_embd, small.config().vocab_size, small.seq) == (3, 48, 300, 64)
    assert (tiny.config().n_layer, tiny.config().n_embd, tiny.config().n_head, tiny.seq) == (2, 48, 3, 32)
    large = tmp_path / "large.json"  # a file larger than small: scaled to it, the heads with the width
    large.write_text('{"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, '
                     '"num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 2}')  # fmt: skip
    built = workloads.resolve(f"hf:{large}").create(size="small", options={}).config()
    assert (built.hidden_size, built.num_attention_heads, built.num_key_value_heads, built.head_dim) == (256, 4, 4, 64)
    assert built.num_hidden_layers == 2


def test_a_config_files_torch_dtype_is_said_ignored_once_and_the_model_built_fp32(capsys, tmp_path):
    """A published config.json's "torch_dtype": "bfloat16" built bf16 parameters (transformers' from_config honours
    it): bf16 gradients and Adam state, half the all-reduce bytes, steps ~60x slower on a CPU, while bench said
    "precision: fp32". Parameters are fp32 and --dtype picks the compute: the field is ignored, and said so once."""
    import json

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 64,
                                  "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
                                  "intermediate_size": 128, "vocab_size": 256, "torch_dtype": "bfloat16"}))  # fmt: skip
    full = workloads.resolve(f"hf:{config}").create(size="full", options={})
    assert {p.dtype for p in full.build_model().parameters()} == {torch.float32}
    ignored = "config.json's torch_dtype bfloat16 ignored: parameters fp32, --dtype picks the compute"
    assert cli.main(["list", f"hf:{config}"]) == 0
    out = capsys.readouterr().out
    assert out.count(ignored) == 1 and "bf16" not in out and out.count(" of fp32 gradients a step") == 1
    assert "at every --size (no larger than tiny's: a size scales your file down only)" in out  # once 3 sizes
    results = tmp_path / "r"
    assert cli.main(["bench", "--dry-run", "--workloads", f"hf:{config}", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert out.count(ignored) == 1 and "precision: fp32 (--dtype auto)" in out
    # a name's, given as an option (transformers 5 calls the field dtype), and a composite's part
    llama = workloads.create("hf:llama", size="tiny", options={"dtype": "bfloat16"})
    with torch.device("meta"):
        assert {p.dtype for p in llama.build_model().parameters()} == {torch.float32}
    assert (llama.dtype_ignored, workloads.create("hf:llama", size="tiny").dtype_ignored) == ("--wopt dtype=bfloat16",
                                                                                             None)  # fmt: skip
    part = tmp_path / "clip.json"
    part.write_text(json.dumps({"model_type": "clip", "text_config": {"torch_dtype": "float16"}}))
    clip = workloads.resolve(f"hf:{part}").create(size="tiny", options={})
    assert clip.dtype_ignored == "clip.json's torch_dtype float16"
    with torch.device("meta"):
        assert {p.dtype for p in clip.build_model().parameters()} == {torch.float32}


def test_a_users_transformers_config_of_an_unknown_model_type_is_refused_naming_the_near_ones(capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "lama"}')
    said = refused(capsys, tmp_path, "--workloads", f"hf:{config}")
    assert "transformers configuration config.json: unknown model_type 'lama'; did you mean llama" in said


def test_a_torchvision_model_takes_its_size_from_the_size_and_is_deterministic():
    tiny = workloads.create("torchvision:convnext_tiny", size="tiny")
    full = workloads.create("torchvision:vit_b_16", size="full")
    assert (tiny.image_size, tiny.classes, full.image_size, full.classes) == (32, 10, 224, 1000)
    assert workloads.create("torchvision:inception_v3", size="tiny").image_size == 75  # its smallest input
    assert workloads.create("torchvision:maxvit_t", size="small").image_size == 224  # its blocks need 224's multiples
    with torch.device("meta"):
        model = tiny.build_model()
    depths = [m.p for m in model.modules() if type(m).__name__ == "StochasticDepth"]
    assert depths and set(depths) == {0.0}  # every rank would draw its own: no parity otherwise


def test_a_model_whose_builder_computes_with_tensors_is_counted_on_the_meta_device():
    """RegNet's builder computes its widths with tensors, which the meta device refuses: `list` of it (with or without
    --wopt stem_width=16) once ended in a traceback, "Cannot copy out of meta tensor"."""
    from harness.measure.modelinfo import parameter_count_on_meta

    workload = workloads.create("torchvision:regnet_y_400mf", size="tiny", options={"stem_width": 16})
    with torch.device("meta"):
        model = workload.build_model()
    assert {t.device.type for t in (*model.parameters(), *model.buffers())} == {"meta"}
    built = sum(p.numel() for p in workload.build_model().parameters())
    assert parameter_count_on_meta(workload)[0] == built


@pytest.mark.parametrize(("name", "tiny", "small"), [("vit_l_16", 32, 64), ("vit_h_14", 42, 70), ("swin_t", 32, 64)])
def test_a_vision_transformer_is_tiny_at_tiny_size_not_its_weights_input(name, tiny, small):
    """Their weights' min_size (224) is the pretrained input's: vit_l_16's tiny once cost its full 369 GFLOPs."""
    sides = [workloads.create(f"torchvision:{name}", size=size).image_size for size in ("tiny", "small")]
    assert sides == [tiny, small]
    workload = workloads.create(f"torchvision:{name}", size="tiny")
    with torch.device("meta"):  # it runs at that input (a ViT's patches fit it), without any memory
        logits = workload.build_model()(torch.empty(2, 3, tiny, tiny))
    assert logits.shape == (2, 10)


def test_without_timm_list_says_so_once_and_offers_no_bench(monkeypatch, capsys):
    """`list timm:resnet50` without timm said each size unavailable, then "counted on the meta device; bench it:
    ... --size full", a bench that skips every row, and hf's "its configuration's fields" as its options."""
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "timm" else object())
    assert cli.main(["list", "timm:nonesuch"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "  unavailable at every --size (needs the Python package timm (pip install timm)): nothing counted, its name "
        "and options unchecked, and bench skips its rows until then"
    ]


def test_without_timm_its_rows_are_skipped_with_how_to_install_it(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "timm" else object())
    workload = workloads.resolve("timm:resnet18").create(size="tiny", options={})
    assert workload.unavailable_reason(device="cpu") == "needs the Python package timm (pip install timm)"


def test_a_run_whose_every_workload_would_be_skipped_is_refused_before_it_launches(capsys, tmp_path, monkeypatch):
    """Once 36 launches, every row skipped, exit 0; with another workload beside it, its rows are skipped."""
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "timm" else object())
    said = refused(capsys, tmp_path, "--workloads", "timm:resnet18")
    assert "nothing to run: timm:resnet18 needs the Python package timm (pip install timm)" in said
    config = BenchConfig(gpus=1, impls=("stock",), workloads=("mlp", "timm:resnet18"), size="tiny")
    assert {c.workload for c in expand(config, device="cpu")} == {"mlp", "timm:resnet18"}


def test_without_timm_a_misspelt_option_is_still_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "timm" else object())
    said = refused(capsys, tmp_path, "--workloads", "mlp,timm:resnet18", "--wopt", "classs=3")
    assert "(timm:resnet18 takes only image_size, num_classes while timm is not installed" in said  # once took all


def test_with_timm_a_model_is_made_by_its_create_model(monkeypatch):
    made = []
    fake = types.SimpleNamespace(
        list_models=lambda: ["resnet18", "resnet34"],
        create_model=lambda name, **kw: made.append((name, kw)) or torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(3 * kw.get("img_size", 32) ** 2, kw["num_classes"])),
        get_pretrained_cfg=lambda name, **kw: types.SimpleNamespace(input_size=(3, 224, 224)),
    )  # fmt: skip
    monkeypatch.setitem(sys.modules, "timm", fake)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())
    workload = workloads.resolve("timm:resnet18").create(size="tiny", options={})
    assert torch.isfinite(torch.tensor(one_step(workload)))
    assert made[0] == ("resnet18", {"pretrained": False, "num_classes": 10, "img_size": 32})
    with pytest.raises(cli.ConfigError, match="unknown timm model 'resnet1'; did you mean resnet18, resnet34"):
        workloads.resolve("timm:resnet1")


USER_FILE = """
import torch
import torch.nn.functional as F
from torch import nn


class Explodes:
    def build_model(self):
        return nn.Linear(4, 2)

    def make_batch(self, batch_size, *, device, generator):
        return torch.randn(batch_size, 4, device=device, generator=generator)

    def loss(self, model, batch):
        raise ValueError("my forward is broken")  # the user's own line


class NoLoss:
    def build_model(self):
        return nn.Linear(4, 2)

    def make_batch(self, batch_size, *, device, generator):
        return torch.randn(batch_size, 4)


class Sized:
    def __init__(self, width: int):
        self.width = width

    def build_model(self):
        return nn.Linear(self.width, 2)

    def make_batch(self, batch_size, *, device, generator):
        return torch.randn(batch_size, self.width, device=device, generator=generator)

    def loss(self, model, batch):
        return model(batch).square().mean()


class OwnSize(Sized):
    def __init__(self, size: int = 3):
        super().__init__(width=size)


class NoParameters(Explodes):
    def build_model(self):
        return nn.ReLU()


class TupleLoss(Explodes):
    def loss(self, model, batch):
        out = model(batch)
        return out.square().mean(), out


class Plain(nn.Module):  # a model, which a workload's build_model() returns
    def __init__(self, width):
        super().__init__()
        self.layer = nn.Linear(width, 2)


def factory():
    return Sized(width=3)

NOT_CALLABLE = 3
"""


@pytest.fixture
def user_file(tmp_path) -> Path:
    path = tmp_path / "theirs" / "models.py"
    path.parent.mkdir()
    path.write_text(USER_FILE)
    return path


def test_a_user_class_takes_the_options_as_keyword_arguments_and_a_factory_is_called(user_file):
    sized = workloads.create(f"{user_file}:Sized", size="tiny", options={"width": 5})
    assert sized.build_model().in_features == 5 and sized.default_batch_size() == 8  # the defaults fill in
    assert workloads.create(f"{user_file}:factory", size="tiny").build_model().in_features == 3
    source = workloads.resolve(f"{user_file}:Sized")
    assert (source.kind, source.name, source.path) == ("file", "models.py:Sized", str(user_file))


def test_a_user_class_may_take_an_option_named_size(user_file, capsys):
    """`list FILE.py:MyGPT --wopt size=full` raised TypeError: workloads.create() got multiple values for keyword
    argument 'size' (--size is ddpbench's, passed beside the options)."""
    from harness import cli

    assert workloads.create(f"{user_file}:OwnSize", size="tiny", options={"size": 7}).build_model().in_features == 7
    assert cli.main(["list", f"{user_file}:OwnSize", "--wopt", "size=7"]) == 0
    out = capsys.readouterr().out
    assert (
        "16 parameters" in out
        and "  --wopt: its keyword arguments in effect, size=7 (--wopt) (docs/your-model.md)\n" in out
    )  # once size=3
    assert cli.main(["list", f"{user_file}:Sized", "--wopt", "width=7"]) == 0
    assert (
        "  --wopt: its keyword arguments in effect, width=7 (--wopt) (docs/your-model.md)\n" in capsys.readouterr().out
    )


def test_the_example_file_runs_as_a_workload_from_any_folder(tmp_path, monkeypatch):
    copy = tmp_path / "my_workload.py"
    copy.write_text((ROOT / "examples" / "my_workload.py").read_text())
    monkeypatch.chdir(tmp_path)
    source = workloads.resolve("my_workload.py:MyModel")  # relative: made absolute for the ranks
    assert source.spec == f"{copy}:MyModel"
    assert torch.isfinite(torch.tensor(one_step(source.create(size="tiny", options={"width": 16}))))
    assert len([line for line in copy.read_text().splitlines() if line.strip()]) <= 25


def test_a_folder_of_yours_with_a_reports_package_shadows_none_of_ddpbenchs(tmp_path):
    """A user's file beside a reports/ (or harness/) folder: ddpbench's own packages are found first. In a fresh
    interpreter started elsewhere, where an editable install finds them after every path entry."""
    import subprocess

    mine = tmp_path / "mine"
    (mine / "reports").mkdir(parents=True)
    (mine / "reports" / "__init__.py").write_text("raise ImportError('the user folder reports package')\n")
    (mine / "my_workload.py").write_text((ROOT / "examples" / "my_workload.py").read_text())
    code = (f"import workloads; workloads.resolve({str(mine / 'my_workload.py')!r} + ':MyModel')\n"
            "import reports.pages, harness; print(reports.pages.__file__, harness.__file__)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert all(Path(found).is_relative_to(ROOT) for found in done.stdout.split())


def test_a_user_model_whose_own_check_refuses_an_option_is_one_line_before_any_rank(capsys, tmp_path):
    """A review's --wopt heads=3 failed in every rank of every configuration (nn.MultiheadAttention's assert), twice
    under auto, where a zoo option is one line: the meta build's own check now is too."""
    (tmp_path / "att.py").write_text(
        textwrap.dedent("""
        import torch
        from torch import nn


        class Att:
            def __init__(self, width: int = 16, heads: int = 2):
                self.width, self.heads = width, heads

            def build_model(self):
                return nn.Sequential(nn.Linear(self.width, self.width), nn.MultiheadAttention(self.width, self.heads))

            def make_batch(self, batch_size, *, device, generator):
                return torch.randn(batch_size, self.width, device=device, generator=generator)

            def loss(self, model, batch):
                return model(batch).mean()
    """)
    )
    results = tmp_path / "r"
    spec = f"{tmp_path / 'att.py'}:Att"
    assert cli.main(["bench", "--workloads", spec, "--wopt", "heads=3", "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert "att.py:Att.build_model() raised AssertionError: embed_dim must be divisible by num_heads" in err
    assert err.count("\n") == 1 and not results.exists()
    # an error that may be the meta device's own (a tensor formatted in an f-string) is the ranks' to report
    (tmp_path / "fmt.py").write_text(
        (tmp_path / "att.py")
        .read_text()
        .replace(
            "        return nn.Sequential(",
            "        print(f'{torch.ones(1).sum():.3f}')\n        return nn.Sequential(",
        )
    )
    assert cli.main(["bench", "--dry-run", "--workloads", f"{tmp_path / 'fmt.py'}:Att", "--results", str(results)]) == 0


def test_a_user_forward_that_raises_leaves_its_own_traceback_for_the_failed_row(tmp_path, user_file, single_rank):
    config = BenchConfig(gpus=1, impls=("stock",), workloads=(f"{user_file}:Explodes",), size="tiny", steps=1,
                         warmup=0, baseline=False)  # fmt: skip
    configurations = expand(config, device="cpu")
    with pytest.raises(ValueError, match="my forward is broken"):
        worker.run_configurations(plan_for(tmp_path, configurations), single_rank)
    [failure] = faults.read_rank_failures(tmp_path, configurations[0].config_id)
    assert failure["error"] == "ValueError: my forward is broken"
    assert f'File "{user_file}", line 15, in loss' in (tmp_path / failure["error_file"]).read_text()
    assert store.read_configs(tmp_path).empty  # the launcher records the failed row, and the run goes on


def test_ddps_unused_parameters_are_named_not_given_by_index(tmp_path, single_rank):
    """A DLRM file with an embedding its forward never used failed with '(indices 3 of model.parameters())': the
    rank names them from the model's parameters that train (a frozen one before them shifts no index)."""
    unused = tmp_path / "unused.py"
    unused.write_text(USER_FILE + textwrap.dedent("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.frozen, self.used = nn.Linear(4, 4).requires_grad_(False), nn.Linear(4, 2)
                self.spare = nn.Embedding(10, 2)

            def forward(self, x):
                return self.used(self.frozen(x))


        class Unused(Sized):
            def build_model(self):
                return Net()
        """))  # fmt: skip
    config = BenchConfig(gpus=1, impls=("stock",), workloads=(f"{unused}:Unused",), size="tiny", steps=2, warmup=0,
                         baseline=False, workload_options=(("width", ("4",)),))  # fmt: skip
    configurations = expand(config, device="cpu")
    with pytest.raises(RuntimeError):
        worker.run_configurations(plan_for(tmp_path, configurations), single_rank)
    [failure] = faults.read_rank_failures(tmp_path, configurations[0].config_id)
    assert "the model's parameters (spare.weight); --opt find_unused_parameters=true" in failure["error"]


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("torchvision:convnext", "unknown torchvision model 'convnext'; did you mean convnext_base, convnext_large, "
                                 "convnext_small, convnext_tiny"),
        ("hf:lama", "unknown transformers model type 'lama'; did you mean"),
        ("torchvision:nope", "unknown torchvision model 'nope'; the names: alexnet, convnext_base, "),  # none near
        ("hf:/no/such/config.json", "transformers configuration '/no/such/config.json' does not exist"),
        ("hf:meta-llama/Llama-2-7b", "/meta-llama/Llama-2-7b'); a Hugging Face Hub id is never downloaded: give "
                                     "hf:llama (its default configuration; --wopt sets its fields), or hf:PATH of "),
        ("nowhere/missing.py:MyModel", "workload file 'nowhere/missing.py' does not exist"),
        ("nonesuch_package_x.models:Net", "workload module 'nonesuch_package_x.models' cannot be imported"),
        ("mlpp", "unknown workload 'mlpp'; choose one of bert, gpt2, mlp"),
        ("convnext_tiny", "unknown workload 'convnext_tiny'; did you mean torchvision:convnext_tiny? choose one of "),
        ("llama", "unknown workload 'llama'; did you mean hf:llama? choose one of bert, gpt2, mlp"),
        ("model:", "workload 'model:' is not a spec"),
    ],
)  # fmt: skip
def test_a_spec_that_names_nothing_is_one_line_exit_2(capsys, tmp_path, spec, said):
    assert said in refused(capsys, tmp_path, "--workloads", spec)


@pytest.mark.parametrize("command", ["bench", "list", "predict"])
def test_a_file_that_is_no_python_file_is_one_line_exit_2_in_every_command(capsys, tmp_path, command):
    """`--workloads notes.txt:Net` (a path, so read as a file) raised AttributeError: 'NoneType' object has no
    attribute 'loader', a traceback in bench, list and predict alike."""
    (tmp_path / "notes.txt").write_text("class Net: pass\n")
    spec = f"{tmp_path / 'notes.txt'}:Net"
    said = "workload file 'notes.txt' is not a Python file; give FILE.py:NAME"
    if command == "bench":
        assert said in refused(capsys, tmp_path, "--workloads", spec)
        return
    argv = ["list", spec] if command == "list" else ["predict", "--workload", spec, "--cluster", "dgx-h100"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("spec", "whole", "part"),
    [
        ("hf:whisper", "WhisperForConditionalGeneration (speech to text, on audio features)", "WhisperForCausalLM"),
        ("hf:clip", "CLIPModel (images matched to texts, on both together)", "CLIPForImageClassification"),
    ],
)  # fmt: skip
def test_a_zoo_model_whose_default_class_is_a_part_of_it_is_refused(capsys, tmp_path, spec, whole, part):
    """hf:whisper built WhisperForCausalLM, its decoder without the encoder (stock DDP failed on the unused
    cross-attention, and FSDP became "the answer"), and hf:clip CLIP's vision tower alone, each under the name of the
    whole model: refused in bench and list, saying what it trains as; asked for by --wopt task, the part is built."""
    said = refused(capsys, tmp_path, "--workloads", f"mlp,{spec}", "--dry-run")
    assert f"{spec} is not benched: transformers trains {spec[3:]} whole as {whole}" in said
    assert f"; {part}, its " in said and "(--wopt task=" in said
    assert cli.main(["list", spec]) == 2 and capsys.readouterr().err == said
    task = workloads.create(spec, size="tiny").task
    workloads.resolve(spec).check_options({"task": task})  # the part, named: no refusal
    assert type(workloads.create(spec, size="tiny", options={"task": task}).build_model()).__name__ == part
    with pytest.raises(ConfigError, match=r"benches that part; hf:llama4_text is its text model\)$"):
        workloads.resolve("hf:llama4").check_options({})  # a multimodal model whose text model has its own type
    with pytest.raises(
        ConfigError,
        match=r"whole as Gemma3ForConditionalGeneration \(text from images and text, on "
        r"both together\), its causal_lm class too, .* does not feed; hf:gemma3_text",
    ):
        workloads.resolve("hf:gemma3").check_options({"task": "causal_lm"})  # failed in every rank: no vocab_size


def test_list_of_a_zoo_name_without_its_zoo_names_the_spec(capsys):
    """`list vit_b_16` named the strategies, workloads and clusters there are, not torchvision:vit_b_16."""
    assert cli.main(["list", "vit_b_16"]) == 2
    assert capsys.readouterr().err.startswith("ddpbench: error: ddpbench list 'vit_b_16': did you mean "
                                              "torchvision:vit_b_16? name a strategy (")  # fmt: skip
    assert workloads._zoo.specs_named("xlm-roberta") == ["hf:xlm-roberta"] and workloads._zoo.specs_named("x/y") == []


def test_a_models_folder_is_read_as_its_config_json(tmp_path):
    """hf:FOLDER, a model's files downloaded (config.json among them), was refused as no configuration file."""
    folder = tmp_path / "Llama-2-7b"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": 3}')
    source = workloads.resolve(f"hf:{folder}")
    assert source.path == str(folder / "config.json") and source.name == "hf:Llama-2-7b/config.json"


def test_a_module_found_nowhere_is_refused_before_torch_is_imported(tmp_path, monkeypatch):
    """A walkthrough's `bench --dry-run --workloads tv:vit` took 20 s (torch's import, on a busy CPU) to say that
    module 'tv' cannot be imported: it is said before the command's imports now. A package in the working folder,
    which the command imports from there, passes the check."""
    import subprocess

    from workloads._zoo import unfindable

    script = ("import sys\nfrom harness import cli\ntry:\n    cli.main(sys.argv[1:])\nexcept SystemExit as e:\n"
              "    print(e.code, 'torch' in sys.modules)")  # fmt: skip
    ran = subprocess.run([sys.executable, "-c", script, "bench", "--dry-run", "--workloads", "tv:vit", "--results",
                          str(tmp_path / "r")], capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert ran.stdout.split() == ["2", "False"], ran
    said = "workload module 'tv' cannot be imported: ModuleNotFoundError: No module named 'tv'"
    assert ran.stderr == f"ddpbench: error: {said}\n" and not (tmp_path / "r").exists()
    (tmp_path / "here_pkg").mkdir()
    (tmp_path / "here_pkg" / "__init__.py").write_text("")
    assert unfindable("here_pkg.models:Net") == (
        "workload module 'here_pkg.models' cannot be imported: ModuleNotFoundError: No module named 'here_pkg'"
    )
    monkeypatch.chdir(tmp_path)
    assert unfindable("here_pkg.models:Net") is None  # the rest (its models, Net) is resolve's to say
    assert unfindable("hf:llama") is None and unfindable("tv/x.py:M") is None and unfindable("json:loads") is None


def test_a_torchvision_name_it_lacks_is_refused_before_torch_is_imported(tmp_path):
    """`list torchvision:resnet1888` took 12-21 s to be refused (torch's and torchvision's imports): the names are
    read from torchvision's source, the very ones its registry lists, and one it lacks is refused in resolve's
    words before any import."""
    import subprocess

    import torchvision.models as models

    from workloads._zoo import torchvision_names, unfindable, vision

    assert torchvision_names() == set(models.list_models(module=models))
    with pytest.raises(ConfigError) as raised:
        vision.torchvision_source("resnet1888")
    assert unfindable("torchvision:resnet1888") == str(raised.value) and unfindable("torchvision:resnet18") is None
    script = ("import sys\nfrom harness import cli\ntry:\n    cli.main(sys.argv[1:])\nexcept SystemExit as e:\n"
              "    print(e.code, 'torch' in sys.modules)")  # fmt: skip
    ran = subprocess.run([sys.executable, "-c", script, "list", "torchvision:resnet1888"], capture_output=True,
                         text=True, cwd=Path(cli.__file__).parents[1])  # fmt: skip
    assert ran.stdout.split() == ["2", "False"] and ran.stderr == f"ddpbench: error: {raised.value}\n", ran


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("fasterrcnn_resnet50_fpn", "is a detection model: it trains on each image's boxes and labels"),
        ("deeplabv3_resnet50", "is a segmentation model: it trains on a class for every pixel"),
        ("r3d_18", "is a video model: it takes clips of frames (torchvision.models.video); ddpbench trains "
                   "torchvision's classification models, on random images and a label each"),
    ],
)  # fmt: skip
def test_a_torchvision_model_of_another_task_is_refused_saying_why(name, said):
    """`torchvision:fasterrcnn_resnet50_fpn` was an "unknown torchvision model" (did you mean wide_resnet50_2?): a
    model torchvision has, refused as a typo. It is one of another task, said so, the same before and after the
    import, with the classification models it is built on where it has one."""
    from workloads._zoo import unfindable, vision

    with pytest.raises(ConfigError) as raised:
        vision.torchvision_source(name)
    assert str(raised.value).startswith(f"torchvision:{name} {said}") and "unknown" not in str(raised.value)
    assert unfindable(f"torchvision:{name}") == str(raised.value)
    assert ("nearest classification models: wide_resnet50_2, resnet50" in str(raised.value)) == ("resnet" in name)


def test_torchvision_names_read_another_way_are_left_to_the_import(tmp_path, monkeypatch):
    """A model registered other than by `@register_model()` or `@register_model("NAME")` (a call, a name not a literal,
    two of them) makes the source's names unknown (None): a name torchvision has is never refused by one missing it."""
    import importlib.machinery
    import importlib.util

    from workloads import _zoo

    folder = tmp_path / "torchvision"
    (folder / "models").mkdir(parents=True)
    (folder / "models" / "a.py").write_text("@register_model()\ndef net_a(): ...\n\n@_api.register_model(name='b')"
                                            "\ndef net_b(): ...\n")  # fmt: skip
    spec = importlib.machinery.ModuleSpec("torchvision", None, is_package=True)
    spec.submodule_search_locations = [str(folder)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    _zoo.torchvision_names.cache_clear()
    monkeypatch.setattr(_zoo, "torchvision_names", _zoo.torchvision_names.__wrapped__)
    assert _zoo.torchvision_names() == {"net_a", "b"}
    assert _zoo.unfindable("torchvision:net_b") == "unknown torchvision model 'net_b'; did you mean net_a?"
    others = ("@register_model(NAME)\ndef c(): ...", "register_model()(c)", "@register_model('c', 'd')\ndef c(): ...")
    for other in others:
        (folder / "models" / "c.py").write_text(other)
        assert _zoo.torchvision_names() is None and _zoo.unfindable("torchvision:c") is None, other


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("Missing", "models.py defines no 'Missing' (its classes with build_model(): Explodes, NoLoss, NoParameters, "
                    "OwnSize, Sized, TupleLoss)"),  # once also its helper functions
        ("sized", "models.py defines no 'sized'; did you mean 'Sized'? (its classes with build_model(): "),
        ("NoLoss", "models.py:NoLoss lacks loss (a workload defines build_model(), make_batch(batch_size, *, device, "
                   "generator), loss(model, batch))"),
        ("NOT_CALLABLE", "models.py:NOT_CALLABLE is not a class or a factory (it is a int)"),
        ("NoParameters", "models.py:NoParameters.build_model() returns a ReLU with no parameter that requires a "
                         "gradient: data parallelism has nothing to train or synchronise"),  # once StopIteration
        ("TupleLoss", "models.py:TupleLoss.loss() returned a tuple, not a scalar tensor"),  # once every row failed
        ("Plain", "models.py:Plain is an nn.Module (a model), not a workload: name the class whose build_model() "
                  "returns it (its classes with build_model(): Explodes, NoLoss, NoParameters, OwnSize, Sized, "
                  "TupleLoss)"),  # once 'missing 1 required positional argument: 'width''
        ("Sized", "models.py:Sized() cannot be built: TypeError: Sized.__init__() missing 1 required positional "
                  "argument: 'width'; give it with --wopt width=N\n"),
    ],
)  # fmt: skip
def test_a_user_file_without_a_workload_is_one_line_naming_the_file(capsys, tmp_path, user_file, name, said):
    assert said in refused(capsys, tmp_path, "--workloads", f"{user_file}:{name}")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("def f(:\n    pass\n", "raised SyntaxError: invalid syntax (broken.py, line 1)\n"),  # once also the importer's
        ('import json\n\nDATA = json.loads("x")\n', "(char 0) (line 3)\n"),  # once json's own line 355
    ],
)
def test_a_user_file_that_fails_to_import_is_named_by_its_own_line(capsys, tmp_path, text, said):
    broken = tmp_path / "broken.py"
    broken.write_text(text)
    assert refused(capsys, tmp_path, "--workloads", f"{broken}:Model").endswith(said)


def test_a_user_file_that_fails_to_import_is_one_line_naming_it_and_the_line(capsys, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(
        textwrap.dedent("""
        import torch

        NUMBER = undefined_name + 1
    """)
    )
    said = refused(capsys, tmp_path, "--workloads", f"{broken}:Model")
    assert (
        "workload file broken.py: importing it raised NameError: name 'undefined_name' is not defined (line 4)" in said
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--workloads", "mlp", "--wopt", "colour=red"], "--wopt colour: no chosen workload takes it (workload 'mlp' "
                                                        "has no option colour; valid options: classes)"),
        (["--workloads", "hf:llama", "--wopt", "colour=red"], "hf:llama has no configuration field colour"),
        (["--workloads", "hf:llama", "--wopt", "hidden_sise=64"], "hf:llama has no configuration field hidden_sise "
         "(did you mean hidden_size?); options are its configuration's fields (LlamaConfig)"),  # once no suggestion
        (["--workloads", "mlp", "--wopt", "clases=3"], "has no option clases (did you mean classes?); valid options"),
        (["--workloads", "torchvision:squeezenet1_1", "--wopt", "num_clases=3"],
         "torchvision:squeezenet1_1 takes no option num_clases (did you mean num_classes?); its options: dropout"),
        (["--workloads", "gpt2", "--wopt", "seq_len=64"], "workload 'gpt2' has no option seq_len; valid options: "
         "none; the zoo's models take their configuration's fields, e.g. --workloads hf:gpt2"),  # the docs' advice
        (["--workloads", "torchvision:squeezenet1_1", "--wopt", "colour=red"],
         "torchvision:squeezenet1_1 takes no option colour; its options: dropout, image_size, num_classes)"),
        # (version, which squeezenet1_1's builder fixes, once offered)
        (["--workloads", "torchvision:convnext_tiny", "--wopt", "colour=red"],
         "torchvision:convnext_tiny takes no option colour; its options: image_size, layer_scale, num_classes, "
         "stochastic_depth_prob)"),  # once swallowed, then offered block and block_setting, no --wopt's to give
        (["--workloads", "torchvision:vit_b_16", "--wopt", "colour=red"],  # once offered num_layers (fixed) and
         "torchvision:vit_b_16 takes no option colour; its options: attention_dropout, dropout, image_size, "
         "num_classes, representation_size)"),  # norm_layer (a layer) too
        (["--workloads", "torchvision:regnet_y_400mf", "--wopt", "colour=red"],  # the meta device refuses its build
         "torchvision:regnet_y_400mf takes no option colour; its options: image_size, num_classes, stem_width)"),
        (["--workloads", "torchvision:regnet_y_400mf", "--wopt", "stem_width=0"],
         "ddpbench: error: torchvision:regnet_y_400mf cannot be built with stem_width=0: ZeroDivisionError"),
        # once failed in every rank
        (["--workloads", "torchvision:vit_b_16", "--wopt", "image_size=40"], "--wopt image_size=40 is not valid for "
         "torchvision:vit_b_16; give a multiple of its patch, 16 (e.g. 32 or 48)"),  # once a traceback, then
        # torchvision's assert: "Input shape indivisible by patch size!", without the valid values
        (["--workloads", "torchvision:vit_b_16", "--wopt", "image_size=100"], "e.g. 96 or 112)"),
        (["--workloads", "torchvision:convnext_tiny", "--wopt", "image_size=16"], "--wopt image_size=16 is not valid "
         "for torchvision:convnext_tiny; give a whole number ≥ 32, its smallest input"),  # once failed in every rank
        (["--workloads", "torchvision:vit_l_16", "--wopt", "num_layers=4"], "torchvision:vit_l_16 cannot be built "
         "with num_layers=4: its builder fixes num_layers (the architecture named; --size sets only image_size and "
         "num_classes, 32 and 10 at tiny); for another num_layers, name another model (vit_b_16, vit_b_32, "),  # once
        # only "got multiple values for keyword argument 'num_layers'"
        (["--workloads", "hf:llama", "--wopt", "task=seq2seq"], "--wopt task=seq2seq is not valid for hf:llama: "
         "transformers has no llama model for it; its tasks: causal_lm"),  # once failed in every rank
        (["--workloads", "mlp,hf:llama", "--wopt", "colour=red"], "--wopt colour: no chosen workload takes it "
         "(workload 'mlp' has no option colour; valid options: classes) (hf:llama has no configuration field colour"),
        (["--workloads", f"mlp,{ROOT / 'examples' / 'my_workload.py'}:MyModel", "--wopt", "width=abc"],
         "--wopt width='abc' is not valid: my_workload.py:MyModel takes width: int"),  # once named mlp's options
        (["--workloads", "mlp", "--wopt", "classes=many"], "classes: 'many' is not a whole number"),
        (["--workloads", "mlp,hf:llama", "--wopt", "classes=0"],
         "workload mlp: option classes=0 is not valid; give a whole number ≥ 1"),
        (["--workloads", "torchvision:squeezenet1_1", "--wopt", "image_size=0"],
         "--wopt image_size=0 is not valid for torchvision:squeezenet1_1; give a whole number ≥ 1"),  # once ignored
        (["--workloads", "hf:llama", "--wopt", "num_hidden_layers=2,-1"],
         "--wopt num_hidden_layers=-1 is not valid for hf:llama; give a whole number ≥ 1"),  # once built no layers
        (["--workloads", "hf:llama", "--size", "tiny", "--wopt", "num_attention_heads=4", "--wopt",
          "num_key_value_heads=3"],  # once failed in every rank
         "hf:llama at --size tiny: num_attention_heads=4 is not a multiple of num_key_value_heads=3"),
        (["--workloads", "hf:llama", "--size", "tiny", "--wopt", "num_attention_heads=3"],  # the heads' width follows
         "hf:llama at --size tiny: hidden_size=64 is not a multiple of num_attention_heads=3"),
        (["--workloads", "hf:gpt2", "--size", "small", "--wopt", "n_head=3"],  # checked at the run's size
         "hf:gpt2 at --size small: hidden_size=256 is not a multiple of num_attention_heads=3"),
        (["--workloads", "hf:gpt2", "--wopt", "n_layer=abc"],  # said once, as predict's --train-wopt now says it
         "ddpbench: error: --wopt n_layer=abc is not valid for hf:gpt2; give a whole number ≥ 1\n"),
        (["--workloads", "hf:llama", "--wopt", "seq_len=0"],
         "--wopt seq_len=0 is not valid for hf:llama; give a whole number ≥ 1"),  # once fell back to the default
        (["--workloads", f"{ROOT / 'examples' / 'my_workload.py'}:MyModel", "--wopt", "width=abc"],
         "--wopt width='abc' is not valid: my_workload.py:MyModel takes width: int"),  # once failed in every rank
        (["--workloads", "mlp", "--wopt", "classes=2", "--wopt", "classes=3"], "option 'classes' is given twice"),
    ],
)  # fmt: skip
def test_a_workload_option_nothing_takes_is_one_line_exit_2(capsys, tmp_path, args, said):
    assert said in refused(capsys, tmp_path, *args)


@pytest.mark.parametrize(("workload", "wopt", "said"), [
    ("mlp", "classes", "--wopt 'classes' is not key=value[,value…] (mlp takes classes=VALUE)"),  # once no keys named
    ("mlp", "colour", "--wopt 'colour' is not key=value[,value…] (workload 'mlp' has no option colour; valid options: "
                      "classes)"),
    ("mlp", "colour=red", "--wopt colour: no chosen workload takes it (workload 'mlp' has no option colour; valid "
                          "options: classes)"),  # list once said it without the flag
    ("mlp", "classes=abc", "--wopt classes=abc is not valid for mlp (classes: 'abc' is not a whole number (≥ 1))"),
    ("gpt2", "seq_len=64", "--wopt seq_len: no chosen workload takes it (workload 'gpt2' has no option seq_len; valid "
                           "options: none; the zoo's models"),  # a registered workload that takes none
])  # fmt: skip
def test_a_bad_workload_option_is_the_same_line_from_list_bench_and_its_dry_run(capsys, tmp_path, workload, wopt,
                                                                                said):  # fmt: skip
    """Each refusal of a --wopt, one line naming it and the workload's keys, exit 2, nothing written, said alike by
    `list`, `bench` and `bench --dry-run` (list said 'classes: 'abc' is not a whole number' of classes=abc)."""
    lines = {refused(capsys, tmp_path, "--workloads", workload, "--wopt", wopt, *dry) for dry in ([], ["--dry-run"])}
    assert cli.main(["list", workload, "--wopt", wopt]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert lines | {err} == {err} and said in err, (lines, err)


def test_a_bare_key_one_workload_takes_names_only_that_one_in_one_bracket(capsys, tmp_path):
    """'(mlp takes classes=VALUE) (workload 'gpt2' has no option classes; valid options: (none) (the zoo's …))':
    where one takes the key, the others' refusals are beside the point."""
    said = refused(capsys, tmp_path, "--workloads", "mlp,gpt2", "--wopt", "classes", "--dry-run")
    assert said == "ddpbench: error: --wopt 'classes' is not key=value[,value…] (mlp takes classes=VALUE)\n", said
    said = refused(capsys, tmp_path, "--workloads", "gpt2", "--wopt", "classes", "--dry-run")
    assert said.count("(") == 1 and said.endswith(": docs/your-model.md)\n"), said  # one bracket, not nested


def test_a_value_one_workload_refuses_is_refused_though_another_takes_it(capsys, tmp_path, user_file):
    loose = user_file.parent / "loose.py"
    loose.write_text("from models import Sized\n\n\ndef Loose(**options):\n    return Sized(width=3)\n")
    said = refused(capsys, tmp_path, "--workloads", f"{user_file}:Sized,{loose}:Loose", "--wopt", "width=8,abc")
    assert "--wopt width='abc' is not valid: models.py:Sized takes width: int" in said  # once ran Sized unsaid


def test_a_user_class_refuses_an_option_it_does_not_take_naming_those_it_does(capsys, tmp_path, user_file):
    said = refused(capsys, tmp_path, "--workloads", f"{user_file}:Sized", "--wopt", "depth=3")
    assert "models.py:Sized takes no option depth; its options: width" in said
    said = refused(capsys, tmp_path, "--workloads", f"{user_file}:Sized", "--wopt", "widht=3")
    assert "models.py:Sized takes no option widht (did you mean width?); its options: width" in said


def test_workload_options_sweep_where_they_apply_and_name_the_rows():
    config = BenchConfig(gpus=1, impls=("stock",), workloads=("mlp", "hf:llama"), size="tiny", baseline=False,
                         workload_options=(("num_hidden_layers", ("1", "2")),))  # fmt: skip
    names = [(c.workload, c.workload_spec, c.workload_options) for c in expand(config, device="cpu")]
    assert names == [("mlp", "mlp", {}), ("hf:llama[num_hidden_layers=1]", "hf:llama", {"num_hidden_layers": 1}),
                     ("hf:llama[num_hidden_layers=2]", "hf:llama", {"num_hidden_layers": 2})]  # fmt: skip


def test_config_ids_and_file_names_stay_short_and_safe_whatever_the_spec(tmp_path):
    long_dir = tmp_path / ("d" * 80)
    long_dir.mkdir()
    path = long_dir / "a model with spaces.py"
    path.write_text(USER_FILE)
    config = BenchConfig(gpus=1, impls=("stock",), workloads=(f"{path}:Sized",), size="tiny", baseline=False,
                         workload_options=(("width", ("3",)),))  # fmt: skip
    [cfg] = expand(config, device="cpu")
    assert cfg.workload == "a model with spaces.py:Sized[width=3]"
    assert len(cfg.config_id) <= 120 and all(c.isalnum() or c in "._-~" for c in cfg.config_id)


def test_files_of_one_name_in_two_folders_are_two_workloads_named_by_their_folders(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "models.py").write_text(USER_FILE)
    specs = (f"{tmp_path}/a/models.py:Explodes", f"{tmp_path}/b/models.py:Explodes")
    config = BenchConfig(gpus=1, impls=("stock",), workloads=specs, size="tiny", baseline=False)
    assert [c.workload for c in expand(config, device="cpu")] == ["a/models.py:Explodes", "b/models.py:Explodes"]


def test_the_docs_show_the_example_file_as_it_is():
    doc = (ROOT / "docs" / "your-model.md").read_text()
    shown = doc.split("```python\n", 1)[1].split("```", 1)[0]
    example = (ROOT / "examples" / "my_workload.py").read_text()
    code = example.split('"""', 2)[2]  # without its docstring
    assert shown.strip() == code.strip()


@pytest.mark.parametrize("name", ["squeezenet1_1", "convnext_tiny", "vit_b_16", "resnet18", "regnet_y_400mf"])
def test_a_torchvision_models_options_read_from_its_source_are_those_its_build_finds(name):
    """`list torchvision:NAME --wopt BAD=1` refuses BAD before torch's import by the options torchvision's source shows
    (vision_keywords): they are the ones building the model finds (squeezenet's version and vit's num_layers fixed by
    the builder, convnext's stochastic_depth_prob popped first, so given); a RegNet's chain is no plain calls: the
    build decides. (torchvision 0.29.1's 80 models: 63 alike, 17 unsure, none different.)"""
    from workloads._zoo import vision, vision_keywords

    build = vision.torchvision_source(name).build
    model_class, weightless = vision._meta_class(build)
    found = vision._givable(build, model_class, vision.keywords(model_class), weightless) | set(vision.OWN_OPTIONS)
    read = vision_keywords.torchvision_options(name)
    assert read == found if not name.startswith("regnet") else read is None


def test_list_refuses_an_option_a_torchvision_model_takes_nowhere_before_importing_torch():
    """It imported torch and torchvision (10-20 s on a busy CPU) to say the option was none of the model's."""
    import subprocess

    code = (
        "import sys; from harness import cli; "
        "print(cli.main(['list', 'torchvision:squeezenet1_1', '--wopt', 'colour=red']), 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["2", "False"]
    assert done.stderr.strip() == (
        "ddpbench: error: --wopt colour: no chosen workload takes it (torchvision:squeezenet1_1 takes no option "
        "colour; its options: dropout, image_size, num_classes)"
    )
