"""Write the bundled pack's build-time artefact (read by rulepack.prebuilt): ``python -m qwen_triage.rulepack.prebuild``.

What the wheel's build hook (``hatch_build.py``) and an image build run: the bundled YAML parsed and
validated from scratch (no cache, no artefact), written atomically, readable by all and writable by
its owner only, as installed code is.
"""

from __future__ import annotations

import sys
from pathlib import Path

from qwen_triage.atomicfile import write_atomic
from qwen_triage.rulepack.pack import (
    RulePack,
    _key_prefix,
    bundled_files,
    load_pack,
    pack_from_data,
    pack_to_data,
    read_all,
)
from qwen_triage.rulepack.paths import bundled_rules_dir
from qwen_triage.rulepack.prebuilt import ARTEFACT, artefact_bytes, prebuilt_data


def load_prebuilt(base: Path, contents: dict[Path, bytes], path: Path | None = None) -> RulePack | None:
    """The pack an artefact holds for these contents (None: missing, stale or not trusted)."""
    data = prebuilt_data(base, contents, _key_prefix(), path)
    return pack_from_data(data) if data is not None else None


def build_artefact(out: Path = ARTEFACT) -> Path:
    """Validate the bundled pack from its YAML and write its artefact to ``out``."""
    base = bundled_rules_dir()
    contents = read_all(bundled_files(base))
    if contents is None:
        raise OSError(f"cannot read the bundled rules under {base}")
    pack = load_pack(bundled=True, prebuilt=False)
    blob = artefact_bytes(base, contents, _key_prefix(), pack_to_data(pack))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, blob, mode=0o644)
    return out


def main(argv: list[str]) -> int:
    """``python -m qwen_triage.rulepack.prebuild [OUT]`` (default: where rulepack.prebuilt reads it)."""
    out = build_artefact(Path(argv[0]) if argv else ARTEFACT)
    print(f"validated bundled pack written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
