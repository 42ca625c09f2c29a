"""An AlphaZero-style loop on Connect Four, built from tfrl's and replay's components.

`connect_four` is the game, `network` the policy+value network in numpy (what the actors
evaluate), `mcts` the PUCT search, `play` whole games and matches, `learner` the TensorFlow
training on the replay table, `actors` the self-play, evaluator and learner actors, `train` the
top-level loop over them and `evaluate` the matches of a saved network. Run it from the repository root:

    python -m examples.alphazero.train --iterations 20
"""
