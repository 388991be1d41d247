"""The page environments: ``PagesEnv`` (one user at a time) and ``PagesVectorEnv`` (many slots, one chooser call
and one rater call per step for all of them). The action is a page of ``page_size`` items; the simulated user
picks which to view (zero or more), rates the viewed ones (a Watcher always, others sometimes) and may leave;
the episode ends when the user leaves or after ``horizon`` pages. Both run ``page_core.PageCore`` and reuse
the item envs' reset and autoreset, so a vector env gives exactly what a loop of single envs gives."""

from __future__ import annotations

import numpy as np

from .choosers import Chooser, make_chooser
from .env import SuberEnv, SuberVectorEnv, _as_dataset, _as_rater, _user_pool
from .page_core import PageConfig, PageCore
from .raters import Rater


def _build_pages(dataset, domain, chooser, chooser_kwargs, rater, rater_kwargs, n, config, options) -> PageCore:
    ds = _as_dataset(dataset, domain)
    config = (config or PageConfig()).with_options(options)
    rater = _as_rater(ds, rater, rater_kwargs)
    if isinstance(chooser, str):
        chooser = make_chooser(chooser, ds, **dict(chooser_kwargs or {}))
    pool = _user_pool(ds, rater)
    return PageCore(ds, chooser, rater, n, config, pool)


class PagesEnv(SuberEnv):
    """One simulated user per episode, shown a page of items per step. ``chooser``: "oracle", "exposure",
    "transformers" or a ``Chooser``; ``rater`` as for ``SuberEnv``; options: ``config=PageConfig(...)`` and/or its
    field names. ``info`` holds the page's pick chances, picks, ratings (-1 where not viewed), which ratings
    the user stated, and whether the user left."""

    def __init__(
        self,
        dataset=None,
        chooser: str | Chooser = "oracle",
        chooser_kwargs: dict | None = None,
        rater: str | Rater = "oracle",
        rater_kwargs: dict | None = None,
        domain: str | None = None,
        render_mode: str | None = None,
        config: PageConfig | None = None,
        **options,
    ):
        core = _build_pages(dataset, domain, chooser, chooser_kwargs, rater, rater_kwargs, 1, config, options)
        self._attach(core, render_mode)
        self.chooser = core.chooser

    def _batch_action(self, action) -> np.ndarray:
        return np.asarray(action, np.int64)[None, :]

    def prompt(self) -> str:
        """The LLM chooser's question about the first item of the last page."""
        if self.core.last_requests is None or not hasattr(self.chooser, "question"):
            raise RuntimeError("no prompt: take a step first, with the transformers chooser")
        return self.chooser.question(self.core.last_requests, 0, 0)

    def render(self):
        if self.render_mode == "ansi" and self._last:
            page = self.core.last_page[0]
            picked = [self.item_title(int(i)) for i, p in zip(page, self._last["picks"], strict=True) if p]
            return f"user {int(self._last['user_id'])} picked {picked} from a page of {len(page)}"
        return None


class PagesVectorEnv(SuberVectorEnv):
    """``num_envs`` page slots stepped together (one chooser call and one rater call per step); slot i seeded
    with ``seed + i`` behaves exactly like ``PagesEnv`` reset with that seed; same-step autoreset."""

    def __init__(
        self,
        num_envs: int = 1,
        dataset=None,
        chooser: str | Chooser = "oracle",
        chooser_kwargs: dict | None = None,
        rater: str | Rater = "oracle",
        rater_kwargs: dict | None = None,
        domain: str | None = None,
        copy: bool = True,
        config: PageConfig | None = None,
        **options,
    ):
        core = _build_pages(dataset, domain, chooser, chooser_kwargs, rater, rater_kwargs, num_envs, config, options)
        self._attach(core, num_envs, copy)
        self.chooser = core.chooser

    def prompt(self, slot: int = 0) -> str:
        if self.core.last_requests is None or not hasattr(self.chooser, "question"):
            raise RuntimeError("no prompt: take a step first, with the transformers chooser")
        return self.chooser.question(self.core.last_requests, slot, 0)
