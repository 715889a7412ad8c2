"""The `minatar` package's side of tests/minatar_reference.rs.

  python minatar_reference.py replay GAME EPISODES SEED
      Episodes of GAME (the package's module name, e.g. breakout) without
      sticky actions, under a policy that plays the game (in Breakout it
      follows the ball 97 steps in 100, in Space Invaders it dodges, fires and
      aims nine steps in ten, so that episodes are long and reach every
      rule; every other Space Invaders episode starts from a thinned block;
      in Seaquest it hunts divers, fires at what is ahead and surfaces when
      short of oxygen nine steps in ten) and otherwise acts at random (in
      Asterix always): one JSON line per episode with the state after reset (the game's
      attributes, named as the package names them), and per step the action
      (an index into the minimal set), the reward, whether the game ended and
      the observation (10x10xC bits, row-major, channels last); in a game
      that draws at random while it plays (Asterix's and Seaquest's spawns), also the state
      before the step and whether the step draws.
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
    "freeway": ["pos", "move_timer", "terminate_timer", "terminal", "cars"],
    "asterix": ["player_x", "player_y", "spawn_speed", "spawn_timer", "move_speed", "move_timer",
                "ramp_timer", "ramp_index", "terminal", "entities"],
    "seaquest": ["oxygen", "diver_count", "sub_x", "sub_y", "sub_or", "e_spawn_speed", "e_spawn_timer",
                 "d_spawn_timer", "move_speed", "ramp_index", "shot_timer", "surface", "terminal",
                 "f_bullets", "e_bullets", "e_fish", "e_subs", "divers"],
    "space_invaders": ["pos", "alien_dir", "enemy_move_interval", "alien_move_timer", "alien_shot_timer",
                       "ramp_index", "shot_timer", "terminal", "alien_map", "f_bullet_map", "e_bullet_map"],
}
MAX_STEPS = 5000
# Seaquest's lists of objects: each as its length, then its objects' values.
LISTS = {"f_bullets", "e_bullets", "e_fish", "e_subs", "divers"}


def player(game, env, actions, rng):
    """An index into `actions`: mostly a move that plays the game, else random."""
    g = env.env
    if game == "freeway" and rng.rand() < 0.8:
        return actions.index(2)  # up: crossings, and the redraws they bring
    if game == "breakout" and rng.rand() < 0.97:
        dx = g.ball_x - g.pos
        full = 0 if dx == 0 else (1 if dx < 0 else 3)  # noop, left, right
        return actions.index(full)
    if game == "space_invaders" and rng.rand() < 0.9:
        # Step out from under a falling bullet, else fire when loaded, else
        # go under the nearest column of aliens.
        if g.e_bullet_map[7:9, g.pos].any():
            return actions.index(1 if g.pos > 0 else 3)
        if g.shot_timer == 0:
            return actions.index(5)
        columns = [x for x in range(10) if g.alien_map[:, x].any()]
        if columns:
            target = min(columns, key=lambda x: abs(x - g.pos))
            full = 0 if target == g.pos else (1 if target < g.pos else 3)
            return actions.index(full)
    if game == "seaquest" and rng.rand() < 0.9:
        return actions.index(seaquest_move(g))
    return int(rng.randint(len(actions)))


def seaquest_move(g):
    """Surface when short of oxygen with a diver aboard (or with six), fire
    at an enemy ahead in the row, else go for the nearest diver, else patrol."""
    if g.diver_count > 0 and (g.oxygen < 60 or g.diver_count == 6):
        return 2  # up
    ahead = [e for e in g.e_fish + g.e_subs if e[1] == g.sub_y and (e[0] > g.sub_x) == g.sub_or]
    if ahead and g.shot_timer == 0:
        return 5  # fire
    if g.divers:
        d = min(g.divers, key=lambda d: abs(d[0] - g.sub_x) + abs(d[1] - g.sub_y))
        if d[1] != g.sub_y:
            return 4 if d[1] > g.sub_y else 2
        if d[0] != g.sub_x:
            return 3 if d[0] > g.sub_x else 1
    if g.sub_y == 0:
        return 4  # down: only surface with a diver
    return 3 if g.sub_or else 1


# Games that draw at random during play: each step also carries the state
# before it, and whether the step draws (then its outcome is not compared):
# Asterix spawns when its timer is out, Freeway redraws the cars' speeds when
# the chicken crosses (the step's reward), Seaquest spawns an enemy or a diver
# when either timer is out.
DRAWS_IN_PLAY = {
    "asterix": lambda before, r: before["spawn_timer"] == 0,
    "freeway": lambda before, r: r > 0,
    "seaquest": lambda before, r: before["e_spawn_timer"] == 0 or before["d_spawn_timer"] == 0,
}
TIMERS = ["spawn_timer", "e_spawn_timer", "d_spawn_timer"]


def state(env, game):
    out = []
    for name in STATE[game]:
        v = getattr(env.env, name)
        if name == "cars":
            for car in v:
                out.extend(float(x) for x in car)
            continue
        if name in LISTS:
            out.append(float(len(v)))
            for obj in v:
                out.extend(float(x) for x in obj)
            continue
        if name == "entities":
            # Per row slot: present, x, moving right, gold.
            for e in v:
                out.extend([0.0] * 4 if e is None else [1.0, float(e[0]), float(e[2]), float(e[3])])
            continue
        out.extend(float(x) for x in np.ravel(v))
    return out


def bits(env):
    return "".join("1" if b else "0" for b in np.ravel(env.state()))


def replay(game, episodes, seed):
    env = Environment(game, sticky_action_prob=0.0, difficulty_ramping=True)
    env.seed(seed)
    actions = env.minimal_action_set()
    policy = np.random.RandomState(seed + 1)
    for i in range(episodes):
        env.reset()
        if game == "space_invaders" and i % 2 == 1:
            # Every other episode starts with a thinned block (1 to 6 aliens
            # left), so that blocks are cleared, the ramp advances and the
            # march speeds up within the episodes.
            alive = np.argwhere(env.env.alien_map == 1)
            keep = policy.choice(len(alive), size=policy.randint(1, 7), replace=False)
            env.env.alien_map[:] = 0
            for y, x in alive[keep]:
                env.env.alien_map[y, x] = 1
        ep = {"state": state(env, game), "obs": bits(env), "steps": []}
        for _ in range(MAX_STEPS):
            a = player(game, env, actions, policy)
            extra = {}
            if game in DRAWS_IN_PLAY:
                extra = {"before": state(env, game)}
                timers = {t: getattr(env.env, t, None) for t in TIMERS}
            r, done = env.act(actions[a])
            if game in DRAWS_IN_PLAY:
                extra["draws"] = bool(DRAWS_IN_PLAY[game](timers, r))
            ep["steps"].append([a, float(r), bool(done), bits(env), extra])
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
