#!/bin/sh
# Reads its request, waits 0.5 s, reports success: a shell script, so that the
# tool takes 0.5 s and not 0.5 s plus an interpreter's start-up.
cat > /dev/null
sleep 0.5
echo '{"version": "0", "type": "done", "ok": true}'
