"""sebulba's side of a Python vector environment, loaded into the interpreter
the actor embeds. One `step` call steps all E envs: actions are read from, and
results written into, arrays allocated once here whose buffers the Rust side
holds (one copy each way). Same-step auto-reset as sebulba's native envs (NativeVecEnv): a
finished env's true last observation goes to `final_obs`, `obs` already holds
the next episode's first one. Time limits are Gymnasium's own (`gym.make`
wraps TimeLimit); terminated and truncated stay apart.

Images: a Box of 2 to 4 axes is an image, written channels last (H, W, C) as
sebulba's networks read it; an axis order whose first axis is shorter than
its last (a frame stack, (4, 84, 84)) is taken as channels first and
transposed. Bytes (uint8) stay bytes on sebulba's side (`dtype`).

EnvPool (`envpool:ID`, `envpool:ALE/Game-v5` for its Atari games) steps its
envs in its own C++ threads; the same semantics as the other sources are
kept here (same-step reset, final observations, life loss and clipping).

Atari (`ale:Game`, `gym:ALE/...` and `envpool:ALE/...` ids) gets the standard preprocessing; in
training envs (`purpose` "train") a lost life ends the learner's episode
without resetting the game (`episodic_life`) and rewards are clipped to their
sign (`reward_clipping`), both on by default; evaluation envs play whole games
at the raw score. Episode statistics are always of whole games at the raw
score (`raw_rewards`, `ended`), as a user scores them.
"""

import importlib
import json
import math
import re
import sys
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
        return flat_observations(make_unlocked(env_id, kwargs))


def flat_observations(env):
    """An observation that is not a Box (POPGym's Discrete cards, a Tuple
    or a Dict of parts) as the flat Box of one-hots and values gymnasium's
    `FlattenObservation` makes of it: what sebulba's networks read. A Box,
    or a space gymnasium cannot flatten (refused by `describe`), is left as
    it is."""
    from gymnasium import spaces
    from gymnasium.wrappers import FlattenObservation

    if isinstance(env.observation_space, spaces.Box):
        return env
    try:
        return FlattenObservation(env)
    except (NotImplementedError, TypeError, ValueError):
        return env


def import_ale():
    try:
        import ale_py
    except ModuleNotFoundError:
        raise BadId("ale_py does not import (Atari needs `pip install ale-py` in the venv VIRTUAL_ENV names)") from None
    return ale_py


def make_unlocked(env_id, kwargs):
    if env_id.startswith("gym:"):
        try:
            import gymnasium as gym
        except ModuleNotFoundError:
            raise BadId("gymnasium does not import (install it into a venv and set VIRTUAL_ENV to it)") from None
        name = env_id[len("gym:"):]
        atari = is_gym_atari(env_id)
        if atari:
            gym.register_envs(import_ale())
            # The preprocessing skips frames itself (and max-pools them).
            kwargs = {"frameskip": 1, **kwargs}
            frames = frame_stack(kwargs)
        try:
            env = gym.make(name, **kwargs)
        except gym.error.Error as e:
            raise BadId(f"{type(e).__name__}: {e}") from None
        if atari:
            env = gym.wrappers.AtariPreprocessing(
                env, noop_max=30, frame_skip=4, screen_size=84, terminal_on_life_loss=False, grayscale_obs=True
            )
            env = gym.wrappers.FrameStackObservation(env, frames)
        return env
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


def is_gym_atari(env_id):
    return env_id.startswith("gym:ALE/")


def is_atari(env_id):
    return env_id.startswith(("ale:", "gym:ALE/", "envpool:ALE/"))


def image_axes(shape):
    """An observation of `shape` as an image: its (H, W, C) and the axis
    order that puts it channels last (None: already so), or (None, None) for
    a vector. Channels come first when the first axis is shorter than the
    last; a 4-axis stack of colour frames (S, H, W, C) becomes (H, W, S*C)."""
    shape = tuple(int(n) for n in shape)
    if len(shape) == 2:
        return (shape[0], shape[1], 1), None
    if len(shape) == 3:
        if shape[0] < shape[2]:
            return (shape[1], shape[2], shape[0]), (1, 2, 0)
        return shape, None
    if len(shape) == 4:
        return (shape[1], shape[2], shape[0] * shape[3]), (1, 2, 0, 3)
    return None, None


def hwc_bounds(values, shape, axes):
    """Per-element bounds in the order sebulba's rows hold them."""
    a = np.broadcast_to(np.asarray(values, np.float64), shape)
    if axes is not None:
        a = np.transpose(a, axes)
    return bounds(a.ravel())


def describe(env):
    """The spaces as plain values; refuses what sebulba cannot act in."""
    max_steps = int(env.spec.max_episode_steps or 0) if env.spec else 0
    return describe_spaces(env.observation_space, env.action_space, max_steps)


def describe_spaces(obs, act, max_steps):
    from gymnasium import spaces

    if not isinstance(obs, spaces.Box):
        raise TypeError(f"observation space {obs} is not a Box (only Box observations are supported)")
    image, axes = image_axes(obs.shape)
    out = {
        "obs_dim": int(np.prod(obs.shape)) if obs.shape else 1,
        "obs_low": hwc_bounds(obs.low, obs.shape, axes),
        "obs_high": hwc_bounds(obs.high, obs.shape, axes),
        "max_episode_steps": max_steps,
        "image": list(image) if image else None,
        "dtype": "u8" if obs.dtype == np.uint8 else "f32",
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
    if env_id.startswith(("ale:", "envpool:")):
        env = make_vec(env_id, kwargs_json, [0], "evaluate")
        try:
            return json.dumps(env.describe())
        finally:
            env.close()
    env = make_one(env_id, atari_options(env_id, parse_kwargs(kwargs_json), "evaluate")[0])
    try:
        return json.dumps(describe(env))
    finally:
        env.close()


def atari_options(env_id, kwargs, purpose):
    """Splits sebulba's Atari training options off the kwargs: (kwargs left,
    episodic life, reward clipping), both off outside training and for
    anything but Atari."""
    if not is_atari(env_id):
        return kwargs, False, False
    kwargs = dict(kwargs)
    train = purpose == "train"
    episodic = bool(kwargs.pop("episodic_life", True)) and train
    clip = bool(kwargs.pop("reward_clipping", True)) and train
    return kwargs, episodic, clip


def frame_stack(kwargs):
    """Pops `frame_stack` off an Atari env's kwargs: the frames each
    observation stacks, 4 by default (the Nature CNN's input), 1 for a
    policy that remembers (CleanRL's ppo_atari_lstm). One name on every
    Atari path; each backend's own (`stack_num`) is refused for it."""
    if "stack_num" in kwargs:
        raise TypeError("env.kwargs.stack_num: sebulba's name for it is env.kwargs.frame_stack")
    n = kwargs.pop("frame_stack", 4)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 16:
        raise TypeError(f"env.kwargs.frame_stack: frames an Atari observation stacks, an integer in 1..=16, got {n!r}")
    return n


def make_vec(env_id, kwargs_json, seeds, purpose):
    """E envs of `env_id` for `purpose` ("train" or "evaluate")."""
    if env_id.startswith("ale:"):
        return AleVecEnv(env_id, kwargs_json, seeds, purpose)
    if env_id.startswith("envpool:"):
        from sebulba_envpool import EnvPoolVecEnv

        return EnvPoolVecEnv(env_id, kwargs_json, seeds, purpose)
    return VecEnv(env_id, kwargs_json, seeds, purpose)


# Env ids whose render raised in this process: never asked again. A
# MuJoCo env without an OpenGL context raises the first time and can hang
# the process (a C++ static initialised twice) the second.
RENDER_FAILED = {}


def rgb_frame(env_id, env):
    """An env's picture for videos as (height, width, RGB bytes): what
    `render()` gives in `rgb_array` mode. None where the env draws nothing
    (another render mode, a render that raised once, with the reason said
    once on stderr, a picture that is not an RGB(A) image of bytes): the
    video is then skipped, never the evaluation."""
    if getattr(env, "render_mode", None) != "rgb_array" or env_id in RENDER_FAILED:
        return None
    try:
        f = np.asarray(env.render())
    except Exception as e:
        RENDER_FAILED[env_id] = f"{type(e).__name__}: {e}"
        print(f"sebulba: {env_id} cannot draw itself, no videos of it: {RENDER_FAILED[env_id]}", file=sys.stderr)
        return None
    if f.dtype != np.uint8 or f.ndim != 3 or f.shape[2] not in (3, 4):
        return None
    return int(f.shape[0]), int(f.shape[1]), np.ascontiguousarray(f[:, :, :3]).tobytes()


class Frames:
    """Writes observations into sebulba's float rows, channels last."""

    def __init__(self, space_shape, rows):
        self.image, self.axes = image_axes(space_shape)
        self.rows = rows

    def put(self, i, o, what):
        o = np.asarray(o)
        row = self.rows[i]
        if o.size != row.shape[0]:
            raise EnvFailure(i, what, f"{what}: expected {row.shape[0]} values, got {o.size}")
        if self.axes is not None and o.ndim == len(self.axes):
            o = np.transpose(o, self.axes)
        np.copyto(row, o.reshape(-1), casting="unsafe")

    def put_all(self, batch):
        """A whole batch `[E, *space]` at once (ALE's vector env)."""
        e = self.rows.shape[0]
        if self.axes is None:
            np.copyto(self.rows, batch.reshape(e, -1), casting="unsafe")
            return
        axes = (0,) + tuple(a + 1 for a in self.axes)
        h, w, c = self.image
        np.copyto(self.rows.reshape(e, h, w, c), np.transpose(batch, axes).reshape(e, h, w, c), casting="unsafe")


def step_buffers(env, e, d, space_shape):
    """The arrays one step of `e` envs writes (the Rust side holds their
    buffers): observations and final observations as float rows written
    channels last, rewards (clipped for training) and raw ones, the end
    flags, and `ended` for whole games."""
    env.obs = np.zeros((e, d), np.float32)
    env.final_obs = np.zeros((e, d), np.float32)
    env.obs_frames = Frames(space_shape, env.obs)
    env.final_frames = Frames(space_shape, env.final_obs)
    env.rewards = np.zeros(e, np.float64)
    env.terminated = np.zeros(e, np.uint8)
    env.truncated = np.zeros(e, np.uint8)
    env.raw_rewards = np.zeros(e, np.float64)
    env.ended = np.zeros(e, np.uint8)


class VecEnv:
    """Gymnasium or user envs, one Python object each."""

    def __init__(self, env_id, kwargs_json, seeds, purpose):
        self.env_id = env_id
        self.kwargs, self.episodic_life, self.clip = atari_options(env_id, parse_kwargs(kwargs_json), purpose)
        self.seeds = [int(s) for s in seeds]
        self.envs = []
        if purpose == "evaluate" and env_id.startswith("gym:") and "render_mode" not in self.kwargs:
            # Evaluation envs can be filmed: rgb_array draws only when asked.
            # An env whose constructor takes no render mode is made without.
            filmed = {**self.kwargs, "render_mode": "rgb_array"}
            try:
                self.envs.append(make_one(env_id, filmed))
                self.kwargs = filmed
            except TypeError as e:
                if "render_mode" not in str(e):
                    raise
        self.envs += [make_one(env_id, self.kwargs) for _ in self.seeds[len(self.envs):]]
        info = describe(self.envs[0])
        e, d = len(self.envs), info["obs_dim"]
        if "discrete" in info:
            self.start = int(self.envs[0].action_space.start)
            self.actions = np.zeros(e, np.uint32)
        else:
            self.start = None
            self.actions = np.zeros((e, len(info["box_low"])), np.float32)
            self.act_dtype = self.envs[0].action_space.dtype
        step_buffers(self, e, d, self.envs[0].observation_space.shape)
        self.lives = [None] * e

    def render_rgb(self, i):
        return rgb_frame(self.env_id, self.envs[i])

    def _reset_one(self, i, seed):
        try:
            o, info = self.envs[i].reset(seed=seed)
        except Exception:
            raise EnvFailure(i, "reset raised", traceback.format_exc())
        self.lives[i] = info.get("lives") if isinstance(info, dict) else None
        self.obs_frames.put(i, o, "reset observation")

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

    def _life_lost(self, i, info):
        if not self.episodic_life or not isinstance(info, dict):
            return False
        before, after = self.lives[i], info.get("lives")
        self.lives[i] = after
        return before is not None and after is not None and after < before

    def step(self):
        for i, env in enumerate(self.envs):
            if self.start is None:
                a = self.actions[i].astype(self.act_dtype, copy=False)
            else:
                a = int(self.actions[i]) + self.start
            try:
                o, r, term, trunc, info = env.step(a)
            except Exception:
                raise EnvFailure(i, "step raised", traceback.format_exc())
            r = float(r)
            self.raw_rewards[i] = r
            self.rewards[i] = float(np.sign(r)) if self.clip else r
            lost = self._life_lost(i, info)
            self.ended[i] = bool(term or trunc)
            self.terminated[i] = bool(term or lost)
            self.truncated[i] = bool(trunc)
            if term or trunc:
                self.final_frames.put(i, o, "step observation")
                self._reset_one(i, None)
            else:
                if lost:
                    # The learner's episode ends here; the game goes on.
                    self.final_frames.put(i, o, "step observation")
                self.obs_frames.put(i, o, "step observation")

    def close(self):
        for env in self.envs:
            env.close()


# What AtariVectorEnv keyword arguments sebulba sets itself.
ALE_RESERVED = ("autoreset_mode", "batch_size", "life_loss_info", "continuous")


def ale_game(env_id):
    """`ale:SpaceInvaders` (or `ale:space_invaders`) as ALE's ROM name."""
    name = env_id[len("ale:"):]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class AleVecEnv:
    """Atari games on ALE's own vector env (`ale_py.vector_env.AtariVectorEnv`):
    E emulators stepped by C++ threads outside the GIL, preprocessed there
    (no-op starts, frame skip 4 with max-pooling, 84x84 grayscale, 4 frames
    stacked unless `frame_stack` says otherwise, sticky actions 0.25 as ALE
    v5's). Its own `episodic_life` would
    restart the game at every lost life; sebulba asks for its life-loss
    signal instead, so that a life lost ends the learner's episode and the
    game goes on."""

    def __init__(self, env_id, kwargs_json, seeds, purpose):
        ale_py = import_ale()
        from ale_py.vector_env import AtariVectorEnv

        self.env_id = env_id
        kwargs, self.episodic_life, self.clip = atari_options(env_id, parse_kwargs(kwargs_json), purpose)
        for key in ALE_RESERVED + ("episodic_life",):
            if key in kwargs:
                raise TypeError(f"env.kwargs.{key}: sebulba sets this itself for `ale:` envs")
        kwargs.setdefault("repeat_action_probability", 0.25)
        kwargs["stack_num"] = frame_stack(kwargs)
        game = ale_game(env_id)
        if ale_py.roms.get_rom_path(game) is None:
            raise BadId(f"ALE has no game `{game}` (ROM names are snake_case: ale:Breakout, ale:SpaceInvaders)")
        self.seeds = [int(s) for s in seeds]
        e = len(self.seeds)
        with MAKE_LOCK:
            self.env = AtariVectorEnv(
                game, e, autoreset_mode="SameStep", life_loss_info=self.episodic_life, reward_clipping=False, **kwargs
            )
        self.frameskip = int(kwargs.get("frameskip", 4))
        self.max_frames = int(kwargs.get("max_num_frames_per_episode", 108000))
        space = self.env.single_observation_space
        d = int(np.prod(space.shape))
        self.actions = np.zeros(e, np.uint32)
        step_buffers(self, e, d, space.shape)
        self.lives = np.zeros(e, np.int64)

    def render_rgb(self, i):
        """ALE's vector env shows no emulator's screen: `gym:ALE/...` ids
        are filmed instead."""
        return None

    def describe(self):
        steps = self.max_frames // max(self.frameskip, 1)
        return describe_spaces(self.env.single_observation_space, self.env.single_action_space, steps)

    @staticmethod
    def _seeds(seeds):
        # ALE takes seeds as C ints.
        return np.asarray([int(s) % (2**31 - 1) for s in seeds], dtype=np.int64)

    def reset(self):
        o, info = self.env.reset(seed=self._seeds(self.seeds))
        self.lives[:] = info["lives"]
        self.obs_frames.put_all(o)

    def restart(self, i, seed):
        mask = np.zeros(len(self.seeds), dtype=np.bool_)
        mask[i] = True
        o, info = self.env.reset(seed=self._seeds([seed]), options={"reset_mask": mask})
        self.lives[i] = info["lives"][i]
        self.obs_frames.put_all(o)

    def step(self):
        # An error here is the whole vector env's, not one game's: it is
        # raised as it is (one env cannot be restarted alone in its place).
        o, r, te, tr, info = self.env.step(self.actions.astype(np.int32))
        lives = info["lives"]
        np.copyto(self.raw_rewards, r, casting="unsafe")
        np.copyto(self.rewards, np.sign(r) if self.clip else r, casting="unsafe")
        if self.episodic_life:
            # A game over restarts the game: its lives do not go down.
            over = tr | (te & (lives >= self.lives))
        else:
            over = te | tr
        self.lives[:] = lives
        np.copyto(self.terminated, te, casting="unsafe")
        np.copyto(self.truncated, tr, casting="unsafe")
        np.copyto(self.ended, over, casting="unsafe")
        self.obs_frames.put_all(o)
        done = np.flatnonzero(te | tr)
        if done.size:
            final = info["final_obs"]
            for i in done:
                self.final_frames.put(i, final[i], "final observation")

    def close(self):
        self.env.close()
