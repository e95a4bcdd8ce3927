"""llm-compressor (``pip install llmcompressor``, vLLM's quantization tool) as users run its ``oneshot`` before
serving the result with vLLM: FP8 dynamic quantization and GPTQ W4A16 with a local calibration set (healthy, on
the CPU), and the recipe and data mistakes of its issue tracker: a scheme name it has no preset for, a recipe YAML
naming a modifier that does not exist, a recipe path that is not there, SmoothQuant without calibration data, and
the default calibration set (Open-Platypus) asked for on a node without network.

The model is the tiny random Qwen2 of ``make_tiny_qwen.py``; every case runs offline. One release only: every
earlier one pins a torch older than the CPU wheel the harness installs (0.8-0.12 ask for torch 2.7-2.9).
"""

from case import Case, Program, Release, tiny_model_case

# The user's script: argv[1] the model, argv[2] the scenario.
ONESHOT = '''\
import sys
from llmcompressor import oneshot
from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier

model, step = sys.argv[1], sys.argv[2]
if step == "fp8":
    oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme="FP8_DYNAMIC", ignore=["lm_head"]),
            output_dir="out")
elif step == "gptq-local":
    from datasets import Dataset
    data = Dataset.from_dict({"text": ["the quick brown fox jumps over the lazy dog " * 4] * 8})
    oneshot(model=model, dataset=data, recipe=GPTQModifier(targets="Linear", scheme="W4A16", ignore=["lm_head"]),
            output_dir="out", num_calibration_samples=8, max_seq_length=32)
elif step == "gptq-hub-data":
    oneshot(model=model, dataset="open_platypus",
            recipe=GPTQModifier(targets="Linear", scheme="W4A16", ignore=["lm_head"]),
            output_dir="out", num_calibration_samples=8, max_seq_length=32)
elif step == "bad-scheme":
    oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme="W3A3", ignore=["lm_head"]),
            output_dir="out")
elif step == "yaml-typo":
    with open("recipe.yaml", "w") as f:
        f.write("quant_stage:\\n  quant_modifiers:\\n    QuantizationModifer:\\n      targets: [Linear]\\n"
                "      scheme: W8A8\\n      ignore: [lm_head]\\n")
    oneshot(model=model, recipe="recipe.yaml", output_dir="out")
elif step == "recipe-missing":
    oneshot(model=model, recipe="recipes/w4a16_recipe.yaml", output_dir="out")
elif step == "smoothquant-no-data":
    from llmcompressor.modifiers.smoothquant import SmoothQuantModifier
    oneshot(model=model, recipe=[SmoothQuantModifier(smoothing_strength=0.8),
                                 GPTQModifier(targets="Linear", scheme="W8A8", ignore=["lm_head"])], output_dir="out")
'''


def _oneshot(id: str, expect: list[str], step: str, note: str, *, model: str = "{work}/tiny", build: bool = True,
             exit: str = "fail") -> Case:
    return tiny_model_case(id, expect, "oneshot.py", ONESHOT, f"{model} {step}", note, build=build, exit=exit)


CASES = [
    _oneshot("fp8-dynamic-healthy", [], "fp8", "healthy: FP8_DYNAMIC quantization (no calibration data) saved",
             exit="ok"),
    _oneshot("gptq-w4a16-local-data-healthy", [], "gptq-local",
             "healthy: GPTQ W4A16 calibrated on a small local data set, saved", exit="ok"),
    _oneshot("gptq-calibration-set-offline", ["download.incomplete"], "gptq-hub-data",
             "GPTQ with the default calibration set (open_platypus) on a node without network, nothing cached"),
    _oneshot("scheme-unknown", ["config.bad_argument"], "bad-scheme",
             "QuantizationModifier(scheme='W3A3'): a scheme name with no preset"),
    _oneshot("recipe-modifier-typo", ["config.bad_argument"], "yaml-typo",
             "a recipe YAML naming QuantizationModifer (a typo): no modifier of that type"),
    _oneshot("recipe-file-missing", ["config.bad_argument"], "recipe-missing",
             "recipe='recipes/w4a16_recipe.yaml', a path that does not exist here (copied from an example's folder)"),
    _oneshot("smoothquant-without-dataset", ["config.bad_argument"], "smoothquant-no-data",
             "SmoothQuant + GPTQ W8A8 run without a calibration data set"),
    _oneshot("model-dir-missing", ["config.bad_argument"], "fp8",
             "a local model path that does not exist on this node (offline, so it is no hub id either)",
             model="./models/Qwen3-8B", build=False),
]

PROGRAM = Program(
    name="llmcompressor",
    releases=[
        Release(label="0.14.0.1", requirements=["torch==2.13.0", "llmcompressor==0.14.0.1"]),
    ],
    cases=CASES,
    dist="llmcompressor",
)
