"""generate.provider `anthropic-batch`: the Message Batches API (half price, results within 24 h).

Requests go in batches of at most 10,000, custom_id = the cache key (a sha256 hex: 64
characters, the API's maximum). The journal, reconciliation and collection are batch.py's; this
module is the API's shape: the request, create, the listing, a batch's status, its results.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from retrieval_bench.llm.providers.anthropic import Messages, message_params
from retrieval_bench.llm.providers.base import BatchInfo, BatchProvider, BatchResult
from retrieval_bench.llm.providers.schema import ReplySchema


class MessageBatches(BatchProvider, Messages):
    name = "anthropic-batch"
    max_requests = 10_000

    def request(
        self,
        custom_id: str,
        model: str,
        max_tokens: int,
        prompt: str,
        schema: ReplySchema | None = None,
    ) -> dict:
        return {"custom_id": custom_id, "params": message_params(model, max_tokens, prompt, schema)}

    async def create(self, client: Any, requests: list[dict]) -> str:
        # SDK retries off: a retried create after a lost answer is a second, paid batch.
        batch = await client.with_options(max_retries=0).messages.batches.create(requests=requests)
        return batch.id

    async def listing(self, client: Any) -> AsyncIterator[BatchInfo]:
        async for batch in client.messages.batches.list(limit=100):
            counts = batch.request_counts
            total = counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
            yield BatchInfo(batch.id, batch.created_at.timestamp(), total, batch.processing_status == "ended")

    async def status(self, client: Any, batch_id: str) -> tuple[bool, str]:
        batch = await client.messages.batches.retrieve(batch_id)
        return (
            batch.processing_status == "ended",
            f"{batch.processing_status}, {batch.request_counts.processing} processing",
        )

    async def results(self, client: Any, batch_id: str) -> AsyncGenerator[BatchResult, None]:
        async for item in await client.messages.batches.results(batch_id):
            result = item.result
            reason = ""
            if result.type != "succeeded":
                reason = result.type
                error = getattr(result, "error", None)
                if error is not None:
                    inner = getattr(error, "error", None)
                    reason = f"{result.type}: {getattr(inner, 'type', '')} {getattr(inner, 'message', '')}".strip()
            yield BatchResult(item.custom_id, result.type, reason, getattr(result, "message", None))


MESSAGE_BATCHES = MessageBatches()
