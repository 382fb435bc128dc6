"""Research tools behind the learned agents' log (``docs/agents_log.md``).

Not installed with ``ddl-gym``: run them from a checkout, at the repository
root, as ``python -m research.<tool>``. They import ``ddl_gym`` and
``ddl_gym.agents``; nothing installed imports them (``tests/test_layout.py``).

* ``suite_report``: several trained models (training seeds pooled) on a
  benchmark split, scored as the leaderboard scores policies;
* ``decisions``: the action histogram (delays, placements per level,
  preemptions) of policies on a split;
* ``heldout``: the earlier held-out comparison and selection rule of models
  trained on the seed's cluster (``CountingPolicy``, ``levers_off``);
* ``feature_ablation``: permutation importance of observation features;
* ``ensemble``: several checkpoints as one policy (a soft vote; not adopted);
* ``size_bias``: how far the replay portfolio's drawn job sizes are from the
  true ones.
"""
