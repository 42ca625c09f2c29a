"""Connect Four on a small board, in numpy: the game the AlphaZero example learns.

Pieces drop into columns; the first player with `connect` pieces in a row, column or diagonal
wins, a full board is a draw. A `State` is immutable (`play` returns a new one) so the search
tree (examples/alphazero/mcts.py) can keep states in its nodes. Player 1 moves first; the
network sees the board from the side of the player to move (`observation`).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))  # row, column, both diagonals


class IllegalMoveError(ValueError):
    """A move into a full or non-existent column, or a move after the game ended."""


@dataclasses.dataclass(frozen=True)
class ConnectFour:
    """The rules: board size and the length of a winning line (default 5 rows x 6 columns, 4)."""

    rows: int = 5
    columns: int = 6
    connect: int = 4

    @property
    def num_actions(self) -> int:
        return self.columns

    @property
    def observation_shape(self) -> tuple:
        return (2, self.rows, self.columns)

    def new_game(self) -> "State":
        return State(self, np.zeros((self.rows, self.columns), np.int8), to_play=1)


@dataclasses.dataclass(frozen=True, eq=False)
class State:
    """A position: `board` holds 1 (first player), -1 (second player) or 0; row 0 is the top.

    `winner` is None while the game runs, then 1 or -1 for the winner, or 0 for a draw.
    """

    game: ConnectFour
    board: np.ndarray
    to_play: int
    winner: Optional[int] = None
    num_moves: int = 0

    @property
    def is_terminal(self) -> bool:
        return self.winner is not None

    def legal_moves(self) -> np.ndarray:
        """The columns that still take a piece (none once the game has ended)."""
        if self.is_terminal:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.board[0] == 0)

    def legal_mask(self) -> np.ndarray:
        mask = np.zeros(self.game.columns, bool)
        mask[self.legal_moves()] = True
        return mask

    def play(self, column: int) -> "State":
        """The position after the player to move drops a piece into `column`.

        Raises:
          IllegalMoveError: the game has ended, or `column` is outside the board or full.
        """
        if self.is_terminal:
            raise IllegalMoveError(f"the game has ended (winner {self.winner}); start a new_game()")
        if not 0 <= column < self.game.columns or self.board[0, column] != 0:
            raise IllegalMoveError(
                f"column {column} does not take a piece; legal moves are {self.legal_moves().tolist()}")
        row = int(np.flatnonzero(self.board[:, column] == 0)[-1])
        board = self.board.copy()
        board[row, column] = self.to_play
        winner = None
        if self._line_through(board, row, column) >= self.game.connect:
            winner = self.to_play
        elif self.num_moves + 1 == self.game.rows * self.game.columns:
            winner = 0
        return State(self.game, board, -self.to_play, winner, self.num_moves + 1)

    def _line_through(self, board: np.ndarray, row: int, column: int) -> int:
        """The longest line of the piece at (row, column) through that square."""
        player, rows, columns = board[row, column], self.game.rows, self.game.columns
        longest = 0
        for dr, dc in _DIRECTIONS:
            length = 1
            for sign in (1, -1):
                r, c = row + sign * dr, column + sign * dc
                while 0 <= r < rows and 0 <= c < columns and board[r, c] == player:
                    length += 1
                    r, c = r + sign * dr, c + sign * dc
            longest = max(longest, length)
        return longest

    def observation(self) -> np.ndarray:
        """Two planes, float32 [2, rows, columns]: the pieces of the player to move, then the
        opponent's (so one network plays both sides)."""
        return np.stack([self.board == self.to_play, self.board == -self.to_play]).astype(np.float32)

    def __str__(self) -> str:
        symbols = {1: "X", -1: "O", 0: "."}
        return "\n".join(" ".join(symbols[int(v)] for v in row) for row in self.board)
