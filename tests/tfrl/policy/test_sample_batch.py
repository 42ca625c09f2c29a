"""SampleBatch / MultiAgentBatch behaviour."""
import pickle

import numpy as np
import pytest

from tfrl.errors import InvalidBatchError
from tfrl.policy import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch, concat_samples


def _batch(n, start=0, eps=None):
    return SampleBatch({
        SampleBatch.OBS: np.arange(start, start + n, dtype=np.float32)[:, None] * np.ones(3),
        SampleBatch.ACTIONS: np.arange(start, start + n),
        SampleBatch.REWARDS: np.arange(start, start + n, dtype=np.float32) * 10,
        SampleBatch.EPS_ID: np.asarray(eps if eps is not None else [0] * n),
        SampleBatch.INFOS: [{"i": i} for i in range(start, start + n)],
    })


def test_lists_become_arrays_and_len_is_rows():
    b = _batch(4)
    assert isinstance(b[SampleBatch.ACTIONS], np.ndarray) and len(b) == b.count == 4
    assert b[SampleBatch.INFOS][2] == {"i": 2}
    with pytest.raises(InvalidBatchError):
        SampleBatch({SampleBatch.OBS: np.zeros(3), SampleBatch.ACTIONS: np.zeros(4)})
    with pytest.raises(InvalidBatchError):
        b[SampleBatch.VF_PREDS] = np.zeros(5)


def test_concat_slice_and_columns():
    b = concat_samples([_batch(3), SampleBatch(), _batch(2, start=3)])
    assert b.count == 5
    np.testing.assert_array_equal(b[SampleBatch.ACTIONS], np.arange(5))
    assert b[SampleBatch.INFOS][4] == {"i": 4}
    s = b[1:3]
    np.testing.assert_array_equal(s[SampleBatch.REWARDS], [10, 20])
    assert s.count == 2
    actions, rewards = b.columns([SampleBatch.ACTIONS, SampleBatch.REWARDS])
    np.testing.assert_array_equal(rewards, actions * 10)
    with pytest.raises(InvalidBatchError, match="no column"):
        b.columns(["nope"])
    other = _batch(2)
    del other[SampleBatch.INFOS]
    with pytest.raises(InvalidBatchError, match="different columns"):
        concat_samples([b, other])


def test_shuffle_keeps_rows_aligned():
    b = _batch(50).shuffle(seed=3)
    assert not np.array_equal(b[SampleBatch.ACTIONS], np.arange(50))
    np.testing.assert_array_equal(b[SampleBatch.REWARDS], b[SampleBatch.ACTIONS] * 10)
    np.testing.assert_array_equal(b[SampleBatch.OBS][:, 0], b[SampleBatch.ACTIONS])
    assert [row["i"] for row in b[SampleBatch.INFOS]] == list(b[SampleBatch.ACTIONS])


def test_split_by_episode_and_rows():
    b = _batch(6, eps=[7, 7, 8, 8, 8, 9])
    parts = b.split_by_episode()
    assert [p.count for p in parts] == [2, 3, 1]
    assert [int(p[SampleBatch.EPS_ID][0]) for p in parts] == [7, 8, 9]
    no_ids = SampleBatch({SampleBatch.TERMINATEDS: [False, True, False, False],
                          SampleBatch.TRUNCATEDS: [False, False, False, True],
                          SampleBatch.REWARDS: [1, 2, 3, 4]})
    assert [p.count for p in no_ids.split_by_episode()] == [2, 2]
    rows = list(_batch(2).rows())
    assert rows[1][SampleBatch.ACTIONS] == 1 and rows[1][SampleBatch.INFOS] == {"i": 1}


def test_minibatches_cover_every_row_once():
    b = _batch(10)
    seen = np.concatenate([m[SampleBatch.ACTIONS] for m in b.minibatches(4, seed=0)])
    assert sorted(seen.tolist()) == list(range(10))
    sizes = [m.count for m in b.minibatches(4, shuffle=False, drop_last=True)]
    assert sizes == [4, 4]


def test_compress_round_trip_is_smaller_and_survives_slicing_and_pickle():
    obs = np.zeros((20, 84, 84), np.uint8)
    obs[:, 10:20, 10:20] = np.arange(20, dtype=np.uint8)[:, None, None]
    b = SampleBatch({SampleBatch.OBS: obs, SampleBatch.ACTIONS: np.arange(20)})
    raw_size = b.size_bytes()
    b.compress([SampleBatch.OBS])
    assert b[SampleBatch.OBS].dtype == object
    assert sum(len(x) for x in b[SampleBatch.OBS]) < raw_size / 10
    restored = pickle.loads(pickle.dumps(b))[5:8].decompress_if_needed()
    np.testing.assert_array_equal(restored[SampleBatch.OBS], obs[5:8])
    bad = SampleBatch({SampleBatch.OBS: np.array([b"TFRLZ1garbage"], dtype=object)})
    with pytest.raises(InvalidBatchError):
        bad.decompress_if_needed()


def test_nested_observation_columns():
    b = SampleBatch({SampleBatch.OBS: {"a": np.arange(4), "b": np.ones((4, 2))},
                     SampleBatch.ACTIONS: np.arange(4)})
    assert b.count == 4
    s = concat_samples([b, b]).slice(3, 6)
    np.testing.assert_array_equal(s[SampleBatch.OBS]["a"], [3, 0, 1])


def test_multi_agent_batch():
    ma = MultiAgentBatch({"p1": _batch(3), "p2": _batch(2)}, env_steps=3)
    both = concat_samples([ma, ma])
    assert both.env_steps() == 6 and both.agent_steps() == 10
    assert both.policy_batches["p2"].count == 4
    single = _batch(2).as_multi_agent()
    assert list(single.policy_batches) == [DEFAULT_POLICY_ID]
    assert MultiAgentBatch.wrap_as_needed(single.policy_batches, 2) is \
        single.policy_batches[DEFAULT_POLICY_ID]
    with pytest.raises(InvalidBatchError):
        concat_samples([ma, _batch(1)])


def test_copies_slices_and_one_piece_concat_equal_rebuilt_batches():
    b = SampleBatch({
        SampleBatch.OBS: {"a": np.arange(6.0), "b": (np.zeros((6, 2)), np.ones(6, np.int32))},
        SampleBatch.ACTIONS: np.arange(6),
        SampleBatch.INFOS: [{"i": i} for i in range(6)],
    })
    for start, end in [(0, 6), (2, 4), (-2, 6), (4, 99), (5, 2), (0, 0)]:
        piece = b.slice(start, end)
        assert piece.count == SampleBatch(dict(piece)).count == len(range(6)[start:end])
    shallow = b.copy(shallow=True)
    assert shallow.count == 6 and shallow[SampleBatch.ACTIONS] is b[SampleBatch.ACTIONS]
    shallow[SampleBatch.OBS]["a"] = np.zeros(6)
    shallow[SampleBatch.REWARDS] = np.ones(6)
    np.testing.assert_array_equal(b[SampleBatch.OBS]["a"], np.arange(6.0))
    assert SampleBatch.REWARDS not in b
    deep = b.copy()
    assert deep.count == 6 and not np.shares_memory(deep[SampleBatch.ACTIONS],
                                                    b[SampleBatch.ACTIONS])
    one = concat_samples([SampleBatch(), b.slice(1, 5)])
    assert one.count == 4 and sorted(one.keys()) == sorted(b.keys())
    assert not np.shares_memory(one[SampleBatch.OBS]["b"][0], b[SampleBatch.OBS]["b"][0])
    assert one[SampleBatch.OBS]["b"][1].dtype == np.int32
    assert one[SampleBatch.INFOS].dtype == object and one[SampleBatch.INFOS][0] == {"i": 1}
    with pytest.raises(InvalidBatchError):
        one[SampleBatch.VF_PREDS] = np.zeros(5)


def test_classic_dones_and_cur_obs_read_gymnasiums_flags():
    batch = SampleBatch(obs=np.arange(3.0), terminateds=[False, False, True],
                        truncateds=[False, True, False])
    assert SampleBatch.CUR_OBS == SampleBatch.OBS
    assert batch[SampleBatch.DONES].tolist() == [False, True, True]
    assert "dones" not in batch and set(batch) == {"obs", "terminateds", "truncateds"}
    recorded = SampleBatch(obs=np.arange(2.0), dones=[True, False], terminateds=[False, False])
    assert recorded["dones"].tolist() == [True, False]  # a stored column is read as it is
    with pytest.raises(KeyError):
        SampleBatch(obs=np.arange(2.0))["dones"]
