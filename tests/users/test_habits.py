"""One "generous rater" rule: the env's personas of real people (evaluation/people.py) name a user's rating habit
as a real population's ``habit`` column does (users/real.py), the env holding its own copy since it never imports
suber_data."""

from __future__ import annotations

import numpy as np
from suber_env.evaluation.people import habit

from suber_data.users.real import habit_names


def test_people_and_real_users_name_a_habit_alike():
    rng = np.random.default_rng(0)
    reference = rng.normal(3.6, 0.4, 500)
    means = np.concatenate([rng.uniform(1.0, 5.0, 400), reference.mean() + reference.std() * np.array([-0.75, 0.75])])
    assert [habit(m, reference) for m in means] == habit_names(means, reference)
    assert set(habit_names(means, reference)) == {"harsh critic", "balanced rater", "generous rater"}
