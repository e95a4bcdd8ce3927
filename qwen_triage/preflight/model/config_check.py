"""config.json and the tokenizer files: present, parseable, and in agreement with the weights.

vLLM picks the model class from ``architectures``/``model_type`` and sizes
every tensor from config.json, so a config from another release fails the
load even when every shard is intact.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from qwen_triage.engine.check_finding import CheckFinding, finding
from qwen_triage.preflight.findings import act, ev, fix
from qwen_triage.preflight.model import jsontext
from qwen_triage.rulepack.actions import Redownload

if TYPE_CHECKING:
    from pathlib import Path

    from qwen_triage.preflight.model.scan_state import ScanState


_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


TOKENIZER_SETS = (("tokenizer.json",), ("tokenizer.model",), ("vocab.json", "merges.txt"), ("qwen.tiktoken",))


# The causal-LM class transformers registers for each model_type.
ARCH_FOR_TYPE = {
    "qwen2": "Qwen2ForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
}


def _weights_mismatch(root: Path, summary: str, text: str) -> CheckFinding:
    return finding("preflight.model.config-weights", summary, evidence=[ev(root / "config.json", text)])


def _unparseable(path: Path, check_id: str, exc: Exception) -> CheckFinding:
    return finding(
        check_id,
        f"{path.name} cannot be parsed: {exc}.",
        evidence=[ev(path, str(exc))],
        fix=[fix(f"download {path.name} again", act(Redownload, what=path.name))],
    )


def check_config(st: ScanState, has_weights: bool, tensor_shapes: dict[str, list[int]]) -> dict[str, Any] | None:
    path = st.root / "config.json"
    if not path.is_file():
        if has_weights:
            st.findings.append(
                finding(
                    "preflight.model.no-config",
                    "the directory has weights but no config.json; vLLM and transformers cannot load it.",
                    evidence=[ev(path, "config.json: No such file")],
                )
            )
        return None
    try:
        cfg = jsontext.loads(path.read_text(encoding="utf-8"))
        if not isinstance(cfg, dict):
            raise ValueError("not a JSON object")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        st.file("config.json", "config", path.stat().st_size, ok=False, detail=str(exc))
        st.findings.append(_unparseable(path, "preflight.model.config-invalid", exc))
        return None
    st.file("config.json", "config", path.stat().st_size, detail=f"{cfg.get('model_type')}")
    archs = cfg.get("architectures") or []
    model_type = cfg.get("model_type")
    if not archs or not model_type:
        missing = " and ".join(k for k, v in (("architectures", archs), ("model_type", model_type)) if not v)
        st.findings.append(
            finding(
                "preflight.model.config-arch",
                f"config.json has no {missing}; vLLM and transformers need both to pick the model class.",
                evidence=[ev(path, f"{missing} missing")],
            )
        )
    elif (want := ARCH_FOR_TYPE.get(model_type)) and archs[0].endswith("ForCausalLM") and archs[0] != want:
        st.findings.append(
            finding(
                "preflight.model.config-arch",
                f"model_type {model_type!r} goes with {want}, but architectures says {archs[0]}.",
                variant="disagree",
                evidence=[ev(path, f'"architectures": {json.dumps(archs)}, "model_type": "{model_type}"')],
                fix=[fix(f'set architectures to ["{want}"] if this is a plain {model_type} checkpoint')],
            )
        )

    if tensor_shapes:
        _config_vs_weights(st, cfg, tensor_shapes)
    return cfg


def _config_vs_weights(st: ScanState, cfg: dict[str, Any], shapes: dict[str, list[int]]) -> None:
    text_cfg = {**cfg, **cfg["text_config"]} if isinstance(cfg.get("text_config"), dict) else cfg
    layers = text_cfg.get("num_hidden_layers")
    indices = {int(m.group(1)) for name in shapes if (m := _LAYER.search(name))}
    if isinstance(layers, int) and indices and max(indices) + 1 != layers:
        st.findings.append(
            _weights_mismatch(
                st.root,
                f"config.json says {layers} layers, the weights hold {max(indices) + 1}.",
                f"num_hidden_layers = {layers}; highest layer in the weights: {max(indices)}",
            )
        )
    embed = next((shapes[n] for n in shapes if n.endswith("embed_tokens.weight")), None)
    vocab, hidden = text_cfg.get("vocab_size"), text_cfg.get("hidden_size")
    if embed and len(embed) == 2 and isinstance(vocab, int) and isinstance(hidden, int) and embed != [vocab, hidden]:
        st.findings.append(
            _weights_mismatch(
                st.root,
                f"the embedding is {embed[0]} x {embed[1]}, config.json says vocab_size {vocab} x hidden_size "
                f"{hidden}.",
                f"embed_tokens.weight shape {embed}; vocab_size = {vocab}, hidden_size = {hidden}",
            )
        )
    tied = bool(text_cfg.get("tie_word_embeddings", False))
    if not tied and embed and not any(n.startswith("lm_head.") for n in shapes):
        st.findings.append(
            _weights_mismatch(
                st.root,
                "tie_word_embeddings is false but the weights have no lm_head.",
                "tie_word_embeddings = false; no lm_head.* tensor",
            )
        )


def check_tokenizer(st: ScanState, cfg: dict[str, Any] | None) -> None:
    present = [s for s in TOKENIZER_SETS if all((st.root / f).is_file() for f in s)]
    if not present:
        st.findings.append(
            finding(
                "preflight.model.no-tokenizer",
                "none of tokenizer.json, tokenizer.model, vocab.json + merges.txt is present; the server "
                "needs --tokenizer pointing at the original repository.",
                evidence=[ev(st.root / "tokenizer.json", "tokenizer.json: No such file")],
            )
        )
        return
    for group in present:
        for f in group:
            st.file(f, "tokenizer", (st.root / f).stat().st_size)
    vocab = (cfg or {}).get("vocab_size")
    tok_path = st.root / "tokenizer.json"
    if not isinstance(vocab, int) or not tok_path.is_file():
        return
    try:
        tok = jsontext.loads(tok_path.read_text(encoding="utf-8"))
        ids = set((tok.get("model") or {}).get("vocab", {}).values()) | {
            a.get("id") for a in tok.get("added_tokens", [])
        }
        ids.discard(None)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
        st.fail("tokenizer.json", str(exc))
        st.findings.append(
            _unparseable(tok_path, "preflight.model.tokenizer-invalid", exc)
        )
        return
    if ids and max(ids) >= vocab:
        st.findings.append(
            finding(
                "preflight.model.tokenizer-vocab",
                f"tokenizer.json has token id {max(ids)}, but vocab_size is {vocab}: those tokens would index "
                "past the embedding.",
                evidence=[ev(tok_path, f"max token id {max(ids)}; config vocab_size {vocab}")],
            )
        )
