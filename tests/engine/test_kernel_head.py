"""What may stand before a kernel rule's phrase: the kernel's own head, not words of the message."""

from __future__ import annotations

import pytest

from qwen_triage.engine.origin import kernel_anchored

PHRASE = "MES failed to response msg=14"


@pytest.mark.parametrize("head", [
    "",
    "amdgpu 0000:c5:00.0: amdgpu: ",
    "[drm] ",
    # DRM_ERROR names the function (with the compiler's suffix) and the module in one bracket
    "[drm:mes_v11_0_submit_pkt_and_poll_completion.constprop.0 [amdgpu]] *ERROR* ",
])
def test_a_kernel_head_is_passed_over(head: str) -> None:
    message = head + PHRASE
    assert kernel_anchored(message, len(head), len(message))


@pytest.mark.parametrize("head", [
    "the user wrote that " * 3,  # words of a sentence, not a head
    "[" + "x" * 120 + "] ",      # a bracket longer than any subsystem or function name
])
def test_text_that_is_no_head_is_not(head: str) -> None:
    message = head + PHRASE
    assert not kernel_anchored(message, len(head), len(message))
