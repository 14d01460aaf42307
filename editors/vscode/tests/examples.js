#!/usr/bin/env node
// Snapshot tests of the TextMate grammar over every real example spec.
//
// vscode-tmgrammar-snap keeps `X.berth.snap` next to `X.berth`; the examples live outside
// the extension, so this copies `examples/<dir>/<file>.berth` to
// `tests/examples/<dir>/<file>.berth` (ignored by git) beside the committed snapshots, and
// runs the snapshot test on the copies. A snapshot whose example is gone fails the test.
//
//   node tests/examples.js       check (npm test, .ci/run); a missing snapshot fails
//   node tests/examples.js -u    accept the current scopes (read the diff before committing)
"use strict";

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");

const extension = path.resolve(__dirname, "..");
const examples = path.resolve(extension, "..", "..", "examples");
const copies = path.join(__dirname, "examples");

function berthFiles(root) {
  return fs
    .readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) =>
      fs
        .readdirSync(path.join(root, d.name))
        .filter((f) => f.endsWith(".berth"))
        .map((f) => path.join(d.name, f)),
    )
    .sort();
}

function snapshots(root) {
  if (!fs.existsSync(root)) return [];
  return fs
    .readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) =>
      fs
        .readdirSync(path.join(root, d.name))
        .filter((f) => f.endsWith(".berth.snap"))
        .map((f) => path.join(d.name, f.slice(0, -".snap".length))),
    )
    .sort();
}

const update = process.argv.includes("-u") || process.argv.includes("--updateSnapshot");
const sources = berthFiles(examples);
if (sources.length === 0) {
  console.error(`no examples found under ${examples}`);
  process.exit(1);
}

for (const orphan of snapshots(copies).filter((s) => !sources.includes(s))) {
  const snap = path.join(copies, orphan + ".snap");
  if (update) {
    fs.unlinkSync(snap);
    console.log(`removed ${path.relative(extension, snap)}: its example is gone`);
  } else {
    console.error(`${path.relative(extension, snap)}: examples/${orphan} is gone (run with -u)`);
    process.exitCode = 1;
  }
}

for (const rel of sources) {
  if (!update && !fs.existsSync(path.join(copies, rel + ".snap"))) {
    // vscode-tmgrammar-snap would write a new snapshot and pass; a new example must have
    // its snapshot reviewed and committed instead.
    console.error(`examples/${rel} has no snapshot tests/examples/${rel}.snap (run with -u)`);
    process.exitCode = 1;
  }
  const copy = path.join(copies, rel);
  fs.mkdirSync(path.dirname(copy), { recursive: true });
  fs.copyFileSync(path.join(examples, rel), copy);
}

const snap = path.join(extension, "node_modules", ".bin", "vscode-tmgrammar-snap");
const args = ["-g", "syntaxes/berth.tmLanguage.json", "-s", "source.berth"];
if (update) args.push("--updateSnapshot");
args.push(...sources.map((rel) => path.join("tests", "examples", rel)));
const run = spawnSync(snap, args, { cwd: extension, stdio: "inherit" });
if (run.error) {
  console.error(`cannot run ${snap}: ${run.error.message} (run \`npm ci\` first)`);
  process.exit(1);
}
if (run.status !== 0) process.exitCode = run.status ?? 1;
