package server_test

// End-to-end tests of the core under attack and at its edges: hostile bytes
// on a session socket, oversized and malformed wire messages, Lazy Pirate
// resends, graceful shutdown (in process and through the real `carapace
// serve`), and an audit log that cannot be written. Every request goes
// through the real bin/ipc or a raw peer on the real session socket.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/server"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/ipc/zmtp"
)

// TestHostileBytesOnSessionSocket: garbage, huge frame headers, stalled and
// churning connections on session A's socket leave the core, session B and
// A's own legitimate client working. They create no session and reach no
// pipeline stage: the only audit trace is the transport's rate-limited
// "rejected" entries against A, the socket that was attacked.
func TestHostileBytesOnSessionSocket(t *testing.T) {
	c := startCore(t, "")
	a := c.Session(t, "main")
	b := c.Session(t, "main")
	legit := 0 // successful bin/ipc calls, each leaves one routed entry
	serves := func(t *testing.T, s api.Session, what string) {
		t.Helper()
		r := runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":"still here"}`)
		if r.Code != 0 || r.Result["message"] != "still here" {
			t.Fatalf("%s: bin/ipc on session %s not served: exit %d, stderr %q", what, s.ID, r.Code, r.Stderr)
		}
		legit++
	}
	coreUp := func(t *testing.T, what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := c.Client.Status(ctx)
		if err != nil {
			t.Fatalf("%s: control Status: %v", what, err)
		}
		if st.Sessions != 2 || st.Draining {
			t.Fatalf("%s: status %+v; want 2 sessions, not draining", what, st)
		}
	}

	attacked := time.Now()
	t.Run("garbage", func(t *testing.T) {
		for _, junk := range [][]byte{
			hostileRandom(t, 4096),
			bytes.Repeat([]byte("GET / HTTP/1.1\r\nHost: carapace\r\n\r\n"), 50),
			append([]byte{0xFF}, hostileRandom(t, 200)...), // a plausible first byte, then noise
		} {
			conn := hostileDial(t, a.Socket)
			_, _ = conn.Write(junk) // the core may cut us off mid-write
			hostileWaitClosed(t, conn)
		}
		serves(t, a, "after garbage")
		serves(t, b, "after garbage")
	})

	t.Run("huge frame headers", func(t *testing.T) {
		for _, size := range []uint64{1 << 62, 1 << 31} {
			conn := hostileDial(t, a.Socket)
			hostileHandshake(t, conn) // a valid DEALER: the handshake is accepted...
			if _, err := conn.Write(hostileHeader(0, size)); err != nil {
				t.Fatal(err)
			}
			hostileWaitClosed(t, conn) // ...and the lying header cuts it
			coreUp(t, "after a header claiming "+strconv.FormatUint(size, 10)+" bytes")
		}
		serves(t, a, "after huge headers")
		serves(t, b, "after huge headers")
	})

	t.Run("100 silent connections held open", func(t *testing.T) {
		var held []net.Conn
		for range 100 {
			held = append(held, hostileDial(t, a.Socket))
		}
		// B has its own socket: untouched by A's flood.
		serves(t, b, "while A is flooded")
		coreUp(t, "while A is flooded")
		// A's socket holds at most 64 connections, and a connection that
		// never finishes its handshake is dropped after 3 s: A's own client
		// gets in within bin/ipc's 5 s connect window.
		start := time.Now()
		serves(t, a, "while A is flooded")
		t.Logf("A's own client was served after %s", time.Since(start).Round(10*time.Millisecond))
		// Every silent connection is dropped by the core, none kept forever.
		for _, conn := range held {
			hostileWaitClosed(t, conn)
		}
	})

	t.Run("200 connections opened and closed", func(t *testing.T) {
		for range 200 {
			conn, err := net.Dial("unix", a.Socket)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			conn.Close()
		}
		serves(t, a, "after churn")
		serves(t, b, "after churn")
	})

	coreUp(t, "after every attack")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := c.Client.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	want := []string{a.ID, b.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("sessions %v; want exactly A and B %v", ids, want)
	}
	socks, _ := filepath.Glob(filepath.Join(c.Home.SessionsDir(), "*"))
	if len(socks) != 2 {
		t.Fatalf("session directory holds %v; want A's and B's sockets only", socks)
	}
	// The audit log holds the core's start, the two sessions, the
	// legitimate calls, and the transport's drops attributed to A (the
	// socket that was attacked), rate-limited to a burst of 10 then 1/s.
	// Nothing the attackers sent reached the pipeline or made a session.
	routed, drops := 0, 0
	for _, e := range c.Audit(t) {
		switch {
		case e.Stage == audit.StageCore && e.Outcome == audit.OutcomeStarted:
		case e.Stage == audit.StageSession && e.Outcome == audit.OutcomeOpened && (e.Session == a.ID || e.Session == b.ID):
		case e.Stage == audit.StageBrief && e.Outcome == audit.OutcomeOK && (e.Session == a.ID || e.Session == b.ID):
		case e.Stage == audit.StageSession && e.Outcome == audit.OutcomeRejected && e.Session == a.ID && strings.HasPrefix(e.Reason, "transport: "):
			drops++
		case e.Stage == audit.StageRoute && e.Outcome == audit.OutcomeRouted && e.Topic == "tool.invoke.echo":
			routed++
		case e.Stage == audit.StageResponse && e.Outcome == audit.OutcomeOK && e.Topic == "tool.invoke.echo":
		default:
			t.Errorf("audit entry not made by a legitimate call or A's transport: %+v", e)
		}
	}
	if routed != legit {
		t.Errorf("%d routed entries; want one per legitimate call (%d)", routed, legit)
	}
	if limit := 10 + int(time.Since(attacked).Seconds()) + 1; drops == 0 || drops > limit {
		t.Errorf("%d transport drops audited for ~370 dropped connections; want between 1 and %d (rate-limited)", drops, limit)
	}
}

// TestHostileOversizedAndMalformedInput: the size limit is enforced by
// bin/ipc before it connects and by the core on what arrives; malformed
// wire messages get a structured stage-1 answer, never silence; a
// correlation cannot be reused for another request; a resend is answered
// from the cache without running the handler again.
func TestHostileOversizedAndMalformedInput(t *testing.T) {
	c := startCore(t, "")
	s := c.Session(t, "main")

	t.Run("bin/ipc refuses oversized arguments", func(t *testing.T) {
		before := len(c.Audit(t))
		big := []byte(`{"message":"` + strings.Repeat("x", ipc.MaxRequestBytes) + `"}`) // > 1 MiB of arguments
		r := runIPCStdin(t, s.Socket, nil, big, "tool.invoke.oversize_probe", "-")
		wantError(t, r, ipc.CodeValidationFailed, 0, "arguments") // stage 0: refused by ipc, not the core
		// Arguments under 1 MiB whose wire message is over it.
		under := []byte(`{"message":"` + strings.Repeat("x", ipc.MaxRequestBytes-20) + `"}`)
		r = runIPCStdin(t, s.Socket, nil, under, "tool.invoke.oversize_probe", "-")
		wantError(t, r, ipc.CodeValidationFailed, 0, "arguments")
		for _, e := range c.Audit(t)[before:] {
			t.Errorf("an oversized call reached the core: %+v", e)
		}
	})

	d := hostileNewDealer(t, s.Socket)

	t.Run("core answers a message over 1 MiB", func(t *testing.T) {
		wire := hostileWire("tool.invoke.echo", "big-1", ipc.MaxRequestBytes+1000)
		if len(wire) != ipc.MaxRequestBytes+1000 {
			t.Fatalf("built %d bytes", len(wire))
		}
		resp := d.exchange(t, wire)
		hostileWantWireError(t, resp, "big-1", "")
		if !strings.Contains(resp.Payload.Error.Message, "exceeds") {
			t.Errorf("message %q does not say the request is too large", resp.Payload.Error.Message)
		}
	})

	t.Run("3 MiB cuts the connection", func(t *testing.T) {
		// By hand, to see the cut: the header claims 3 MiB, over the
		// transport's 1 MiB + 64 KiB.
		conn := hostileDial(t, s.Socket)
		hostileHandshake(t, conn)
		body := hostileWire("tool.invoke.echo", "huge-1", 3<<20)
		go func() { _, _ = conn.Write(append(hostileHeader(0, uint64(len(body))), body...)) }()
		hostileWaitClosed(t, conn)

		// Through zmq4, as a real client would: no answer, ever.
		d3 := hostileNewDealer(t, s.Socket)
		_ = d3.d.Send(zmq4.NewMsg(hostileWire("tool.invoke.echo", "huge-2", 3<<20)))
		select {
		case f, ok := <-d3.frames:
			if ok {
				t.Fatalf("the core answered a 3 MiB message: %.200q", f)
			}
		case <-time.After(2 * time.Second):
		}
		for _, e := range c.Audit(t) {
			if strings.HasPrefix(e.Correlation, "huge-") {
				t.Errorf("a 3 MiB message reached the pipeline: %+v", e)
			}
		}
		r := runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":"after"}`)
		if r.Code != 0 || r.Result["message"] != "after" {
			t.Fatalf("core no longer serves bin/ipc: %+v", r)
		}
	})

	t.Run("malformed JSON", func(t *testing.T) {
		for _, raw := range []string{
			`{"topic":"tool.invoke.echo","correlation":"m-1","arguments":{`,
			`not json at all`,
			`["tool.invoke.echo","m-3",{}]`,
			`{"topic":"tool.invoke.echo","correlation":"m-4","arguments":{}} trailing`,
			"",
		} {
			resp := d.exchange(t, []byte(raw))
			if resp.Payload.Error == nil || resp.Payload.Error.Code != ipc.CodeValidationFailed || resp.Payload.Error.Stage != 1 {
				t.Errorf("%q: answer %+v; want VALIDATION_FAILED stage 1", raw, resp.Payload)
			}
		}
	})

	t.Run("escaped strings", func(t *testing.T) {
		// The core's one-pass decoder unquotes by hand (ipc.unquote): an
		// escape reads as encoding/json reads it, so an escaped name is
		// the tool it spells, and a lone surrogate is U+FFFD, no tool.
		resp := d.exchange(t, []byte(`{"topic":"tool.invoke.\u0065cho","correlation":"esc-\u0031","arguments":{"message":"\ud83d\ude00 \u003c"}}`))
		if resp.Payload.Error != nil || resp.Correlation != "esc-1" || string(resp.Payload.Result) != `{"message":"😀 \u003c"}` {
			t.Fatalf("escaped echo: %+v, result %s", resp, resp.Payload.Result)
		}
		resp = d.exchange(t, []byte(`{"topic":"tool.invoke.ech\ud800o","correlation":"esc-2","arguments":{}}`))
		if e := resp.Payload.Error; e == nil || e.Code != ipc.CodeUnknownTool || resp.Correlation != "esc-2" || !strings.Contains(e.Message, "ech\ufffdo") {
			t.Fatalf("a lone surrogate in the tool's name: %+v (error %+v); want UNKNOWN_TOOL naming ech\ufffdo", resp, resp.Payload.Error)
		}
	})

	t.Run("two frames", func(t *testing.T) {
		one := hostileWire("tool.invoke.tk_count", "two-1", 0)
		before := c.Kit.calls.Load()
		if err := d.d.Send(zmq4.NewMsgFrom(one, one)); err != nil {
			t.Fatal(err)
		}
		resp := d.next(t)
		hostileWantWireError(t, resp, "", "")
		if n := c.Kit.calls.Load(); n != before {
			t.Fatalf("handler ran for a two-frame message: calls %d -> %d", before, n)
		}
	})

	t.Run("correlation reuse and resend", func(t *testing.T) {
		first := []byte(`{"topic":"tool.invoke.tk_count","correlation":"dup-1","arguments":{}}`)
		before := c.Kit.calls.Load()
		resp1, raw1 := d.exchangeRaw(t, first)
		if resp1.Payload.Error != nil {
			t.Fatalf("first call failed: %+v", resp1.Payload.Error)
		}
		if c.Kit.calls.Load() != before+1 {
			t.Fatalf("calls %d; want %d", c.Kit.calls.Load(), before+1)
		}
		// Same correlation, different request.
		other := []byte(`{"topic":"tool.invoke.tk_count","correlation":"dup-1","arguments":{"sleep_ms":0}}`)
		hostileWantWireError(t, d.exchange(t, other), "dup-1", "correlation")
		// The same bytes again, on this connection and on a fresh one (what
		// a Lazy Pirate resend does): the stored answer, byte for byte.
		_, raw2 := d.exchangeRaw(t, first)
		_, raw3 := hostileNewDealer(t, s.Socket).exchangeRaw(t, first)
		if !bytes.Equal(raw1, raw2) || !bytes.Equal(raw1, raw3) {
			t.Fatalf("resend answered differently:\n%s\n%s\n%s", raw1, raw2, raw3)
		}
		if n := c.Kit.calls.Load(); n != before+1 {
			t.Fatalf("handler ran %d times for one correlation; want once", n-before)
		}
		routed := 0
		for _, e := range c.Audit(t) {
			if e.Correlation == "dup-1" && e.Outcome == audit.OutcomeRouted {
				routed++
			}
		}
		if routed != 1 {
			t.Fatalf("%d routed entries for dup-1; want 1", routed)
		}
	})
}

// TestRetryNeverRunsTwice: bin/ipc resends every 300 ms while the handler
// takes 1.5 s; the core joins the resends to the running call.
func TestRetryNeverRunsTwice(t *testing.T) {
	c := startCore(t, "")
	s := c.Session(t, "main")
	// bin/ipc goes through a counting relay, to see that it did resend.
	relay, conns := hostileRelay(t, s.Socket)
	r := runIPC(t, relay, []string{"CARAPACE_IPC_RETRY=300ms"}, "tool.invoke.tk_count", `{"sleep_ms":1500}`)
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
	}
	if n := conns.Load(); n < 3 {
		t.Fatalf("bin/ipc made %d connections; want several resends (retry 300ms, handler 1.5s)", n)
	} else {
		t.Logf("bin/ipc sent the request on %d connections", n)
	}
	if n, _ := r.Result["count"].(float64); n != 1 {
		t.Fatalf("result %v; want count 1", r.Result)
	}
	if n := c.Kit.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times; want once", n)
	}
	var routed []audit.Entry
	for _, e := range c.Audit(t) {
		if e.Topic == "tool.invoke.tk_count" && e.Outcome == audit.OutcomeRouted {
			routed = append(routed, e)
		}
	}
	if len(routed) != 1 {
		t.Fatalf("%d routed entries for tk_count; want 1: %+v", len(routed), routed)
	}
	es, err := audit.Read(c.Home.AuditLog(), audit.Filter{Correlation: routed[0].Correlation})
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	for _, e := range es {
		stages = append(stages, e.Stage+"/"+e.Outcome)
	}
	if !slices.Equal(stages, []string{"route/routed", "response/ok"}) {
		t.Fatalf("entries for correlation %s: %v; want one routed call and one answer", routed[0].Correlation, stages)
	}
}

// TestShutdownDrainsInProcess: what SIGTERM does to a core with a call in
// its handler: the call finishes, new calls are refused, plugins are shut
// down once, sockets are removed and the log ends with "closed".
func TestShutdownDrainsInProcess(t *testing.T) {
	c := startCore(t, "")
	s := c.Session(t, "main")
	inflight := hostileStartIPC(t, s.Socket, nil, "tool.invoke.tk_count", `{"sleep_ms":1500}`)
	waitFor(t, "the call to reach its handler", func() bool {
		for _, e := range c.Audit(t) {
			if e.Topic == "tool.invoke.tk_count" && e.Outcome == audit.OutcomeRouted {
				return true
			}
		}
		return false
	})

	c.Cancel() // what the serve command does on SIGTERM
	waitFor(t, "the core to report draining", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := c.Client.Status(ctx)
		return err == nil && st.Draining
	})

	// Started after the drain began, while the first call still runs.
	r := runIPC(t, s.Socket, nil, "tool.invoke.tk_count", `{}`)
	wantError(t, r, ipc.CodePluginUnavailable, 6, "")

	r = inflight.wait(t, 20*time.Second)
	if r.Code != 0 {
		t.Fatalf("in-flight call: exit %d, stderr %q; want it to complete", r.Code, r.Stderr)
	}
	if n, _ := r.Result["count"].(float64); n != 1 {
		t.Fatalf("in-flight call: %v; want count 1", r.Result)
	}
	select {
	case <-c.Stopped():
		if err := c.Stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20s")
	}
	if n := c.Kit.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times; the call made while draining must not run", n)
	}
	if n := c.Kit.shutdown.Load(); n != 1 {
		t.Errorf("testkit Shutdown called %d times; want once", n)
	}
	for _, p := range []string{s.Socket, c.Home.ControlSocket(), c.Home.PidFile()} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still exists after Run returned (%v)", p, err)
		}
	}
	if socks, _ := filepath.Glob(filepath.Join(c.Home.SessionsDir(), "*")); len(socks) != 0 {
		t.Errorf("sockets left: %v", socks)
	}
	es := c.Audit(t)
	last := es[len(es)-1]
	if last.Stage != audit.StageCore || last.Outcome != audit.OutcomeClosed || last.Source != "core" {
		t.Fatalf("last audit entry %+v; want the core's closed entry", last)
	}
	if strings.Contains(last.Reason, "did not finish") {
		t.Errorf("closed entry says the drain was cut short: %q", last.Reason)
	}
}

// TestShutdownServeBinarySIGTERM: the real `carapace serve` on SIGTERM
// withdraws a pending confirmation (the agent gets PLUGIN_UNAVAILABLE at
// stage 5), exits 0 and leaves no socket or pid file behind.
func TestShutdownServeBinarySIGTERM(t *testing.T) {
	h := newHome(t)
	// Small timeouts so that the drain bound is short: the drain waits up
	// to handler_timeout + 1 s, plugin shutdown up to shutdown_timeout, the
	// control API up to 2 s.
	const drainBound = 5*time.Second + time.Second + 2*time.Second + 2*time.Second
	if err := os.WriteFile(h.Config(), []byte("[core]\nhandler_timeout = \"5s\"\nshutdown_timeout = \"2s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	serve := hostileStart(t, exec.Command(bins.carapace, "--home", string(h), "serve"))
	waitFor(t, "carapace status to answer", func() bool {
		_, _, code := runCLI(t, h, "status")
		return code == 0
	})

	run := hostileStart(t, exec.Command(bins.carapace, "--home", string(h), "run", "--group", "main", "--runtime", "none", "--",
		bins.ipc, "tool.invoke.echo_confirm", `{"message":"x"}`))
	var sessions []string
	waitFor(t, "the confirmation to be pending", func() bool {
		out, _, code := runCLI(t, h, "confirm", "list", "--json")
		var list []api.Confirmation
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Tool != "echo_confirm" {
			return false
		}
		sessions = []string{list[0].Session}
		return true
	})

	if err := serve.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	serveCode := serve.wait(t, drainBound)
	if serveCode != 0 {
		t.Fatalf("carapace serve exited %d after SIGTERM; stderr:\n%s", serveCode, serve.stderr.String())
	}
	runCode := run.wait(t, 30*time.Second)
	var got *ipc.Error
	for _, l := range scanLines(run.stderr.String()) {
		var e ipc.Error
		if json.Unmarshal([]byte(l), &e) == nil && e.Code != "" {
			got = &e
		}
	}
	es, err := audit.Read(h.AuditLog(), audit.Filter{})
	if err != nil || len(es) == 0 {
		t.Fatalf("audit: %v, %d entries", err, len(es))
	}
	if got == nil || got.Code != ipc.CodePluginUnavailable || got.Stage != 5 {
		var trail strings.Builder
		for _, e := range es {
			b, _ := json.Marshal(e)
			trail.Write(append(b, '\n'))
		}
		t.Errorf("pending call ended with %+v (carapace run exit %d); want PLUGIN_UNAVAILABLE stage 5\nrun stderr:\n%s\nserve stderr:\n%s\naudit:\n%s",
			got, runCode, run.stderr.String(), serve.stderr.String(), trail.String())
	}
	if runCode != 1 {
		t.Errorf("carapace run exited %d; want ipc's 1", runCode)
	}
	for _, p := range []string{h.ControlSocket(), h.PidFile(), h.SessionSocket(sessions[0])} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still exists after serve exited (%v)", p, err)
		}
	}
	if socks, _ := filepath.Glob(filepath.Join(h.SessionsDir(), "*")); len(socks) != 0 {
		t.Errorf("sockets left: %v", socks)
	}
	if last := es[len(es)-1]; last.Stage != audit.StageCore || last.Outcome != audit.OutcomeClosed {
		t.Errorf("last audit entry %+v; want the core's closed entry", last)
	}
}

// TestAuditFailRefusesRequest: with the audit log on /dev/full every write
// fails with ENOSPC; requests are refused, never run unaudited.
func TestAuditUnwritableAtStartRefusesToStart(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Fatalf("this test needs /dev/full: %v", err)
	}
	h := newHome(t)
	if err := os.Symlink("/dev/full", h.AuditLog()); err != nil { // every write fails with ENOSPC
		t.Fatal(err)
	}
	err := server.Run(context.Background(), server.Options{Home: h, Logger: slog.New(slog.DiscardHandler), Version: "test"})
	if err == nil || !strings.Contains(err.Error(), "audit log") {
		t.Fatalf("Run = %v; want a refusal to start naming the audit log", err)
	}
	for _, p := range []string{h.ControlSocket(), h.PidFile()} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", p, err)
		}
	}
}

// ---- helpers (prefixed: other files of this package are written in parallel) ----

// hostileWire builds a valid wire message of exactly size bytes (or the
// smallest one when size is 0) by padding an echo message.
func hostileWire(topic, correlation string, size int) []byte {
	build := func(n int) []byte {
		return []byte(`{"topic":"` + topic + `","correlation":"` + correlation + `","arguments":{"message":"` + strings.Repeat("x", n) + `"}}`)
	}
	if size == 0 {
		return []byte(`{"topic":"` + topic + `","correlation":"` + correlation + `","arguments":{}}`)
	}
	return build(size - len(build(0)))
}

func hostileWantWireError(t *testing.T, r *ipc.Response, correlation, field string) {
	t.Helper()
	e := r.Payload.Error
	if r.Type != ipc.TypeResponse || e == nil || e.Code != ipc.CodeValidationFailed || e.Stage != 1 || e.Field != field || r.Correlation != correlation || r.Source != "core" {
		t.Fatalf("answer %+v (error %+v); want VALIDATION_FAILED stage 1 field %q, correlation %q, from core", r, e, field, correlation)
	}
}

func hostileRandom(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// hostileRelay listens on a fresh socket and relays every connection to
// target, counting them.
func hostileRelay(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	dir, err := os.MkdirTemp("", "cp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "r.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			out, err := net.Dial("unix", target)
			if err != nil {
				in.Close()
				continue
			}
			go func() { _, _ = io.Copy(out, in); out.Close(); in.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close(); out.Close() }()
		}
	}()
	return path, &n
}

// ---- a hand-driven ZMTP 3.0 peer (after ipc/zmtp's test helpers) ----

func hostileGreeting() []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10] = 0xFF, 0x7F, 3 // signature, version 3.0
	copy(g[12:32], "NULL")            // mechanism; as-server (g[32]) 0
	return g
}

// hostileHeader encodes a frame header, short or long as the size requires.
func hostileHeader(flags byte, size uint64) []byte {
	if size > 255 {
		return binary.BigEndian.AppendUint64([]byte{flags | 0x02}, size)
	}
	return []byte{flags, byte(size)}
}

// hostileReady is a READY command announcing a DEALER.
func hostileReady() []byte {
	name, value := "Socket-Type", "DEALER"
	body := append([]byte{5}, "READY"...)
	body = append(body, byte(len(name)))
	body = append(body, name...)
	body = binary.BigEndian.AppendUint32(body, uint32(len(value)))
	body = append(body, value...)
	return append(hostileHeader(0x04, uint64(len(body))), body...)
}

func hostileDial(t *testing.T, path string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// hostileHandshake completes a DEALER's handshake and checks the core's
// greeting and READY came back: the connection is established.
func hostileHandshake(t *testing.T, conn net.Conn) {
	t.Helper()
	if _, err := conn.Write(append(hostileGreeting(), hostileReady()...)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer conn.SetReadDeadline(time.Time{})
	g := make([]byte, 64+2)
	if _, err := io.ReadFull(conn, g); err != nil {
		t.Fatalf("core's greeting and READY header: %v", err)
	}
	if g[0] != 0xFF || g[9] != 0x7F || g[10] != 3 || g[64] != 0x04 {
		t.Fatalf("core's greeting %x", g)
	}
	body := make([]byte, g[65])
	if _, err := io.ReadFull(conn, body); err != nil || !bytes.Contains(body, []byte("ROUTER")) {
		t.Fatalf("core's READY %q: %v", body, err)
	}
}

// hostileWaitClosed reads until the core closes conn; it fails if the
// connection is still open after 10 s (the handshake watchdog is 3 s).
func hostileWaitClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, conn)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatal("the core kept the connection open")
	}
}

// ---- a raw zmq4 DEALER on the hardened transport ----

type hostileDealer struct {
	d      zmq4.Socket
	frames chan []byte
}

func hostileNewDealer(t *testing.T, socket string) *hostileDealer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := zmq4.NewDealer(ctx, zmq4.WithLogger(log.New(io.Discard, "", 0)), zmq4.WithDialerMaxRetries(0))
	t.Cleanup(func() { d.Close(); cancel() })
	if err := d.Dial(zmtp.Scheme + "://" + socket); err != nil {
		t.Fatalf("dial: %v", err)
	}
	hd := &hostileDealer{d: d, frames: make(chan []byte, 16)}
	go func() {
		defer close(hd.frames)
		for {
			msg, err := d.Recv()
			if err != nil {
				return
			}
			if msg.Type == zmq4.CmdMsg || len(msg.Frames) == 0 {
				continue
			}
			hd.frames <- msg.Frames[len(msg.Frames)-1]
		}
	}()
	return hd
}

func (hd *hostileDealer) next(t *testing.T) *ipc.Response {
	t.Helper()
	r, _ := hd.nextRaw(t)
	return r
}

func (hd *hostileDealer) nextRaw(t *testing.T) (*ipc.Response, []byte) {
	t.Helper()
	select {
	case f, ok := <-hd.frames:
		if !ok {
			t.Fatal("connection closed without an answer")
		}
		r, err := ipc.DecodeResponse(f)
		if err != nil {
			t.Fatalf("answer %q: %v", f, err)
		}
		return r, f
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
	}
	return nil, nil
}

func (hd *hostileDealer) exchange(t *testing.T, wire []byte) *ipc.Response {
	t.Helper()
	r, _ := hd.exchangeRaw(t, wire)
	return r
}

func (hd *hostileDealer) exchangeRaw(t *testing.T, wire []byte) (*ipc.Response, []byte) {
	t.Helper()
	if err := hd.d.Send(zmq4.NewMsg(wire)); err != nil {
		t.Fatalf("send: %v", err)
	}
	return hd.nextRaw(t)
}

// ---- processes in the background ----

type hostileProc struct {
	cmd            *exec.Cmd
	stdout, stderr *testutil.Buffer
	done           chan struct{}
	err            error
}

func hostileStart(t *testing.T, cmd *exec.Cmd) *hostileProc {
	t.Helper()
	p := &hostileProc{cmd: cmd, stdout: &testutil.Buffer{}, stderr: &testutil.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait returns the exit code, failing if the process runs longer than d.
func (p *hostileProc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s still running after %s; stderr:\n%s", p.cmd.Path, d, p.stderr.String())
	}
	if ee, ok := errors.AsType[*exec.ExitError](p.err); ok {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("%s: %v", p.cmd.Path, p.err)
	}
	return 0
}

type hostileIPC struct{ p *hostileProc }

// hostileStartIPC runs bin/ipc in the background, as runIPC would.
func hostileStartIPC(t *testing.T, socket string, env []string, args ...string) hostileIPC {
	t.Helper()
	cmd := exec.Command(bins.ipc, args...)
	cmd.Env = append([]string{"CARAPACE_IPC_ENDPOINT=ipc://" + socket, "PATH=/usr/bin:/bin"}, env...)
	return hostileIPC{hostileStart(t, cmd)}
}

// wait returns the run, parsed as runIPC parses it.
func (h hostileIPC) wait(t *testing.T, d time.Duration) ipcRun {
	t.Helper()
	r := ipcRun{Code: h.p.wait(t, d), Stdout: h.p.stdout.String(), Stderr: h.p.stderr.String()}
	parseIPCRun(t, &r)
	return r
}
