"""Latent Action Q-learning: value functions from state-only experience.

laq learns a value function V(s) from logs of states and rewards, with no actions, and
exports it as a small ``value.safetensors`` that the Rust runtime evaluates on robots.
This package reads datasets, trains and evaluates models from Python:

>>> import laq
>>> data = laq.load("walk.npz")                       # doctest: +SKIP
>>> model = laq.train(data, out="run", **{"dqn.steps": 2000})  # doctest: +SKIP
>>> model.values(data["observations"][:5])            # doctest: +SKIP

Messages of the trainer go to the :mod:`logging` loggers under ``laq``.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Union

import numpy as np

from . import _laq

__all__ = ["load", "train", "Model", "from_episodes", "MAX_LOOKAHEAD", "__version__"]
__version__: str = _laq.__version__
#: Most controllers in a sequence that :meth:`Model.select_ahead` plans (its ``depth``).
MAX_LOOKAHEAD: int = _laq.MAX_LOOKAHEAD

PathLike = Union[str, "os.PathLike[str]"]


def load(
    path: PathLike,
    obs_keys: Optional[Sequence[str]] = None,
    reward: Optional[str] = None,
) -> Dict[str, np.ndarray]:
    """Reads a dataset in any format laq reads, as a dict of numpy arrays.

    ``path`` is a ``.npz`` or ``.safetensors`` file of the dataset format, a D4RL-style
    HDF5 file or a Minari dataset directory. ``obs_keys`` picks and orders the keys of a
    dict observation (HDF5 sources); ``reward`` is where the rewards come from: another
    key of the file, ``"episode-end"`` (1 on the last transition of each episode) or a
    ``.csv`` file of ``episode,step`` pairs, as ``laq train --reward`` takes it.

    The dict holds ``observations`` and ``next_observations`` ``[N, *obs_shape]``
    (float32, or uint8 for images), ``rewards`` (float32), ``terminals`` (bool) and,
    when the source has them, ``timeouts``, ``next_missing`` (bool) and ``actions``
    (int64 ``[N]`` or float32 ``[N, A]``). What reading did (rows left out, assumptions)
    is logged at level INFO.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for an invalid
    one, with the reason.
    """
    arrays, report = _laq.load(
        os.fspath(path), None if obs_keys is None else list(obs_keys), reward
    )
    if report:
        import logging

        log = logging.getLogger("laq.data")
        for line in report:
            log.info("%s: %s", os.fspath(path), line)
    return arrays


def _raw(key: str, value: Any) -> tuple:
    """An array as the extension takes it: dtype, shape and C-ordered little-endian bytes."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"`{key}` has dtype {arr.dtype}; laq reads bool, integer and float arrays"
        )
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    arr = np.ascontiguousarray(arr)
    return (arr.dtype.str, list(arr.shape), arr.tobytes())


def _is_episodes(data: Any) -> bool:
    return callable(getattr(data, "iterate_episodes", None))


def _frames_chw(a: Any) -> Optional[np.ndarray]:
    """A camera's frames ``[T, ...]`` as ``laq`` reads them, ``[T, C, H, W]`` u8 (stacks
    and channels-last frames reordered, by the rule of ``laq`` itself); ``None`` where the
    array is not frames."""
    if isinstance(a, Mapping):
        return None
    a = np.asarray(a)
    if a.dtype != np.uint8 or a.ndim < 3:
        return None
    t, row = a.shape[0], a.shape[1:]
    layout = _laq.frame_layout(list(row))
    if layout is None:
        return a if len(row) == 3 else None
    frames, channels, h, w, channels_last = layout
    if channels_last:
        a = a.reshape(t, frames, h, w, channels).transpose(0, 1, 4, 2, 3)
    return a.reshape(t, frames * channels, h, w)


def _is_frames(a: Any) -> bool:
    """Whether ``laq`` reads the array as a camera's frames."""
    return _frames_chw(a) is not None


def _is_text(a: Any) -> bool:
    """Whether an array of a dict observation holds no numbers (text, as the ``mission``
    of a MiniGrid environment)."""
    return not isinstance(a, Mapping) and np.asarray(a).dtype.kind in "OSU"


def _flat_obs(obs: Any, obs_keys: Optional[Sequence[str]], warn: bool = False) -> np.ndarray:
    """One episode's observations as ``[T+1, ...]``; a dict observation (a Minari
    ``Dict`` space) becomes its keys flattened and joined, in ``obs_keys`` order or
    sorted, as ``laq`` reads a dict group of an HDF5 file: text is left out, frames
    beside vectors are left out unless named (but for one number a row in all beside
    them, as MiniGrid's heading, which is left out instead), one key keeps its own shape
    (a camera's frames stay frames), and cameras of one height and width taken together
    become one frame of their channels side by side."""
    if isinstance(obs, Mapping):
        import warnings

        keys = list(obs_keys) if obs_keys is not None else sorted(obs)
        missing = [k for k in keys if k not in obs]
        if missing:
            raise ValueError(
                f"observation keys {missing} not in the episode (keys: {sorted(obs)})"
            )
        if len(set(keys)) < len(keys):
            raise ValueError(f"obs_keys names a key twice: {keys}")
        text = [k for k in keys if _is_text(obs[k])]
        if text and obs_keys is not None:
            raise ValueError(f"observation keys {text} hold no numbers (text); laq reads numbers")
        if text:
            keys = [k for k in keys if k not in text]
            if not keys:
                raise ValueError(f"no observation key holds numbers (text: {text})")
            if warn:
                warnings.warn(
                    f"observation keys left out, not numbers: {text} (where they tell each "
                    "episode's goal, V does not read that goal)"
                )
        if obs_keys is None:
            frames = [k for k in keys if _is_frames(obs[k])]
            rest = [k for k in keys if k not in frames]
            width = sum(int(np.prod(np.shape(_flat_obs(obs[k], None))[1:])) for k in rest)
            if frames and rest and width == 1:
                keys = frames
                if warn:
                    warnings.warn(
                        f"{rest[0]!r} (one number a row) left out beside frames, which are "
                        f"read; obs_keys={frames + rest!r} flattens all into one vector"
                    )
            elif frames and rest:
                keys = rest
                if warn:
                    warnings.warn(
                        f"frames left out of the observations: {frames}; obs_keys="
                        f"[{frames[0]!r}] trains on that camera's frames instead of the vectors"
                    )
        if len(keys) == 1:
            return _flat_obs(obs[keys[0]], None)
        cameras = [_frames_chw(obs[k]) for k in keys]
        if all(c is not None for c in cameras) and len({c.shape[2:] for c in cameras}) == 1:
            if len({len(c) for c in cameras}) > 1:
                raise ValueError(
                    f"cameras {keys} hold {[len(c) for c in cameras]} frames; one per step each"
                )
            return np.concatenate(cameras, axis=1)
        parts = [_flat_obs(obs[k], None) for k in keys]
        if len({len(p) for p in parts}) > 1:
            raise ValueError(
                f"observation keys {keys} hold {[len(p) for p in parts]} rows; one per step each"
            )
        if warn and any(c is not None for c in cameras):
            warnings.warn(
                f"frames flattened with the other observation keys into one vector: "
                f"{[k for k, c in zip(keys, cameras) if c is not None]}; obs_keys naming one "
                "camera alone trains on its frames as images"
            )
        return np.concatenate([p.reshape(len(p), -1) for p in parts], axis=1)
    return np.asarray(obs)


def from_episodes(
    dataset: Any, obs_keys: Optional[Sequence[str]] = None
) -> Dict[str, np.ndarray]:
    """Transitions of a Minari dataset (``minari.load_dataset(...)``), or of any object
    whose ``iterate_episodes()`` yields episodes with ``observations`` (``T + 1`` rows),
    ``rewards``, ``terminations`` and ``truncations`` (``T`` each), as the dict
    :func:`train` takes.

    Each step ``t`` becomes the transition from observation ``t`` to ``t + 1``;
    terminations become ``terminals`` and truncations ``timeouts``. Dict observations
    are flattened key by key (``obs_keys``, or every key sorted), as ``laq`` reads a
    Minari directory: frames beside vectors are left out unless named (with a warning),
    one key keeps its shape, so ``obs_keys=["pixels"]`` gives a camera's frames, and
    cameras of one height and width named together become one frame of their channels
    side by side, ``[T + 1, C1 + C2, H, W]`` u8.
    """
    obs, nxt, rew, term, trunc = [], [], [], [], []
    for i, ep in enumerate(dataset.iterate_episodes()):
        o = _flat_obs(ep.observations, obs_keys, warn=i == 0)
        r = np.asarray(ep.rewards).reshape(-1)
        t = len(r)
        if len(o) != t + 1:
            raise ValueError(
                f"episode {i}: {len(o)} observations for {t} rewards; an episode holds "
                "one observation more than it has steps"
            )
        te = np.asarray(ep.terminations).reshape(-1).astype(bool)
        tr = np.asarray(ep.truncations).reshape(-1).astype(bool)
        if len(te) != t or len(tr) != t:
            raise ValueError(
                f"episode {i}: {len(te)} terminations and {len(tr)} truncations for "
                f"{t} steps"
            )
        obs.append(o[:-1])
        nxt.append(o[1:])
        rew.append(r.astype(np.float32))
        term.append(te)
        trunc.append(tr)
    if not obs:
        raise ValueError("the dataset holds no episodes")
    return {
        "observations": np.concatenate(obs),
        "next_observations": np.concatenate(nxt),
        "rewards": np.concatenate(rew),
        "terminals": np.concatenate(term),
        "timeouts": np.concatenate(trunc),
    }


def train(
    data: Any,
    out: PathLike,
    seed: int = 0,
    *,
    obs_keys: Optional[Sequence[str]] = None,
    reward: Optional[str] = None,
    **settings: Any,
) -> "Model":
    """Runs the laq pipeline (labels, Q-learning, export) and writes the run directory
    ``out``, as ``laq train`` does; returns the trained :class:`Model`.

    ``data`` is a dataset path (any format :func:`load` reads; ``obs_keys`` and
    ``reward`` as there), a dict of numpy arrays under the keys of the dataset format
    (what :func:`load` returns; without ``next_observations``, each row's is the next
    row of its episode, as for D4RL files), or a Minari dataset (see
    :func:`from_episodes`).

    ``settings`` are named as in ``laq config default``: ``labels``, ``q``,
    ``top_actions``; nested ones with a dot, passed as
    ``**{"dqn.steps": 5000, "mining.latent_actions": 4}``. Values are bools, numbers,
    strings, lists or dicts. Unset ones take the defaults for the data.

    The GIL is released while training. Raises ``ValueError`` for invalid data or
    settings (naming the key), ``RuntimeError`` if training fails unexpectedly.
    """
    for key in settings:
        if not isinstance(key, str):
            raise TypeError(f"setting names are strings, got {key!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    all_settings = {"seed": int(seed), **settings}
    out = os.fspath(out)
    if isinstance(data, (str, os.PathLike)):
        path = _laq.train(
            out,
            all_settings,
            path=os.fspath(data),
            obs_keys=None if obs_keys is None else list(obs_keys),
            reward=reward,
        )
        return Model(path)
    if _is_episodes(data):
        data = from_episodes(data, obs_keys)
    elif obs_keys is not None:
        raise ValueError("obs_keys applies to dataset files and Minari datasets")
    if not isinstance(data, Mapping):
        raise TypeError(
            "data is a dataset path, a dict of numpy arrays or a Minari dataset, got "
            f"{type(data).__name__}"
        )
    if reward is not None:
        if reward not in data:
            raise ValueError(
                f"no key `{reward}` to take the rewards from (keys: {sorted(data)})"
            )
        data = {k: v for k, v in data.items() if k not in ("rewards", reward)} | {
            "rewards": data[reward]
        }
    arrays = {str(k): _raw(str(k), v) for k, v in data.items()}
    path = _laq.train(out, all_settings, arrays=arrays)
    return Model(path)


class Model:
    """A value model exported by laq (``value.safetensors``), evaluated by the Rust
    runtime that ships to robots, so values here are the values there.

    ``Model(path)`` or ``Model.load(path)`` takes the file or a run directory.
    """

    def __init__(self, path: PathLike) -> None:
        self._m = _laq.Model(os.fspath(path))

    @classmethod
    def load(cls, path: PathLike) -> "Model":
        """Loads ``value.safetensors``, or the one in a run directory."""
        return cls(path)

    @property
    def path(self) -> str:
        """Path of the model file."""
        return os.fspath(self._m.path)

    @property
    def obs_shape(self) -> tuple:
        """Shape of one observation (``(C, H, W)`` for image models)."""
        return tuple(self._m.obs_shape)

    @property
    def gamma(self) -> float:
        """The discount the model was trained with."""
        return float(self._m.gamma)

    @property
    def cost_per_step(self) -> Optional[float]:
        """The cost a step that V was learned above, where the log paid one until its
        episodes ended (V is then 1 one step from an end, 0 never ending); ``None``
        where V is in the log's own units."""
        c = self._m.cost_per_step
        return None if c is None else float(c)

    def values(self, obs: Any, in_data_units: bool = False) -> np.ndarray:
        """V of a batch of observations ``[N, *obs_shape]`` as a float32 array ``[N]``,
        or of one observation ``obs_shape`` as a 0-d array. An image model also takes
        frames as ``laq.train`` reads them: channels-last ``[N, H, W, C]``, grey
        ``[N, H, W]``, stacks ``[N, T, C, H, W]`` or ``[N, T, H, W, C]``.

        With ``in_data_units``, each value in the units of the log's rewards (``laq
        predict``'s ``value_in_data_units``): the same, except where V was learned above
        a cost per step ``c`` (:attr:`cost_per_step`), then the return
        ``c * (1 - gamma * V) / (1 - gamma)``. :meth:`select` adds rewards to values in
        these units.

        Numbers of any real dtype are converted to float32. Raises ``ValueError`` for a
        wrong shape or a NaN/infinite value (naming the row), ``TypeError`` for a
        non-numeric array.
        """
        return self._m.values(_f32(obs, "observations"), bool(in_data_units))

    def select(
        self,
        candidates: Any,
        rewards: Optional[Any] = None,
        terminals: Optional[Any] = None,
    ) -> int:
        """Index of the best candidate next state ``[M, *obs_shape]`` (frames also in
        the layouts :meth:`values` takes) by ``reward + gamma * V(next)`` (``V = 0`` for
        terminal ones; rewards 0 when not given, which ranks by V). Candidates that are NaN/infinite or outside the
        model's density gate never win; ties go to the lowest index. Raises
        ``ValueError`` if none is valid.
        """
        c = _f32(candidates, "candidates")
        r = None if rewards is None else _f32(rewards, "rewards").reshape(-1).tolist()
        t = None
        if terminals is not None:
            t = np.asarray(terminals).reshape(-1).astype(bool).tolist()
        return int(self._m.select(c, r, t))

    def select_ahead(
        self,
        state: Any,
        predict: Callable[[int, np.ndarray], Any],
        count: int,
        depth: int = 2,
    ) -> int:
        """Index of the controller to run now: the first of the best sequence of
        ``depth`` controllers (of ``count``) from ``state``, each predicting from the
        state the previous one predicted. A sequence scores
        ``r1 + gamma * (r2 + gamma * (... + gamma * V(s_depth)))``; a terminal
        prediction ends it (its score is then the rewards so far). With ``depth=1`` this
        is :meth:`select` on the states the controllers predict from ``state``.

        ``predict(i, s)`` gets the controller's index and a state (a float32 array of
        shape ``obs_shape``) and returns controller ``i``'s next state (array-like,
        ``obs_shape`` or flat), or ``(next, reward)``, or ``(next, reward, terminal)``,
        or ``None`` when controller ``i`` is unavailable from ``s`` (the sequence ends
        there). It is called up to ``count ** depth`` times (``depth`` is 1 to
        :data:`MAX_LOOKAHEAD`). Predictions that are NaN/infinite or outside the
        model's density gate end no sequence; ties go to the lowest index.

        An exception of ``predict`` stops the search and is raised as it is. Raises
        ``ValueError`` for a bad ``depth``, ``count`` or ``state``, for a prediction of
        the wrong length (naming the controller), and if no sequence scores;
        ``TypeError`` for a ``count`` or ``depth`` that is not an integer or a
        ``predict`` that is not callable.
        """
        for name, value in (("count", count), ("depth", depth)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{name} must be an integer, got {value!r}")
        if not 1 <= depth <= MAX_LOOKAHEAD:
            raise ValueError(
                f"depth {depth}: look 1 to {MAX_LOOKAHEAD} controllers ahead"
            )
        if count < 1:
            raise ValueError(f"count {count}: give at least one controller")
        if not callable(predict):
            raise TypeError(f"predict must be callable, got {type(predict).__name__}")
        shape = self.obs_shape

        def step(i: int, s: np.ndarray) -> Optional[tuple]:
            out = predict(i, s.reshape(shape))
            if out is None:
                return None
            reward, terminal = 0.0, False
            # A tuple that starts with an array is (next, reward[, terminal]); one of
            # numbers is a state.
            if isinstance(out, tuple) and len(out) in (2, 3) and np.ndim(out[0]) >= 1:
                out, reward, *rest = out
                terminal = bool(rest[0]) if rest else False
            nxt = _f32(out, f"controller {i}'s prediction").reshape(-1)
            return nxt, float(reward), terminal

        s = _f32(state, "state")
        return int(self._m.select_ahead(s, step, int(count), int(depth)))

    def __repr__(self) -> str:
        return f"laq.Model({self.path!r}, obs_shape={self.obs_shape})"


def _f32(x: Any, what: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what} has dtype {arr.dtype}; give real numbers")
    return np.ascontiguousarray(arr, dtype=np.float32)
