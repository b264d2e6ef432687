#!/usr/bin/env bash
# Fetch the pinned oracle sources the tests use (the frameworks' own argument parsers; see
# tests/oracle/workers.py TREES and ../shared/oracles/README.md) and pack each into
# DEST/<name>.tar.gz, the same paths the shared archives hold (LICENSE, megatron/, and
# tools/retro/ for microsoft's fork), under "./" as they are.
#
#   scripts/fetch-oracles.sh [DEST]
#
# DEST: the argument, else $GEN_LAUNCH_ORACLES, else ../shared/oracles beside the repository
# (where the tests look). An archive already in DEST is skipped.
#
# Needs network access to the Git hosts (github.com) and git, tar and gzip.
#
# Each pin names a repository, a ref (tag or branch), the commit (full, or abbreviated as the
# README gives it) and, for a branch, a date before the commit. A full hash is fetched as it
# is; otherwise the ref is fetched (a branch back to the date) and the commit must be among what
# came: the archive is packed from it, or the script fails saying so.
#
# Overrides, for tests against local repositories:
#   GEN_LAUNCH_ORACLE_GIT_BASE  base URL of the repositories (default https://github.com)
#   GEN_LAUNCH_ORACLE_PINS      a file of pins in the format of PINS below, used instead of it
set -euo pipefail

# name  repository  ref  commit  since (a branch: fetched back to this date; - for a tag)  paths...
PINS='
megatron-lm-core_v0.16.1 NVIDIA/Megatron-LM refs/tags/core_v0.16.1 55ac708251 - LICENSE megatron
megatron-lm-main-d98e8a64dd NVIDIA/Megatron-LM refs/heads/main d98e8a64dd 2026-08-21 LICENSE megatron
megatron-deepspeed-microsoft-f4157bea microsoft/Megatron-DeepSpeed refs/heads/main f4157bea 2024-12-23 LICENSE megatron tools/retro
megatron-deepspeed-bigscience-8387ae17 bigscience-workshop/Megatron-DeepSpeed refs/heads/main 8387ae17 2023-12-07 LICENSE megatron
'

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${1:-${GEN_LAUNCH_ORACLES:-$root/../shared/oracles}}
base=${GEN_LAUNCH_ORACLE_GIT_BASE:-https://github.com}
if [[ -n ${GEN_LAUNCH_ORACLE_PINS:-} ]]; then
    PINS=$(cat -- "$GEN_LAUNCH_ORACLE_PINS")
fi

die() {
    echo "fetch-oracles: $*" >&2
    exit 1
}

work=$(mktemp -d)
partial=''  # an archive being written into DEST (renamed into place once whole)
trap 'rm -rf -- "$work" ${partial:+"$partial"}' EXIT
mkdir -p -- "$dest"

# fetch NAME REPO REF COMMIT SINCE PATH...: DEST/NAME.tar.gz from REPO at COMMIT
fetch() {
    local name=$1 repo=$2 ref=$3 commit=$4 since=$5
    shift 5
    local url="$base/$repo" git_dir="$work/$name.git" stage="$work/$name" full
    git init --quiet --bare -- "$git_dir"
    if [[ $commit =~ ^[0-9a-f]{40}$ ]]; then
        git --git-dir="$git_dir" fetch --quiet --depth 1 -- "$url" "$commit" ||
            die "$name: cannot fetch commit $commit from $url"
    elif [[ $since == - ]]; then
        git --git-dir="$git_dir" fetch --quiet --depth 1 -- "$url" "$ref" ||
            die "$name: cannot fetch $ref from $url"
    else
        git --git-dir="$git_dir" fetch --quiet --shallow-since="$since" -- "$url" "$ref" ||
            die "$name: cannot fetch $ref (since $since) from $url"
    fi
    full=$(git --git-dir="$git_dir" rev-parse --verify --quiet "$commit^{commit}") ||
        die "$name: $url $ref does not have the pinned commit $commit (it has $(git --git-dir="$git_dir" \
rev-parse --short=10 FETCH_HEAD)$( [[ $since == - ]] || echo " and the commits since $since")); \
pin the full commit hash"
    [[ $full == "$commit"* ]] || die "$name: $commit resolved to $full, which is not the pinned commit"
    mkdir -p -- "$stage"
    git --git-dir="$git_dir" archive --format=tar "$full" -- "$@" | tar -x -C "$stage" ||
        die "$name: commit $full does not have all of: $*"
    partial="$dest/.$name.tar.gz.$$"
    tar -czf "$partial" -C "$stage" .
    mv -- "$partial" "$dest/$name.tar.gz"
    partial=''
    echo "fetch-oracles: wrote $dest/$name.tar.gz ($repo $full: $*)"
}

while read -r name repo ref commit since paths; do
    [[ -z ${name:-} || $name == \#* ]] && continue
    [[ -n ${paths:-} ]] || die "a pin needs: name repository ref commit since path...: $name"
    if [[ -e $dest/$name.tar.gz ]]; then
        echo "fetch-oracles: $dest/$name.tar.gz is there; skipped"
        continue
    fi
    read -r -a folders <<<"$paths"
    fetch "$name" "$repo" "$ref" "$commit" "$since" "${folders[@]}"
done <<<"$PINS"
