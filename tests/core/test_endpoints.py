"""The one rule for where a key from the user's environment may go: only hosts that name this
machine whatever resolves names (`localhost` itself, loopback IP literals) pass without the user
vouching for them; a name that merely looks local may be sent to DNS, which anyone can answer."""

from __future__ import annotations

import pytest

from retrieval_bench.core.endpoints import check_ray_address, may_receive_key
from retrieval_bench.core.errors import InputError


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
    assert may_receive_key(url, [])


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
    assert not may_receive_key(url, [])
    assert may_receive_key(url, [url])


def test_an_official_host_is_vouched_for_over_https_alone():
    assert may_receive_key("https://api.openai.com/v1", [], {"api.openai.com"})
    assert not may_receive_key("http://api.openai.com/v1", [], {"api.openai.com"})  # the key in clear text
    assert not may_receive_key("https://api.openai.com/v1", [])  # a store's key: no official host


def test_a_ray_cluster_follows_the_same_rule_by_host_and_port(tmp_path):
    """A Ray address is read as tcp://host:port by the same rule: loopback passes, another host
    only as the user named it outside git (the environment or the endpoints file), port included."""
    env = {"HOME": str(tmp_path)}
    for address in ("localhost:6379", "127.0.0.1:6379", "[::1]:6379"):
        check_ray_address(address, env)
    with pytest.raises(InputError, match="RETRIEVAL_BENCH_RAY_ADDRESS=10.0.0.5:6379"):
        check_ray_address("10.0.0.5:6379", env)
    check_ray_address("10.0.0.5:6379", {**env, "RETRIEVAL_BENCH_RAY_ADDRESS": "10.0.0.5:6379"})
    (tmp_path / ".config" / "retrieval-bench").mkdir(parents=True)
    (tmp_path / ".config" / "retrieval-bench" / "endpoints").write_text("tcp://HEAD.example:6379  # the cluster\n")
    check_ray_address("head.example:6379", env)
    for other in ("head.example:6380", "head.example.:6379", "evil.example:6379"):
        with pytest.raises(InputError):
            check_ray_address(other, env)
