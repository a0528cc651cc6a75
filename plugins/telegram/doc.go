// Package telegram is the Telegram channel: a first-party plugin that runs
// out of process (it faces the network and holds the bot token) and lets
// the owner talk to the agent from a Telegram chat, get its answers there,
// and approve high-risk calls with a button. handler/ is its executable;
// docs/TELEGRAM.md is the user's guide.
//
// # Owner only, silently
//
// The owner is one Telegram user: owner_id in [plugins.telegram.config],
// else the user who paired (stored in the database). Every update that is
// not the owner's text in a chat mapped to a group (the owner's private
// chat → owner_group, a chat in config "chats" → its group) or the owner's
// button press in the owner's private chat is dropped before anything is
// done with it: strangers' messages, edits, callbacks, channel posts,
// membership changes, the bot's own messages, unbound group chats. A
// dropped update causes no request to Telegram at all; it is recorded (id,
// kind, chat, user — never content) and logged as one structured line on
// stderr, which the core keeps in its log (a plugin cannot write the
// core's audit log).
//
// # Pairing
//
// `carapace telegram pair` calls pairing.New, which writes pairing.File
// (pairing.json) in the plugin's data folder, mode 0600, atomically:
//
//	{
//	  "code_sha256": "<hex SHA-256 of the code, upper case as printed>",
//	  "created_at": "2026-01-01T12:00:00Z",
//	  "expires_at": "2026-01-01T12:10:00Z"
//	}
//
// The code is pairing.CodeLength (10) characters of pairing.CodeAlphabet and is valid for
// pairing.TTL (10 minutes); the file never holds the code itself. While no
// owner is known, Init succeeds only if such a file exists (else
// CONFIG_ERROR naming the pair command). A private-chat "/start CODE" whose
// code matches an unexpired file makes its sender the owner, deletes the
// file (single use) and gets a short welcome; a wrong, expired or reused
// code gets nothing, like any stranger's message. Once there is an owner,
// the file is ignored. The CLI writes the file and then restarts the
// plugin so that it starts accepting the code; it refuses to while the bot
// has an owner. pairing.Owner reads the paired owner from the database
// and pairing.Unpair forgets it (`carapace telegram unpair`, `pair
// --replace`); a plugin that starts without an owner drops the queued
// messages and pending commands a former owner left.
//
// # Exactly once
//
// The plugin polls getUpdates itself (poll.go), not through
// go-telegram/bot, which acknowledges an update to Telegram (by asking
// for the next offset) as soon as it has queued it, and decodes a batch
// as a whole. Each update is decoded on its own: one that cannot be (a
// union type added to the Bot API after the library was written) is
// recorded and audited as dropped, by id, kind, chat and user, and
// skipped. The next getUpdates, which tells Telegram to forget the batch,
// is asked for only once every update of the batch is handled, and
// "handled" means committed: one SQLite transaction (WAL,
// synchronous=FULL) records the update id, advances last_update_id and,
// for the owner's text, appends it to the chat's queued prompt. Polling
// resumes after last_update_id. So an update whose transaction did not
// commit before a crash is served again by Telegram, and one that did is
// skipped (its id is the table's primary key). One exception saves an
// fsync on the way to the agent: the owner's text that goes to the core
// at once (no debounce, nothing in flight in its chat) is recorded with a
// relaxed commit (sqlitedb.TxRelaxed), which outlives the death of the
// process but not a power loss; its publishing mark, a full commit, follows
// at once and makes the record durable too, and the next getUpdates
// waits for it (or, when no mark follows or none within markWait, which
// a core slow to answer Paused would cause, for a full commit of its own:
// store.syncUpdate). A power loss before then takes the record back while
// Telegram still holds the update. A second plugin process on
// the same data folder is refused by an exclusive flock on LockFile.
//
// When no getUpdates has succeeded for degraded_after_s (2 minutes by
// default; each long poll lasts at most half of it), the plugin reports
// itself degraded to the core (plugin.Services.ReportHealth), saying
// why, and healthy again at the next getUpdates that succeeds.
//
// Prompts go from the database to the core: a prompt is marked
// "publishing" in one transaction, published as message.inbound, then
// marked "published". A crash between the two leaves it "publishing":
// after a restart it is neither lost silently nor sent twice — the owner
// is told it may not have reached the agent. The marks that follow
// "publishing" (published, started, done) are committed without waiting
// for the disk (sqlitedb.TxRelaxed): a crash of a process finds them; a
// power loss may take them back to "publishing", never further, so a
// prompt is not sent to the agent twice even then. A prompt "published" but not
// answered when the plugin restarts keeps its chat busy until its
// channel.reply comes (the core routes it to the new process), unless the
// core reports no session at all (it restarted too), in which case the
// owner is told it was lost.
//
// The owner's commands and button presses are recorded with their update
// as pending actions and done before the next update: effect, then done,
// then the answer (actions.go). One a crash left pending is done again
// before the first getUpdates; every effect is safe to repeat.
//
// # A chat is a conversation
//
// The owner's messages in one chat are merged for a debounce (debounce_ms,
// 1.5 s by default, at most 3 periods after the first) and published as
// message.inbound for the chat's group with
//
//	{"text": "...", "reply_to": {"chat_id": N, "prompt": P}, "conversation": "telegram:N"}
//
// where P is the prompt's row id. After the owner's /new in the chat the
// conversation is "telegram:N:G", G the update id of the last /new (kept
// in the conversations table): the core finds no transcript of it and
// starts the conversation afresh, untainted. A forwarded message, and the message
// the owner replies to or quotes, reach the agent marked as someone
// else's, with their origin, every line quoted (provenance.go). While the chat's session runs (from the
// publish to its channel.reply) further messages wait, in order, and go
// next as one prompt: never two sessions for one chat. channel.started
// gives the session (for /stop and send_telegram) and starts a typing
// indicator (every 4 s); channel.reply stops it and sends the answer to
// the prompt's chat, as the plugin recorded it — never a chat the agent
// named. Only events whose source is the core count.
//
// # Sending
//
// Texts are plain (no parse_mode), split by Split at 4096 UTF-16 units; at
// most one message a second per chat and 25 a second in all; 429 answers
// are waited out (retry_after); a send whose answer was lost is not sent
// again (errMaybeSent). Approval cards are HTML with every value escaped,
// resent as plain text if Telegram cannot parse them. Every text is built
// by textParams or editParams, which turn Telegram's link preview off, and
// every request passes egressGuard (egress.go), which refuses one that
// could make Telegram fetch or open an address: nothing leaves through a
// chat.
package telegram
