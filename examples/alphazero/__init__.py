"""An AlphaZero-style loop on Connect Four, built from tfrl's and replay's components.

`connect_four` is the game, `network` the policy+value network in numpy (what the actors
evaluate), `mcts` the PUCT search, `actors` the self-play, evaluator and learner actors, and
`train` the top-level loop over them. Run it from the repository root:

    python -m examples.alphazero.train --iterations 20
"""
