"""EnvPool as a sebulba environment source (`envpool:ID`; its Atari games as
`envpool:ALE/Game-v5`, named as Gymnasium names them, so that sebulba knows
an Atari id from its name alone). EnvPool steps the E envs in its own C++
threads outside the GIL: one Python call a step for all of them.

EnvPool resets a finished env on the *next* step (Gymnasium's NEXT_STEP
autoreset); sebulba resets in the same step, so a finished env is reset here
at once (`reset` with its env id) and its last observation kept as the final
one, as every other source does. Atari runs with EnvPool's own episodic life
and reward clipping off: a lost life and the clipped reward are worked out
here from `lives` and the raw reward, so that training and evaluation play
the same game and score it raw, exactly as the `ale:` and `gym:ALE/` paths.
Sticky actions default to ALE v5's 0.25 (EnvPool's default is none).
"""

import numpy as np

from sebulba_env import MAKE_LOCK, BadId, atari_options, describe_spaces, frame_stack, parse_kwargs, step_buffers

# What sebulba sets itself (the E envs, their seeds, one batch of all E).
RESERVED = ("num_envs", "batch_size", "seed", "env_seed", "reward_clip", "gym_reset_return_info")


def import_envpool():
    try:
        import envpool
    except ModuleNotFoundError:
        raise BadId("envpool does not import (`envpool:` ids need `pip install envpool` in the venv VIRTUAL_ENV names)") from None
    return envpool


def envpool_name(env_id):
    """`envpool:ALE/Breakout-v5` -> ("Breakout-v5", True)."""
    name = env_id[len("envpool:"):]
    if name.startswith("ALE/"):
        return name[len("ALE/"):], True
    return name, False


def check_name(envpool, name, atari):
    from envpool.registration import registry

    entry = registry.specs.get(name)
    if entry is None:
        raise BadId(f"EnvPool has no env `{name}` (envpool.list_all_envs() lists them)")
    is_atari = entry[0] == "envpool.atari"
    if is_atari and not atari:
        raise BadId(f"`{name}` is an Atari game: write envpool:ALE/{name} (sebulba's Atari preprocessing and preset)")
    if atari and not is_atari:
        raise BadId(f"`{name}` is not one of EnvPool's Atari games: write envpool:{name}")


class EnvPoolVecEnv:
    """E envs of one EnvPool pool, stepped together (its synchronous mode:
    a batch of all E)."""

    def __init__(self, env_id, kwargs_json, seeds, purpose):
        envpool = import_envpool()
        name, atari = envpool_name(env_id)
        check_name(envpool, name, atari)
        kwargs, self.episodic_life, self.clip = atari_options(env_id, parse_kwargs(kwargs_json), purpose)
        for key in RESERVED + (("episodic_life",) if not atari else ()):
            if key in kwargs:
                raise TypeError(f"env.kwargs.{key}: sebulba sets this itself for `envpool:` envs")
        if atari:
            frames = frame_stack(kwargs)
            kwargs = {"repeat_action_probability": 0.25, **kwargs, "episodic_life": False, "reward_clip": False}
            kwargs["stack_num"] = frames
        self.seeds = [int(s) % (2**31 - 1) for s in seeds]
        e = len(self.seeds)
        with MAKE_LOCK:
            self.env = envpool.make(
                name, env_type="gymnasium", num_envs=e, batch_size=e, seed=self.seeds[0], env_seed=self.seeds, **kwargs
            )
        self.ids = np.arange(e, dtype=np.int32)
        obs_space, act_space = self.env.single_observation_space, self.env.single_action_space
        self.info = describe_spaces(obs_space, act_space, int(self.env.spec.config.max_episode_steps))
        d = self.info["obs_dim"]
        if "discrete" in self.info:
            self.actions = np.zeros(e, np.uint32)
            self.act_dtype = np.int32
        else:
            self.actions = np.zeros((e, len(self.info["box_low"])), np.float32)
            self.act_dtype = act_space.dtype
        step_buffers(self, e, d, obs_space.shape)
        self.lives = np.zeros(e, np.int64)

    def render_rgb(self, i):
        """EnvPool's pools show no env's screen: no videos."""
        return None

    def describe(self):
        return self.info

    def _put_reset(self, o, info):
        ids = np.asarray(info["env_id"])
        for row, i in enumerate(ids):
            self.obs_frames.put(i, o[row], "reset observation")
        if "lives" in info:
            self.lives[ids] = info["lives"]

    def reset(self):
        self._put_reset(*self.env.reset(self.ids))

    def restart(self, i, seed):
        # EnvPool cannot reseed one env: the pool's own generator goes on.
        self._put_reset(*self.env.reset(np.asarray([i], dtype=np.int32)))

    def step(self):
        # An error here is the whole pool's, not one env's: raised as it is.
        o, r, te, tr, info = self.env.step(self.actions.astype(self.act_dtype), self.ids)
        order = np.asarray(info["env_id"])
        if not np.array_equal(order, self.ids):
            back = np.argsort(order)
            o, r, te, tr = o[back], r[back], te[back], tr[back]
            info = {"lives": np.asarray(info["lives"])[back]} if "lives" in info else {}
        te, tr = np.asarray(te, bool), np.asarray(tr, bool)
        over = te | tr
        lost = np.zeros_like(over)
        if self.episodic_life and "lives" in info:
            lives = np.asarray(info["lives"])
            lost = ~over & (lives < self.lives)
            self.lives[:] = lives
        np.copyto(self.raw_rewards, r, casting="unsafe")
        np.copyto(self.rewards, np.sign(r) if self.clip else r, casting="unsafe")
        np.copyto(self.terminated, te | lost, casting="unsafe")
        np.copyto(self.truncated, tr, casting="unsafe")
        np.copyto(self.ended, over, casting="unsafe")
        self.obs_frames.put_all(np.asarray(o))
        for i in np.flatnonzero(over | lost):
            # A lost life ends the learner's episode; the game goes on.
            self.final_frames.put(i, o[i], "final observation")
        done = np.flatnonzero(over).astype(np.int32)
        if done.size:
            self._put_reset(*self.env.reset(done))

    def close(self):
        self.env.close()
