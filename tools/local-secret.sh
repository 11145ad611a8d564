#!/usr/bin/env bash
# `make run`'s secret for RL.PSEUDONYM: creates the file $1 (mode 0600, 32 random bytes
# as hex) if it does not exist, leaves an existing one alone, and says which it did.
set -euo pipefail
file="${1:?usage: local-secret.sh FILE}"
if [[ -e "$file" ]]; then
    echo "make run: RL.PSEUDONYM's secret: $file (rl.secret-file); run with RL_SECRET_FILE=/your/file to use your own" >&2
else
    mkdir -p "$(dirname "$file")"
    (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$file")
    echo "make run: created a local secret for RL.PSEUDONYM in $file (rl.secret-file); run with RL_SECRET_FILE=/your/file to use your own" >&2
fi
