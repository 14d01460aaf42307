// The berth extension: starts `berth lsp` (path from the `berth.server.path` setting) and
// serves the standard library's `berth-std:` documents through the server.
"use strict";

const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration("berth").get("server.path", "berth");
  const server = { command, args: ["lsp"] };
  client = new LanguageClient(
    "berth",
    "berth language server",
    { run: server, debug: server },
    {
      documentSelector: [
        { scheme: "file", language: "berth" },
        { scheme: "berth-std", language: "berth" },
      ],
    },
  );
  // Go to definition into `use std.…` opens read-only virtual documents; their text comes
  // from the server (the standard library is embedded in the binary).
  context.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider("berth-std", {
      provideTextDocumentContent: (uri) =>
        client.sendRequest("berth/stdSource", { uri: uri.toString() }),
    }),
  );
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("berth.server.path")) {
        vscode.commands.executeCommand("workbench.action.restartExtensionHost");
      }
    }),
  );
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
