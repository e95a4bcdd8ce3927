"""faster-whisper (on CTranslate2): a model name the release does not know, a local model directory that is not a
converted model, and the voice-activity filter run on a generated tone (healthy). No case downloads a model.
"""

from functools import partial

from case import OFFLINE_ENV, Program, Release, script_case

TONE = """\
import wave
import numpy as np
sr = 16000
t = np.arange(sr * 3) / sr
sig = (0.3 * np.sin(2 * np.pi * 220 * t) * (t > 1.0)).astype(np.float32)
with wave.open("tone.wav", "wb") as w:
    w.setnchannels(1)
    w.setsampwidth(2)
    w.setframerate(sr)
    w.writeframes((sig * 32767).astype(np.int16).tobytes())
"""

VAD = TONE + """
from faster_whisper.audio import decode_audio
from faster_whisper.vad import VadOptions, get_speech_timestamps
audio = decode_audio("tone.wav", sampling_rate=16000)
print("decoded", audio.shape, audio.dtype)
print("speech chunks", get_speech_timestamps(audio, VadOptions(min_silence_duration_ms=200)))
"""

_case = partial(script_case, env=OFFLINE_ENV, timeout=120)


CASES = [
    _case("vad-on-tone-healthy", [], VAD,
          "healthy: decode a WAV and run the Silero voice-activity filter (ONNX Runtime on the CPU)", exit="ok"),
    _case("unknown-model-size", ["config.bad_argument"],
          "from faster_whisper import WhisperModel\nWhisperModel('large-v4', device='cpu')\n",
          "a model name that is not in the release's table (a typo, or a name newer than the release): "
          "https://github.com/McCloudS/subgen/issues/154"),
    _case("model-dir-not-converted", ["model.file_missing"],
          "import os\nos.makedirs('whisper-large-v3', exist_ok=True)\nopen('whisper-large-v3/config.json', 'w').write('{}')\n"
          "from faster_whisper import WhisperModel\nWhisperModel('./whisper-large-v3', device='cpu')\n",
          "a local folder with no model.bin (the Hugging Face checkpoint, not its CTranslate2 conversion, or a "
          "download that stopped)"),
]

PROGRAM = Program(
    name="fasterwhisper",
    releases=[
        Release(label="1.0.3", requirements=["faster-whisper==1.0.3", "ctranslate2==4.4.0", "numpy<2", "requests"]),
        Release(label="1.2.1", requirements=["faster-whisper==1.2.1", "ctranslate2==4.8.5"]),
    ],
    cases=CASES,
    dist="faster-whisper",
)
