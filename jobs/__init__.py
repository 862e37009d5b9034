"""The composition root: the one place that wires the stages into jobs and commands.

The core (`pulsar_audit/`) imports no stage and the stages import only the core; the main job
(`analyze`), the CLI and the scheduled entry points put them together here.
"""
