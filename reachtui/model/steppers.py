"""One decoding step of a prefilled batch: the model's forward over each row's last token, with the mask,
positions and KV cache it needs from step to step. The decoding loop (`decode.py`) asks a stepper for the
next logits and, when rows have finished, to keep only the others.

- `GrowingStepper` (eager): the cache grows by one column per step (GrowingLayers written in place, or
  any transformers cache, sliding windows included), the 2D mask is a view of a buffer allocated once,
  and transformers builds the 4D mask, exactly as a model's own forward does.
- `FullStepper` (plain full-attention models): the KV cache holds its full capacity from the start
  (routing.GrowingLayer's full mode), a step writes its keys/values at a device-side column and attends
  to every column under a boolean mask kept on the device, and advances column, positions and mask in
  place: no shape and no host value changes from step to step. On CUDA it is captured once as a CUDA
  graph after one eager step and replayed for every later step (captured again after the batch shrinks).
  A model whose step cannot be captured (a host sync inside, a device map, ...) runs the same step
  eagerly; the runner is told once (`on_fallback`) and stops trying.
"""

from __future__ import annotations

import torch

from reachtui.errors import first_line
from reachtui.model import routing


class GrowingStepper:
    """Eager steps with a growing cache (see the module)."""

    captures = replays = 0

    def __init__(self, model, cache, attention, capacity: int) -> None:
        b, w = attention.shape
        self.model, self.cache = model, cache
        self.mask = attention.new_zeros((b, capacity))
        self.mask[:, :w] = attention
        self.n = w
        self.positions = attention.sum(-1, keepdim=True) - 1
        self.eager = 0

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.eager += 1
        self.mask[:, self.n] = 1
        self.n += 1
        self.positions.add_(1)
        return routing.forward_last_logits(self.model, tokens[:, None], self.mask[:, : self.n], self.positions,
                                           self.cache)

    def keep(self, index: torch.Tensor) -> None:
        routing.select_rows(self.cache, index)
        self.mask, self.positions = self.mask[index], self.positions[index]


def _is_sync_error(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and "synchroniz" in str(exc)


class FullStepper:
    """Full-capacity steps, eager or captured as a CUDA graph (see the module). The cache must have been
    made with `full=True`; `attention` is the prefill's [rows, width] mask. Every step attends to the whole
    capacity (the mask hides the columns not yet written): one graph serves every step of the batch.
    (Attending to the written columns rounded up to a span, one graph per span, was tried on an H200:
    slower at GSM8K scale, 157 s against 135 s for the routes probe, and closer to the memory's end.)"""

    def __init__(self, model, arch, cache, attention, capacity: int, *, capture: bool = False,
                 on_fallback=None) -> None:
        b, w = attention.shape
        device = attention.device
        self.model, self.arch, self.cache = model, arch, cache
        self.mask = torch.zeros((b, capacity), dtype=torch.bool, device=device)
        self.mask[:, :w] = attention.bool()
        self.positions = attention.sum(-1, keepdim=True) - 1
        self.clock = routing.Clock(torch.tensor([w - 1], dtype=torch.long, device=device), w)
        routing.set_clock(cache, self.clock)
        self.tokens = torch.zeros((b, 1), dtype=torch.long, device=device)
        self.capture = capture and device.type == "cuda"
        self.on_fallback = on_fallback
        self.graph = None
        self.logits = None
        self.eager_steps = 0        # since the last change of shape
        self.checked = False        # the first eager step looked for host syncs
        self.captures = self.replays = self.eager = 0      # for the runner's statistics

    def _body(self) -> torch.Tensor:
        """The step itself: everything it reads and writes lives on the device at fixed addresses."""
        self.clock.column.add_(1)
        self.positions.add_(1)
        self.mask.index_fill_(1, self.clock.column, True)
        with routing.decode_attention(self.arch):
            return routing.forward_last_logits(self.model, self.tokens, self.mask[:, None, None, :], self.positions,
                                               self.cache)

    def _undo(self) -> None:
        """Take back a body that failed before its forward wrote anything that a retry would not overwrite."""
        self.clock.column.sub_(1)
        self.positions.sub_(1)

    def _fallback(self, why: str) -> None:
        self.capture = False
        self.graph = None
        if self.on_fallback is not None:
            self.on_fallback(why)

    def _eager(self) -> torch.Tensor:
        if not (self.capture and not self.checked):
            return self._body()
        # the first step of a stepper that will be captured: a synchronizing op in the forward would make
        # the capture fail; find it here, where the step can still be taken back and run again
        self.checked = True
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")
        try:
            return self._body()
        except RuntimeError as exc:
            if not _is_sync_error(exc):
                raise
            torch.cuda.set_sync_debug_mode(previous)
            self._undo()
            self._fallback(f"the model's decode step synchronizes with the host ({first_line(exc)})")
            return self._body()
        finally:
            torch.cuda.set_sync_debug_mode(previous)

    def _capture(self) -> None:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits = self._body()
        self.graph, self.logits = graph, logits
        self.captures += 1

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.tokens.copy_(tokens.view(-1, 1))
        self.clock.n += 1
        if self.graph is not None:
            self.graph.replay()
            self.replays += 1
            return self.logits
        if self.capture and self.eager_steps >= 1:
            try:
                self._capture()
            except Exception as exc:  # noqa: BLE001 - any failure to capture: the same step, eagerly
                torch.cuda.synchronize()
                self._fallback(first_line(exc))
            else:
                self.graph.replay()
                self.replays += 1
                return self.logits
        out = self._eager()
        self.eager_steps += 1
        self.eager += 1
        return out

    def keep(self, index: torch.Tensor) -> None:
        routing.select_rows(self.cache, index)
        self.mask = self.mask.index_select(0, index)
        self.positions = self.positions.index_select(0, index)
        self.tokens = self.tokens.index_select(0, index)
        self.graph, self.logits = None, None        # new shapes: captured again after one eager step
        self.eager_steps = 0
