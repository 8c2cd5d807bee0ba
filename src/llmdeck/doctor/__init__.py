"""`llmdeck doctor`: everything preflight knows about this host, as one report a user runs first.

``run_doctor(settings, options)`` returns a :class:`DoctorReport` of findings, each ``ok``, ``warn``
or ``fail`` with what it means and the fix. Probes take their inputs injectable (an environment, a
meminfo text, a runner for external commands) so tests exercise each finding's pass and fail paths
on real data.
"""
