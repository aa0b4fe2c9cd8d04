#!/bin/sh
# picoagent-issue.service's work (see systemd/picoagent-issue.path): while the daemon's one-time web password is
# the one in use, say it and the page's address above the console's login prompt; once the owner has chosen
# theirs (the file is gone), say nothing. ROOT: a test's root directory.
set -eu
secret="${ROOT:-}/var/lib/picoagent/initial-password"
note="${ROOT:-}/etc/issue.d/picoagent.issue"
if [ -s "$secret" ]; then
    mkdir -p "$(dirname "$note")"
    name=$(cat "${ROOT:-}/etc/hostname" 2>/dev/null || hostname)
    {
        echo "picoagent: open https://$name.local:8080 and sign in with the one-time password $(head -c 64 "$secret")"
        echo "  (a short setup there asks for your own)"
        echo
    } > "$note.tmp"
    chmod 0644 "$note.tmp"
    mv "$note.tmp" "$note"
else
    rm -f "$note"
fi
