"""A local OpenAI-compatible server for MotorMind brains (``motormind serve-brain``).

``server.BrainServer`` answers ``/v1/models`` and ``/v1/chat/completions`` from any ``Brain``
(the oracle, a replay of a recorded episode, a scripted brain), honours ``response_format``, and
can inject faults (``faults.FaultPlan``) so the real ``openai`` client path, the roles' repair
round-trip and the Controller's validation are exercised without the internet or VLM weights.
See docs/vlm-backends.md.
"""
