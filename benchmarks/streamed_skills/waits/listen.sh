#!/bin/sh
# Reads its request, waits 2 s, reports success: a shell script, so that the
# tool takes 2 s and not 2 s plus an interpreter's start-up.
cat > /dev/null
sleep 2
echo '{"version": "0", "type": "done", "ok": true}'
