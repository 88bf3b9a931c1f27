"""A table recipe naming a column the file lacks is an error at the key that names it
(data.ignore, data.features), not at data.path."""

from __future__ import annotations

import os

import pytest

from graphfit.recipes import RecipeError, load_recipe
from graphfit.recipes.running import runner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CHURN = os.path.join(REPO, "recipes", "churn_table.yaml")


@pytest.mark.parametrize("override,key", [
    ("data.ignore=[customer_idx]", "data.ignore"),
    ("data.features=[age, countri]", "data.features"),
])
def test_an_unknown_column_is_reported_at_the_key_naming_it(override, key):
    with pytest.raises(RecipeError, match="has no column") as caught:
        runner.prepare(load_recipe(CHURN, [override]))
    assert key in str(caught.value) and "data.path" not in str(caught.value)
