"""Tests of the Python package: reading, training on a tiny corridor, evaluation against
the CLI's `laq predict`, and the errors bad input gets."""

import csv
import logging
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import laq

# Small enough to train in seconds; the corridor needs no more to rank states.
FAST = {
    "second_seed": False,
    "mining.latent_actions": 2,
    "mining.steps": 300,
    "mining.restarts": 1,
    "dqn.steps": 400,
    "distill.steps": 200,
}

LENGTH = 8


def corridor_episodes(episodes=30, seed=0):
    """Random walks on a corridor of LENGTH cells, observed as (x, 1); reaching the
    right end pays 1 and ends the episode; 12 steps without reaching it cut the
    episode (truncation)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(episodes):
        x = int(rng.integers(0, LENGTH - 1))
        obs, rew, term = [[x, 1.0]], [], []
        for _ in range(12):
            x = min(max(x + (1 if rng.random() < 0.6 else -1), 0), LENGTH - 1)
            obs.append([x, 1.0])
            done = x == LENGTH - 1
            rew.append(1.0 if done else 0.0)
            term.append(done)
            if done:
                break
        trunc = [False] * len(rew)
        if not term[-1]:
            trunc[-1] = True
        out.append(
            SimpleNamespace(
                observations=np.array(obs, dtype=np.float32),
                rewards=np.array(rew),
                terminations=np.array(term),
                truncations=np.array(trunc),
            )
        )
    return out


class FakeMinari:
    """What laq reads of a `minari.MinariDataset`."""

    def __init__(self, episodes):
        self.episodes = episodes

    def iterate_episodes(self):
        return iter(self.episodes)


@pytest.fixture(scope="module")
def data():
    return laq.from_episodes(FakeMinari(corridor_episodes()))


@pytest.fixture(scope="module")
def data_file(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("data") / "corridor.npz"
    np.savez(path, **data)
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory, data_file):
    out = tmp_path_factory.mktemp("run") / "run"
    model = laq.train(data_file, out=out, seed=1, **FAST)
    return out, model


def laq_binary():
    """The `laq` CLI: on PATH, or built in the repository's release target directory."""
    found = shutil.which("laq")
    if found:
        return found
    root = Path(__file__).resolve().parents[2]
    for target in (os.environ.get("CARGO_TARGET_DIR"), root / "target"):
        if target:
            exe = Path(target) / "release" / "laq"
            if exe.is_file():
                return str(exe)
    return None


def test_episodes_become_transitions(data):
    n = sum(len(e.rewards) for e in corridor_episodes())
    assert data["observations"].shape == (n, 2)
    assert data["next_observations"].shape == (n, 2)
    assert data["terminals"].dtype == bool and data["timeouts"].dtype == bool
    assert np.array_equal(data["terminals"], data["rewards"] == 1.0)
    # Within an episode, one transition's next state is the following one's state.
    cont = ~(data["terminals"] | data["timeouts"])[:-1]
    assert np.array_equal(data["next_observations"][:-1][cont], data["observations"][1:][cont])


def test_load_reads_what_was_written(data, data_file):
    got = laq.load(data_file)
    assert set(got) == {
        "observations",
        "next_observations",
        "rewards",
        "terminals",
        "timeouts",
    }
    assert got["observations"].dtype == np.float32
    assert got["rewards"].dtype == np.float32
    assert got["terminals"].dtype == bool
    for k in got:
        assert np.array_equal(got[k], data[k].astype(got[k].dtype)), k


def test_load_reward_from_another_key(tmp_path, data):
    path = tmp_path / "success.npz"
    d = dict(data)
    d["success"] = d.pop("rewards") * 2
    np.savez(path, **d)
    got = laq.load(path, reward="success")
    assert np.array_equal(got["rewards"], data["rewards"] * 2)
    with pytest.raises(ValueError, match="no key `nope`"):
        laq.load(path, reward="nope")


def test_load_errors(tmp_path, data):
    with pytest.raises(FileNotFoundError):
        laq.load(tmp_path / "missing.npz")
    bad = dict(data)
    bad["rewards"] = bad["rewards"][:-1]
    path = tmp_path / "bad.npz"
    np.savez(path, **bad)
    with pytest.raises(ValueError, match="rewards"):
        laq.load(path)


def test_train_writes_the_run_and_ranks_the_corridor(run):
    out, model = run
    for name in ("value.safetensors", "metrics.json", "config.toml", "summary.txt"):
        assert (out / name).is_file(), name
    assert model.obs_shape == (2,)
    xs = np.array([[x, 1.0] for x in range(LENGTH - 1)], dtype=np.float32)
    v = model.values(xs)
    assert v.dtype == np.float32 and v.shape == (LENGTH - 1,)
    # Nearer the rewarded end is worth more.
    assert v[-1] > v[0], v
    assert model.select(xs[[0, LENGTH - 2]]) == 1


def test_model_load_and_single_observation(run):
    out, model = run
    again = laq.Model.load(out)
    same = laq.Model.load(out / "value.safetensors")
    x = np.array([[3.0, 1.0], [5.0, 1.0]], dtype=np.float32)
    assert np.array_equal(again.values(x), model.values(x))
    assert np.array_equal(same.values(x), model.values(x))
    one = model.values(x[1])
    assert one.shape == () and one == model.values(x)[1]
    # Other real dtypes are converted.
    assert np.array_equal(model.values(x.astype(np.float64)), model.values(x))
    assert np.array_equal(model.values(x.tolist()), model.values(x))
    assert 0.0 < model.gamma < 1.0


def test_values_equal_laq_predict(run, data_file, tmp_path):
    exe = laq_binary()
    if exe is None:
        pytest.skip("no `laq` binary on PATH or in target/release (cargo build --release)")
    out, model = run
    csv_path = tmp_path / "v.csv"
    subprocess.run(
        [
            exe,
            "predict",
            "--quiet",
            "--model",
            str(out / "value.safetensors"),
            "--data",
            str(data_file),
            "--out",
            str(csv_path),
        ],
        check=True,
    )
    with open(csv_path) as f:
        cli = np.array([float(r["value"]) for r in csv.DictReader(f)], dtype=np.float32)
    obs = laq.load(data_file)["observations"]
    mine = model.values(obs)
    assert mine.shape == cli.shape
    diff = float(np.max(np.abs(mine - cli)))
    print(f"max |model.values - laq predict| = {diff:.3g} over {len(cli)} observations")
    assert diff <= 1e-6


def test_train_on_arrays_and_minari(tmp_path, data):
    a = laq.train(data, out=tmp_path / "a", seed=1, **FAST)
    b = laq.train(FakeMinari(corridor_episodes()), out=tmp_path / "b", seed=1, **FAST)
    x = data["observations"][:20]
    # The same transitions and seed give the same model.
    assert np.array_equal(a.values(x), b.values(x))
    assert (tmp_path / "a" / "value.safetensors").is_file()


def test_train_logs_through_logging(tmp_path, data, caplog):
    with caplog.at_level(logging.INFO, logger="laq"):
        laq.train(data, out=tmp_path / "r", **FAST)
    assert any(r.name.startswith("laq") for r in caplog.records)


def test_train_errors(tmp_path, data):
    with pytest.raises(ValueError, match="nope"):
        laq.train(data, out=tmp_path / "x", **{"dqn.nope": 3})
    with pytest.raises(ValueError, match="type"):
        laq.train(data, out=tmp_path / "x", **{"dqn.steps": "many"})
    bad = dict(data)
    bad["next_observations"] = bad["next_observations"][:, :1]
    with pytest.raises(ValueError, match="next_observations"):
        laq.train(bad, out=tmp_path / "x", **FAST)
    nan = dict(data)
    nan["observations"] = nan["observations"].copy()
    nan["observations"][3, 0] = np.nan
    with pytest.raises(ValueError, match="(?i)nan"):
        laq.train(nan, out=tmp_path / "x", **FAST)
    strings = dict(data)
    strings["rewards"] = np.array(["a"] * len(data["rewards"]))
    with pytest.raises(TypeError, match="rewards"):
        laq.train(strings, out=tmp_path / "x", **FAST)
    with pytest.raises(FileNotFoundError):
        laq.train(tmp_path / "none.npz", out=tmp_path / "x", **FAST)
    with pytest.raises(TypeError):
        laq.train(42, out=tmp_path / "x")
    # A folder of the user's own files is not a run directory: nothing in it is replaced.
    own = tmp_path / "own"
    own.mkdir()
    (own / "report.md").write_text("mine")
    with pytest.raises(ValueError, match="run.json"):
        laq.train(data, out=own, **FAST)
    assert (own / "report.md").read_text() == "mine"


def test_model_errors(run, tmp_path):
    out, model = run
    with pytest.raises(ValueError, match=r"shape \[4, 3\].*\[2\]"):
        model.values(np.zeros((4, 3), dtype=np.float32))
    with pytest.raises(ValueError, match=r"NaN.*row 1"):
        model.values(np.array([[0.0, 1.0], [np.nan, 1.0]], dtype=np.float32))
    with pytest.raises(TypeError, match="dtype"):
        model.values(np.array([["a", "b"]]))
    with pytest.raises(ValueError, match="rewards has 1 entries for 2"):
        model.select(np.zeros((2, 2), dtype=np.float32), rewards=[1.0])
    with pytest.raises(ValueError, match="no valid"):
        model.select(np.full((2, 2), np.inf, dtype=np.float32))
    with pytest.raises(FileNotFoundError):
        laq.Model.load(tmp_path / "missing.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a valid model"):
        laq.Model.load(junk)


def test_select_uses_rewards_and_terminals(run):
    _, model = run
    assert model.cost_per_step is None
    v = model.values(np.array([[3.0, 1.0]], dtype=np.float32))
    assert model.values(np.array([[3.0, 1.0]], dtype=np.float32), in_data_units=True) == v
    c = np.array([[6.0, 1.0], [1.0, 1.0]], dtype=np.float32)
    assert model.select(c) == 0
    # A large reward on the worse state wins; a terminal state is worth its reward only.
    assert model.select(c, rewards=[0.0, 100.0]) == 1
    assert model.select(c, rewards=[0.0, 100.0], terminals=[False, True]) == 1


def test_a_cost_per_step_gives_values_in_the_logs_units(tmp_path, data):
    # The corridor as a log that pays -1 a step, the goal marked by the episode's end.
    cost = {**data, "rewards": np.full_like(data["rewards"], -1.0)}
    model = laq.train(cost, out=tmp_path / "c", seed=1, **FAST)
    assert model.cost_per_step == -1.0
    obs = data["observations"]
    v = model.values(obs).astype(np.float64)
    g = model.gamma
    returns = model.values(obs, in_data_units=True)
    np.testing.assert_allclose(returns, -(1.0 - g * v) / (1.0 - g), rtol=1e-4)
    assert (returns < 0).all()
    # Nearer the goal, a smaller cost to come.
    near, far = np.array([[6.0, 1.0], [1.0, 1.0]], dtype=np.float32)
    assert model.values(near, in_data_units=True) > model.values(far, in_data_units=True)


def test_dict_observations_are_flattened_by_key():
    ep = SimpleNamespace(
        observations={
            "b": np.array([[1.0], [2.0], [3.0]]),
            "a": np.array([[10.0, 11.0], [20.0, 21.0], [30.0, 31.0]]),
        },
        rewards=np.array([0.0, 1.0]),
        terminations=np.array([False, True]),
        truncations=np.array([False, False]),
    )
    d = laq.from_episodes(FakeMinari([ep]))
    assert d["observations"].tolist() == [[10.0, 11.0, 1.0], [20.0, 21.0, 2.0]]
    assert d["next_observations"][1].tolist() == [30.0, 31.0, 3.0]
    d = laq.from_episodes(FakeMinari([ep]), obs_keys=["b"])
    assert d["observations"].tolist() == [[1.0], [2.0]]
    short = SimpleNamespace(**{**vars(ep), "rewards": np.array([0.0])})
    with pytest.raises(ValueError, match="episode 0"):
        laq.from_episodes(FakeMinari([short]))


def test_a_camera_of_a_dict_observation_stays_frames_when_named():
    frames = np.arange(3 * 20 * 20 * 3, dtype=np.uint8).reshape(3, 20, 20, 3)
    state = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
    ep = SimpleNamespace(
        observations={"pixels": frames, "state": state},
        rewards=np.array([0.0, 1.0]),
        terminations=np.array([False, True]),
        truncations=np.array([False, False]),
    )
    with pytest.warns(UserWarning, match="obs_keys=\\['pixels'\\]"):
        d = laq.from_episodes(FakeMinari([ep]))
    assert d["observations"].tolist() == [[1.0, 0.0], [2.0, 0.0]]
    d = laq.from_episodes(FakeMinari([ep]), obs_keys=["pixels"])
    assert d["observations"].dtype == np.uint8
    assert d["observations"].shape == (2, 20, 20, 3)
    assert np.array_equal(d["next_observations"][1], frames[2])
    with pytest.warns(UserWarning, match="flattened"):
        d = laq.from_episodes(FakeMinari([ep]), obs_keys=["state", "pixels"])
    assert d["observations"].shape == (2, 2 + 1200)


@pytest.mark.parametrize("side", [7, 19])
def test_a_minigrid_dict_reads_its_grid_as_laq_reads_the_file(tmp_path, side):
    """MiniGrid as Minari records it: a heading (one number a row), the symbolic grid (u8)
    and the mission (text). The grid is read as stored, as `laq` reads the same dict from
    a Minari file; the mission and the lone heading are left out, each with a warning."""
    t = 3
    grid = np.arange((t + 1) * side * side * 3, dtype=np.uint64).astype(np.uint8) % 11
    grid = grid.reshape(t + 1, side, side, 3)
    ep = SimpleNamespace(
        observations={
            "direction": np.arange(t + 1) % 4,
            "image": grid,
            "mission": ["get to the green goal square"] * (t + 1),
        },
        rewards=np.array([0.0, 0.0, 1.0]),
        terminations=np.array([False, False, True]),
        truncations=np.array([False, False, False]),
    )
    with pytest.warns(UserWarning) as said:
        d = laq.from_episodes(FakeMinari([ep]))
    said = " ".join(str(w.message) for w in said)
    assert "['mission']" in said and "'direction' (one number a row)" in said, said
    assert np.array_equal(d["observations"], grid[:t])
    # Named, both are flattened into one vector; text named is refused.
    with pytest.warns(UserWarning, match="flattened"):
        d = laq.from_episodes(FakeMinari([ep]), obs_keys=["image", "direction"])
    assert d["observations"].shape == (t, side * side * 3 + 1)
    with pytest.raises(ValueError, match="mission"):
        laq.from_episodes(FakeMinari([ep]), obs_keys=["image", "mission"])
    mission = {"mission": ep.observations["mission"]}
    only_text = SimpleNamespace(**{**vars(ep), "observations": mission})
    with pytest.raises(ValueError, match="no observation key holds numbers"):
        laq.from_episodes(FakeMinari([only_text]))


@pytest.mark.parametrize(
    "row",
    [(20, 20), (20, 18, 3), (4, 20, 18, 3), (4, 2, 20, 18), (3, 20, 18), (8, 8), (16, 4, 3)],
)
def test_frames_follow_the_rule_laq_reads_files_by(tmp_path, row):
    """The package's view of a camera's frames is the trainer's reading of the same array
    from a file: stacks and channels-last frames reordered alike, small arrays left be."""
    a = np.arange(3 * int(np.prod(row)), dtype=np.uint64).astype(np.uint8).reshape(3, *row)
    np.savez(
        tmp_path / "f.npz",
        observations=a,
        next_observations=a,
        rewards=np.zeros(3, np.float32),
        terminals=np.zeros(3, bool),
    )
    read = laq.load(tmp_path / "f.npz")
    ours = laq._frames_chw(a)
    if ours is None:
        assert read["observations"].shape == a.shape
    else:
        assert np.array_equal(read["observations"], ours)


def test_cameras_named_together_stack_as_laq_reads_them():
    rng = np.random.default_rng(0)
    # An agent-view camera stored channels-last and a grey wrist camera channels-first,
    # of one height and width: one frame of 3 + 1 channels, as `laq --obs-keys` reads them.
    view = rng.integers(0, 256, (4, 24, 24, 3), dtype=np.uint8)
    wrist = rng.integers(0, 256, (4, 1, 24, 24), dtype=np.uint8)
    small = rng.integers(0, 256, (4, 3, 3), dtype=np.uint8)
    ep = SimpleNamespace(
        observations={"view": view, "wrist": wrist, "grid": small},
        rewards=np.array([0.0, 0.0, 1.0]),
        terminations=np.array([False, False, True]),
        truncations=np.array([False, False, False]),
    )
    d = laq.from_episodes(FakeMinari([ep]), obs_keys=["view", "wrist"])
    both = np.concatenate([view.transpose(0, 3, 1, 2), wrist], axis=1)
    assert d["observations"].dtype == np.uint8
    assert np.array_equal(d["observations"], both[:3])
    assert np.array_equal(d["next_observations"], both[1:])
    # A small u8 matrix is values, not a grey frame: it stays beside the cameras by default.
    with pytest.warns(UserWarning, match="frames left out"):
        d = laq.from_episodes(FakeMinari([ep]))
    assert np.array_equal(d["observations"], small[:3])
    with pytest.raises(ValueError, match="twice"):
        laq.from_episodes(FakeMinari([ep]), obs_keys=["view", "view"])


def test_training_releases_the_gil(tmp_path, data):
    done = []
    worker = threading.Thread(
        target=lambda: done.append(laq.train(data, out=tmp_path / "t", **FAST))
    )
    ticks = 0
    worker.start()
    while worker.is_alive():
        ticks += 1
        time.sleep(0.001)
    worker.join()
    assert done, "training failed"
    # With the GIL held for the whole run this loop could not have turned.
    assert ticks > 20, ticks


def corridor_controllers(x_goal=LENGTH - 1):
    """Moves on the corridor as `select_ahead` controllers: left (unavailable at the
    left end), right, two right (unavailable past the end), and stay with a small
    reward; entering the right end pays 1 and is terminal, and so is staying in cell 3
    (a trap that pays 0.5, less than what follows elsewhere)."""
    moves = [-1, 1, 2, 0]

    def predict(i, s):
        assert s.dtype == np.float32 and s.shape == (2,)
        x = float(s[0]) + moves[i]
        if x < 0 or x > x_goal:
            return None
        nxt = np.array([x, 1.0], dtype=np.float32)
        if x == x_goal:
            return nxt, 1.0, True
        if moves[i] == 0 and x == 3:
            return nxt, 0.5, True
        if moves[i] == 0:
            return nxt, 0.01
        return nxt

    return predict, len(moves)


def brute_force(model, state, predict, count, depth):
    """The first controller of the best sequence by enumerating every one, with the
    documented score `r + gamma * best(rest)` (`r` alone when terminal, V at the end),
    in float32 as the runtime computes it."""
    gamma = np.float32(model.gamma)

    def normalized(out):
        if isinstance(out, tuple):
            nxt, reward, *rest = out
            terminal = bool(rest and rest[0])
            return np.asarray(nxt, np.float32), np.float32(reward), terminal
        return np.asarray(out, np.float32), np.float32(0.0), False

    def first(s, i, depth):
        out = predict(i, np.asarray(s, np.float32))
        if out is None:
            return None
        nxt, reward, terminal = normalized(out)
        if terminal:
            return reward
        rest = model.values(nxt)[()] if depth == 1 else best(nxt, depth - 1)
        if rest is None:
            return None
        return np.float32(reward + gamma * np.float32(rest))

    def best(s, depth):
        scores = [first(s, i, depth) for i in range(count)]
        valid = [v for v in scores if v is not None]
        return max(valid) if valid else None

    scores = [first(state, i, depth) for i in range(count)]
    top = max(v for v in scores if v is not None)
    return scores.index(top)


def test_select_ahead_is_the_best_sequence(run):
    _, model = run
    predict, count = corridor_controllers()
    for x in range(LENGTH - 1):
        s = np.array([x, 1.0], dtype=np.float32)
        for depth in (1, 2, 3):
            expected = brute_force(model, s, predict, count, depth)
            got = model.select_ahead(s, predict, count, depth=depth)
            assert got == expected, (x, depth)
    # The default depth is 2; a state may be any real array-like.
    assert model.select_ahead([3, 1], predict, count) == brute_force(
        model, np.array([3, 1], np.float32), predict, count, 2
    )


def test_select_ahead_depth_1_is_select(run):
    _, model = run
    moves = [[1.0, 0.0], [-1.0, 0.0], [2.0, 0.0], [0.0, 0.0]]
    # Were the third terminal, it would win by its reward and V after it.
    rewards = [0.0, 0.3, 0.5, 0.05]
    terminals = [False, False, True, False]

    def predict(i, s):
        return s + np.array(moves[i], np.float32), rewards[i], terminals[i]

    for x in range(1, LENGTH - 2):
        s = np.array([x, 1.0], dtype=np.float32)
        table = np.array([s + np.array(m, np.float32) for m in moves])
        assert model.select_ahead(s, predict, len(moves), depth=1) == model.select(
            table, rewards=rewards, terminals=terminals
        )


def test_select_ahead_none_is_unavailable(run):
    _, model = run
    calls = []

    def predict(i, s):
        calls.append(i)
        # Controller 0 would win by far, but is never available.
        if i == 0:
            return None
        return s + np.array([i, 0], np.float32), 0.0

    for depth in (1, 2, 3):
        assert model.select_ahead([1.0, 1.0], predict, 3, depth=depth) != 0
    assert 0 in calls
    with pytest.raises(ValueError, match="no valid"):
        model.select_ahead([1.0, 1.0], lambda i, s: None, 3)
    # Available from the start, but from nowhere after it: no sequence of two.
    once = lambda i, s: s + [1, 0] if s[0] < 2 else None  # noqa: E731
    assert model.select_ahead([1.0, 1.0], once, 2, depth=1) == 0
    with pytest.raises(ValueError, match="no valid"):
        model.select_ahead([1.0, 1.0], once, 2, depth=2)


def test_select_ahead_raises_what_predict_raises(run):
    _, model = run

    class Broken(Exception):
        pass

    calls = []

    def predict(i, s):
        calls.append(i)
        if len(calls) == 3:
            raise Broken("controller failed")
        return s

    with pytest.raises(Broken, match="controller failed"):
        model.select_ahead([1.0, 1.0], predict, 4, depth=3)
    # The search stopped at the exception.
    assert len(calls) == 3
    with pytest.raises(ZeroDivisionError):
        model.select_ahead([1.0, 1.0], lambda i, s: 1 / 0, 2)


def test_select_ahead_errors(run):
    _, model = run
    same = lambda i, s: s  # noqa: E731
    for depth in (0, laq.MAX_LOOKAHEAD + 1, -1):
        with pytest.raises(ValueError, match="depth"):
            model.select_ahead([1.0, 1.0], same, 2, depth=depth)
    with pytest.raises(TypeError, match="depth"):
        model.select_ahead([1.0, 1.0], same, 2, depth=2.0)
    with pytest.raises(ValueError, match="count"):
        model.select_ahead([1.0, 1.0], same, 0)
    with pytest.raises(TypeError, match="callable"):
        model.select_ahead([1.0, 1.0], None, 2)
    wrong = r"controller 1 predicted a state of 3 values.* 2"
    with pytest.raises(ValueError, match=wrong):
        model.select_ahead([1.0, 1.0], lambda i, s: [0.0] * (2 + i), 2)
    with pytest.raises(ValueError, match=r"shape \[3\]"):
        model.select_ahead([1.0, 1.0, 1.0], same, 2)
    with pytest.raises(ValueError, match="NaN"):
        model.select_ahead([np.nan, 1.0], same, 2)
    assert laq.MAX_LOOKAHEAD == 4
    assert model.select_ahead([1.0, 1.0], same, 2, depth=laq.MAX_LOOKAHEAD) == 0


def test_channels_last_frames_train_and_evaluate_as_stored(tmp_path, data):
    """The corridor drawn as 20x20 RGB frames stored channels-last, as numpy and
    gymnasium keep them: laq reads them as [3, 20, 20], and the model takes them either
    way, with the same values."""
    x = data["observations"][:, 0].astype(int)
    nx = data["next_observations"][:, 0].astype(int)

    def draw(pos):
        f = np.zeros((len(pos), 20, 20, 3), dtype=np.uint8)
        for i, p in enumerate(pos):
            f[i, :, 2 * p : 2 * p + 2, 0] = 255
            f[i, 2 * p : 2 * p + 2, :, 2] = 128
        return f

    frames = dict(data, observations=draw(x), next_observations=draw(nx))
    model = laq.train(frames, out=tmp_path / "r", seed=1, **FAST)
    assert model.obs_shape == (3, 20, 20)
    stored = frames["observations"][:16].astype(np.float32)
    as_read = stored.transpose(0, 3, 1, 2)
    assert np.array_equal(model.values(stored), model.values(as_read))
    assert model.values(stored[3]) == model.values(as_read)[3]
    assert model.select(stored[:6]) == model.select(as_read[:6])
    with pytest.raises(ValueError, match=r"shape \[3, 20, 20\]"):
        model.values(stored[:, :, :10])


def test_arrays_without_next_observations_follow_their_episodes(tmp_path, data):
    """D4RL's layout: no next observations; each row's is the next row of its episode,
    and the last row of an episode cut without a terminal is left out."""
    d4rl = {k: v for k, v in data.items() if k != "next_observations"}
    model = laq.train(d4rl, out=tmp_path / "r", seed=1, **FAST)
    v = model.values(data["observations"])
    assert np.all(np.isfinite(v))
    no_terminals = {k: v for k, v in d4rl.items() if k != "terminals"}
    with pytest.raises(ValueError, match="next_observations` and `terminals"):
        laq.train(no_terminals, out=tmp_path / "x", **FAST)
