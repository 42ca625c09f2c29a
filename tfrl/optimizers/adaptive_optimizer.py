"""AdaptiveOptimizer (`optimizer: auto`): measures candidate strategies, keeps the fastest.

The RLlib paper (Appendix C, Figure 8) notes that the best policy optimizer depends on the
runtime picture (how many workers, how fast each is, how many devices) and that strategies can
be switched on runtime statistics. This meta-optimizer does that: it runs each candidate
strategy for `auto_warmup_steps` unmeasured plus `auto_trial_steps` measured optimizer steps,
measures the env steps trained per second of the measured ones, commits to the fastest, and
starts the trials again when the runtime picture changes (remote workers added or removed, a
worker lost and recreated, the local devices changed).

Trials cost what a slower strategy trains less than the best one would have, so they are kept
short: they run in the order of the candidates, except that a candidate still starting its
actors (`ready()` false) waits behind those that are ready, and a trial whose first measured
step trains at less than `auto_abandon_ratio` of the best rate measured so far ends there.

All candidates are built up front (so a bad setting fails at construction) and share the
trainer's workers; only the active one runs. At a switch the outgoing strategy hands its state
to the driver policy (`deactivate`) and the incoming one takes it from there (`activate`), so
learning goes on from the same weights. Every switch is logged and reported in the result dict
under `info/optimizer`: the active `strategy`, `phase` ("trial" or "committed"), `num_switches`,
the measured `rates` (trained env steps/s per strategy; the committed one's kept current as it
runs) and the last switches.
"""
from __future__ import annotations

import logging
import time
from typing import Dict, List, Optional, Sequence

from tfrl import errors
from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.optimizers.strategies import REPLAY_STRATEGIES, STRATEGIES, build_strategy
from tfrl.optimizers.settings import AdaptiveSettings

logger = logging.getLogger(__name__)

_SWITCHES_REPORTED = 10


class AdaptiveOptimizer(PolicyOptimizer):
    """Config keys: those of AdaptiveSettings (read once, here), plus each candidate's own.

    Args:
      allowed: the strategies the algorithm allows (candidates must be among them).
      default_candidates: candidates when config["auto_candidates"] is None.
      algorithm: the algorithm's name, for messages.

    Raises (constructor):
      InvalidConfigError: an unknown or disallowed candidate, none at all, more than one
        candidate streaming through replay tables, or a candidate's own bad setting.
    """

    def __init__(self, workers, config: Optional[dict] = None, replay=None, *,
                 allowed: Sequence[str] = STRATEGIES, default_candidates: Sequence[str] = (),
                 algorithm: str = "auto", **settings):
        super().__init__(workers, config, replay, **settings)
        self.settings = AdaptiveSettings.from_config(self.config)
        names = list(self.settings.auto_candidates or default_candidates or allowed)
        self.candidate_names = self._checked_candidates(names, allowed, algorithm)
        # replay-fed strategies first: multi_device replaces the driver policy by its learner
        # copy, which the others must see
        order = sorted(self.candidate_names, key=lambda n: n not in REPLAY_STRATEGIES)
        self.candidates: Dict[str, PolicyOptimizer] = {}
        for name in order:
            self.candidates[name] = build_strategy(name, workers, self.config, replay)
        for candidate in self.candidates.values():
            candidate.deactivate()  # none runs until it is chosen
        self.active_name: Optional[str] = None
        self.phase = "trial"
        self.decision: Optional[str] = None  # why the committed strategy was chosen
        self.rates: Dict[str, float] = {}
        self.num_switches = 0
        self.switches: List[dict] = []
        self._picture = self._runtime_picture()
        self._queue: List[str] = list(self.candidate_names)
        self._trial = {"steps": 0, "seconds": 0.0, "trained": 0}
        self._committed_rate: Optional[float] = None
        self._last_step_end: Optional[float] = None

    @staticmethod
    def _checked_candidates(names: List[str], allowed: Sequence[str], algorithm: str) -> List[str]:
        bad = [n for n in names if n not in allowed]
        if bad or not names:
            raise errors.InvalidConfigError(
                f"{algorithm}: auto_candidates {names!r} must be a non-empty list of "
                f"{', '.join(repr(s) for s in allowed)} (strategies this algorithm allows)")
        if len(set(names)) != len(names):
            raise errors.InvalidConfigError(
                f"{algorithm}: auto_candidates {names!r} names a strategy twice")
        if sum(n in REPLAY_STRATEGIES for n in names) > 1:
            raise errors.InvalidConfigError(
                f"{algorithm}: auto_candidates {names!r} has more than one of "
                f"{', '.join(REPLAY_STRATEGIES)} (they would share the replay tables); keep one")
        return names

    # --- the runtime picture ----------------------------------------------------------------
    def _runtime_picture(self) -> dict:
        import tensorflow as tf

        return {"remote_workers": len(self.workers.remote_workers()),
                "worker_failures": getattr(self.workers, "num_worker_failures", 0),
                "devices": len(tf.config.list_logical_devices())}

    def _picture_change(self) -> Optional[str]:
        picture = self._runtime_picture()
        if picture == self._picture:
            return None
        changes = ", ".join(f"{k} {self._picture[k]} -> {v}" for k, v in picture.items()
                            if self._picture[k] != v)
        self._picture = picture
        return changes

    # --- switching ----------------------------------------------------------------------------
    @property
    def active(self) -> Optional[PolicyOptimizer]:
        return self.candidates.get(self.active_name) if self.active_name else None

    def _switch_to(self, name: str, reason: str) -> None:
        if name == self.active_name:
            return
        previous = self.active_name
        if self.active is not None:
            self.active.deactivate()
            self._new_episodes.extend(self.active._new_episodes)  # noqa: SLF001 - ours to report
            self.active._new_episodes = []  # noqa: SLF001
        self.candidates[name].activate()
        self.active_name = name
        self._last_step_end = None
        if previous is None:
            logger.info("auto optimizer: starting with %s (%s)", name, reason)
            return
        self.num_switches += 1
        event = {"from": previous, "to": name, "reason": reason,
                 "timesteps": self.num_steps_sampled}
        self.switches = (self.switches + [event])[-_SWITCHES_REPORTED:]
        logger.info("auto optimizer: switching %s -> %s (%s)", previous, name, reason)

    def _restart_trials(self, reason: str) -> None:
        logger.info("auto optimizer: re-evaluating the strategies (%s)", reason)
        self.phase = "trial"
        self.decision = None
        self.rates = {}
        self._queue = list(self.candidate_names)
        if self.active_name in self._queue:  # measure the running one first: no switch needed
            self._queue.remove(self.active_name)
            self._queue.insert(0, self.active_name)
        self._trial = {"steps": 0, "seconds": 0.0, "trained": 0}

    # --- stepping -----------------------------------------------------------------------------
    def _run_active(self) -> dict:
        """One step of the active strategy, with the counters carried across strategies."""
        active = self.active
        active.num_steps_sampled = self.num_steps_sampled
        active.num_steps_trained = self.num_steps_trained
        fetches = active.step()
        self.num_steps_sampled = active.num_steps_sampled
        self.num_steps_trained = active.num_steps_trained
        self._new_episodes.extend(active._new_episodes)  # noqa: SLF001 - handed to our metrics
        active._new_episodes = []  # noqa: SLF001
        self.learner_stats = active.learner_stats
        return fetches

    def step(self) -> dict:
        change = self._picture_change()
        if change:
            self._restart_trials(f"runtime picture changed: {change}")
        if self.phase == "committed":
            if not self._ready_queued():
                return self._measured_step(committed=True)
            self.phase = "trial"  # a candidate that was starting is up: measure it now
        if self._trial["steps"] == 0:  # a new trial: of a candidate whose actors are up
            ready = self._ready_queued()
            if ready:
                self._queue.remove(ready)
                self._queue.insert(0, ready)
            elif self.rates:  # the best so far runs while the others start
                self._commit()
                return self._measured_step(committed=True)
        name = self._queue[0]
        self._switch_to(name, "trial")
        fetches = self._measured_step(committed=False)
        if self._trial_done():
            trial = self._trial
            self.rates[name] = trial["trained"] / max(trial["seconds"], 1e-9)
            logger.info("auto optimizer: %s trained %.1f env steps/s", name, self.rates[name])
            self._queue.pop(0)
            self._trial = {"steps": 0, "seconds": 0.0, "trained": 0}
            if not self._ready_queued():  # all measured, or the rest still starting
                self._commit()
        return fetches

    def _ready_queued(self) -> Optional[str]:
        """The first candidate still to measure whose actors have started, if any."""
        return next((n for n in self._queue if self.candidates[n].ready()), None)

    def _commit(self) -> None:
        """Runs the fastest strategy measured; candidates still starting are measured later."""
        best = max(self.rates, key=self.rates.get)
        rates = ", ".join(f"{n} {r:.1f}" for n, r in self.rates.items())
        self.decision = f"{best}: fastest of the trials (trained env steps/s: {rates})"
        if self._queue:
            self.decision += f"; still starting, measured later: {', '.join(self._queue)}"
        logger.info("auto optimizer: committing to %s", self.decision)
        self._switch_to(best, self.decision)
        self.phase = "committed"
        self._committed_rate = self.rates[best]

    def _trial_done(self) -> bool:
        """All its steps are done, or its first measured step was far below the best rate."""
        settings = self.settings
        measured = self._trial["steps"] - settings.auto_warmup_steps
        if measured >= settings.auto_trial_steps:
            return True
        if measured != 1 or not self.rates:
            return False
        rate = self._trial["trained"] / max(self._trial["seconds"], 1e-9)
        return rate < settings.auto_abandon_ratio * max(self.rates.values())

    def _measured_step(self, committed: bool) -> dict:
        """One step of the active strategy. Its time is the wall time since the end of the
        previous step of the same strategy (the trainer's work between steps included: an
        asynchronous strategy's workers keep going then), else the step's own."""
        trained_before = self.num_steps_trained
        start = time.perf_counter()
        fetches = self._run_active()
        end = time.perf_counter()
        seconds = end - (self._last_step_end if self._last_step_end is not None else start)
        self._last_step_end = end
        trained = self.num_steps_trained - trained_before
        if committed:
            # kept in `rates` too, so a later trial is compared with its rate of now rather
            # than with its trial's (taken when more actors were still starting, say)
            rate = trained / max(seconds, 1e-9)
            self._committed_rate = rate if self._committed_rate is None else (
                0.7 * self._committed_rate + 0.3 * rate)
            self.rates[self.active_name] = self._committed_rate
        else:
            self._trial["steps"] += 1
            if self._trial["steps"] > self.settings.auto_warmup_steps:
                self._trial["seconds"] += seconds
                self._trial["trained"] += trained
        return fetches

    # --- reporting and lifecycle -------------------------------------------------------------
    def stats(self) -> dict:
        out = dict(self.active.stats()) if self.active is not None else {}
        out.update(super().stats())
        out["optimizer"] = {
            **out.get("optimizer", {}),  # the active strategy's own (e.g. shard failures)
            "strategy": self.active_name,
            "phase": self.phase,
            "num_switches": self.num_switches,
            "decision": self.decision,
            "rates": {name: round(rate, 3) for name, rate in self.rates.items()},
            "waiting": list(self._queue) if self.phase == "committed" else [],
            "committed_rate": (round(self._committed_rate, 3)
                               if self._committed_rate is not None else None),
            "switches": list(self.switches),
        }
        return out

    def fetch_worker_episodes(self) -> list:
        """As the active strategy fetches them (without asking busy workers where it can)."""
        active = self.active
        return active.fetch_worker_episodes() if active is not None else super(
        ).fetch_worker_episodes()

    def learner_policies(self):
        own = getattr(self.active, "learner_policies", None)
        return own() if own else {}

    def save(self) -> dict:
        """The counters, the active strategy and every candidate's own state (e.g. the
        parameter shards' optimizer variables)."""
        return dict(super().save(), strategy=self.active_name,
                    candidates={name: c.save() for name, c in self.candidates.items()})

    def restore(self, state: dict) -> None:
        super().restore(state)
        for name, candidate_state in (state.get("candidates") or {}).items():
            if name in self.candidates:
                self.candidates[name].restore(candidate_state)

    def stop(self) -> None:
        for candidate in self.candidates.values():
            candidate.stop()
        super().stop()
