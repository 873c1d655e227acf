"""The one rule for where a key from the user's environment may go: only hosts that name this
machine whatever resolves names (`localhost` itself, loopback IP literals) pass without the user
vouching for them; a name that merely looks local may be sent to DNS, which anyone can answer."""

from __future__ import annotations

import pytest

from retrieval_bench.core.endpoints import is_vouched


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8000/v1",
        "http://LOCALHOST",
        "http://127.0.0.1:6333",
        "http://127.0.0.5",
        "http://[::1]:8000",
    ],
)
def test_a_loopback_host_needs_no_vouching(url):
    assert is_vouched(url, [])


@pytest.mark.parametrize(
    "url",
    [
        "http://app.localhost:8000",  # the resolver may send *.localhost to DNS (or add a search domain)
        "http://localhost.evil.com",
        "http://127.0.0.1.evil.com",
        "http://127.0.0.1@evil.com",  # user info: the host is evil.com
        "http://evil.com/127.0.0.1",
    ],
)
def test_a_name_that_only_looks_local_is_refused_unless_the_user_named_it(url):
    assert not is_vouched(url, [])
    assert is_vouched(url, [url])
