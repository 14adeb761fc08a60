"""The daemon: the composition root (:mod:`agent.daemon.service`), its add-ons, health wiring,
presence, reloads and the main thread's loop. docs/architecture.md shows how it is wired."""
