"""Build time only: the int8 recipe (:mod:`.recipe`), the graph layout rewrites it needs
(:mod:`.layout`) and the quality gate's measures (:mod:`.quality`). Never imported by the daemon.
"""
