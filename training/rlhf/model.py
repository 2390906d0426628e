"""The project's own instruction model: a byte-level BPE tokenizer trained on the corpus with `tokenizers`, and a
small Llama-style causal LM initialised from scratch (no hub download is possible here, and none is needed).

The model reads and writes numbers as slots (#1 is the instruction's first number; slots.py), one token each;
the digits left (default speeds, 1.57 for an unspecified turn) are split one per token. head_dim is 64 because
vLLM's CPU attention rejects 16. A pretrained base (base_model.py) or any other local Hugging Face causal-LM
directory can replace this model in every stage; it reads and writes plain numbers unless its config says
`number_slots`, and reads its prompt in its own chat template when its config has `chat_prompt`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from edge.config import setting
from edge.instruct.prompt import CHAT_SLOT
from edge.instruct.slots import SLOT_TOKENS
from training.errors import ConfigError

PAD, BOS, EOS = "<pad>", "<s>", "</s>"
# the plan grammar's fixed pieces as single tokens: a segment is then 4 of these and 16 digit/point/sign tokens
GRAMMAR_TOKENS = ['[{"vx":', '},{"vx":', ',"vy":', ',"wz":', ',"duration_s":', "}]"]
HEAD_DIMS = (32, 64, 128)  # the head sizes vLLM's CPU attention takes
DEVICES = ("auto", "cpu", "cuda")  # where a stage's tensors live; auto: cuda when torch sees a GPU


@dataclass
class ModelConfig:
    vocab_size: int = setting(640, "BPE target size (the trained vocabulary may be smaller)", ge=1)
    hidden_size: int = setting(128, "width of the model", ge=1)
    num_layers: int = setting(4, "decoder layers", ge=1)
    num_heads: int = setting(2, "attention heads; hidden_size / num_heads must be 32, 64 or 128", ge=1)
    intermediate_size: int = setting(512, "MLP width", ge=1)
    max_positions: int = setting(320, "longest prompt + plan in tokens", ge=1)

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads or self.hidden_size // self.num_heads not in HEAD_DIMS:
            raise ConfigError(
                f"hidden_size / num_heads must be one of {', '.join(map(str, HEAD_DIMS))} (vLLM's CPU attention "
                f"head sizes), got {self.hidden_size} / {self.num_heads}"
            )


def train_tokenizer(texts: Iterable[str], vocab_size: int):
    """A PreTrainedTokenizerFast (byte-level BPE, digits split, grammar pieces and number slots whole, BOS added to
    every text)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens([AddedToken(t, normalized=False) for t in (*GRAMMAR_TOKENS, *SLOT_TOKENS)])
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, tok.token_to_id(BOS))])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD, padding_side="left", model_max_length=512
    )


def new_model(tokenizer, config: ModelConfig, seed: int = 0, number_slots: bool = True):
    """A randomly initialised LlamaForCausalLM sized by `config` for `tokenizer`; `number_slots`: it reads an
    instruction's numbers as #1, #2, ... and writes plans with them (slots.py)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_heads,
        head_dim=config.hidden_size // config.num_heads,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        number_slots=number_slots,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg)


def torch_device(name: str = "auto"):
    """The torch device a `device` setting names; ConfigError for cuda on a machine without one."""
    import torch

    if name not in DEVICES:
        raise ConfigError(f"device must be one of {', '.join(DEVICES)}, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device cuda: torch sees no CUDA GPU here (use auto or cpu)")
    return torch.device("cuda" if name != "cpu" and torch.cuda.is_available() else "cpu")


def chat_prompt_of(tokenizer, system: str | None = None) -> str | None:
    """The tokenizer's chat template rendered for one user turn and the assistant's reply (CHAT_SLOT where the
    user's text goes; edge.instruct.prompt.in_chat fills it), None if it has no template. `system`: the system
    turn's text (None: the template's own default, if it has one)."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    turns = [{"role": "user", "content": CHAT_SLOT}]
    if system is not None:
        turns.insert(0, {"role": "system", "content": system})
    text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    if text.count(CHAT_SLOT) != 1:
        raise ConfigError(f"the tokenizer's chat template does not place the user's text once: {text!r}")
    return text


def load_model(model_dir: str | Path, kind: str = "causal", device: str = "auto"):
    """(model, tokenizer) from a local directory; kind "causal" or "reward" (sequence classification, 1 label);
    the model on `device` (DEVICES)."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    from training.errors import TrainingError

    path = Path(model_dir)
    if not (path / "config.json").is_file():
        raise TrainingError(f"{path} is not a model directory (no config.json)")
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if kind == "reward":
        model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, dtype="float32")
        model.config.pad_token_id = tokenizer.pad_token_id
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    return model.to(torch_device(device)).eval(), tokenizer
