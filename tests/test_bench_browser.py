"""bench/browser.py's sign-in, against a stand-in for Playwright's page: the page a sign-in lands on
(the war room's default view) is closed only once none of its requests is in flight, so the server is
not still computing them while the next, timed, load asks for its own."""

from __future__ import annotations

from bench import browser


class LandingPage:
    """Signing in lands on a page that asks for three answers; each finishes after a few polls."""

    def __init__(self) -> None:
        self.handlers: dict[str, list] = {}
        self.pending: list[str] = []
        self.polls = 0
        self.closed_with: list[str] | None = None

    def on(self, event: str, handler) -> None:
        self.handlers.setdefault(event, []).append(handler)

    def emit(self, event: str, request: str) -> None:
        for handler in self.handlers.get(event, []):
            handler(request)

    def goto(self, url: str) -> None:
        pass

    def fill(self, selector: str, value: str) -> None:
        pass

    def click(self, selector: str) -> None:
        for request in ("lanes", "events", "catalogue"):
            self.pending.append(request)
            self.emit("request", request)

    def wait_for_url(self, predicate) -> None:
        assert predicate("http://127.0.0.1/timeline/")

    def wait_for_timeout(self, ms: float) -> None:
        self.polls += 1
        if self.polls % 3 == 0 and self.pending:
            request = self.pending.pop(0)
            self.emit("requestfinished", request)

    def close(self) -> None:
        self.closed_with = list(self.pending)


class Context:
    def __init__(self) -> None:
        self.page = LandingPage()

    def new_page(self) -> LandingPage:
        return self.page


def test_sign_in_closes_its_landing_page_once_no_request_is_in_flight(monkeypatch):
    monkeypatch.setitem(browser.wait_quiet.__kwdefaults__, "quiet_s", 0.05)
    context = Context()
    browser.sign_in(context, "http://127.0.0.1", "viewer", "secret")
    assert context.page.closed_with == []
