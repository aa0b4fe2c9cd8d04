"""The agent: one turn, from a message to its reply record.

``loop.py`` owns the turn (``local_turn.py`` the local model's rounds), ``context.py`` its prompt,
``router.py`` where it is served (and the route a person forces: one mechanism, several inputs),
``escalation.py`` the cloud route, ``reply_guard.py``, ``claims.py`` and ``decline.py`` what a reply may say,
``intents_run.py`` and ``schedule_desk.py`` act on what was understood without a model. Not here: what a
message means (:mod:`appliance.understanding`) and answers from facts (:mod:`appliance.grounded`).
"""
