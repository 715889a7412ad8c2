"""The `minatar` package's side of tests/minatar_reference.rs.

  python minatar_reference.py replay GAME EPISODES SEED
      Episodes of GAME (the package's module name, e.g. breakout) without
      sticky actions, under a policy that plays the game (in Breakout it
      follows the ball 97 steps in 100, so that episodes are long and reach
      every rule) and otherwise acts at random: one JSON line per episode with the state after reset (the game's
      attributes, named as the package names them), and per step the action
      (an index into the minimal set), the reward, whether the game ended and
      the observation (10x10xC bits, row-major, channels last).
  python minatar_reference.py compare GAME EPISODES SEED OURS.json
      EPISODES episodes of GAME as the paper plays it (sticky actions 0.1,
      difficulty ramping), uniformly random minimal actions; compares their
      lengths and returns with ours (a JSON object of two lists) by SciPy's
      two-sample Kolmogorov-Smirnov test; prints one JSON line.
"""
import json
import sys

import numpy as np
from scipy.stats import ks_2samp
from minatar import Environment

STATE = {
    "breakout": ["ball_x", "ball_y", "ball_dir", "pos", "last_x", "last_y", "strike", "terminal", "brick_map"],
}
MAX_STEPS = 5000


def player(game, env, actions, rng):
    """An index into `actions`: mostly a move that plays the game, else random."""
    if game == "breakout" and rng.rand() < 0.97:
        dx = env.env.ball_x - env.env.pos
        full = 0 if dx == 0 else (1 if dx < 0 else 3)  # noop, left, right
        return actions.index(full)
    return int(rng.randint(len(actions)))


def state(env, game):
    out = []
    for name in STATE[game]:
        v = getattr(env.env, name)
        out.extend(float(x) for x in np.ravel(v))
    return out


def bits(env):
    return "".join("1" if b else "0" for b in np.ravel(env.state()))


def replay(game, episodes, seed):
    env = Environment(game, sticky_action_prob=0.0, difficulty_ramping=True)
    env.seed(seed)
    actions = env.minimal_action_set()
    policy = np.random.RandomState(seed + 1)
    for _ in range(episodes):
        env.reset()
        ep = {"state": state(env, game), "obs": bits(env), "steps": []}
        for _ in range(MAX_STEPS):
            a = player(game, env, actions, policy)
            r, done = env.act(actions[a])
            ep["steps"].append([a, float(r), bool(done), bits(env)])
            if done:
                break
        print(json.dumps(ep))


def compare(game, episodes, seed, ours_path):
    env = Environment(game, sticky_action_prob=0.1, difficulty_ramping=True)
    env.seed(seed)
    actions = env.minimal_action_set()
    policy = np.random.RandomState(seed + 1)
    lengths, returns = [], []
    for _ in range(episodes):
        env.reset()
        n, g = 0, 0.0
        done = False
        while not done and n < MAX_STEPS:
            r, done = env.act(actions[policy.randint(len(actions))])
            n, g = n + 1, g + r
        lengths.append(n)
        returns.append(g)
    with open(ours_path) as f:
        ours = json.load(f)
    out = {"episodes": episodes}
    for what, theirs in (("length", lengths), ("return", returns)):
        t = ks_2samp(ours[what], theirs)
        out[what] = {"statistic": float(t.statistic), "pvalue": float(t.pvalue),
                     "ours_mean": float(np.mean(ours[what])), "theirs_mean": float(np.mean(theirs))}
    print(json.dumps(out))


if __name__ == "__main__":
    mode, game, episodes, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if mode == "replay":
        replay(game, episodes, seed)
    else:
        compare(game, episodes, seed, sys.argv[5])
