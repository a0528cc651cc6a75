package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
)

// BenchmarkTelegramRoundTrip is the phone's round trip: from the moment
// the fake Bot API serves the owner's message to a getUpdates of the real
// Telegram plugin process, to its sendMessage of the agent's answer. The
// agent is the Docker test agent, which makes one echo call through the
// real ipc binary and prints the result. The debounce is 0 (a burst is not
// waited for), so the figure is Carapace, the engine and the agent; a
// user's default debounce of 1.5 s comes on top. Run it with
//
//	go test -run '^$' -bench TelegramRoundTrip -benchtime 15x ./core/server
//
// (make bench does). Besides ns/op it reports the median and p90 of the
// round trip and of its parts, in ms, from the fake's clock, the audit log
// and the core's log:
//
//   - in: served → the plugin's message.inbound published (audit): the
//     plugin's poll, its SQLite transaction, the event;
//   - start: → "agent container starting": the core's session, the skills,
//     brief and files;
//   - agent: → "agent said it is done": the agent's run in its container
//     (its start, or the warm one's wake; its call; its exit), the
//     engine's and the agent's time, not Carapace's; the container's
//     teardown comes after, and no answer waits for it (core/agent/done.go);
//   - out: → the answer's sendMessage: channel.reply through the bus and
//     the plugin's mailbox, the plugin's send.
//
// carapace-ms is in + start + out: Carapace's own share. Rounds are a
// second apart, as the plugin sends at most one message a second to a
// chat; ns/op counts that pause out but is the mean, not the median.
//
// It runs twice, side by side: cold ([sessions] warm = 0: each message
// starts a container) and warm (warm = 1: each message claims the
// group's warm container, and another is started behind it). Warm, the
// start ends at "agent session claimed a warm container" and the agent
// part is the waiting container woken, the agent's run and its exit.
func BenchmarkTelegramRoundTrip(b *testing.B) {
	for _, mode := range []struct {
		name, warm, mark string
	}{{"cold", "0", "agent container starting"}, {"warm", "1", "agent session claimed a warm container"}} {
		b.Run(mode.name, func(b *testing.B) { telegramRoundTrip(b, mode.warm, mode.mark) })
	}
}

// telegramRoundTrip is BenchmarkTelegramRoundTrip with [sessions] warm =
// warm; mark is the core's log line that ends the start.
func telegramRoundTrip(b *testing.B, warm, mark string) {
	bot := fakebot.New(b)
	cfg := strings.Replace(telegramConfig(b, bot, ""), "debounce_ms = 300", "debounce_ms = 0", 1)
	if !strings.Contains(cfg, "debounce_ms = 0") {
		b.Fatal("the benchmark's config did not set debounce_ms = 0")
	}
	cfg = strings.Replace(cfg, "[groups.main]", "[sessions]\nwarm = "+warm+"\n[groups.main]", 1)
	c := startCoreWith(b, coreOptions{Config: cfg, Bundled: []loader.Bundled{telegramBundle(b)}, Setup: func(h home.Dir) { setToken(b, h) }})
	bot.WaitCount(b, "getUpdates", 1)

	roundTrip := func(i int) (served, sent time.Time) {
		msg := fmt.Sprintf("round trip %d", i)
		id := bot.PrivateText(tgOwner, echo(msg))
		waitAnswer(b, bot, tgOwner, `"message":"`+msg+`"`)
		served, ok := bot.ServedAt(id)
		if !ok {
			b.Fatalf("update %d answered but never served", id)
		}
		for _, r := range bot.Requests() {
			if r.Method == "sendMessage" && strings.Contains(r.Params["text"], `"message":"`+msg+`"`) {
				return served, r.At
			}
		}
		b.Fatalf("no sendMessage with the answer to %q", msg)
		return
	}
	var last time.Time
	for i := range 2 { // the engine's first runs are slower
		_, last = roundTrip(-1 - i)
	}
	time.Sleep(time.Until(last.Add(1100 * time.Millisecond)))
	type round struct{ served, sent time.Time }
	rounds := make([]round, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		s, e := roundTrip(i)
		rounds = append(rounds, round{s, e})
		// The plugin sends at most one message a second to a chat: a
		// message answered within a second of the last answer waits for
		// it. A person does not type that fast; the rounds are spaced.
		b.StopTimer()
		time.Sleep(time.Until(e.Add(1100 * time.Millisecond)))
		b.StartTimer()
	}
	b.StopTimer()

	published := publishedTimes(b, c)
	starting, done := logTimes(b, c.Log.String(), mark), logTimes(b, c.Log.String(), "agent said it is done")
	var total, in, start, agent, out, own []time.Duration
	for _, r := range rounds {
		p, okP := firstIn(published, r.served, r.sent)
		st, okS := firstIn(starting, p, r.sent)
		d, okD := firstIn(done, st, r.sent)
		if !okP || !okS || !okD {
			b.Fatalf("a round trip from %s to %s lacks a mark (published %v, starting %v, done %v)",
				r.served.Format(time.RFC3339Nano), r.sent.Format(time.RFC3339Nano), okP, okS, okD)
		}
		total = append(total, r.sent.Sub(r.served))
		in, start, agent, out = append(in, p.Sub(r.served)), append(start, st.Sub(p)), append(agent, d.Sub(st)), append(out, r.sent.Sub(d))
		own = append(own, p.Sub(r.served)+st.Sub(p)+r.sent.Sub(d))
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"total", total}, {"in", in}, {"start", start}, {"agent", agent}, {"out", out}, {"carapace", own}} {
		b.ReportMetric(ms(quantile(m.d, 0.5)), m.name+"-p50-ms")
		b.ReportMetric(ms(quantile(m.d, 0.9)), m.name+"-p90-ms")
	}
}

// publishedTimes are the audit log's times of the Telegram plugin's
// message.inbound events, in order.
func publishedTimes(b *testing.B, c *testCore) []time.Time {
	b.Helper()
	var out []time.Time
	for _, e := range c.Audit(b) {
		if e.Source == "telegram" && e.Topic == plugin.TopicMessageInbound.Name() && e.Stage == audit.StageEvent && e.Outcome == audit.OutcomePublished {
			out = append(out, e.Time)
		}
	}
	return out
}

// logTimes are the times of the core's log lines whose msg is msg, in
// order.
func logTimes(b *testing.B, log, msg string) []time.Time {
	b.Helper()
	var out []time.Time
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == msg {
			out = append(out, l.Time)
		}
	}
	return out
}

// firstIn returns the first of ts within [from, to].
func firstIn(ts []time.Time, from, to time.Time) (time.Time, bool) {
	for _, t := range ts {
		if !t.Before(from) && !t.After(to) {
			return t, true
		}
	}
	return time.Time{}, false
}

// quantile returns the q-quantile of d (nearest rank).
func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
