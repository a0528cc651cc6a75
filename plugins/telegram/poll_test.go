package telegram

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
)

// futureForward is a stranger's message forwarded from an origin of a
// type Telegram may add one day: go-telegram/bot refuses to decode it.
func futureForward(f *fakebot.Server, from int64, text string) map[string]any {
	m := f.TextMessage(fakebot.User(from), fakebot.PrivateChat(from), text)
	m["forward_origin"] = map[string]any{"type": "future_origin", "date": 1767225600}
	return map[string]any{"message": m}
}

// One update the library cannot decode does not stop the phone: it is
// recorded and audited as dropped (by id, kind, chat and user, never its
// content), Telegram is told to forget it, and the owner's message after
// it is handled — also after a restart, which resumes after both.
func TestUndecodableUpdateIsSkipped(t *testing.T) {
	e := newEnv(t)
	const secret = "stranger-secret-91c2"
	bad := e.fake.AddUpdate(futureForward(e.fake, stranger, secret))
	good := e.fake.PrivateText(owner, "after the stranger")
	e.handled(good)
	if ev := e.flush(1); plugintest.Member(&ev, "text") != "after the stranger" {
		t.Errorf("prompt %q", plugintest.Member(&ev, "text"))
	}
	var kind, disposition string
	var chat, user int64
	if err := e.h.db.db.QueryRow("SELECT kind, chat_id, user_id, disposition FROM updates WHERE update_id = ?", bad).Scan(&kind, &chat, &user, &disposition); err != nil {
		t.Fatalf("the undecodable update is not recorded: %v", err)
	}
	if kind != "message" || chat != stranger || user != stranger || !strings.HasPrefix(disposition, "drop: ") {
		t.Errorf("recorded as %s in %d from %d: %q", kind, chat, user, disposition)
	}
	dropped := strings.Join(e.svc.Dropped(), "\n")
	if !strings.Contains(dropped, fmt.Sprintf("telegram update %d (message) in chat %d from user %d", bad, stranger, stranger)) {
		t.Errorf("audited as %q", dropped)
	}
	if strings.Contains(dropped, secret) || strings.Contains(disposition, secret) {
		t.Error("the record of a dropped update holds its content")
	}
	e.restart()
	e.fake.WaitCount(t, "getUpdates", 1)
	waitFor(t, "a poll after the restart", func() bool { return lastOffset(e.fake) > 0 })
	if got := lastOffset(e.fake); got != good+1 {
		t.Errorf("after a restart polling resumed at offset %d, want %d", got, good+1)
	}
}

// lastOffset is the offset of the newest getUpdates.
func lastOffset(f *fakebot.Server) int64 {
	var off int64
	for _, r := range f.Requests() {
		if r.Method == "getUpdates" {
			off = atoi(r.Params["offset"])
		}
	}
	return off
}

// A poll that fails for degraded_after_s reports the plugin degraded,
// with the last error, and healthy again once getUpdates works; the
// owner's message then arrives.
func TestPollReportsDegradedAndBack(t *testing.T) {
	e := newEnv(t, func(e *env) { e.cfg["degraded_after_s"] = json.Number("60") })
	e.fake.Fail("getUpdates", 8, fakebot.Fault{Code: 502, Description: "Bad Gateway"})
	// The plugin has taken the failure in (the fake's record of its 502
	// comes before that: moving the clock then could report the poll
	// stuck, with no error yet).
	e.fake.Wait(t, 10*time.Second, "a failed getUpdates, taken in", func() bool {
		e.h.health.mu.Lock()
		defer e.h.health.mu.Unlock()
		return e.h.health.lastErr != ""
	})
	if n := len(e.svc.Reports()); n != 0 {
		t.Fatalf("%d health reports before degraded_after_s passed", n)
	}
	e.until("a degraded report", func() bool { return len(e.svc.Reports()) > 0 })
	r := e.svc.Reports()[0]
	if !r.Degraded || !strings.Contains(r.Why, "no message from Telegram can arrive") || !strings.Contains(r.Why, "502: Bad Gateway") {
		t.Errorf("report %+v: want degraded, saying why, with the last error", r)
	}
	e.until("a healthy report", func() bool { rs := e.svc.Reports(); return !rs[len(rs)-1].Degraded })
	id := e.fake.PrivateText(owner, "back again")
	e.handled(id)
	if ev := e.flush(1); plugintest.Member(&ev, "text") != "back again" {
		t.Errorf("prompt %q", plugintest.Member(&ev, "text"))
	}
}

// The owner's own message that cannot be decoded is skipped too, and the
// owner is told so; a stranger's never gets an answer.
func TestOwnersUndecodableMessageIsAnswered(t *testing.T) {
	e := newEnv(t)
	e.handled(e.fake.AddUpdate(futureForward(e.fake, stranger, "x")))
	id := e.fake.AddUpdate(futureForward(e.fake, owner, "forwarded from the future"))
	e.handled(id)
	e.until("the note", func() bool { return len(e.fake.Texts(owner)) > 0 })
	if got := e.fake.Texts(owner)[0]; !strings.Contains(got, fmt.Sprintf("update %d", id)) || !strings.Contains(got, "could not be read") {
		t.Errorf("note %q", got)
	}
	if n := len(e.fake.Texts(stranger)); n != 0 {
		t.Errorf("the stranger got %d messages", n)
	}
	if n := len(e.events()); n != 0 {
		t.Errorf("%d prompts from undecodable messages", n)
	}
}
