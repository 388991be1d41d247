"""The launcher's changes to llama-cpp-python, made in the server's process before it loads its model (why each:
``llama_server``'s docstring). ``last_prompt_logits`` replaces private parts of ``llama_cpp.Llama`` (``eval``,
``_create_completion``, its ``_ctx`` and ``_batch``), which any release may change: it runs only on the versions it
was written and tested for (``SUPPORTED``), and names them otherwise."""

from __future__ import annotations

import re

# llama-cpp-python releases whose Llama internals the patch below was written for (tested: 0.3.36); the same range
# is declared in suber-env's `llama` extra.
SUPPORTED = ((0, 3, 36), (0, 4, 0))
SUPPORTED_TEXT = ">=0.3.36,<0.4"


def check_version(version: str) -> None:
    """Raise ``RuntimeError`` naming the supported range when ``version`` of llama-cpp-python is outside it."""
    parts = [int(p) for p in re.findall(r"\d+", version)[:3]]
    got = tuple(parts + [0] * (3 - len(parts)))
    low, high = SUPPORTED
    if not low <= got < high:
        raise RuntimeError(
            f"llama-cpp-python {version} is not supported by suber_env's llama.cpp launcher, which patches its private "
            f"Llama.eval and _create_completion: install llama-cpp-python{SUPPORTED_TEXT} "
            "(pip install 'suber-env[llama]'), or start the launcher with --prompt_logits all (no patch)"
        )


def without_extra_buffer_types() -> None:
    """Load every model without llama.cpp's extra CPU buffer types (``use_extra_bufts``: the AMX / repacked-Q4
    buffers whose first decode crashes with the 0.3.36 wheel on recent Xeons)."""
    import llama_cpp
    import llama_cpp.llama

    default = llama_cpp.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p

    llama_cpp.llama_model_default_params = params
    llama_cpp.llama.llama_cpp.llama_model_default_params = params  # the name Llama() reads


def last_prompt_logits() -> None:
    """Make ``llama_cpp.Llama`` compute, in a model loaded with ``logits_all``, only the logits of the last token
    of each evaluated chunk (the row a completion's ``logprobs`` and its sampler read), except while it answers an
    ``echo`` request with ``logprobs``. The other rows of ``Llama.scores`` are then left as they were."""
    import llama_cpp
    import numpy as np
    from llama_cpp import Llama

    if getattr(Llama, "_suber_last_logits", False):
        return
    check_version(llama_cpp.__version__)
    eval_all, create, to_logprobs = Llama.eval, Llama._create_completion, Llama.logits_to_logprobs

    class Rows:
        """The log-softmax of a logits matrix, computed for the rows sliced out of it only (a completion's
        ``logprobs`` slices the rows after the prompt out of the log-softmax of all rows)."""

        def __init__(self, logits):
            self.logits = logits

        def __getitem__(self, key):
            return to_logprobs(self.logits[key])

        def __len__(self):
            return len(self.logits)

        def __array__(self, dtype=None, copy=None):
            return np.asarray(to_logprobs(self.logits), dtype)

    def logits_to_logprobs(logits, axis: int = -1):
        if axis == -1 and isinstance(logits, np.ndarray) and logits.ndim == 2:
            return Rows(logits)
        return to_logprobs(logits, axis)

    def eval_last(self, tokens):
        if not self._logits_all or getattr(self, "_suber_every_row", False) or not tokens:
            return eval_all(self, tokens)
        self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
        for i in range(0, len(tokens), self.n_batch):
            batch = tokens[i : i + self.n_batch]
            n_past, n = self.n_tokens, len(batch)
            self._batch.set_batch(batch=batch, n_past=n_past, logits_all=False)  # outputs: the last token only
            self._ctx.decode(self._batch)
            self.input_ids[n_past : n_past + n] = batch
            row = np.ctypeslib.as_array(self._ctx.get_logits_ith(-1), shape=(self._n_vocab,))
            self.scores[n_past + n - 1, :] = row
            self.n_tokens += n
            self._requires_eval = False

    def create_completion(self, *args, **kwargs):
        self._suber_every_row = bool(kwargs.get("echo")) and kwargs.get("logprobs") is not None
        try:
            return (yield from create(self, *args, **kwargs))
        finally:
            self._suber_every_row = False

    Llama.eval, Llama._create_completion = eval_last, create_completion
    Llama.logits_to_logprobs, Llama._suber_last_logits = staticmethod(logits_to_logprobs), True
