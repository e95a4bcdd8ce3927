"""diffusers' pipelines on a CPU-only torch: a tiny randomly initialised DDPM pipeline that generates (healthy), the
same pipeline moved to CUDA, xFormers attention asked for where xFormers is not installed, and a hub pipeline loaded
offline that was never downloaded.

The tiny pipeline is built in the script (a two-block UNet2DModel and a DDPM scheduler), so nothing is downloaded.
"""

from functools import partial

from case import OFFLINE_ENV, Program, Release, script_case

TINY = '''\
import torch
from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel

torch.manual_seed(0)
unet = UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16),
                   norm_num_groups=4, down_block_types=("DownBlock2D", "DownBlock2D"),
                   up_block_types=("UpBlock2D", "UpBlock2D"))
pipe = DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=10))
'''

_case = partial(script_case, prelude=TINY, env=OFFLINE_ENV, timeout=240)

CASES = [
    _case("ddpm-cpu-healthy", [], 'print(pipe(num_inference_steps=2, output_type="np").images.shape)\n',
          "healthy: two denoising steps of a tiny DDPM pipeline on the CPU", exit="ok"),
    _case("pipeline-to-cuda-cpu-torch", ["runtime.backend_mismatch"], 'pipe.to("cuda")\n',
          "pipe.to('cuda') with the CPU-only torch build installed"),
    _case("xformers-attention-not-installed", ["runtime.backend_mismatch"],
          "pipe.enable_xformers_memory_efficient_attention()\n",
          "enable_xformers_memory_efficient_attention() in an environment without xFormers"),
    _case("from-pretrained-offline-not-cached", ["download.incomplete"],
          "from diffusers import DiffusionPipeline\n"
          "DiffusionPipeline.from_pretrained('stabilityai/stable-diffusion-xl-base-1.0')\n",
          "a hub pipeline loaded with HF_HUB_OFFLINE=1 on a host where it was never downloaded"),
]

PROGRAM = Program(
    name="diffusers",
    releases=[
        # 0.27 imports huggingface_hub.cached_download, which huggingface_hub 0.26 removed
        Release(label="0.27.2", requirements=["torch==2.13.0", "diffusers==0.27.2", "huggingface_hub<0.26", "numpy<2"]),
        Release(label="0.42.1", requirements=["torch==2.13.0", "diffusers==0.42.1", "numpy"]),
    ],
    cases=CASES,
    dist="diffusers",
)
