"""Categories for a corpus that gives none: topics found in the items' own text, each named by its most
distinctive word, never by a word every item uses.

TF-IDF over the title and text (English stop words out, words that more than half of the items use out: they tell
no item from another) factorised by NMF into at most ``derive_categories`` topics; an item belongs to the topics
that carry a good share of its weight. A topic is named by the word that weighs most in it *and* least in the
others, so a word spread evenly over the corpus ("said", "little") names nothing. Too little text for two topics
of two items each gives no categories at all, rather than made-up ones.

Text, not item embeddings: the users step (which draws tastes over the categories) runs before the embedding
step, which a build may leave out altogether (docs/corpus.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FIT_ITEMS = 50_000  # the topics are fitted on at most this many items (spread over the corpus), then applied to all
MAX_SHARE = 0.5  # a word that more than this share of the items use is nobody's category
SHARE_OF_ITEM = 0.35  # an item belongs to a topic carrying at least this share of its largest topic weight
MAX_PER_ITEM = 3
TOP_WORDS = 5  # a topic's heaviest words: recorded in the manifest, and what its coherence is measured on
MIN_COHERENCE = 0.1  # mean NPMI of those words: below it they meet by chance, and the topic is noise
# Narration and dialogue words that the English list lacks but that say nothing about what an item is about.
NARRATION = frozenset(
    [
        "says",
        "said",
        "saying",
        "replied",
        "replies",
        "reply",
        "asked",
        "asks",
        "asking",
        "answered",
        "answers",
        "told",
        "tells",
        "goes",
        "going",
        "gone",
        "went",
        "does",
        "doing",
        "done",
        "take",
        "takes",
        "taking",
        "took",
        "little",
        "thing",
        "things",
        "something",
        "nothing",
        "anything",
        "everything",
        "really",
        "come",
        "comes",
        "came",
        "coming",
        "look",
        "looks",
        "looked",
        "know",
        "knows",
        "knew",
        "think",
        "thinks",
        "thought",
        "want",
        "wants",
        "wanted",
    ]
)


@dataclass(frozen=True)
class Topics:
    """Each item's categories (topic names, possibly none) and the topics found, with their top words."""

    per_item: list[list[str]]
    words: dict[str, list[str]]  # topic name -> its heaviest words, for the manifest


def stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | NARRATION


def derive_topics(texts: list[str], most: int) -> Topics:
    """At most ``most`` named topics over ``texts`` (one per item); none when the text cannot carry two."""
    from sklearn.decomposition import NMF
    from sklearn.feature_extraction.text import TfidfVectorizer

    n = len(texts)
    none = Topics([[] for _ in texts], {})
    if most < 2 or n < 4:
        return none
    vectorizer = TfidfVectorizer(
        stop_words=sorted(stop_words()),
        token_pattern=r"(?u)\b[^\W\d_]{4,}\b",  # words of four letters or more, no digits
        min_df=2,
        max_df=MAX_SHARE,
        sublinear_tf=True,
        max_features=20_000,
    )
    fit_rows = np.linspace(0, n - 1, min(n, FIT_ITEMS)).round().astype(int)
    try:
        vectorizer.fit([texts[i] for i in fit_rows])
    except ValueError:  # no word left after the filters: nothing to name a topic by
        return none
    matrix = vectorizer.transform(texts)
    k = min(most, matrix.shape[1], n // 2)
    if k < 2:
        return none
    nmf = NMF(n_components=k, init="nndsvd", max_iter=400)
    weights = nmf.fit(matrix[fit_rows]).transform(matrix)  # every item weighed against the fitted topics
    return _named(weights, nmf.components_, vectorizer.get_feature_names_out(), matrix > 0)


def coherence(present, words: list[int]) -> float:
    """Mean normalised pointwise mutual information of the pairs of ``words`` over the items (``present``: a sparse
    item x word matrix of booleans): near 1 when the words come together, near 0 or below when their meeting is
    chance. Fewer than two words: -1."""
    if len(words) < 2:
        return -1.0
    seen = np.asarray(present[:, words].todense(), dtype=float)
    p = seen.mean(axis=0)
    scores = []
    for i in range(len(words)):
        for j in range(i + 1, len(words)):
            both = float((seen[:, i] * seen[:, j]).mean())
            scores.append(-1.0 if both == 0 else float(np.log(both / (p[i] * p[j])) / -np.log(both)))
    return float(np.mean(scores))


def _named(weights: np.ndarray, components: np.ndarray, vocabulary: np.ndarray, present) -> Topics:
    """Topics named by their distinctive words. Dropped: a topic of fewer than two items, one whose top words come
    together no more than by chance (``coherence`` under MIN_COHERENCE: a word that happens to be in some items,
    not a subject), one whose name is taken; fewer than two topics left: none."""
    share = components / np.maximum(components.sum(axis=0, keepdims=True), 1e-12)
    distinct = components * share  # heavy in this topic and light in the others
    top = weights.max(axis=1, keepdims=True)
    member = (weights >= SHARE_OF_ITEM * top) & (weights > 0)
    rank = np.argsort(-weights, axis=1)[:, :MAX_PER_ITEM]
    names: dict[int, str] = {}
    words: dict[str, list[str]] = {}
    for t in np.argsort(-member.sum(axis=0), kind="stable"):
        heaviest = [int(w) for w in np.argsort(-components[t])[:TOP_WORDS] if components[t, w] > 0]
        if member[:, t].sum() < 2 or coherence(present, heaviest) < MIN_COHERENCE:
            continue
        name = next((str(vocabulary[w]) for w in np.argsort(-distinct[t]) if str(vocabulary[w]) not in words), None)
        if name is None:
            continue
        names[int(t)] = name
        words[name] = [str(vocabulary[w]) for w in heaviest]
    if len(names) < 2:
        return Topics([[] for _ in range(weights.shape[0])], {})
    per_item = [sorted({names[t] for t in row if t in names and member[i, t]}) for i, row in enumerate(rank)]
    return Topics(per_item, words)
