"""Training above the agents: rollouts of any strategy against the script simulator and their
rewards (:mod:`.rollout`), GRPO training of a tool-use policy with TRL (:mod:`.train`), and the
sim-to-real comparison of simulated and real tools on one ingested video (:mod:`.sim_to_real`).

They use the agents (strategies, runtime, simulator) and nothing in the agents uses them.
"""
