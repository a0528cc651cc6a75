package zmtp

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// ---- attack 1: a frame header claiming an enormous body ----

func TestHugeFrameHeader(t *testing.T) {
	rj := newRejects()
	ep, path := register(t, Options{OnReject: rj.hook})
	echoRouter(t, ep)
	for _, size := range []uint64{1 << 62, 1 << 31, DefaultMaxFrame + 1, ^uint64(0)} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c := rawConn(t, path)
			rawHandshake(t, c)
			if _, err := c.Write(header(0, size)); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, c)
			rj.expect(t, "frame too large")
			roundTrip(t, ep)
		})
	}
}

// ---- attack 2: peers that connect and stall the handshake ----

func TestStalledPeers(t *testing.T) {
	t.Run("zipc", func(t *testing.T) {
		const hsTimeout = 3 * time.Second
		rj := newRejects()
		ep, path := register(t, Options{HandshakeTimeout: hsTimeout, OnReject: rj.hook})
		echoRouter(t, ep)
		var stalled []net.Conn
		for i := 0; i < 20; i++ {
			stalled = append(stalled, rawConn(t, path)) // connect, send nothing
		}
		half := rawConn(t, path)
		if _, err := half.Write(validGreeting()[:30]); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, half)

		start := time.Now()
		roundTrip(t, ep)
		// Served before any stalled peer timed out: nothing waited on them.
		if el := time.Since(start); el >= hsTimeout {
			t.Fatalf("legit dealer served only after %v, the stalled peers' timeout", el)
		}
		for _, c := range stalled {
			waitClosed(t, c)
		}
		time.Sleep(100 * time.Millisecond) // let the last OnReject calls land
		n := 0
		for _, r := range rj.drain() {
			if r == "handshake timeout" {
				n++
			}
		}
		if n != len(stalled) {
			t.Fatalf("%d handshake timeouts reported, want %d", n, len(stalled))
		}
	})

	// Plain zmq4: one silent peer holds the accept loop, and with it every
	// later connection, for as long as it stays.
	t.Run("ipc unpatched", func(t *testing.T) {
		path := sockPath(t)
		ep := "ipc://" + path
		echoRouter(t, ep)
		silent := rawConn(t, path)
		d := zmq4.NewDealer(t.Context(), quiet())
		t.Cleanup(func() { d.Close() })
		dialed := make(chan error, 1)
		go func() { dialed <- d.Dial(ep) }()
		select {
		case err := <-dialed:
			t.Fatalf("dealer dial finished while a silent peer held the accept loop: %v", err)
		case <-time.After(time.Second):
		}
		silent.Close() // release the accept loop
		select {
		case err := <-dialed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(wait):
			t.Fatal("dealer still blocked after the silent peer left")
		}
	})
}

// ---- attack 3: malformed handshakes ----

func TestMalformedHandshake(t *testing.T) {
	ready := func(md ...[]byte) []byte { return cat(validGreeting(), readyCmd(md...)) }
	st := prop("Socket-Type", "DEALER")
	badFooter := validGreeting()
	badFooter[9] = 0
	for _, tc := range []struct {
		name   string
		stream []byte
		reason string
	}{
		{"wrong signature", cat([]byte{0xFE}, validGreeting()[1:], dealerReady()), "bad greeting: signature"},
		{"wrong signature footer", cat(badFooter, dealerReady()), "bad greeting: signature"},
		{"version 2", cat(greetingBytes("NULL", 2, 0), dealerReady()), "bad greeting: version"},
		{"mechanism PLAIN", cat(greetingBytes("PLAIN", 3, 0), dealerReady()), "bad greeting: mechanism"},
		{"mechanism CURVE", cat(greetingBytes("CURVE", 3, 0), dealerReady()), "bad greeting: mechanism"},
		{"mechanism NULLX", cat(greetingBytes("NULLX", 3, 0), dealerReady()), "bad greeting: mechanism"},
		{"as-server 2", cat(greetingBytes("NULL", 3, 2), dealerReady()), "bad greeting: as-server"},
		{"garbage", bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 8), "bad greeting: signature"},
		{"READY not a command", cat(validGreeting(), frame(0, []byte("\x05READY"))), "bad READY: not a single command"},
		{"READY with MORE", cat(validGreeting(), frame(flagCommand|flagMore, []byte("\x05READY"))), "bad READY: not a single command"},
		{"READY too large", cat(validGreeting(), header(flagCommand, MaxReadySize+1)), "bad READY: too large"},
		{"READY claims 2^62", cat(validGreeting(), header(flagCommand, 1<<62)), "bad READY: too large"},
		{"empty command", cat(validGreeting(), frame(flagCommand, nil)), "bad READY: empty command"},
		{"command name past end", cat(validGreeting(), frame(flagCommand, []byte("\x0aREADY"))), "bad READY: command name past end"},
		{"not READY", cat(validGreeting(), command("HELLO", st)), "bad READY: not a READY command"},
		{"lower-case ready", cat(validGreeting(), command("ready", st)), "bad READY: not a READY command"},
		{"key length past end", ready(st, []byte{3, 'a', 'b'}), "bad READY: property name past end"},
		{"key length past end, alone", ready([]byte{200}), "bad READY: property name past end"},
		{"truncated value length", ready(st, []byte{1, 'a', 0, 0}), "bad READY: truncated value length"},
		{"value length past end", ready(st, []byte{1, 'a', 0, 0, 0, 9, 'x'}), "bad READY: value past end"},
		{"value length 2^32-1", ready(st, []byte{1, 'a', 0xFF, 0xFF, 0xFF, 0xFF}), "bad READY: value past end"},
		{"empty property name", ready(st, []byte{0, 0, 0, 0, 0}), "bad READY: empty property name"},
		{"bad property name", ready(st, prop("Sock\x00t", "x")), "bad READY: bad property name"},
		{"duplicate Socket-Type", ready(st, prop("socket-type", "DEALER")), "bad READY: duplicate property"},
		{"duplicate Identity", ready(st, prop("Identity", "a"), prop("IDENTITY", "b")), "bad READY: duplicate property"},
		{"unknown socket type", ready(prop("Socket-Type", "FOO")), "bad READY: unknown socket type"},
		{"Socket-Type missing", ready(prop("Identity", "x")), "bad READY: missing Socket-Type"},
		{"no metadata", ready(), "bad READY: missing Socket-Type"},
		{"Socket-Type PUB", ready(prop("Socket-Type", "PUB")), "socket type not allowed"},
		{"Socket-Type ROUTER", ready(prop("Socket-Type", "ROUTER")), "socket type not allowed"},
		{"Socket-Type REQ", ready(prop("Socket-Type", "REQ")), "socket type not allowed"},
		{"closed mid-greeting", validGreeting()[:10], "handshake incomplete: peer closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rj := newRejects()
			ep, path := register(t, Options{OnReject: rj.hook})
			echoRouter(t, ep)
			c := rawConn(t, path)
			if _, err := c.Write(tc.stream); err != nil {
				t.Fatal(err)
			}
			if tc.reason == "handshake incomplete: peer closed" {
				c.(*net.UnixConn).CloseWrite()
			}
			waitClosed(t, c)
			rj.expect(t, tc.reason)
			roundTrip(t, ep)
		})
	}
}

// TestHandshakeAccepted: what a legitimate peer may vary.
func TestHandshakeAccepted(t *testing.T) {
	libzmq := validGreeting()
	libzmq[8], libzmq[11] = 1, 1 // libzmq's padding, ZMTP 3.1
	for _, tc := range []struct {
		name   string
		stream []byte
	}{
		{"lower-case socket type and names", cat(validGreeting(), readyCmd(prop("socket-type", "dealer")))},
		{"libzmq padding and version 3.1", cat(libzmq, dealerReady())},
		{"as-server 1", cat(greetingBytes("NULL", 3, 1), dealerReady())},
		{"long READY header", cat(validGreeting(), header(flagCommand|flagLong, uint64(len(dealerReady())-2)), dealerReady()[2:])},
		{"extra properties", cat(validGreeting(), readyCmd(prop("Socket-Type", "DEALER"), prop("X-Foo", ""), prop("Resource", "/x")))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, path := register(t, Options{})
			r := router(t, ep)
			c := rawConn(t, path)
			if _, err := c.Write(tc.stream); err != nil {
				t.Fatal(err)
			}
			// The server's greeting and READY come back once zmq4 has it.
			c.SetReadDeadline(time.Now().Add(wait))
			var g [GreetingLen + 2]byte
			if _, err := io.ReadFull(c, g[:]); err != nil {
				t.Fatalf("not accepted: %v", err)
			}
			if _, err := c.Write(frame(0, []byte("hello"))); err != nil {
				t.Fatal(err)
			}
			m, err := recv(r, wait)
			if err != nil || len(m.Frames) != 2 || string(m.Frames[1]) != "hello" {
				t.Fatalf("router got %q, %v", m.Frames, err)
			}
			if string(m.Frames[0]) == "forged" {
				t.Fatal("peer-chosen identity reached the ROUTER")
			}
		})
	}
}

// ---- frame limits after the handshake ----

func TestFrameLimits(t *testing.T) {
	opts := func(rj *rejects) Options {
		return Options{MaxFrame: 1024, MaxMessage: 2048, MaxFrames: 3, OnReject: rj.hook}
	}
	body := func(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }
	for _, tc := range []struct {
		name   string
		stream []byte
		reason string
	}{
		{"frame too large", frame(0, body(1025)), "frame too large"},
		{"frame too large, header only", header(0, 1025), "frame too large"},
		{"frame too large in a message", cat(frame(flagMore, body(10)), header(0, 5000)), "frame too large"},
		{"message too large", cat(frame(flagMore, body(1000)), frame(flagMore, body(1000)), frame(0, body(100))), "message too large"},
		{"too many frames", cat(frame(flagMore, nil), frame(flagMore, nil), frame(flagMore, nil), frame(0, nil)), "too many frames"},
		{"command too large", command("PING", body(600)), "command too large"},
		{"command inside message", cat(frame(flagMore, body(1)), command("PING", nil)), "command inside a message"},
		{"command with MORE", frame(flagCommand|flagMore, []byte("\x04PING")), "command inside a message"},
		{"unknown flags", []byte{0x80, 0}, "unknown flags"},
		{"garbage", bytes.Repeat([]byte{0xFF}, 64), "unknown flags"},
		{"second READY claiming 2^62", header(flagCommand, 1<<62), "command too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rj := newRejects()
			ep, path := register(t, opts(rj))
			echoRouter(t, ep)
			c := rawConn(t, path)
			rawHandshake(t, c)
			if _, err := c.Write(tc.stream); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, c)
			rj.expect(t, tc.reason)
			roundTrip(t, ep)
		})
	}

	// Exactly at the limits is fine, and the counters reset per message.
	t.Run("at the limits", func(t *testing.T) {
		rj := newRejects()
		ep, path := register(t, opts(rj))
		r := router(t, ep)
		c := rawConn(t, path)
		rawHandshake(t, c)
		msg := cat(frame(flagMore, body(1024)), frame(flagMore, body(1024)), frame(0, nil))
		ping := command("PING", body(MaxCommandSize-5)) // 512 bytes exactly
		if _, err := c.Write(cat(msg, ping, msg)); err != nil {
			t.Fatal(err)
		}
		// The ROUTER prepends the routing id. Note that zmq4 delivers the
		// PING command to Recv like a message (Type CmdMsg).
		for i, want := range []int{4, 2, 4} {
			m, err := recv(r, wait)
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if len(m.Frames) != want {
				t.Fatalf("message %d has %d frames, want %d", i, len(m.Frames), want)
			}
			if isCmd := m.Type == zmq4.CmdMsg; isCmd != (i == 1) {
				t.Fatalf("message %d: Type %v", i, m.Type)
			}
		}
		if got := rj.drain(); len(got) != 0 {
			t.Fatalf("rejected: %q", got)
		}
	})
}

func TestMaxConns(t *testing.T) {
	rj := newRejects()
	ep, path := register(t, Options{MaxConns: 2, HandshakeTimeout: time.Minute, OnReject: rj.hook})
	echoRouter(t, ep)
	accepted := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(wait))
		var g [GreetingLen]byte
		_, err := io.ReadFull(c, g[:])
		return err == nil
	}
	a, b := rawConn(t, path), rawConn(t, path)
	if !accepted(a) || !accepted(b) {
		t.Fatal("first two connections not accepted")
	}
	if accepted(rawConn(t, path)) {
		t.Fatal("third connection accepted past MaxConns=2")
	}
	rj.expect(t, "too many connections")

	// Closing one frees its slot, exactly once: a legit dealer fits, the
	// next connection again does not.
	a.Close()
	rj.expect(t, "handshake incomplete: peer closed")
	d := dealer(t, ep)
	if err := d.Send(zmq4.NewMsgString("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := recv(d, wait); err != nil {
		t.Fatal(err)
	}
	if accepted(rawConn(t, path)) {
		t.Fatal("connection accepted past MaxConns=2 after a slot was reused")
	}
	rj.expect(t, "too many connections")
}

func TestWriteTimeout(t *testing.T) {
	rj := newRejects()
	ep, path := register(t, Options{WriteTimeout: 200 * time.Millisecond, OnReject: rj.hook})
	r := router(t, ep)
	c := rawConn(t, path)
	rawHandshake(t, c)
	if _, err := c.Write(frame(0, []byte("hi"))); err != nil {
		t.Fatal(err)
	}
	m, err := recv(r, wait)
	if err != nil {
		t.Fatal(err)
	}
	id := m.Frames[0]
	// The peer never reads again: the socket buffers fill and a Write blocks
	// until its deadline. Send must keep returning.
	big := bytes.Repeat([]byte{'x'}, 256<<10)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 0; i < 64; i++ {
			if err := r.Send(zmq4.NewMsgFrom(id, big)); err != nil {
				return
			}
		}
	}()
	rj.expect(t, "write timeout")
	select {
	case <-sent:
	case <-time.After(wait):
		t.Fatal("ROUTER Send still blocked after the write timeout")
	}
}

// ---- the dial side: a hostile "core" ----

func TestDialSide(t *testing.T) {
	serverReady := readyCmd(prop("Socket-Type", "ROUTER"), prop("Identity", "core"))
	for _, tc := range []struct {
		name    string
		send    []byte // what the fake core sends once it accepted
		dialErr bool
		reason  string
	}{
		{"frame claims 2^62 after handshake", cat(validGreeting(), serverReady, header(0, 1<<62)), false, "frame too large"},
		{"frame claims 2^31 after handshake", cat(validGreeting(), serverReady, header(0, 1<<31)), false, "frame too large"},
		{"silent core", nil, true, "handshake timeout"},
		{"bad greeting", cat(greetingBytes("PLAIN", 3, 0), serverReady), true, "bad greeting: mechanism"},
		{"READY key length past end", cat(validGreeting(), readyCmd(prop("Socket-Type", "ROUTER"), []byte{3, 'a', 'b'})), true, "bad READY: property name past end"},
		{"READY claims 2^62", cat(validGreeting(), header(flagCommand, 1<<62)), true, "bad READY: too large"},
		{"READY without Socket-Type", cat(validGreeting(), readyCmd(prop("Identity", "core"))), true, "bad READY: missing Socket-Type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rj := newRejects()
			// Only the silent core waits for the watchdog; elsewhere a
			// short timeout would race the legitimate part of the exchange.
			hsTimeout := wait
			if tc.reason == "handshake timeout" {
				hsTimeout = 500 * time.Millisecond
			}
			ep, path := register(t, Options{HandshakeTimeout: hsTimeout, OnReject: rj.hook})
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				c.Write(tc.send)
				io.Copy(io.Discard, c) // until the dealer hangs up
			}()

			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			d := zmq4.NewDealer(t.Context(), quiet())
			t.Cleanup(func() { d.Close() })
			dialed := make(chan error, 1)
			go func() { dialed <- d.Dial(ep) }()
			var derr error
			select {
			case derr = <-dialed:
			case <-time.After(wait):
				t.Fatal("dial still blocked")
			}
			if tc.dialErr {
				if derr == nil {
					t.Fatal("dial succeeded against a hostile core")
				}
			} else {
				if derr != nil {
					t.Fatal(derr)
				}
				if _, err := recv(d, wait); err == nil || err == errTimeout {
					t.Fatalf("dealer Recv = %v, want the connection's error", err)
				}
			}
			rj.expect(t, tc.reason)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Fatalf("%d bytes allocated while talking to the hostile core", grew)
			}
		})
	}
}
