"""What the scripts that record data share: the rows of goal-reaching episodes, writing a
dataset with its truth, and the fewest steps to a goal over a grid of two state values,
by value iteration."""
import argparse

import numpy as np


def arguments(doc, random_help, random=0.3, more=None, shares=()):
    """The command line of a script that drives a body with a noisy controller:
    `--steps`, `--random` (the share of random actions, `random` by default), `--seed`,
    `--out`, and what `more(parser)` adds; `--random` and the options named in `shares`
    (`(name, "of what")`) must lie within 0 and 1."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--random", type=float, default=random, help=random_help)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    if more:
        more(p)
    a = p.parse_args()
    for name, of in (("random", "the steps"), *shares):
        if not 0.0 <= getattr(a, name) <= 1.0:
            p.error(f"--{name} {getattr(a, name)}: a share of {of}, 0 to 1")
    return a


class Rows:
    """The transitions a script records from a body reaching a goal, episode after episode,
    until it has `steps` of them: a step that reaches the goal is rewarded and terminal, an
    episode's last step that does not (or the last step recorded) is a timeout."""

    def __init__(self, steps):
        self.steps = steps
        self.obs, self.nxt, self.rew, self.term, self.tout = [], [], [], [], []

    def full(self):
        return len(self.rew) >= self.steps

    def add(self, s, s2, hit, last):
        """Records the step from `s` to `s2` (`hit`: it reaches the goal; `last`: the
        episode's last step); returns whether the episode ends with it."""
        self.obs.append(s)
        self.nxt.append(s2)
        self.rew.append(1.0 if hit else 0.0)
        self.term.append(hit)
        self.tout.append(not hit and (last or self.full()))
        return hit or last or self.full()

    def save(self, out, truth):
        save(out, self.obs, self.nxt, self.rew, self.term, self.tout, truth)


def save(out, obs, nxt, rew, term, tout, truth):
    """Writes the transitions as laq reads them and the truth beside them, `<out>_truth.npy`."""
    np.savez(
        out,
        observations=np.array(obs, np.float32),
        next_observations=np.array(nxt, np.float32),
        rewards=np.array(rew, np.float32),
        terminals=np.array(term),
        timeouts=np.array(tout),
    )
    np.save(out.removesuffix(".npz") + "_truth.npy", np.asarray(truth, np.float32))


def fewest_steps(step, done, low, high, sizes, actions, periodic=False, sweeps=2000):
    """The fewest steps to `done` from any (x, y) under `step(x, y, action)`, by value
    iteration on a `sizes` grid over [low, high] (x periodic over its range with
    `periodic`), bilinear between grid points; returns a function of (x, y) arrays."""
    xs = np.linspace(low[0], high[0], sizes[0])
    ys = np.linspace(low[1], high[1], sizes[1])
    x, y = np.meshgrid(xs, ys, indexing="ij")

    def at(grid, px, py):
        if periodic:
            px = (px - low[0]) % (high[0] - low[0]) + low[0]
        fx = (px - low[0]) / (high[0] - low[0]) * (sizes[0] - 1)
        fy = (py - low[1]) / (high[1] - low[1]) * (sizes[1] - 1)
        i = np.clip(np.floor(fx).astype(int), 0, sizes[0] - 2)
        j = np.clip(np.floor(fy).astype(int), 0, sizes[1] - 2)
        a, b = fx - i, fy - j
        return ((1 - a) * (1 - b) * grid[i, j] + a * (1 - b) * grid[i + 1, j]
                + (1 - a) * b * grid[i, j + 1] + a * b * grid[i + 1, j + 1])

    def value(grid, px, py):
        return np.where(done(px, py), 0.0, at(grid, px, py))

    steps = np.zeros(x.shape)
    nexts = [step(x, y, u) for u in actions]
    for _ in range(sweeps):
        best = np.min([1.0 + value(steps, nx, ny) for nx, ny in nexts], axis=0)
        best[done(x, y)] = 0.0
        if np.max(np.abs(best - steps)) < 1e-6:
            steps = best
            break
        steps = best
    return lambda px, py: value(steps, px, py)
