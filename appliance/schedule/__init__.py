"""Acting on a clock: cron jobs on their schedules, and the heartbeat.

- :mod:`~appliance.schedule.parse`: a schedule's text, and when it next runs (time zones, daylight
  saving). A leaf the config checks import to validate jobs.
- :mod:`~appliance.schedule.jobs`: what running a job does, and its recorded runs.
- :mod:`~appliance.schedule.scheduler`: the loop that runs the jobs, catches up missed runs, delivers.
- :mod:`~appliance.schedule.heartbeat`: the local model checking ``workspace/HEARTBEAT.md``.

Jobs are read and checked by :mod:`appliance.config` (``scheduler.jobs`` and ``workspace/cron.yaml``
alike). Import from the modules: this package imports none of them, so that ``appliance.config``
can import ``parse`` without the loop (which imports ``appliance.config``) coming along.
"""
