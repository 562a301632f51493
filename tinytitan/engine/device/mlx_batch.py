"""Continuous batching for the mlx backend (``--max-concurrent N``), on mlx-lm's ``BatchGenerator``.

``MlxBatch`` is the resident model's ``Batch``: the device worker adds rows, removes cancelled ones
and steps it. Each step decodes one token for every running row, then prefills one chunk
(``PREFILL_STEP`` tokens) of at most one newcomer — so a newcomer's prompt never stalls the running
streams for longer than one chunk; with no stream to hold up, chunks are ``PREFILL_ALONE`` tokens
(large products run faster) — but never so large that one layer of it is more than ``LAYER_WORK``
tokens' work, and such a lone chunk is left between two layers once its row is cancelled
(``interrupt.py``: a client that leaves frees the device within one small step). mlx-lm supplies
the batched KV caches (``BatchKVCache``), the prefill/decode interleaving and per-row samplers and
logits processors; this module adds what serving needs around them:

- the prompt cache per row: a row starts from the longest cached prefix (memory or disk), and its
  KV state is stored back when it leaves;
- the KV cache's form: with ``kv`` (``--kv-bits``) every row's cache is ``kv/cache.py``'s quantized
  one, which batches like mlx-lm's ``BatchKVCache``;
- per-row samplers — our ``sampling.Sampler``, each owning the request's own PRNG key, so a row
  draws from its own random stream whatever shares the batch — penalties and grammar masks, built
  from the row's own request; a processor that fails (a grammar the sampler left) fails its own row;
- the end of a row: end of turn (``stop``, the end token not handed on) or its output cap
  (``length``) — the only place the cap is decided.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinytitan.engine.device.batch import Batch, Output, Row
from tinytitan.engine.device.draft_model import ModelDrafts
from tinytitan.engine.device.images import VIRTUAL_BASE, penalty_tokens
from tinytitan.engine.device.interrupt import Interrupted, LayerWatch, rewind
from tinytitan.engine.device.placement import device_context
from tinytitan.engine.device.sampling import make_processors, make_sampler
from tinytitan.engine.device.speculative import Speculator
from tinytitan.engine.errors import GenerationFailed, TinyTitanError
from tinytitan.engine.kv import masks
from tinytitan.engine.mlx_lm_adapter import TESTED, cache_problems, problems, set_prefill_step
from tinytitan.engine.request import Sampling

if TYPE_CHECKING:
    from tinytitan.engine.kv.form import KvForm
    from tinytitan.engine.prompt_cache.memory import PromptCache

__all__ = ["PREFILL_ALONE", "PREFILL_STEP", "MlxBatch"]

log = logging.getLogger("tinytitan.mlx")

PREFILL_STEP = 256  # prompt tokens per prefill step while other rows decode (the longest a newcomer holds them up)
PREFILL_ALONE = 2048  # … and while none does: BLIS multiplies 2048 rows ~3× faster a row than 256 (bench_decode.py)
_NULL = nullcontext()  # reusable: a step's contexts that do nothing


@dataclass(eq=False)
class _Running:
    row: Row
    uid: int
    error: BaseException | None = None
    decoding: bool = False  # its prompt is done and it has sampled a token
    cached: int = 0  # prompt tokens the prompt cache gave it
    todo: int = 0  # prompt tokens past those (mlx-lm's prompt progress counts these)
    prefilled: int = 0  # … of which prefilled so far; == todo once it is in the generation batch
    draftable: bool = False  # may draft (no grammar mask; see speculative.py)


class MlxBatch(Batch):
    def __init__(
        self,
        model: Any,
        prompt_cache: PromptCache,
        identity: str,
        eos: Sequence[int],
        max_rows: int,
        *,
        mask_for: Callable[[Row], Any] = lambda _row: None,
        sampler: Callable[[Sampling], Any] = make_sampler,
        processors: Callable[[Sampling, Sequence[int], int], list[Any]] = make_processors,
        prefill_step: int = PREFILL_STEP,
        prefill_alone: int = PREFILL_ALONE,
        device: str | None = None,
        counted: Callable[[int], None] = lambda _n: None,
        interruptible: bool = True,
        drafts: bool = False,
        draft_model: Any = None,
        kv: KvForm | None = None,
    ) -> None:
        from mlx_lm.generate import BatchGenerator

        self.model = model
        self.device = device  # "cpu": a catalog's <id>@cpu
        self.prompt_cache = prompt_cache
        self.identity = identity
        self.eos = frozenset(eos)
        self.max_rows = max(1, max_rows)
        self.prefill_step = prefill_step
        # a lone chunk may be left between layers (None: the model has no layers to watch, or not asked)
        self.watch = LayerWatch(model) if interruptible else None
        cap = self.watch.chunk_cap() if self.watch is not None else None
        self.prefill_alone = max(prefill_step, min(prefill_alone, cap or prefill_alone))
        self.mask_for = mask_for  # the row's grammar mask (built here, on the device thread), or None
        self.make_sampler = sampler  # per row, from its request (a benchmark may swap it)
        self.make_processors = processors
        self.counted = counted  # told how many tokens each step sampled (tests watch it for cancellation)
        self.peak_rows = 0  # the most rows one step decoded (tests, benchmarks)
        # per step: (rows decoded, prompt tokens prefilled, seconds) — tests, benchmarks
        self.steps: deque[tuple[int, int, float]] = deque(maxlen=4096)
        self._running: dict[int, _Running] = {}  # by uid
        self._by_row: dict[int, _Running] = {}  # by row id
        masks.install()  # a lone row's decode step without a mask (kv/masks.py)
        with self._on_device():
            self.gen = BatchGenerator(
                model,
                completion_batch_size=self.max_rows,
                prefill_batch_size=1,  # one prompt at a time (images.ImageModel relies on it)
                prefill_step_size=self.prefill_alone,  # its prompt batch's largest product; each step sets its own
            )
        # what this mlx-lm lacks of the adapter's contract turns off what needs it (one line, once)
        lacking = problems(self.gen)
        if kv is not None:
            from tinytitan.engine.kv.cache import QuantizedBatchKVCache

            if missing := cache_problems(QuantizedBatchKVCache):
                lacking["a quantized KV cache"] = missing
        _say_lacking(lacking)
        self.kv = kv if "a quantized KV cache" not in lacking else None  # every row's KV cache in this form
        self.sized_steps = "prefill chunks" not in lacking  # else every chunk is prefill_alone
        self._chunk: int | None = None  # the prefill chunk last set on the generator
        drafts = drafts and "drafts" not in lacking
        # prompt-lookup drafts, and the draft model's where given (speculative.py)
        self.speculator = Speculator(ModelDrafts(draft_model) if draft_model is not None else None) if drafts else None

    @property
    def rows(self) -> int:
        return len(self._running)

    def _on_device(self) -> AbstractContextManager[Any]:
        return _NULL if self.device is None else device_context(self.device)

    def add(self, row: Row) -> list[Output]:
        from mlx_lm.generate import StopSequences

        with self._on_device():
            mask = self.mask_for(row)
            tokens = list(row.tokens)
            cache, reused = self.prompt_cache.fetch(tokens, self.identity)
            if cache is None and self.kv is not None:
                from tinytitan.engine.kv.cache import row_caches

                cache = row_caches(self.model, self.kv)
            vision = getattr(row.prompt, "vision", None)  # images: features now, virtual ids for processors
            join = getattr(self.model, "join", None)  # a vision-language model (images.ImageModel)
            if join is not None:
                cache = join(row.id, vision, reused, cache)
            draftable = mask is None and vision is None  # a lookup draft must never propose a virtual id
            running = _Running(row, -1, cached=reused, todo=len(tokens) - reused, draftable=draftable)
            seen = penalty_tokens(tokens, vision) if vision is not None else tokens
            made = self.make_processors(row.request.sampling, seen, 0)
            processors = [self._guard(running, _seen_as(p, vision)) for p in made]
            if mask is not None:
                processors.append(self._guard(running, mask))  # last: penalties cannot re-open a masked token
            (uid,) = self.gen.insert(
                [tokens[reused:]],
                max_tokens=[row.max_new],
                caches=[cache] if cache is not None else None,
                all_tokens=[tokens[:reused]],
                samplers=[self.make_sampler(row.request.sampling)],
                logits_processors=[processors],
                stop_sequences=[StopSequences([[e] for e in self.eos])],
            )
        running.uid = int(uid)
        self._running[running.uid] = running
        self._by_row[row.id] = running
        return [Output(row, cached=reused)]

    @staticmethod
    def _guard(running: _Running, processor: Any) -> Any:
        """A processor whose failure fails its own row, not the batch."""

        def guarded(tokens: Any, logits: Any) -> Any:
            if running.error is not None:
                return logits
            try:
                return processor(tokens, logits)
            except Exception as exc:
                running.error = exc
                return logits

        return guarded

    def remove(self, row: Row) -> None:
        running = self._by_row.get(row.id)
        if running is not None:
            self._drop([running], keep=True)

    def _drop(self, leaving: list[_Running], *, keep: bool) -> None:
        """Take rows out of the batch; ``keep``: store their KV state in the prompt cache."""
        with self._on_device():
            caches = self.gen.remove([r.uid for r in leaving], return_prompt_caches=True)
            for running in leaving:
                self._prompt_done(running)
                del self._running[running.uid]
                del self._by_row[running.row.id]
                if keep:
                    cache, tokens = caches.get(running.uid, (None, None))
                    self._remember(cache, tokens)

    def step(self) -> list[Output]:
        began = time.perf_counter()
        decoding = prefilling = False
        for r in self._running.values():
            if r.decoding:
                decoding = True
            else:
                prefilling = True
        # mlx-lm reads the chunk size at each step: a short one only when it would hold up a stream
        if self.sized_steps and (chunk := self.prefill_step if decoding else self.prefill_alone) != self._chunk:
            set_prefill_step(self.gen, chunk)
            self._chunk = chunk
        lone = self._interruptible() if prefilling else None
        armed = self.watch.armed(lambda: lone.row.cancelled) if self.watch and lone else _NULL
        # mlx-lm's stats copy its counters twice a step: read only while a prompt is being prefilled
        stats = self.gen.stats() if prefilling else None
        try:
            with self._on_device(), stats or _NULL as counted, armed:
                responses = self.speculator.step(self.gen, self._draftable) if self.speculator else None
                prompts = []
                if responses is None:
                    prompts, responses = self.gen.next()
        except Interrupted:
            assert lone is not None
            self.steps.append((0, 0, time.perf_counter() - began))  # nothing of the chunk is kept
            self._interrupted(lone)
            return []
        for prompt in prompts:  # the public progress of every prompt, (done, todo)
            if (running := self._running.get(prompt.uid)) is not None:
                running.prefilled = int(prompt.progress[0])
        prefilled = counted.prompt_tokens if counted is not None else 0
        self.steps.append((len(responses), prefilled, time.perf_counter() - began))
        self.peak_rows = max(self.peak_rows, len(responses))
        self.counted(len(responses))
        outputs: list[Output] = []
        failed: list[_Running] = []
        for response in responses:
            running = self._running.get(response.uid)
            if running is None:
                continue
            if not running.decoding:
                self._prompt_done(running)
            running.decoding = True
            if running.error is not None:  # sampled from unmasked logits: dropped, and the row fails
                failed.append(running)
                outputs.append(Output(running.row, error=_row_error(running.error)))
                continue
            token = int(response.token)
            if response.finish_reason is None:
                outputs.append(Output(running.row, [token]))
                continue
            del self._running[running.uid]
            del self._by_row[running.row.id]
            with self._on_device():
                self._remember(response.prompt_cache, response.all_tokens)
            ended = [] if token in self.eos else [token]
            outputs.append(Output(running.row, ended, finish=str(response.finish_reason)))
        if failed:
            self._drop(failed, keep=False)
        return outputs

    def _interruptible(self) -> _Running | None:
        """The row whose prefill chunk this step may leave between layers: the one being prefilled
        (mlx-lm takes prompts in arrival order, one at a time), and only while no row is past its
        prompt — an interrupted step must not lose a token decoded in it — and a chunk is left before
        its last token (that one goes in with its first decode)."""
        if self.watch is None:
            return None
        first: _Running | None = None
        for running in self._running.values():
            if running.prefilled >= running.todo:
                return None
            first = first or running
        return first if first is not None and first.prefilled < first.todo - 1 else None

    def _interrupted(self, running: _Running) -> None:
        """``running`` was cancelled mid-chunk: it leaves, its KV state rewound to before the chunk."""
        self._prompt_done(running)
        del self._running[running.uid]
        del self._by_row[running.row.id]
        with self._on_device():
            caches = self.gen.remove([running.uid], return_prompt_caches=True)
            cache, tokens = caches.get(running.uid, (None, None))
            kept = rewind(cache, tokens, running.cached + running.prefilled)
            if kept is not None:
                self._remember(*kept)
        kept_tokens = len(kept[1]) if kept else 0
        log.debug("row %d left its prefill mid-chunk (%d prompt tokens kept)", running.row.id, kept_tokens)

    def _prompt_done(self, running: _Running) -> None:
        """``running``'s prompt is in (or it left): its image features are let go."""
        if getattr(running.row.prompt, "vision", None) is not None:
            self.model.release(running.row.id)

    def _draftable(self, uid: int) -> bool:
        running = self._running.get(uid)
        return running is not None and running.draftable and running.error is None

    def _remember(self, cache: list[Any] | None, tokens: list[int] | None) -> None:
        """Store a leaving row's KV state (it holds exactly ``tokens``) in the prompt cache."""
        if not cache or not tokens:
            return
        offset = getattr(cache[0], "offset", None)
        if not isinstance(offset, int) or offset != len(tokens):
            return
        self.prompt_cache.store(list(tokens), cache, self.identity)

    def close(self) -> None:
        if self.model is None:  # closed already (unloaded, then the worker let it go)
            return
        with self._on_device():
            self.gen.close()
        self.model = self.gen = None  # the generator holds the model too


_said: set[str] = set()
_CONSEQUENCES = {"drafts": "serving without drafts", "a quantized KV cache": "the KV cache is kept in full precision"}


def _say_lacking(lacking: dict[str, list[str]]) -> None:
    """One warning per process for each feature this mlx-lm cannot serve (``mlx_lm_adapter.problems``)."""
    import mlx_lm

    for feature, missing in lacking.items():
        if feature not in _said:
            _said.add(feature)
            consequence = _CONSEQUENCES.get(feature, "every prefill chunk is one size")
            log.warning(
                "mlx-lm %s lacks %s (checked against %s): %s",
                getattr(mlx_lm, "__version__", "?"),
                ", ".join(missing),
                f"mlx-lm {TESTED}",
                consequence,
            )


def _seen_as(processor: Any, vision: Any) -> Any:
    """``processor`` for a row with images: virtual ids in its token context read as the image token."""
    if vision is None:
        return processor
    image_token = vision.image_token_id

    def seen(tokens: Any, logits: Any) -> Any:
        import mlx.core as mx

        return processor(mx.where(tokens >= VIRTUAL_BASE, image_token, tokens), logits)

    return seen


def _row_error(error: BaseException) -> BaseException:
    if isinstance(error, TinyTitanError):
        return error
    log.error("a logits processor failed: %r", error)
    return GenerationFailed()
