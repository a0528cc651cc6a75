package telegram

import (
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
)

// dieAt makes the handler's goroutine stop dead at point, once, as if the
// process had been killed there (the in-process stand-in; see
// TestSIGKILL for the real thing).
func dieAt(point string) envOpt {
	return func(e *env) {
		e.crash = func(p string) {
			if p == point && e.died.CompareAndSwap(false, true) {
				runtime.Goexit()
			}
		}
	}
}

func TestExactlyOnceAcrossRestart(t *testing.T) {
	e := newEnv(t)
	first := e.say(owner, "one")
	e.flush(1)
	e.restart()
	// The new process asks Telegram for what follows the handled update.
	waitFor(t, "a poll", func() bool { return e.fake.Count("getUpdates") > 0 })
	var offsets []string
	for _, r := range e.fake.Requests() {
		if r.Method == "getUpdates" {
			offsets = append(offsets, r.Params["offset"])
		}
	}
	if want := itoa(first + 1); offsets[len(offsets)-1] != want {
		t.Errorf("polling resumed at offset %v, want %s", offsets, want)
	}
	e.say(owner, "two")
	e.clock.Advance(DefaultDebounce)
	// "one" is still in flight (no reply yet): "two" waits; after the reply it goes, alone.
	e.channel(plugin.TopicChannelReply, e.events()[0], "s-1", "")
	e.until("the second prompt", func() bool { return len(e.events()) == 2 })
	texts := []any{plugintest.Member(&e.events()[0], "text"), plugintest.Member(&e.events()[1], "text")}
	if texts[0] != "one" || texts[1] != "two" {
		t.Errorf("prompts %v, want [one two]", texts)
	}
}

func TestCrashPoints(t *testing.T) {
	cases := []struct {
		point     string
		redeliver bool   // Telegram must serve the update again
		events    int    // message.inbound events in all
		note      string // what the owner is told after the restart
	}{
		{"update:before-commit", true, 1, ""},
		{"update:after-commit", false, 1, ""}, // committed: the queue in the database has it
		{"publish:before-mark", false, 1, ""}, // still queued
		{"publish:before", false, 0, "may or may not have reached"},
		{"publish:after", false, 1, "may or may not have reached"},
	}
	for _, tc := range cases {
		t.Run(tc.point, func(t *testing.T) {
			e := newEnv(t, dieAt(tc.point))
			id := e.fake.PrivateText(owner, "exactly once")
			if strings.HasPrefix(tc.point, "update:") {
				waitFor(t, "the crash", func() bool { return e.died.Load() })
				// Dead before releasing the poll: Telegram keeps the update.
				if c := e.fake.Confirmed(); c >= id {
					t.Fatalf("update %d confirmed to Telegram before it was handled", id)
				}
			} else {
				e.handled(id)
				e.clock.waitTimer(t, DefaultDebounce)
				e.clock.Advance(DefaultDebounce)
				waitFor(t, "the crash", func() bool { return e.died.Load() })
			}
			e.restart()
			e.handled(id)
			if tc.redeliver && !servedTwice(e.fake, id) {
				t.Error("the update was not served again after the crash")
			}
			e.until("the outcome", func() bool {
				if tc.note != "" {
					return len(e.fake.Texts(owner)) > 0
				}
				return len(e.events()) >= tc.events
			})
			e.clock.Advance(DefaultDebounce)
			if n := len(e.events()); n != tc.events {
				t.Errorf("%d message.inbound events, want %d", n, tc.events)
			}
			if tc.note != "" && !strings.Contains(strings.Join(e.fake.Texts(owner), "\n"), tc.note) {
				t.Errorf("the owner was told %q", e.fake.Texts(owner))
			}
		})
	}
}

// servedTwice reports whether getUpdates answers served update id more
// than once — seen from the offsets: a poll at or below id after the
// first one that served it.
func servedTwice(f *fakebot.Server, id int64) bool {
	n := 0
	for _, r := range f.Requests() {
		if r.Method == "getUpdates" && r.Status == 200 && atoi(r.Params["offset"]) <= id {
			n++
		}
	}
	return n >= 2
}

func TestSecondProcessIsRefused(t *testing.T) {
	e := newEnv(t)
	second := New(Options{DataDir: e.dir, Clock: e.clock, Logger: testLogger(t)})
	err := second.Init(t.Context(), e.cfg, e.svc)
	if err == nil {
		_ = second.Shutdown(t.Context())
		t.Fatal("a second handler on the same data folder started")
	}
	if !strings.Contains(err.Error(), "another telegram plugin process") {
		t.Errorf("error %v", err)
	}
	// Positive control: once the first stops, a new one starts.
	e.hs.Shutdown()
	third := New(Options{DataDir: e.dir, Clock: e.clock, Logger: testLogger(t)})
	plugintest.New(t, third, plugintest.WithConfig(e.cfg), plugintest.WithServices(e.svc))
}

func itoa(n int64) string { return formatID(n) }

func atoi(s string) int64 {
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return n
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// TestConfirmWaitsForADurableRecord: an owner's message that goes to the
// core at once (no debounce) is recorded with a relaxed commit, and
// Telegram is not told to forget its update (the next getUpdates) until
// the prompt's publishing mark, a full commit, has made the record
// durable. The control: with a debounce the record is a full commit of
// its own, and the same check sees the update confirmed while the mark
// is held.
func TestConfirmWaitsForADurableRecord(t *testing.T) {
	for _, tc := range []struct {
		name            string
		debounce        any // nil: the default
		confirmedBefore bool
	}{
		{"at once", json.Number("0"), false},
		{"debounced (control)", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			e := newEnv(t, func(e *env) {
				if tc.debounce != nil {
					e.cfg["debounce_ms"] = tc.debounce
				}
				e.crash = func(p string) {
					if p == "publish:before-mark" {
						once.Do(func() { close(held); <-release })
					}
				}
			})
			id := e.fake.PrivateText(owner, "hold the mark")
			if tc.debounce == nil {
				e.handled(id)
				e.clock.waitTimer(t, DefaultDebounce)
				e.clock.Advance(DefaultDebounce)
			}
			select {
			case <-held:
			case <-time.After(10 * time.Second):
				t.Fatal("the prompt never reached its publishing mark")
			}
			// The poll asks again at once when nothing holds it.
			time.Sleep(300 * time.Millisecond)
			if got := e.fake.Confirmed() >= id; got != tc.confirmedBefore {
				t.Errorf("update confirmed to Telegram before the publishing mark: %v, want %v", got, tc.confirmedBefore)
			}
			close(release)
			e.handled(id)
			if ev := e.waitEvents(1)[0]; plugintest.Member(&ev, "text") != "hold the mark" {
				t.Errorf("published %q", plugintest.Member(&ev, "text"))
			}
			// The mark made the record durable: no commit of its own.
			if v, err := e.h.db.meta(t.Context(), keyDurable); err != nil || v != "" {
				t.Errorf("%s = %q (%v), want unset", keyDurable, v, err)
			}
		})
	}
}

// TestConfirmWhilePausedSyncsItself: a message that would go at once
// while the core is paused keeps its prompt queued, with no publishing
// mark, so the poll makes the relaxed record durable itself, with a full
// commit of its own, before it confirms the update.
func TestConfirmWhilePausedSyncsItself(t *testing.T) {
	e := newEnv(t, func(e *env) {
		e.cfg["debounce_ms"] = json.Number("0")
		e.svc.Status.Paused = true
	})
	id := e.say(owner, "are you there?")
	if v, err := e.h.db.meta(t.Context(), keyDurable); err != nil || v != itoa(id) {
		t.Errorf("%s = %q (%v), want %d: the record was not synced before the confirmation", keyDurable, v, err, id)
	}
	waitFor(t, "the note", func() bool { return len(e.fake.Texts(owner)) == 1 })
	if got := e.fake.Texts(owner)[0]; got != notePaused {
		t.Errorf("note %q", got)
	}
	if n := len(e.events()); n != 0 {
		t.Errorf("%d events while paused", n)
	}
}

// TestConfirmDoesNotWaitLongForTheMark: the poll waits at most markWait
// for the publishing mark (which waits for the core's answer to Paused);
// then it makes the update's record durable itself and confirms it,
// while the mark is still held. The prompt still goes, once.
func TestConfirmDoesNotWaitLongForTheMark(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e := newEnv(t, func(e *env) {
		e.cfg["debounce_ms"] = json.Number("0")
		e.crash = func(p string) {
			if p == "publish:before-mark" {
				once.Do(func() { close(held); <-release })
			}
		}
	})
	id := e.fake.PrivateText(owner, "a slow core")
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the prompt never reached its publishing mark")
	}
	e.clock.waitTimer(t, markWait)
	e.clock.Advance(markWait)
	e.handled(id) // the mark is still held
	if v, err := e.h.db.meta(t.Context(), keyDurable); err != nil || v != itoa(id) {
		t.Errorf("%s = %q (%v), want %d: confirmed without a durable record", keyDurable, v, err, id)
	}
	close(release)
	if ev := e.waitEvents(1)[0]; plugintest.Member(&ev, "text") != "a slow core" {
		t.Errorf("published %q", plugintest.Member(&ev, "text"))
	}
	time.Sleep(100 * time.Millisecond) // a second event would come now
	if n := len(e.events()); n != 1 {
		t.Errorf("%d events, want 1", n)
	}
}
