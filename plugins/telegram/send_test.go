package telegram

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
)

func TestSendTelegramTargets(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "hi")
	ev := e.flush(1)
	e.channel(plugin.TopicChannelStarted, ev, "s-main", "")
	cases := []struct {
		name    string
		args    string
		group   string
		session string
		to      int64  // 0: refused
		code    string // the handler's code when refused
	}{
		{"the session's own chat", `{"text":"progress"}`, "main", "s-main", owner, ""},
		{"the owner's chat from a session of owner_group", `{"text":"done"}`, "main", "s-cron", owner, ""},
		{"a chat bound to the session's group", `{"text":"hello family","chat":-100777}`, "family", "s-x", family, ""},
		{"a chat bound to another group", `{"text":"leak","chat":-100888}`, "family", "s-x", 0, "CHAT_NOT_ALLOWED"},
		{"an unbound chat", `{"text":"leak","chat":-100999}`, "main", "s-main", 0, "CHAT_NOT_ALLOWED"},
		{"a stranger's private chat", `{"text":"leak","chat":666}`, "main", "s-main", 0, "CHAT_NOT_ALLOWED"},
		{"the owner's chat from another group", `{"text":"leak","chat":4242}`, "family", "s-x", 0, "CHAT_NOT_ALLOWED"},
		{"no chat of its own, outside owner_group", `{"text":"where?"}`, "work2", "s-y", 0, "NO_CHAT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.fake.Count("sendMessage")
			r := e.invoke(tc.args, plugintest.WithGroup(tc.group), plugintest.WithSession(tc.session))
			if tc.to == 0 {
				plugintest.AssertError(t, r, "")
				if r.HandlerCode != tc.code {
					t.Errorf("code %s (%s), want %s", r.HandlerCode, r.Message, tc.code)
				}
				if n := e.fake.Count("sendMessage") - before; n != 0 {
					t.Errorf("a refused call sent %d messages", n)
				}
				return
			}
			v := plugintest.AssertSuccess(t, r)
			if v["chat"] != json.Number(strconv.FormatInt(tc.to, 10)) {
				t.Errorf("sent to %v, want %d", v["chat"], tc.to)
			}
		})
	}
}

func TestFloodControlIsHonoured(t *testing.T) {
	e := newEnv(t)
	e.fake.Fail("sendMessage", 1, fakebot.TooManyRequests(3))
	done := make(chan plugintest.Result, 1)
	go func() {
		done <- e.hs.Invoke("send_telegram", plugintest.Args(t, `{"text":"hello"}`), plugintest.WithGroup("main"))
	}()
	e.fake.WaitCount(t, "sendMessage", 1)
	e.clock.waitTimer(t, 3*time.Second)
	e.clock.Advance(3*time.Second - time.Millisecond)
	if n := e.fake.Count("sendMessage"); n != 1 {
		t.Fatalf("%d sendMessage before retry_after passed", n)
	}
	e.clock.Advance(time.Millisecond)
	plugintest.AssertSuccess(t, <-done)
	if got := e.fake.Texts(owner); len(got) != 1 || got[0] != "hello" {
		t.Errorf("delivered %q", got)
	}
}

func TestRateLimits(t *testing.T) {
	t.Run("one a second per chat", func(t *testing.T) {
		e := newEnv(t)
		s := e.h.send
		for i := range 3 {
			go func() { _, _ = s.send(t.Context(), owner, message{Text: "m" + string(rune('0'+i))}) }()
		}
		e.fake.WaitCount(t, "sendMessage", 1)
		for i := 2; i <= 3; i++ {
			e.clock.waitTimer(t, time.Second)
			e.clock.Advance(time.Second - time.Millisecond)
			if n := e.fake.Count("sendMessage"); n != i-1 {
				t.Fatalf("%d messages after %d.999 s, want %d", n, i-2, i-1)
			}
			e.clock.Advance(time.Millisecond)
			e.fake.WaitCount(t, "sendMessage", i)
		}
	})
	t.Run("twenty-five a second in all", func(t *testing.T) {
		e := newEnv(t)
		s := e.h.send
		for c := range 30 { // thirty different chats at once
			go func() { _, _ = s.send(t.Context(), int64(1000+c), message{Text: "hi"}) }()
		}
		e.fake.WaitCount(t, "sendMessage", 1)
		for step := 1; step < 25; step++ {
			waitFor(t, "the next booking", func() bool { return len(e.clock.Pending()) > 0 })
			e.clock.Advance(globalGap)
			e.fake.WaitCount(t, "sendMessage", step+1)
		}
		// 25 sent within the first second (at 0, 40 ms, …, 960 ms): the 26th waits.
		if n := e.fake.Count("sendMessage"); n != 25 {
			t.Fatalf("%d messages in the first second, want 25", n)
		}
		e.clock.Advance(globalGap)
		e.fake.WaitCount(t, "sendMessage", 26)
	})
}

func TestUnknownOutcomeIsNotResent(t *testing.T) {
	e := newEnv(t)
	e.fake.LoseAnswer("sendMessage", 1)
	r := e.hs.Invoke("send_telegram", plugintest.Args(t, `{"text":"pay the invoice"}`), plugintest.WithGroup("main"))
	plugintest.AssertError(t, r, "")
	if r.HandlerCode != "MAYBE_SENT" || !strings.Contains(r.Message, "may") {
		t.Errorf("error %s: %s", r.HandlerCode, r.Message)
	}
	e.clock.Advance(time.Hour)
	if n := e.fake.Count("sendMessage"); n != 1 {
		t.Errorf("sendMessage sent %d times, want exactly 1 (the lost answer must not cause a resend)", n)
	}
	// Positive control: the same path with the answer intact succeeds.
	plugintest.AssertSuccess(t, e.hs.Invoke("send_telegram", plugintest.Args(t, `{"text":"ok"}`), plugintest.WithGroup("main")))
}

func TestSplitProperties(t *testing.T) {
	alphabet := []rune("ab ¢€\n\n\n 😀🦀𝄞 z") // ASCII, 2- and 3-byte, astral, spaces and line breaks
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		n := rng.IntN(12000)
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		in := b.String()
		max := []int{MaxMessage, 2, 3, 17, 100}[i%5]
		pieces := Split(in, max)
		if strings.Join(pieces, "") != in {
			t.Fatalf("case %d: the pieces do not add up to the input", i)
		}
		for _, p := range pieces {
			if p == "" {
				t.Fatalf("case %d: an empty piece", i)
			}
			u := utf16.Encode([]rune(p))
			if len(u) > max {
				t.Fatalf("case %d: a piece of %d units (max %d)", i, len(u), max)
			}
			if !utf8.ValidString(p) {
				t.Fatalf("case %d: a piece is not valid UTF-8 (a character was cut)", i)
			}
			for j, c := range u { // no lone surrogate: every high one is followed by a low one
				if utf16.IsSurrogate(rune(c)) && c < 0xDC00 && (j+1 == len(u) || u[j+1] < 0xDC00 || u[j+1] > 0xDFFF) {
					t.Fatalf("case %d: a lone surrogate", i)
				}
			}
		}
	}
}

func TestSplitPrefersBoundaries(t *testing.T) {
	para := strings.Repeat("x", 3000)
	cases := []struct {
		name string
		in   string
		want []string
	}{
		{"fits", "short", []string{"short"}},
		{"paragraph", para + "\n\n" + para, []string{para + "\n\n", para}},
		{"line", para + "\n" + para, []string{para + "\n", para}},
		{"space", para + " " + para, []string{para + " ", para}},
		{"nothing to cut at", strings.Repeat("y", 5000), []string{strings.Repeat("y", 4096), strings.Repeat("y", 904)}},
		{"an emoji on the edge", strings.Repeat("y", 4095) + "🦀", []string{strings.Repeat("y", 4095), "🦀"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Split(tc.in, MaxMessage)
			if len(got) != len(tc.want) {
				t.Fatalf("%d pieces, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("piece %d: %d bytes, want %d", i, len(got[i]), len(tc.want[i]))
				}
			}
		})
	}
}
