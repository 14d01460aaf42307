"""End-to-end test of `berth lsp` with a client nobody here wrote: pytest-lsp (pygls).

Run by .ci/run after `cargo test`, with BERTH pointing at the built binary.
"""

import asyncio
import os
import pathlib

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

BERTH = os.environ.get("BERTH", "target/debug/berth")

TARGETS = """use std.gpu.{H100}

/// The main cluster.
target hpc {
  class        = datacenter
  runtime      = kubernetes { context = "c"  namespace = "ml" }
  region       = "eu"
  connectivity = connected
  cpu    = 64
  memory = 512GiB
  pool h100 {
    accelerator = H100
    count       = 4
  }
  services = {}
  cost     = { gpu_hour: 2.40 }
}
"""

WORKLOAD = """workload w {
  release = "1"
  replica = 2
}
"""


async def published(client: LanguageClient, uri: str, ready):
    """The diagnostics last published for `uri`, once `ready(diagnostics)` holds.

    The server republishes every file of the spec after each change, one notification per
    file, so waiting for "the next notification" could see another file's: poll instead.
    """
    for _ in range(200):
        diagnostics = client.diagnostics.get(uri)
        if diagnostics is not None and ready(diagnostics):
            return diagnostics
        await asyncio.sleep(0.05)
    raise AssertionError(f"diagnostics for {uri}: {client.diagnostics.get(uri)}")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[BERTH, "lsp"]))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=pytest_lsp.client_capabilities("visual-studio-code"))
    )
    yield
    await lsp_client.shutdown_session()


async def test_diagnostics_hover_and_fix(client: LanguageClient, tmp_path: pathlib.Path):
    (tmp_path / "targets.berth").write_text(TARGETS)
    path = tmp_path / "workloads.berth"
    path.write_text(WORKLOAD)
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="berth", version=1, text=WORKLOAD)
        )
    )
    diagnostics = await published(client, uri, lambda ds: any(d.code == "E0301" for d in ds))
    unknown = next(d for d in diagnostics if d.code == "E0301")
    assert unknown.range.start == types.Position(line=2, character=2)
    assert unknown.range.end == types.Position(line=2, character=9)

    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=1, character=4),
        )
    )
    assert hover is not None and "release" in hover.contents.value

    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=unknown.range,
            context=types.CodeActionContext(diagnostics=[unknown]),
        )
    )
    assert actions and actions[0].title == "replace with `replicas`"

    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=unknown.range, text="replicas"
                )
            ],
        )
    )
    # Only the typo is fixed: the missing required fields (E0302) stay.
    after = await published(client, uri, lambda ds: all(d.code != "E0301" for d in ds))
    assert {d.code for d in after} == {"E0302"}, after
