"""The one mapping between a source's rating scale and a rater's labels (scales.rater_to_source / source_to_rater),
both ways, on every kind of declared scale: signed and continuous (-10..10, step 0), half stars, whole stars 1-5,
1-10 and 0-9; and the prompt's standing line on a signed scale."""

from __future__ import annotations

import numpy as np
import pytest
from suber_env.prompts import PromptBuilder
from suber_env.scales import SCALES, SourceScale, get_scale, rater_to_source, source_bins, source_to_rater

SIGNED = SourceScale("signed", -10.0, 10.0, 0.0)
SOURCES = {
    "signed continuous -10..10": SIGNED,
    "half stars": SourceScale("half", 0.5, 5.0, 0.5),
    "whole stars 1-5": SourceScale("stars", 1.0, 5.0, 1.0),
    "1-10": SourceScale("ten", 1.0, 10.0, 1.0),
    "0-9": SourceScale("nine", 0.0, 9.0, 1.0),
}


@pytest.mark.parametrize("rater", sorted(SCALES))
@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_the_mapping_both_ways(kind, rater):
    source, scale = SOURCES[kind], get_scale(rater)
    labels = np.asarray(scale.values)
    # the ends meet the ends, both ways
    np.testing.assert_allclose(rater_to_source([scale.min, scale.max], scale, source), [source.min, source.max])
    np.testing.assert_allclose(source_to_rater([source.min, source.max], source, scale), [scale.min, scale.max])
    # a label there and back is the label; a source rating there and back is the rating
    there = rater_to_source(labels, scale, source, snap=False)
    np.testing.assert_allclose(source_to_rater(there, source, scale), labels)
    real = np.linspace(source.min, source.max, 37)
    np.testing.assert_allclose(rater_to_source(source_to_rater(real, source, scale), scale, source, snap=False), real)
    # order kept: a higher label is never a lower source rating
    assert np.all(np.diff(rater_to_source(labels, scale, source)) >= 0)
    snapped = rater_to_source(labels, scale, source)
    if source.continuous:  # every value of the range is allowed: nothing to snap to
        np.testing.assert_allclose(snapped, rater_to_source(labels, scale, source, snap=False))
    else:
        assert set(np.round(snapped, 6)) <= set(source.values.tolist())
    # each label falls in exactly one of the source's bins
    bins = source_bins(scale, source)
    assert bins.shape == (scale.n, len(source.values)) and (bins.sum(1) == 1).all()


def test_a_continuous_scale_has_bins_and_no_division_by_its_step():
    """Before: SourceScale.values divided by the step, ZeroDivisionError on a continuous scale."""
    values = SIGNED.values
    assert len(values) == SIGNED.bins == 10 and values[0] == -10 and values[-1] == 10
    ten = get_scale("1-10")
    # the 1-10 rater's labels land each exactly on one bin: its histogram is on the same values as the real one
    np.testing.assert_allclose(rater_to_source(ten.values, ten, SIGNED), values, atol=1e-6)
    np.testing.assert_array_equal(source_bins(ten, SIGNED), np.eye(10))
    # values off the range are clipped, inside it kept to the last decimal
    np.testing.assert_allclose(rater_to_source([0.0, 5.5, 11.0], ten, SIGNED), [-10.0, 0.0, 10.0])
    np.testing.assert_allclose(source_to_rater([-3.2, 0.0, 4.03], SIGNED, ten), [4.06, 5.5, 7.3135])


def test_like_thresholds_on_every_scale():
    """Three quarters up the scale, rounded up to an allowed value: SUBER's 4 of 5 and 8 of 10 stay as they were."""
    got = {k: s.like_threshold for k, s in SOURCES.items()}
    assert got == {"signed continuous -10..10": 5.0, "half stars": 4.0, "whole stars 1-5": 4.0, "1-10": 8.0, "0-9": 7.0}
    assert SIGNED.at(0.5) == 0.0 and SOURCES["half stars"].at(0.5) == 3.0 and SIGNED.text == "-10 to 10"


def _standing(pb: PromptBuilder, vote: float | None) -> str:
    return pb.query(
        name="Ann", sex="F", age=30, description="curious", history=[], title="Fog", year=0, overview="A fog.",
        genres=[], people=[], vote=vote, seen=0,
    )  # fmt: skip


def test_the_standing_line_is_on_the_sources_own_scale():
    """Before: "+4.03 on -10..10" was told as "4 on a scale of 1 to 10", and a negative average got no line."""
    pb = PromptBuilder("items", get_scale("1-10"), shots=0, vote_scale=SIGNED)
    assert 'rate "Fog" +4.03 on a scale of -10 to 10.' in _standing(pb, 4.03)
    assert 'rate "Fog" -3.2 on a scale of -10 to 10.' in _standing(pb, -3.2)
    assert 'rate "Fog" 0 on a scale of -10 to 10.' in _standing(pb, 0.0)
    assert "On average" not in _standing(pb, None)  # unknown: no line
    stars = PromptBuilder("items", get_scale("1-5"), shots=0, vote_scale=SourceScale("vote", 1, 5, 0))
    assert 'rate "Fog" 3.75 on a scale of 1 to 5.' in _standing(stars, 3.75)  # no sign where the range has none
    # SUBER's movie prompt is unchanged: TMDB's vote on the rater's 0-9 scale, shifted like its labels
    movies = PromptBuilder("movies", get_scale("0-9"), shots=0, vote_scale=SourceScale("vote", 0, 10, 0))
    assert 'rate "Fog" 6.8 on a scale of 0 to 9.' in _standing(movies, 7.8)
