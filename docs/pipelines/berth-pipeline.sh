#!/usr/bin/env bash
# berth in a deployment pipeline, one stage per call: the steps of docs/pipelines.md, run by
# the GitHub Actions workflow and the GitLab CI job there, and by tests/pipeline.rs against a
# real control plane and a real edge agent.
#
#   berth-pipeline.sh check     diagnostics as SARIF for code scanning    → $OUT/berth.sarif
#   berth-pipeline.sh plan      the plan at the commit's time, saved;     → $OUT/plan.json
#                               the merge request comment                 → $OUT/comment.md
#                               whether it changes anything (0/1)         → $OUT/changes
#   berth-pipeline.sh approve   the approval gate's signature ($APPROVER_KEY) → $OUT/plan.approval.json
#   berth-pipeline.sh apply     the saved plan applied, waited for, under the apply lock
#   berth-pipeline.sh status    replicas, GPU allocation, agents          → $OUT/status.json
#
# Environment: SPEC (the spec directory), OUT (where files go), BERTH (the binary; `berth`),
# AT (the plan instant; default the commit's time, so a re-run plans the same), PREVIOUS_PLAN
# (the plan last applied, for the comment's diff; optional), APPROVER_KEY (the approver's
# secret key file) and APPROVAL_EXPIRES (e.g. `24h`; optional), BUNDLES and BUNDLE_KEY
# (edge targets' bundle store and signing key), AGENT_TOKEN_FILE (edge agents' API token),
# KUBECONFIG. Secrets are read from files the CI system writes and are never echoed: this
# script never runs with `set -x`.
set -euo pipefail

stage="${1:?usage: berth-pipeline.sh check|plan|approve|apply|status}"
: "${SPEC:?SPEC: the spec directory}"
: "${OUT:?OUT: the directory for the files of the pipeline}"
BERTH="${BERTH:-berth}"
mkdir -p "$OUT"

case "$stage" in
check)
    # The SARIF log is written even when the spec has errors (code scanning shows them);
    # the job fails after it is saved.
    rc=0
    "$BERTH" --output sarif check "$SPEC" > "$OUT/berth.sarif" || rc=$?
    exit "$rc"
    ;;
plan)
    at="${AT:-$(git log -1 --format=%cI)}"
    previous=()
    if [[ -n "${PREVIOUS_PLAN:-}" && -f "$PREVIOUS_PLAN" ]]; then
        previous=(--previous "$PREVIOUS_PLAN")
    fi
    rc=0
    "$BERTH" --output markdown plan "$SPEC" --at "$at" -o "$OUT/plan.json" "${previous[@]}" \
        > "$OUT/comment.md" || rc=$?
    # 1: infeasible (the plan is saved and shown; the apply job refuses nothing placed) or
    # errors (nothing saved); 2: usage or environment.
    if [[ ! -f "$OUT/plan.json" ]]; then
        exit "$rc"
    fi
    if [[ -n "${PREVIOUS_PLAN:-}" && -f "$PREVIOUS_PLAN" ]]; then
        diff_rc=0
        "$BERTH" plan-diff --detailed-exitcode "$PREVIOUS_PLAN" "$OUT/plan.json" > /dev/null \
            || diff_rc=$?
        case "$diff_rc" in
        0) echo 0 > "$OUT/changes" ;;
        2) echo 1 > "$OUT/changes" ;;
        *) exit 1 ;;
        esac
    else
        echo 1 > "$OUT/changes"
    fi
    exit "$rc"
    ;;
approve)
    : "${APPROVER_KEY:?APPROVER_KEY: the secret key file of the approver, from berth keys generate}"
    "$BERTH" approve "$OUT/plan.json" --key "$APPROVER_KEY" --spec "$SPEC" \
        ${APPROVAL_EXPIRES:+--expires "$APPROVAL_EXPIRES"}
    ;;
apply)
    args=(apply "$OUT/plan.json" --spec "$SPEC" --wait --timeout "${WAIT_SECONDS:-600}"
          --lock-timeout "${LOCK_TIMEOUT:-900}")
    if [[ -n "${BUNDLES:-}" ]]; then
        args+=(--bundles "$BUNDLES" --key "${BUNDLE_KEY:?BUNDLE_KEY: the bundle signing key file}")
    fi
    "$BERTH" "${args[@]}"
    ;;
status)
    args=(--output json status "$OUT/plan.json" --spec "$SPEC")
    if [[ -n "${AGENT_TOKEN_FILE:-}" ]]; then
        args+=(--agent-token-file "$AGENT_TOKEN_FILE")
    fi
    "$BERTH" "${args[@]}" > "$OUT/status.json"
    ;;
*)
    echo "berth-pipeline.sh: unknown stage \`$stage\`" >&2
    exit 2
    ;;
esac
