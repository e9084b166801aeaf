# Sourced by the dev probes that instrument a kernel for one run (ws_trace.sh, fp8_trace.sh, fa2_patch_ab.sh):
# `. scripts/dev/with_patch.sh <patch> [<patch> ...]` from the repository root applies the patches in order
# and reverts them, last first, when the calling script exits.
_with_patch_undo=""
for _p in "$@"; do
  git apply "$_p" || { [ -n "$_with_patch_undo" ] && eval "$_with_patch_undo"; exit 1; }
  _with_patch_undo="git apply -R '$_p'; $_with_patch_undo"
done
# shellcheck disable=SC2064
trap "$_with_patch_undo" EXIT
