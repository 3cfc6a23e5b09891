"""The served judge (numpy) computes what the trained network (torch) computes."""

import numpy as np
import pytest

from cardrag.retrievers.judge.model import Learned, compare, side

torch = pytest.importorskip("torch")

from cardrag.evals.judge.network import JudgeNetwork  # noqa: E402


def _network(seed: int) -> JudgeNetwork:
    torch.manual_seed(seed)
    network = JudgeNetwork()
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    return network


def test_numpy_compare_gives_the_network_s_logits() -> None:
    rng = np.random.default_rng(3)
    question = rng.normal(size=(7, 3 * 384)).astype(np.float32)
    sentences = [rng.normal(size=(n, 3 * 384)).astype(np.float32) for n in (4, 9, 2)]
    network = _network(1)
    width = max(len(s) for s in sentences)
    padded = np.zeros((3, width, 3 * 384), np.float32)
    mask = np.zeros((3, width), bool)
    for row, s in enumerate(sentences):
        padded[row, : len(s)], mask[row, : len(s)] = s, True
    with torch.no_grad():
        expected = network(
            torch.from_numpy(np.repeat(question[None], 3, 0)),
            torch.ones(3, 7, dtype=torch.bool),
            torch.from_numpy(padded),
            torch.from_numpy(mask),
        ).numpy()
    learned = network.learned()
    got = compare(learned, side(learned, question), [side(learned, s) for s in sentences])
    assert got.shape == (3,)
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert len(set(np.round(got, 3))) == 3  # a network that ignores the sentence would tie


def test_learned_weights_survive_saving_in_fp16(tmp_path) -> None:  # type: ignore[no-untyped-def]
    learned = _network(2).learned()
    learned.save(tmp_path / "judge.npz")
    loaded = Learned.load(tmp_path / "judge.npz")
    assert loaded.project.shape == (3 * 384, 256)
    np.testing.assert_allclose(loaded.project, learned.project, atol=1e-3)
    np.testing.assert_array_equal(loaded.scalars, learned.scalars)
    assert not list(tmp_path.glob("*.partial*"))
