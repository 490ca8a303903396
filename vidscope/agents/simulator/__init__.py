"""A script-simulated environment for agent policies (AgentCVR's idea).

Videos become scripts of timed events and audio (:mod:`.script`), written from templates with
known answers (:mod:`.templates`) or imported from an ingested video (:mod:`.importer`). The
simulator (:mod:`.simulator`) answers the agents' tool calls from the script behind the real tools'
names and specs (:mod:`.tools`; AgentCVR's actions in :mod:`.tools_cvr`, SAMA's tools in
:mod:`.tools_sama`), each declared with ``@simulates(real_tool)``. Rollouts, GRPO training and
sim-to-real comparison use the simulator from above the agents: :mod:`vidscope.flows.training`.
"""
