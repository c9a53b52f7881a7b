"""Which task a transformers architecture is benched at (seq2seq, masked LM, causal LM, image classification), and
the model class of it that transformers builds: its configuration's `architectures` decide first, then the first
task transformers has a class of the model type for; `--wopt task=…` overrides."""

from __future__ import annotations

from typing import Any

from harness.protocols import ConfigError

TASKS = ("seq2seq", "masked_lm", "causal_lm", "image_classification")
MAPPINGS = {
    "seq2seq": ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "AutoModelForSeq2SeqLM"),
    "masked_lm": ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "AutoModelForMaskedLM"),
    "causal_lm": ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "AutoModelForCausalLM"),
    "image_classification": ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "AutoModelForImageClassification"),
}
ARCHITECTURE_SUFFIXES = {"ForConditionalGeneration": "seq2seq", "ForSeq2SeqLM": "seq2seq", "ForMaskedLM": "masked_lm",
                         "ForCausalLM": "causal_lm", "LMHeadModel": "causal_lm",
                         "ForImageClassification": "image_classification"}  # fmt: skip


TRAINED_WHOLE_BY = {
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES": "speech to text, on audio features",
    "MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES": "images matched to texts, on both together",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES": "text from images and text, on both together",
}
"""Tasks ddpbench makes no batch for whose class is a model type's whole architecture (WhisperForConditionalGeneration,
CLIPModel), and what they train on: where a type has one, a class of TASKS that differs is a part of it alone."""


def check_task(name: str, model_type: str, task: str, *, by_default: bool = False) -> None:
    """A task transformers has no model of this type for is bad input (it once failed in every rank), and so is one
    chosen `by_default` (neither --wopt task nor the configuration's `architectures` named it) whose class is a part
    alone of an architecture trained whole at another task: hf:whisper built WhisperForCausalLM, its decoder without
    the encoder (its cross-attention unused, so DDP failed), and hf:clip CLIP's vision tower alone. A type whose
    class at `task` is that whole model is refused at any task: gemma3's, fed tokens alone, failed in every rank."""
    whole, built = whole_class(model_type), class_name(model_type, task)
    if whole and whole[0] == built:
        raise ConfigError(
            f"{name} is not benched: transformers trains {model_type} whole as {built} ({whole[1]}), "
            f"its {task} class too, which ddpbench's {task} batch (no images, no audio) does not "
            f"feed{_text_model(model_type)}"
        )
    if by_default and whole and whole[0] != built:
        raise ConfigError(
            f"{name} is not benched: transformers trains {model_type} whole as {whole[0]} ({whole[1]}), "
            f"which ddpbench makes no batch for; {class_name(model_type, task)}, its {task} class, is "
            f"a part of it alone (--wopt task={task} benches that part{_text_model(model_type)})"
        )
    if task not in TASKS:
        raise ConfigError(f"{name} task {task!r} is not one of {', '.join(TASKS)}")
    if task not in tasks(model_type):
        raise ConfigError(f"--wopt task={task} is not valid for {name}: transformers has no {model_type} "
                          f"model for it; its tasks: {', '.join(tasks(model_type))}")  # fmt: skip


def choose_task(fields: dict[str, Any]) -> str:
    """The task an architecture trains at: its configuration's `architectures` say, else the first of
    TASKS that transformers has a model class for."""
    for architecture in fields.get("architectures") or ():
        for suffix, task in ARCHITECTURE_SUFFIXES.items():
            if architecture.endswith(suffix):
                return task
    model_type = fields["model_type"]
    trained = tasks(model_type)
    if trained:
        return trained[0]
    raise ConfigError(f"transformers model type {model_type!r} has no model for a task ddpbench trains "
                      f"({', '.join(TASKS)})")  # fmt: skip


def tasks(model_type: str) -> list[str]:
    """The tasks of TASKS that transformers has a model class of `model_type` for."""
    from transformers.models.auto import modeling_auto

    return [task for task in TASKS if model_type in getattr(modeling_auto, MAPPINGS[task][0])]


def class_name(model_type: str, task: str) -> str | None:
    """The class transformers builds for `model_type` at `task` (WhisperForCausalLM); None where it has none."""
    from transformers.models.auto import modeling_auto

    return getattr(modeling_auto, MAPPINGS[task][0]).get(model_type) if task in MAPPINGS else None


def whole_class(model_type: str) -> tuple[str, str] | None:
    """The class that is `model_type`'s whole architecture at a task of TRAINED_WHOLE_BY, and what that trains on."""
    from transformers.models.auto import modeling_auto

    for mapping, trains_on in TRAINED_WHOLE_BY.items():
        if whole := getattr(modeling_auto, mapping, {}).get(model_type):
            return whole, trains_on
    return None


def _text_model(model_type: str) -> str:
    """', or hf:llama4_text, its text model alone', where transformers has a model type of that name."""
    from transformers import CONFIG_MAPPING

    return f"; hf:{model_type}_text is its text model" if f"{model_type}_text" in CONFIG_MAPPING else ""
