"""sebulba's side of a Python vector environment, loaded into the interpreter
the actor embeds. One `step` call steps all E envs: actions are read from, and
results written into, arrays allocated once here whose buffers the Rust side
holds (one copy each way). Same-step auto-reset as sebulba's native envs (NativeVecEnv): a
finished env's true last observation goes to `final_obs`, `obs` already holds
the next episode's first one. Time limits are Gymnasium's own (`gym.make`
wraps TimeLimit); terminated and truncated stay apart.
"""

import importlib
import json
import math
import threading
import traceback

import numpy as np


class BadId(Exception):
    """The id names nothing that can be made (no such env, module or
    factory): said in one line, without a traceback."""


class EnvFailure(Exception):
    """An env raised or returned non-finite values: `index` names it."""

    def __init__(self, index, what, text):
        super().__init__(f"env {index}: {what}")
        self.index = index
        self.what = what
        self.text = text


# Envs are made one at a time: actor threads of one process making envs at
# once would import the same packages concurrently, which CPython can answer
# with a partially initialised module.
MAKE_LOCK = threading.Lock()


def parse_kwargs(kwargs_json):
    kwargs = json.loads(kwargs_json) if kwargs_json else {}
    if not isinstance(kwargs, dict):
        raise TypeError(f"env.kwargs must be a table (a JSON object), got {type(kwargs).__name__}")
    return kwargs


def make_one(env_id, kwargs):
    with MAKE_LOCK:
        return make_unlocked(env_id, kwargs)


def make_unlocked(env_id, kwargs):
    if env_id.startswith("gym:"):
        try:
            import gymnasium as gym
        except ModuleNotFoundError:
            raise BadId("gymnasium does not import (install it into a venv and set VIRTUAL_ENV to it)") from None
        try:
            return gym.make(env_id[len("gym:"):], **kwargs)
        except gym.error.Error as e:
            raise BadId(f"{type(e).__name__}: {e}") from None
    if env_id.startswith("py:"):
        target = env_id[len("py:"):]
        module, sep, factory = target.rpartition(":")
        if not sep or not module or not factory:
            raise BadId(f"expected py:package.module:factory, got `{env_id}`")
        try:
            make = getattr(importlib.import_module(module), factory)
        except ModuleNotFoundError as e:
            raise BadId(f"ModuleNotFoundError: {e} (is it on PYTHONPATH or in the venv?)") from None
        except AttributeError:
            raise BadId(f"module `{module}` has no `{factory}`") from None
        return make(**kwargs)
    raise BadId(f"not a Python environment id: `{env_id}`")


def bounds(values):
    """Finite bounds as numbers, infinite ones as null (JSON has no inf)."""
    return [float(v) if math.isfinite(v) else None for v in values]


def describe(env):
    """The spaces as plain values; refuses what sebulba cannot act in."""
    from gymnasium import spaces

    obs = env.observation_space
    if not isinstance(obs, spaces.Box):
        raise TypeError(f"observation space {obs} is not a Box (only Box observations are supported)")
    act = env.action_space
    out = {
        "obs_dim": int(np.prod(obs.shape)) if obs.shape else 1,
        "obs_low": bounds(np.asarray(obs.low, np.float64).ravel()),
        "obs_high": bounds(np.asarray(obs.high, np.float64).ravel()),
        "max_episode_steps": int(env.spec.max_episode_steps or 0) if env.spec else 0,
    }
    if isinstance(act, spaces.Discrete):
        out["discrete"] = int(act.n)
    elif isinstance(act, spaces.Box):
        low = np.asarray(act.low, np.float64).ravel()
        high = np.asarray(act.high, np.float64).ravel()
        if len(act.shape) != 1:
            raise TypeError(f"action space {act}: only one-dimensional Box actions are supported")
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise TypeError(f"action space {act}: Box actions need finite bounds (the policy rescales to them)")
        out["box_low"] = low.tolist()
        out["box_high"] = high.tolist()
    else:
        raise TypeError(f"action space {act} is neither Discrete nor Box")
    return out


def spec_json(env_id, kwargs_json):
    env = make_one(env_id, parse_kwargs(kwargs_json))
    try:
        return json.dumps(describe(env))
    finally:
        env.close()


class VecEnv:
    def __init__(self, env_id, kwargs_json, seeds):
        self.env_id = env_id
        self.kwargs = parse_kwargs(kwargs_json)
        self.seeds = [int(s) for s in seeds]
        self.envs = [make_one(env_id, self.kwargs) for _ in self.seeds]
        info = describe(self.envs[0])
        e, d = len(self.envs), info["obs_dim"]
        self.shape = self.envs[0].observation_space.shape
        if "discrete" in info:
            self.start = int(self.envs[0].action_space.start)
            self.actions = np.zeros(e, np.uint32)
        else:
            self.start = None
            self.actions = np.zeros((e, len(info["box_low"])), np.float32)
            self.act_dtype = self.envs[0].action_space.dtype
        self.obs = np.zeros((e, d), np.float32)
        self.final_obs = np.zeros((e, d), np.float32)
        self.rewards = np.zeros(e, np.float64)
        self.terminated = np.zeros(e, np.uint8)
        self.truncated = np.zeros(e, np.uint8)

    def _put(self, row, index, o, what):
        flat = np.asarray(o, dtype=np.float32).reshape(-1)
        if flat.shape[0] != row.shape[0]:
            raise EnvFailure(index, what, f"{what}: expected {row.shape[0]} values, got {flat.shape[0]}")
        row[:] = flat

    def _reset_one(self, i, seed):
        try:
            o, _ = self.envs[i].reset(seed=seed)
        except Exception:
            raise EnvFailure(i, "reset raised", traceback.format_exc())
        self._put(self.obs[i], i, o, "reset observation")

    def reset(self):
        for i, s in enumerate(self.seeds):
            self._reset_one(i, s)

    def restart(self, i, seed):
        """Replaces env i with a new one (after a failure) and resets it."""
        try:
            self.envs[i].close()
        except Exception:
            pass
        self.envs[i] = make_one(self.env_id, self.kwargs)
        self._reset_one(i, int(seed))

    def step(self):
        for i, env in enumerate(self.envs):
            if self.start is None:
                a = self.actions[i].astype(self.act_dtype, copy=False)
            else:
                a = int(self.actions[i]) + self.start
            try:
                o, r, term, trunc, _ = env.step(a)
            except Exception:
                raise EnvFailure(i, "step raised", traceback.format_exc())
            self.rewards[i] = float(r)
            self.terminated[i] = bool(term)
            self.truncated[i] = bool(trunc)
            if term or trunc:
                self._put(self.final_obs[i], i, o, "step observation")
                self._reset_one(i, None)
            else:
                self._put(self.obs[i], i, o, "step observation")

    def close(self):
        for env in self.envs:
            env.close()
