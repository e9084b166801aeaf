# Sourced by the dev probes that instrument a kernel for one run (ws_trace.sh, fp8_trace.sh):
# `. scripts/dev/with_patch.sh <patch>` from the repository root applies the patch and reverts it when
# the calling script exits.
git apply "$1" || exit 1
# shellcheck disable=SC2064
trap "git apply -R '$1'" EXIT
