"""Health: the snapshot of what the agent is doing (:mod:`.snapshot`), liveness from progress
(:mod:`.liveness`), and its reporters: systemd (:mod:`.sdnotify`), Prometheus textfile
(:mod:`.prometheus`) and the periodic reporter (:mod:`.reporter`). :mod:`.sysinfo` reads /proc.
"""
