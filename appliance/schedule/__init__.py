"""Acting on a clock: cron jobs on their schedules, and the heartbeat.

- :mod:`~appliance.schedule.parse`: a schedule's text, and when it next runs (time zones, daylight
  saving). A leaf the config checks import to validate jobs.
- :mod:`~appliance.schedule.jobs`: jobs from the config and ``workspace/cron.yaml``, what running one
  does, and its recorded runs.
- :mod:`~appliance.schedule.scheduler`: the loop that runs the jobs, catches up missed runs, delivers.
- :mod:`~appliance.schedule.heartbeat`: the local model checking ``workspace/HEARTBEAT.md``.

Import from the modules: this package imports none of them, so that importing one never brings
the others along.
"""
