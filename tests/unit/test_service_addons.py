"""The add-on seam: built from factories, started in order, a failing one left out, stopped in
reverse, told of every connect."""

from __future__ import annotations

from typing import Any

from agent.daemon.addons import AddonSet


class _Addon:
    def __init__(self, name: str, calls: list[str], *, fail_start: bool = False) -> None:
        self.name, self.calls, self.fail_start = name, calls, fail_start

    def start(self) -> None:
        if self.fail_start:
            raise RuntimeError("port in use")
        self.calls.append(f"start {self.name}")

    def stop(self, timeout: float) -> None:
        self.calls.append(f"stop {self.name}")

    def on_connected(self) -> None:
        self.calls.append(f"connected {self.name}")


def test_lifecycle_order_failing_start_and_switched_off_addons() -> None:
    calls: list[str] = []
    service: Any = object()
    seen: list[object] = []

    def factory(name: str, *, fail: bool = False, off: bool = False) -> Any:
        def build(svc: Any) -> _Addon | None:
            seen.append(svc)
            return None if off else _Addon(name, calls, fail_start=fail)
        return build

    addons = AddonSet(service, [factory("a"), factory("off", off=True),
                                factory("broken", fail=True), factory("b")])
    assert seen == [service] * 4
    assert [a.name for a in addons.addons] == ["a", "broken", "b"]
    addons.start()
    assert addons.get("broken") is None and addons.get("a") is not None
    addons.on_connected()
    addons.stop(1.0)
    assert calls == ["start a", "start b", "connected a", "connected b", "stop b", "stop a"]
    addons.stop(1.0)  # a second stop does nothing
    assert calls[-1] == "stop a" and len(calls) == 6
