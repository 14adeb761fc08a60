"""The Wyoming TTS server: Home Assistant's way of talking to TTS engines
(docs/home-assistant.md, Wyoming). Switched on by ``wyoming.uri``; wired in as an add-on
(:mod:`agent.wyoming.addon`)."""
