"""examples/alphazero: Connect Four's rules, the PUCT search, and the network in numpy and TF."""
import numpy as np
import pytest

from examples.alphazero import mcts, network
from examples.alphazero.connect_four import ConnectFour, IllegalMoveError

GAME = ConnectFour()  # 5 rows x 6 columns, four in a line wins
# A full game with no line of four (X moves first; the final board is drawn).
DRAWN_GAME = [2, 3, 4, 5, 0, 0, 4, 5, 1, 1, 5, 2, 1, 4, 1, 2, 3, 3, 0, 0, 5, 4, 5, 2, 4, 1, 2, 3, 0, 3]


def play(moves, game=GAME):
    state = game.new_game()
    for move in moves:
        state = state.play(move)
    return state


@pytest.mark.parametrize("moves, winner", [
    ([0, 0, 1, 1, 2, 2, 3], 1),                       # row, bottom
    ([5, 0, 5, 0, 5, 0, 4, 0], -1),                   # column, second player
    ([0, 1, 1, 2, 2, 3, 2, 3, 3, 5, 3], 1),           # diagonal rising to the right
    ([5, 4, 4, 3, 3, 2, 3, 2, 2, 0, 2], 1),           # diagonal rising to the left
    ([1, 0, 2, 0, 4, 0, 5, 1, 3], 1),                 # row completed in its middle
])
def test_a_line_of_four_wins_and_ends_the_game(moves, winner):
    before = play(moves[:-1])
    assert before.winner is None and len(before.legal_moves()) == GAME.columns
    after = before.play(moves[-1])
    assert after.winner == winner and after.is_terminal
    assert after.legal_moves().size == 0
    with pytest.raises(IllegalMoveError, match="ended"):
        after.play(0)


def test_three_in_a_line_does_not_win():
    state = play([0, 0, 1, 1, 2, 2])
    assert state.winner is None
    assert play([0, 1, 0, 1, 0, 2]).winner is None  # three in a column


def test_a_full_column_is_not_a_legal_move():
    state = play([3] * GAME.rows)
    assert state.legal_moves().tolist() == [0, 1, 2, 4, 5]
    assert state.legal_mask().tolist() == [True, True, True, False, True, True]
    with pytest.raises(IllegalMoveError, match="column 3"):
        state.play(3)
    with pytest.raises(IllegalMoveError, match="column 6"):
        state.play(6)


def test_pieces_stack_from_the_bottom_and_the_observation_is_the_movers_view():
    state = play([2, 2, 3])
    assert state.board[-1].tolist() == [0, 0, 1, 1, 0, 0] and state.board[-2, 2] == -1
    assert state.to_play == -1
    own, opponent = state.observation()
    assert own.sum() == 1 and own[-2, 2] == 1  # the second player's piece
    assert opponent.sum() == 2 and opponent[-1, 2] == opponent[-1, 3] == 1


def test_a_full_board_without_a_line_is_a_draw():
    before = play(DRAWN_GAME[:-1])
    assert before.winner is None and before.legal_moves().tolist() == [DRAWN_GAME[-1]]
    after = before.play(DRAWN_GAME[-1])
    assert after.winner == 0 and after.is_terminal and (after.board != 0).all()


def test_the_search_finds_a_one_move_win():
    # X holds columns 1-3 of the bottom row, O holds column 0 there: only column 4 wins.
    state = play([1, 1, 2, 2, 3, 0])
    assert state.to_play == 1
    winning = [m for m in state.legal_moves() if state.play(m).winner == 1]
    assert winning == [4]
    for evaluate in (network.uniform_evaluator, network.evaluator(network.initial_weights(60, 6))):
        visits = mcts.search(state, evaluate, num_simulations=200)
        assert int(np.argmax(visits)) == 4, visits
        assert visits[4] > 0.5


def test_the_search_blocks_the_opponents_one_move_win():
    state = play([0, 1, 0, 1, 0])  # X threatens to complete column 0; O must block there
    assert state.to_play == -1 and state.play(5).play(0).winner == 1
    visits = mcts.search(state, network.uniform_evaluator, num_simulations=300)
    assert int(np.argmax(visits)) == 0, visits


def test_search_returns_a_distribution_over_legal_moves_with_and_without_noise():
    state = play([3] * GAME.rows)
    evaluate = network.evaluator(network.initial_weights(60, 6, seed=1))
    for rng in (None, np.random.default_rng(0)):
        visits = mcts.search(state, evaluate, num_simulations=30, rng=rng)
        assert visits.shape == (6,) and visits[3] == 0
        assert np.isclose(visits.sum(), 1.0) and (visits >= 0).all()
    with pytest.raises(ValueError, match="ended"):
        mcts.search(play(DRAWN_GAME), evaluate, num_simulations=10)


def test_numpy_forward_matches_the_learners_tensorflow_network():
    from examples.alphazero.learner import PolicyValueNet

    weights = network.initial_weights(60, 6, hidden=(32, 16), seed=3)
    weights = [w + np.random.default_rng(i).normal(0, 0.1, w.shape).astype(np.float32)
               for i, w in enumerate(weights)]  # nonzero biases too
    observations = np.stack([play([2, 2, 3]).observation(), play([0, 1]).observation()])
    logits, values = network.forward(weights, observations)
    tf_logits, tf_values = PolicyValueNet(weights, 1e-3, 0.0)(observations)
    np.testing.assert_allclose(logits, tf_logits.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(values, tf_values.numpy(), rtol=1e-5, atol=1e-5)
    assert logits.shape == (2, 6) and values.shape == (2,) and (np.abs(values) < 1).all()
