#!/bin/sh
# carapace-agent: the entrypoint of Carapace's agent image.
#
#   carapace-agent                 run Claude Code on the prompt in
#                                  $CARAPACE_PROMPT_FILE (mounted read-only
#                                  by the core; never passed in the
#                                  environment, which `inspect` shows)
#   carapace-agent CMD [ARGS...]   run CMD instead (`carapace run -- CMD`)
#
# Claude Code reads the session's instructions and memory brief from
# ~/.claude/CLAUDE.md, its environment from ~/.claude/settings.json and the
# tools' skills from ~/.claude/skills, all mounted read-only by the core;
# its permissions (ipc allowed, web tools denied) and every lock on what a
# session could leave for the next come from the image's
# /etc/claude-code/managed-settings.json. It reaches the outside world only with
# `ipc`, through /run/carapace/ipc.sock.
set -eu
# The core's token for the line that says the agent is done (below),
# kept out of the agent's environment.
done_token=${CARAPACE_DONE-}
unset CARAPACE_DONE
# The model API: Claude Code talks to http://127.0.0.1:$CARAPACE_LLM_PORT
# ($ANTHROPIC_BASE_URL, set by the core with a placeholder key), where
# ipc-relay copies bytes to the core's proxy over /run/carapace/llm.sock;
# the proxy adds the real credential. Nothing here ever holds it.
if [ -n "${CARAPACE_LLM_PORT:-}" ]; then
	ipc-relay --listen "127.0.0.1:$CARAPACE_LLM_PORT" 2>/tmp/relay.log &
	# Claude Code's first request must not race the relay's listen.
	for _ in $(seq 50); do
		grep -q "listening on" /tmp/relay.log 2>/dev/null && break
		sleep 0.1
	done
fi
if [ "$#" -gt 0 ]; then
	exec "$@"
fi
# A warm container (core/agent/warm.go) waits here, before anything else,
# until the core hands it a session: "go", written after the prompt,
# CLAUDE.md and the conversation's id (files the core made empty with the
# container). Where the core made a FIFO in $CARAPACE_WARM ("wake",
# engines sharing the host's kernel) it sleeps on it until the core writes
# "go" there, and leaves if the core goes away (the FIFO's end it holds
# closes); otherwise (Apple's VM) it polls for the file "go" there (which
# the core also writes after the FIFO's line, for older entrypoints). It
# never waits longer than $CARAPACE_WARM_TIMEOUT seconds (the core's
# warm_idle and a margin), even if the core died before the FIFO was open.
if [ -n "${CARAPACE_WARM-}" ]; then
	(
		sleep "${CARAPACE_WARM_TIMEOUT:-3600}"
		kill -TERM $$
	) </dev/null >/dev/null 2>&1 &
	watchdog=$!
	# The core said it made the FIFO, and it is not there: the folder is
	# not the core's (its home went away as the container started).
	if [ -n "${CARAPACE_WARM_WAKE-}" ] && [ ! -p "$CARAPACE_WARM/wake" ]; then
		echo "the claim folder has no FIFO: the core that started this warm container is gone" >&2
		exit 3
	fi
	if [ -p "$CARAPACE_WARM/wake" ]; then
		if ! read -r word <"$CARAPACE_WARM/wake" || [ "$word" != go ]; then
			echo "the core went away before it handed this warm container a session" >&2
			exit 3
		fi
	else
		until [ -e "$CARAPACE_WARM/go" ]; do sleep 0.05; done
	fi
	kill "$watchdog" 2>/dev/null || :
	if [ -s "$CARAPACE_WARM/conversation" ]; then
		CARAPACE_CONVERSATION=$(cat "$CARAPACE_WARM/conversation")
		export CARAPACE_CONVERSATION
		if [ -e "$CARAPACE_WARM/conversation-new" ]; then
			export CARAPACE_CONVERSATION_NEW=1
		fi
	fi
fi
if [ -z "${CARAPACE_PROMPT_FILE:-}" ] || [ ! -r "$CARAPACE_PROMPT_FILE" ]; then
	echo "carapace-agent: no prompt: the core mounts it at \$CARAPACE_PROMPT_FILE (carapace run --prompt TEXT)" >&2
	exit 2
fi
# -p: print mode, non-interactive. Tools that the managed settings neither
# allow nor deny are refused rather than asked about, as nobody is there to
# answer; high-risk ipc calls still wait for the user on the host.
# --setting-sources user: no settings, CLAUDE.md, rules, skills or MCP
# servers from the workspace (project and local scope), which a session
# could have left there for the next; -p has no trust dialog to stop them.
# A conversation (a chat with its owner, say) continues: the core names it
# with a Claude Code session id, new or already in ~/.claude/projects.
set -- claude -p --setting-sources user
if [ -n "${CARAPACE_CONVERSATION:-}" ]; then
	if [ "${CARAPACE_CONVERSATION_NEW:-}" = 1 ]; then
		set -- "$@" --session-id "$CARAPACE_CONVERSATION"
	else
		set -- "$@" --resume "$CARAPACE_CONVERSATION"
	fi
fi
prompt=$(cat "$CARAPACE_PROMPT_FILE")
if [ -z "$done_token" ]; then
	exec "$@" "$prompt"
fi
# Once Claude Code has exited by itself, the last line on stdout says so,
# with its status: "carapace-agent-done TOKEN STATUS" after a newline. The
# core answers the channel or ends the task run on it, without waiting for
# the engine to tear the container down (core/agent/done.go). A signal
# (`docker stop`) is passed on to Claude Code, and then no line is
# printed: the session ends with the stop's cause.
agent=
stopped=
trap 'stopped=1; [ -z "$agent" ] || kill -TERM "$agent" 2>/dev/null || :' TERM INT HUP
"$@" "$prompt" &
agent=$!
status=0
wait "$agent" || status=$?
# A trapped signal ends wait early: wait again, for the agent's own status.
while kill -0 "$agent" 2>/dev/null; do
	status=0
	wait "$agent" || status=$?
done
if [ -z "$stopped" ]; then
	printf '\ncarapace-agent-done %s %d\n' "$done_token" "$status"
fi
exit "$status"
