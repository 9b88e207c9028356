"""The anomaly model of one entity class: robust per-entity baselines + an IsolationForest.

1. Baseline. For every entity (a port, a queue, a NIC, a storage target) and feature:
   the median and the MAD of its window means in training. A window's feature becomes a
   one-sided robust score z = (x - median) / scale, clipped to [0, Z_CAP]: only a rise
   above the entity's own normal counts. The scale has a floor of two parts:
   scale = floor + max(1.4826 MAD, rel |median|). `floor` (absolute, in the feature's
   unit) is the smallest change that can matter; `rel` (a share of the entity's own
   level) keeps a history that never moved (MAD 0: a flat corrected-FEC floor, a gauge
   the collector repeats) from turning a 2 % wobble of a large value into a score of 50.
   The median itself is known only to within the error of a median of the entity's n
   training windows (1.2533 sigma / sqrt(n), sigma from its window column's MAD): that
   error joins the scale in quadrature. It matters where n is small and the horizon
   calm: 10 minutes polled every 30 s give 20 windows, a median off by 0.28 sigma, while
   the smoothed horizon's own noise is 0.21 sigma, so without it a NIC whose training
   median came out low scored its ordinary stall share at z 7.8 (three false
   `nic_degraded` in a clean half hour); at 1 s polling (120 windows) it adds 13 % to
   the smoothed scale and 0.5 % to the window's. Entities not seen in training use
   the class's pooled baseline (median of the entities' medians and scales).
2. Forest. An IsolationForest per class learns which z vectors occur in normal
   operation; its anomaly score is `-score_samples`, in (0, 1], about 0.5 for ordinary
   points. Its threshold is the highest score of any training window plus a margin.

A window is anomalous when its largest z reaches `z_min` (far above this entity's own
normal in some feature), or when its largest z reaches half of that and the forest finds
it more isolated than every training window (a combination of moderate rises the class
never shows). The forest adds detections and never vetoes one: it cannot see a feature
that was constant in training (its trees never split on it), nor how far beyond the
training range a point lies (splits stop at the sample's range), which is what the z
scores measure. Only windows whose largest z lies between z_min / 2 and z_min reach the
forest (above, the z score decides alone), so scoring costs almost nothing while the
fabric is healthy.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import IsolationForest



def anomaly_scores(forest: IsolationForest, X: np.ndarray) -> np.ndarray:
    """The forest's anomaly score of each row, in (0, 1]: `-score_samples`. (A walk of the
    trees through scikit-learn's private attributes once replaced this; measured on
    scikit-learn 1.9 it bought nothing, docs/design.md "Speed tricks".)"""
    return -forest.score_samples(X)

Z_CAP = 50.0
SEEN_Z = 0.45  # a reading within the entity's clean range scores at most this share of z_min
MAD_K = 1.4826  # MAD -> standard deviation for normal data
MEDIAN_SE = 1.2533  # the standard error of a median of n normal samples is this x sigma / sqrt(n)


@dataclass
class Verdict:
    key: str
    z_max: float  # the largest robust score: how far above normal
    forest: float | None  # the forest's anomaly score when it was consulted, in (0, 1]
    z: np.ndarray
    values: np.ndarray


@dataclass
class ClassModel:
    cls: str
    features: tuple[str, ...]
    floors: np.ndarray
    keys: dict[str, int]  # entity key -> row of med/scale
    med: np.ndarray  # (entities, features)
    scale: np.ndarray
    pooled_med: np.ndarray
    pooled_scale: np.ndarray
    forest: IsolationForest | None
    threshold: float
    z_min: float
    windows: int  # training windows seen
    rel: np.ndarray | None = None  # relative spread floor per feature (None: 0, models of before)
    ceiling: np.ndarray | None = None  # (entities, features): the highest training window (None: models of before)
    pooled_ceiling: np.ndarray | None = None

    # --- training -------------------------------------------------------------------
    @classmethod
    def fit(cls, name: str, features: tuple[str, ...], floors: list[float], keys: list[str],
            values: np.ndarray, *, seed: int, z_min: float, margin: float = 0.02,
            max_rows: int = 20_000, trees: int = 100, smooth: list | None = None,
            rel: list[float] | None = None) -> ClassModel:
        """values: (windows, features) window means, keys: the entity of each row.
        smooth: (column, its window column, k): the column's scale (beyond its floor) is
        at least k times the window column's (a smoothed mean of white noise).
        rel: the relative spread floor of each column (default 0): its scale beyond the
        absolute floor is at least rel x |median|."""
        floors_a = np.asarray(floors, dtype=float)
        rel_a = np.zeros_like(floors_a) if rel is None else np.asarray(rel, dtype=float)
        order = sorted(set(keys))
        index = {k: i for i, k in enumerate(order)}
        rows = np.array([index[k] for k in keys], dtype=np.int64)
        med = np.zeros((len(order), len(features)))
        scale = np.zeros_like(med)
        ceiling = np.zeros_like(med)
        error = np.zeros_like(med)  # the standard error of each median (module docstring)
        unseen = np.zeros(med.shape, dtype=bool)  # a feature the entity never reported in training
        for i in range(len(order)):
            x = values[rows == i]
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a feature never reported: NaN
                m = np.nanmedian(x, axis=0) if len(x) else np.full(len(features), np.nan)
                mad = np.nanmedian(np.abs(x - m), axis=0) if len(x) else np.full(len(features), np.nan)
                top = np.nanmax(x, axis=0) if len(x) else np.full(len(features), np.nan)
            unseen[i] = np.isnan(m)
            med[i] = np.where(unseen[i], 0.0, m)
            ceiling[i] = np.where(np.isnan(top), med[i], top)
            spread = MAD_K * np.where(np.isnan(mad), 0.0, mad)
            scale[i] = np.maximum(spread, rel_a * np.abs(med[i])) + floors_a
            error[i] = MEDIAN_SE * spread / np.sqrt(np.maximum(np.sum(~np.isnan(x), axis=0), 1))
        for j, i, k in smooth or ():  # a smoothed mean is never calmer than white noise allows
            scale[:, j] = np.maximum(scale[:, j] - floors_a[j], k * (scale[:, i] - floors_a[i])) + floors_a[j]
            error[:, j] = error[:, i]  # its level is the window column's, known as well as that
            # A smoothed mean never warm in training (a history shorter than its warm-up:
            # 12 samples, 12 minutes at 60 s polling) is no zero: its level is the window
            # column's, and it never rises above the highest window (a 10-minute history
            # at 60 s gave every NIC a smoothed PCIe stall of 0, and at minute 12 of the
            # run every NIC was 8-17 z over it: false nic_degraded on clean fabrics).
            cold = unseen[:, j] & ~unseen[:, i]
            med[cold, j], ceiling[cold, j] = med[cold, i], ceiling[cold, i]
        scale = np.sqrt((scale - floors_a) ** 2 + error ** 2) + floors_a
        pooled_med = np.median(med, axis=0) if len(order) else np.zeros(len(features))
        pooled_scale = np.median(scale, axis=0) if len(order) else floors_a.copy()
        pooled_ceiling = np.median(ceiling, axis=0) if len(order) else np.zeros(len(features))
        model = cls(name, tuple(features), floors_a, index, med, scale, pooled_med, pooled_scale,
                    None, 1.0, z_min, int(len(values)), rel_a, ceiling, pooled_ceiling)
        z = model._z(values, med[rows], scale[rows])
        if len(z) >= 2:
            rng = np.random.default_rng(seed)
            sample = z if len(z) <= max_rows else z[np.sort(rng.choice(len(z), max_rows, replace=False))]
            forest = IsolationForest(n_estimators=trees, max_samples=min(256, len(sample)),
                                     random_state=seed)
            forest.fit(sample)
            model.forest = forest
            model.threshold = float(anomaly_scores(forest, z).max()) + margin
        return model

    # --- scoring --------------------------------------------------------------------
    @staticmethod
    def _z(values: np.ndarray, med: np.ndarray, scale: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            z = (values - med) / scale
        return np.clip(np.nan_to_num(z, nan=0.0), 0.0, Z_CAP)

    def _seen_before(self, z: np.ndarray, keys: list[str], values: np.ndarray) -> np.ndarray:
        """A reading no higher than the entity's own clean history reached (its highest
        training window, per column: a collective phase, a checkpoint it had then) is not
        news, however far above the median: its z is held below the forest's band."""
        rows = np.fromiter((self.keys.get(k, -1) for k in keys), dtype=np.intp, count=len(keys))
        ceil = self.ceiling[rows]
        ceil[rows < 0] = self.pooled_ceiling
        held = np.minimum(z, SEEN_Z * self.z_min)
        return np.where(values > ceil, z, held)

    def baseline(self, key: str, online: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(median, scale) of an entity: learned online, else trained, else pooled."""
        if online:
            got = online.get(key)
            if got is not None:
                return got
        i = self.keys.get(key)
        if i is None:
            return self.pooled_med, self.pooled_scale
        return self.med[i], self.scale[i]

    def score(self, keys: list[str], values: np.ndarray,
              online: dict | None = None) -> tuple[np.ndarray, list[Verdict]]:
        """z scores of every row, and the verdicts of the anomalous rows."""
        if online or not len(self.med):
            meds, scales = (np.asarray(x) for x in zip(*(self.baseline(k, online) for k in keys)))
        else:  # `baseline` of every row as two array lookups (the usual case: no online learning)
            rows = np.fromiter((self.keys.get(k, -1) for k in keys), dtype=np.intp, count=len(keys))
            meds, scales = self.med[rows], self.scale[rows]
            pooled = rows < 0
            if pooled.any():
                meds[pooled], scales[pooled] = self.pooled_med, self.pooled_scale
        z = self._z(values, meds, scales)
        if self.ceiling is not None:
            z = self._seen_before(z, keys, values)
        top = z.max(axis=1)
        out = [Verdict(keys[i], float(top[i]), None, z[i], values[i]) for i in np.flatnonzero(top >= self.z_min)]
        # The forest decides only between half and all of z_min: above, the z score alone does.
        undecided = np.flatnonzero((top >= self.z_min / 2) & (top < self.z_min))
        if len(undecided) and self.forest is not None:
            for i, s in zip(undecided, anomaly_scores(self.forest, z[undecided])):
                if s >= self.threshold:
                    out.append(Verdict(keys[i], float(top[i]), float(s), z[i], values[i]))
        return z, out

    # --- online learning ------------------------------------------------------------
    def learn(self, key: str, values: np.ndarray, rate: float,
              online: dict) -> None:
        """Move an entity's baseline toward a window judged normal, in O(1) memory per
        entity: median and MAD tracked by stochastic approximation (each step moves the
        estimate by `rate` scales toward the sample; `online` holds the entities' learned
        baselines, key -> (median, scale)), so a single window shifts it little
        and a lasting change of the normal is followed within about 1/rate windows."""
        m, s = self.baseline(key, online)
        x = np.where(np.isnan(values), m, values)
        step = rate * s
        m2 = m + step * np.sign(x - m)
        mad = np.maximum((s - self.floors) / MAD_K, 0.0)
        mad2 = mad + rate * np.maximum(mad, self.floors / MAD_K) * np.sign(np.abs(x - m) - mad)
        rel = self.rel if self.rel is not None else 0.0
        online[key] = (m2, np.maximum(MAD_K * np.maximum(mad2, 0.0), rel * np.abs(m2)) + self.floors)
