"""Understanding: what a message means before any model answers it. Rules first, then meaning.

- :mod:`~appliance.understanding.intent`: the rule parser of device commands and questions ("turn on
  the porch light", "is the fan on?"), and the answers to a question it asked back;
- :mod:`~appliance.understanding.semantic` (words: :mod:`~appliance.understanding.semantic_words`):
  device requests by meaning, for what the rules passed on;
- :mod:`~appliance.understanding.schedule_words`: "remind me at 7 to ...", "cancel the 7:30 fan"; the time
  part is :mod:`~appliance.understanding.schedule_times` (the one resolver of "in 10 minutes", "tomorrow
  at 7"), its words :mod:`~appliance.understanding.schedule_vocab`, sunset and sunrise
  :mod:`~appliance.understanding.schedule_sun`;
- :mod:`~appliance.understanding.difficulty`: how hard a message looks, from its embedding
  (``difficulty.json`` beside it: the weights and the bar calibration chose);
- :mod:`~appliance.understanding.tool_rank`: the tools the local model is shown, ranked by meaning;
- :mod:`~appliance.understanding.meaning`: the one small embedding model put to those uses (semantic
  devices, tool ranking, difficulty), built once per agent;
- :mod:`~appliance.understanding.asked_back`: the one store of questions the appliance asked a chat
  back and waits on (the device yes/no, the schedule desk's "which one?"), kept in the database.

Not here: acting on what was understood and the turn around it live in :mod:`appliance.agent` (the
device command run: ``agent/intents_run.py``; schedules made and cancelled: ``agent/schedule_desk.py``;
routing, the route a person forces with ``/cloud`` included: ``agent/router.py``); answers from what the
appliance knows (the time, itself, its devices and schedules, the weather) live in
:mod:`appliance.grounded`; a schedule said back in words in :mod:`appliance.schedule.said`. This package
imports tools, memory, hardware and config below it, never the agent, the grounded answers or a channel
(tests/test_layers.py); nothing is imported here, so importing one module costs only that module.
"""
