"""Text to phoneme ids: the espeak-ng bindings (:mod:`.espeak`) and the frontend that splits
sentences and maps phonemes to the voice's ids (:mod:`.frontend`).

First stage of the data flow (text -> voice -> pipeline -> audio). Imports nothing else of the agent
but :mod:`agent.logs`.
"""
