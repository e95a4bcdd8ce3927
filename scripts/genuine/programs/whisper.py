"""openai-whisper (the reference implementation, `pip install openai-whisper`): a model name it does not list, a
checkpoint download on a host that cannot resolve the download server (an air-gapped GPU node), and a transcription
that works (healthy).

No real checkpoint is downloaded: the healthy case first writes a randomly initialised one-layer model in the
checkpoint format ``whisper.load_model`` reads (``dims`` + ``model_state_dict``); its transcript is noise, but every
step of loading and decoding is the real one.
"""

from functools import partial

from case import Program, Release, script_case

MAKE_TINY = '''\
import torch
from whisper.model import ModelDimensions, Whisper

dims = ModelDimensions(n_mels=80, n_audio_ctx=1500, n_audio_state=64, n_audio_head=2, n_audio_layer=1,
                       n_vocab=51865, n_text_ctx=448, n_text_state=64, n_text_head=2, n_text_layer=1)
torch.manual_seed(0)
torch.save({"dims": dims.__dict__, "model_state_dict": Whisper(dims).state_dict()}, "tiny-random.pt")
'''

_case = partial(script_case, prelude="import whisper\n", env={"OMP_NUM_THREADS": "1"}, timeout=240)
_tiny = partial(_case, prelude="import whisper\n" + MAKE_TINY)

CASES = [
    _case("unknown-model-name", ["config.bad_argument"], "whisper.load_model('large-v4')\n",
          "a model name whisper does not list (a typo, or a name from another Whisper port)"),
    _case("download-host-unresolvable", ["download.incomplete"],
          "whisper.load_model('tiny', download_root='models')\n",
          "the first load downloads the checkpoint, and this host cannot resolve the download server (no network, "
          "no DNS, no proxy set): urllib's URLError under whisper's _download"),
    _tiny("transcribe-cpu-healthy", [],
          "import numpy as np\nm = whisper.load_model('tiny-random.pt')\n"
          "r = m.transcribe(np.zeros(16000 * 3, dtype=np.float32), language='en', temperature=0.0)\n"
          "print('segments:', len(r['segments']))\n",
          "healthy: a local checkpoint transcribes three seconds of audio on the CPU (with whisper's FP16-on-CPU "
          "warning)", exit="ok"),
]

PROGRAM = Program(
    name="whisper",
    releases=[
        # an sdist whose setup.py imports pkg_resources: built with an older setuptools, outside build isolation
        Release(label="20231117", requirements=["torch==2.13.0", "openai-whisper==20231117", "numpy<2"],
                first=["setuptools<70", "wheel"], pip_args=["--no-build-isolation"]),
        Release(label="20250625", requirements=["torch==2.13.0", "openai-whisper==20250625", "numpy"]),
    ],
    cases=CASES,
    dist="openai-whisper",
)
