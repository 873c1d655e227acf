"""Exact search's candidates on a torch device (`retrieval.device`: cuda, or auto where torch sees
one): float32 matrix products and a top-k, in blocks, on the device. Only the candidates are found
there; retrieval.flat scores them again on the host in its fixed order, checks with the same bound
that no chunk left out can reach the cut, and orders ties by chunk index, so a run on the GPU has
the CPU run's chunks and scores, bit for bit. Tested on torch's CPU backend (device "cpu")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from retrieval_bench.core.errors import InputError
from retrieval_bench.retrieval.flat import Candidates

SCORE_ENTRIES = 1 << 26  # question x chunk products per device block (256 MiB of float32)


def torch_device(setting: str, where: str) -> str | None:
    """`retrieval.device` as the torch device the candidates are found on, or None: FAISS on this
    CPU (`cpu`, and `auto` without a GPU). A GPU asked for that is not here is one line naming the key."""
    if setting == "cpu":
        return None
    try:
        import torch
    except ImportError:
        if setting == "auto":
            return None
        raise InputError(f"{where}.device {setting} needs torch (pip install torch), which is not installed") from None
    if not torch.cuda.is_available():
        if setting == "auto":
            return None
        raise InputError(
            f"{where}.device {setting}: torch sees no CUDA device on this machine "
            f"(torch {torch.__version__}, a {'CPU-only' if torch.version.cuda is None else 'CUDA'} build); "
            f"set {where}.device to cpu or auto"
        )
    number = int(setting.partition(":")[2] or 0)
    if number >= torch.cuda.device_count():
        raise InputError(
            f"{where}.device {setting}: this machine has {torch.cuda.device_count()} CUDA device(s), numbered from 0"
        )
    return "cuda" if setting == "auto" else setting


@contextlib.contextmanager
def ieee_float32() -> Iterator[None]:
    """float32 products in full float32 (no TF32, no bf16): flat's error bound assumes them."""
    import torch

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def candidates_on(device: str, chunks: np.ndarray) -> Candidates:
    """A function (questions, width) -> (float32 scores, chunk indices), each question's `width` best
    by float32 products on `device`, best first (equal scores in any order); the corpus is copied to
    the device once."""
    import torch

    on_device = torch.from_numpy(np.ascontiguousarray(chunks, dtype=np.float32)).to(device)

    def candidates(questions: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        query = torch.from_numpy(np.ascontiguousarray(questions, dtype=np.float32)).to(device)
        step = max(width, SCORE_ENTRIES // max(len(query), 1))
        best = torch.full((len(query), 0), -torch.inf, device=device)
        where = torch.zeros((len(query), 0), dtype=torch.int64, device=device)
        with torch.inference_mode(), ieee_float32():
            for c0 in range(0, len(on_device), step):
                scores, found = (query @ on_device[c0 : c0 + step].T).topk(min(width, len(on_device) - c0), dim=1)
                best, at = torch.cat([best, scores], dim=1).topk(min(width, best.shape[1] + scores.shape[1]), dim=1)
                where = torch.cat([where, found + c0], dim=1).gather(1, at)
        return best.cpu().numpy(), where.cpu().numpy()

    return candidates
