"""Any OpenAI-compatible chat-completions server: vLLM, SGLang, llama.cpp's server, OpenAI itself.

Requests run concurrently (at most ``concurrency`` in flight) over one HTTP connection pool. A 429 is
retried after the server's ``Retry-After``; a 5xx, a timeout or a dropped connection after an
exponential backoff (``suber_data.retry``); other 4xx are not retried. The program's constraints travel
as structured output (``response_format`` with a JSON schema: the choice as an ``enum``, the description
as a one-line string); the answer is validated again here, so a server that ignores the schema cannot
slip a bad row through. The key comes from ``api_key`` or ``OPENAI_API_KEY`` and is never logged or stored.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import httpx

from suber_data.descriptions.base import BackendInfo, Output
from suber_data.descriptions.program import DESCRIPTION, Choice, Decoding, Request
from suber_data.descriptions.settings import DEFAULTS
from suber_data.errors import SuberDataError
from suber_data.retry import TRANSIENT_STATUS, Retryable, async_retrying, retry_after

RETRY_STATUS = TRANSIENT_STATUS | {409}
# "json_schema": OpenAI, vLLM, SGLang, llama.cpp's llama-server; "json_object": llama-cpp-python's server
# (``{"type": "json_object", "schema": ...}``); "none": no structured output (the answer is still validated).
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
DESCRIPTION_PATTERN = '^[a-z][^\\n"\\\\]*$'


class OpenAIBackend:
    def __init__(
        self,
        info: BackendInfo,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = DEFAULTS.concurrency,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        timeout: float = 120.0,
        response_format: str = DEFAULTS.response_format,
    ):
        self.info = info
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self.concurrency = max(1, concurrency)
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        if response_format not in RESPONSE_FORMATS:
            raise SuberDataError(f"response_format must be one of {RESPONSE_FORMATS}, not {response_format!r}")
        self.response_format = response_format
        self.retries = 0  # retried requests, over the backend's life

    def close(self) -> None:
        pass

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIBackend(model={self.info.model!r}, base_url={self.base_url!r})"

    # ------------------------------------------------------------------ request and answer

    def body(self, request: Request, seed: int, decoding: Decoding) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        asks = []
        for choice in request.choices:
            properties[choice.name] = {"type": "string", "enum": list(choice.options)}
            asks.append(f'"{choice.name}": one of {", ".join(choice.options)}')
        # One line, starting in lower case (it continues a sentence, as in SUBER), no quotes or backslashes
        # (some servers turn the pattern into a grammar that would otherwise let the string end early).
        properties[DESCRIPTION] = {"type": "string", "minLength": 1, "pattern": DESCRIPTION_PATTERN}
        asks.append(
            f'"{DESCRIPTION}": the rest of the sentence "{request.lead} ...", one long line that starts in lower '
            "case right after those words (do not write the name again)"
        )
        record = request.record_text().rstrip()
        record = record.rsplit("\n", 1)[0] if request.lead and record.endswith(request.lead) else record
        content = (
            f"{request.instruction}\n\n{record}\n\n"
            "Answer with a JSON object with these fields: " + "; ".join(asks) + "."
        )
        body: dict[str, Any] = {
            "model": self.info.model,
            "messages": [{"role": "user", "content": content}],
            "temperature": decoding.temperature,
            "max_tokens": decoding.max_tokens + 64,  # room for the JSON around the description
            "seed": seed % 2**31,
        }
        schema = {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }
        if self.response_format == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "user_description", "strict": True, "schema": schema},
            }
        elif self.response_format == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        return body

    @staticmethod
    def parse(request: Request, payload: dict[str, Any]) -> Output:
        try:
            choice = payload["choices"][0]
            content = choice["message"]["content"]
            finish = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError):
            return Output(None, error=f"answer without choices[0].message.content: {str(payload)[:200]}")
        try:
            answer = json.loads(content)
        except (json.JSONDecodeError, TypeError):
            why = "cut by max_tokens" if finish == "length" else "not JSON"
            return Output(None, error=f"answer is {why}: {str(content)[:120]!r}")
        if not isinstance(answer, dict) or not isinstance(answer.get(DESCRIPTION), str):
            return Output(None, error=f"answer has no string field {DESCRIPTION!r}: {str(answer)[:120]}")
        choices = {}
        for part in request.choices:
            value = answer.get(part.name)
            if value not in part.options:
                return Output(None, error=f"answer's {part.name!r} = {value!r} is not one of {list(part.options)}")
            choices[part.name] = value
        text = answer[DESCRIPTION]
        lead = request.lead
        if lead and text.strip().lower().startswith(lead.lower()):
            text = text.strip()[len(lead) :]
        if "\n" in text.strip():
            return Output(None, error="answer's description spans several lines")
        return Output(text.strip(), choices, truncated=finish == "length")

    # ------------------------------------------------------------------ transport

    def generate(self, requests: list[Request], seeds: list[int], decoding: Decoding) -> list[Output]:
        return asyncio.run(self._generate(requests, seeds, decoding))

    async def _generate(self, requests: list[Request], seeds: list[int], decoding: Decoding) -> list[Output]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        gate = asyncio.Semaphore(self.concurrency)
        async with httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=self.timeout, limits=limits
        ) as client:

            async def one(request: Request, seed: int) -> Output:
                async with gate:
                    start = time.perf_counter()
                    output = await self._call(client, request, seed, decoding)
                    output.seconds = time.perf_counter() - start
                    return output

            return list(await asyncio.gather(*(one(r, s) for r, s in zip(requests, seeds, strict=True))))

    async def _call(self, client: httpx.AsyncClient, request: Request, seed: int, decoding: Decoding) -> Output:
        body = self.body(request, seed, decoding)

        def count(_state) -> None:
            self.retries += 1

        try:
            async for attempt in async_retrying(
                attempts=self.max_retries + 1, backoff=self.backoff, max_backoff=self.max_backoff, before_sleep=count
            ):
                with attempt:
                    return self._answer(request, await client.post("/chat/completions", json=body))
        except Retryable as exc:
            return Output(None, error=f"gave up after {self.max_retries + 1} tries: {exc}")
        except httpx.TransportError as exc:
            return Output(None, error=f"gave up after {self.max_retries + 1} tries: {type(exc).__name__}: {exc}")
        raise AssertionError("unreachable: the retry loop returns or raises")

    def _answer(self, request: Request, response: httpx.Response) -> Output:
        """The output of a 200; raise Retryable for a transient status, an error for a setup problem."""
        if response.status_code == 200:
            try:
                return self.parse(request, response.json())
            except ValueError:
                return Output(None, error=f"server answered 200 with a body that is not JSON: {response.text[:120]!r}")
        last = f"HTTP {response.status_code}: {response.text[:200]}"
        if response.status_code == 401:
            raise SuberDataError(
                f"{self.base_url}: 401 unauthorized; set OPENAI_API_KEY (or pass the key) for this server"
            )
        if response.status_code == 400 and "response_format" in response.text and self.response_format != "none":
            raise SuberDataError(
                f"{self.base_url} rejected structured output (response_format json_schema): "
                f"{response.text[:200]}; try response_format='json_object' (llama-cpp-python) or 'none'"
            )
        if response.status_code not in RETRY_STATUS:
            return Output(None, error=last)
        raise Retryable(last, retry_after(response.headers.get("Retry-After")), response.status_code)


__all__ = ["OpenAIBackend", "Choice"]
