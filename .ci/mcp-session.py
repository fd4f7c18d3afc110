"""An MCP session against a running errbook, held by the official MCP Python SDK as a
chat client holds one (streamable HTTP): connect, list the tools, call each with valid
arguments (the SDK checks every result against the tool's outputSchema), then send a
paste over a mebibyte and one over what /mcp reads at all, and check that each comes
back as an error and that the same session still answers.

Usage: python mcp-session.py http://127.0.0.1:PORT/mcp
"""

import asyncio
import sys

from mcp import Client
from mcp.shared.exceptions import MCPError

TRACEBACK = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/train.py", line 88, in <module>
[rank1]:     model = DDP(model, device_ids=[local_rank])
[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.19.3
[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
[rank1]: Last error:
[rank1]: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000
"""

# Seconds any one call may take: a call that never returns is the failure this guards.
CALL_SECONDS = 120


class Checks:
    def __init__(self):
        self.passed = 0

    def ok(self, condition, what):
        if not condition:
            raise AssertionError(what)
        self.passed += 1


async def call(client, tool, arguments):
    return await asyncio.wait_for(client.call_tool(tool, arguments), CALL_SECONDS)


async def session(url, check):
    async with Client(url) as client:
        check.ok(client.protocol_version == "2025-06-18", f"version {client.protocol_version}")
        check.ok(client.server_info.name == "errbook", f"server {client.server_info}")

        tools = {t.name: t for t in (await client.list_tools()).tools}
        check.ok(
            sorted(tools) == ["diagnose", "feedback", "fetch", "search"], f"tools {sorted(tools)}"
        )
        for tool in tools.values():
            check.ok(tool.output_schema is not None, f"{tool.name} has no outputSchema")
            for name, prop in tool.input_schema["properties"].items():
                if prop.get("type") == "string":
                    check.ok(prop.get("maxLength", 0) > 0, f"{tool.name}.{name} has no maxLength")
        max_text = tools["diagnose"].input_schema["properties"]["text"]["maxLength"]

        # Each call's structured content is validated by the SDK against the tool's
        # outputSchema: a result that does not conform raises here.
        found = await call(client, "search", {"query": "NCCL watchdog timeout", "limit": 3})
        check.ok(not found.is_error, f"search failed: {found.content}")
        hits = found.structured_content["results"]
        check.ok(0 < len(hits) <= 3, f"search hits {hits}")
        check.ok(all(hit["summary"] for hit in hits), "a search hit without its summary")

        tagged = await call(client, "search", {"query": "timeout", "tag": "nccl", "limit": 2.0})
        check.ok(not tagged.is_error, f"search with a tag failed: {tagged.content}")
        check.ok(
            all("nccl" in hit["tags"] for hit in tagged.structured_content["results"]),
            "a hit outside the tag",
        )

        entry = await call(client, "fetch", {"id": hits[0]["id"]})
        check.ok(not entry.is_error, f"fetch failed: {entry.content}")
        read = entry.structured_content
        for field in ("title", "summary", "symptoms", "cause", "fix", "verify", "url"):
            check.ok(read[field], f"fetch without {field}")
        check.ok("signatures" not in read and "seed:" not in str(read), "fetch leaks internals")

        diagnosis = await call(client, "diagnose", {"text": TRACEBACK, "limit": 3})
        check.ok(not diagnosis.is_error, f"diagnose failed: {diagnosis.content}")
        answer = diagnosis.structured_content
        check.ok(answer["verdict"] in ("matched", "possible"), f"verdict {answer['verdict']}")
        cited = [line["line"] for line in answer["lines"]]
        check.ok(len(cited) == len(set(cited)), f"a line listed twice: {cited}")

        # What the user said of that answer, passed on for the team's curators.
        top = answer["matches"][0]["slug"]
        said = await call(
            client, "feedback", {"vote": "no", "entry": top, "text": TRACEBACK, "comment": "still hangs"}
        )
        check.ok(not said.is_error, f"feedback failed: {said.content}")
        check.ok(said.structured_content["recorded"] is True, f"feedback {said.structured_content}")
        unknown = await call(client, "feedback", {"vote": "yes", "entry": "no-such-entry"})
        check.ok(unknown.is_error, "feedback on an unknown entry was accepted")

        # A paste over a mebibyte: a tool error the model reads, saying how much to send.
        paste = TRACEBACK * (1_200_000 // len(TRACEBACK))
        check.ok(len(paste.encode()) > 1 << 20, "the paste is over a mebibyte")
        refused = await call(client, "diagnose", {"text": paste})
        message = refused.content[0].text
        check.ok(refused.is_error, f"an over-long paste was not refused: {message[:200]}")
        check.ok(f"at most {max_text} characters" in message, f"no size in {message!r}")

        again = await call(client, "search", {"query": "ncclInvalidUsage"})
        check.ok(not again.is_error and again.structured_content["results"], "no answer after")

        # Past what /mcp reads at all: a JSON-RPC error, which the SDK raises.
        try:
            await call(client, "diagnose", {"text": "x" * (8 << 20)})
            check.ok(False, "an 8 MiB body was answered as a result")
        except MCPError as error:
            check.ok("over the limit" in str(error), f"the error says {error}")

        last = await call(client, "fetch", {"id": hits[0]["id"]})
        check.ok(not last.is_error, "no answer after the error")


def main():
    check = Checks()
    asyncio.run(session(sys.argv[1], check))
    print(f"mcp session: {check.passed} checks passed")


if __name__ == "__main__":
    main()
