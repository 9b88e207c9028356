"""The one place the engine reaches into scikit-learn's private internals.

`anomaly_scores` is `-IsolationForest.score_samples`, bit for bit, without its per-call
overhead: scikit-learn validates the input and walks the trees through joblib on every
call, about 6 ms for the few undecided windows of a class (most of the time the models
add to a replay); this walks the same trees in the same order with the same arithmetic
(`IsolationForest._compute_score_samples`), about 0.5 ms. It reads, of a fitted forest:
`_decision_path_lengths`, `_average_path_length_per_tree`, `_max_samples`,
`_max_features`, `estimators_`, `estimators_features_`, each estimator's `tree_.apply`,
and the private function `sklearn.ensemble._iforest._average_path_length`.

Checked against scikit-learn CHECKED (tests/test_models.py compares the scores with
scikit-learn's own on the installed version); importing this module under another
version raises `engine.versions.UnsupportedVersion`. A forest without those attributes
is scored by scikit-learn itself; models are also refused under another scikit-learn
minor version than they were trained with (models.store).
"""
from __future__ import annotations

import numpy as np

from engine.versions import require

CHECKED = ("scikit-learn", "1.9", "1.10")  # >= 1.9, < 1.10 (checked on 1.9.1)
require(*CHECKED, where="models/sklearn_internals.py")

from sklearn.ensemble import IsolationForest  # noqa: E402  (after the guard)
from sklearn.ensemble._iforest import _average_path_length  # noqa: E402


def anomaly_scores(forest: IsolationForest, X: np.ndarray) -> np.ndarray:
    """`-forest.score_samples(X)`, bit for bit (see the module's docstring)."""
    paths = getattr(forest, "_decision_path_lengths", None)
    averages = getattr(forest, "_average_path_length_per_tree", None)
    if paths is None or averages is None or not hasattr(forest, "_max_samples"):
        return -forest.score_samples(X)
    X = np.ascontiguousarray(X, dtype=np.float32)  # the trees' dtype, as score_samples converts it
    subsample = forest._max_features != X.shape[1]
    depths = np.zeros(X.shape[0], order="f")
    for tree, features, path, average in zip(forest.estimators_, forest.estimators_features_, paths, averages):
        # the fitted tree's own apply: the estimator's checks its fit and its tags each call
        leaves = tree.tree_.apply(X[:, features] if subsample else X)
        depths += path[leaves] + average[leaves] - 1.0
    denominator = len(forest.estimators_) * _average_path_length([forest._max_samples])
    return 2 ** -np.divide(depths, denominator, out=np.ones_like(depths), where=denominator != 0)
