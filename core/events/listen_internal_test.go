package events

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/carapace-dev/carapace/ipc/zmtp/wire"
)

// zframe encodes one ZMTP frame.
func zframe(flags byte, body []byte) []byte {
	if len(body) > 255 {
		f := binary.BigEndian.AppendUint64([]byte{flags | flagLong}, uint64(len(body)))
		return append(f, body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

// TestOutStreamDropsWholeMessages feeds zmq4-like output (greeting, READY,
// two-frame messages with short, long and empty frames) in random pieces
// and checks that exactly the messages that began while "full" are
// missing, whole, from the result.
func TestOutStreamDropsWholeMessages(t *testing.T) {
	greet := make([]byte, wire.GreetingLen)
	greet[0], greet[9], greet[10] = 0xFF, 0x7F, 3
	ready := zframe(flagCommand, append([]byte{5}, "READY"...))
	var msgs [][]byte
	for i, size := range []int{0, 1, 255, 256, 300, 70000, 10, 0, 4096} {
		body := bytes.Repeat([]byte{byte('a' + i)}, size)
		msgs = append(msgs, append(zframe(flagMore, []byte("agent.started")), zframe(0, body)...))
	}
	tests := []struct {
		name string
		drop []bool // per message
	}{
		{"nothing dropped", make([]bool, len(msgs))},
		{"everything dropped", []bool{true, true, true, true, true, true, true, true, true}},
		{"every other message", []bool{true, false, true, false, true, false, true, false, true}},
		{"the long one", []bool{false, false, false, false, false, true, false, false, false}},
	}
	for _, tt := range tests {
		for seed := range uint64(20) {
			rng := rand.New(rand.NewPCG(seed, 1))
			var s outStream
			s.greeting = wire.GreetingLen
			var buf []byte
			feed := func(p []byte, full bool) int {
				total := 0
				for len(p) > 0 {
					n := 1 + rng.IntN(min(len(p), 600))
					var d int
					buf, d = s.feed(buf, p[:n], full)
					total += d
					p = p[n:]
				}
				return total
			}
			want := append(append([]byte{}, greet...), ready...)
			if d := feed(greet, true) + feed(ready, true); d != 0 {
				t.Fatalf("%s: the handshake was dropped", tt.name)
			}
			dropped := 0
			for i, m := range msgs {
				dropped += feed(m, tt.drop[i])
				if !tt.drop[i] {
					want = append(want, m...)
				}
			}
			wantDropped := 0
			for _, d := range tt.drop {
				if d {
					wantDropped++
				}
			}
			if dropped != wantDropped {
				t.Fatalf("%s (seed %d): dropped %d, want %d", tt.name, seed, dropped, wantDropped)
			}
			if !bytes.Equal(buf, want) {
				t.Fatalf("%s (seed %d): output differs from the kept messages (%d bytes, want %d)", tt.name, seed, len(buf), len(want))
			}
		}
	}
}

func TestCheckReady(t *testing.T) {
	prop := func(name, value string) []byte {
		b := append([]byte{byte(len(name))}, name...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
		return append(b, value...)
	}
	ready := func(props ...[]byte) []byte {
		b := append([]byte{5}, "READY"...)
		for _, p := range props {
			b = append(b, p...)
		}
		return b
	}
	// want is the socket type of the READY zmq4 is shown; "" for a
	// refusal.
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"SUB", ready(prop("Socket-Type", "SUB")), "SUB"},
		{"XSUB with an identity", ready(prop("Identity", "abc"), prop("Socket-Type", "XSUB")), "XSUB"},
		{"name in lower case", ready(prop("socket-type", "SUB")), "SUB"},
		{"type in lower case", ready(prop("Socket-Type", "sub")), "SUB"},
		{"empty", nil, ""},
		{"short name", []byte{5, 'R', 'E'}, ""},
		{"not READY", append([]byte{5}, "ERROR"...), ""},
		{"no properties", ready(), ""},
		{"PUB", ready(prop("Socket-Type", "PUB")), ""},
		{"unknown type", ready(prop("Socket-Type", "SUBX")), ""},
		{"SUB then DEALER", ready(prop("Socket-Type", "SUB"), prop("SOCKET-TYPE", "DEALER")), ""},
		{"empty name", ready(prop("", "x"), prop("Socket-Type", "SUB")), ""},
		{"bad name", ready(prop("Socket:Type", "SUB")), ""},
		{"truncated length", append(ready(prop("Socket-Type", "SUB")), 1, 'x', 0, 0), ""},
		{"value past the end", append(ready(prop("Socket-Type", "SUB")), 1, 'x', 0xFF, 0xFF, 0xFF, 0xFF), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkReady(tt.body)
			switch {
			case tt.want == "" && err == nil:
				t.Fatalf("checkReady accepted it: %q", got)
			case tt.want != "" && err != nil:
				t.Fatalf("checkReady = %v, want a READY of %s", err, tt.want)
			case tt.want != "" && !bytes.Equal(got, wire.EncodeReady(tt.want)):
				// Only the canonical Socket-Type reaches zmq4: never an
				// Identity or the peer's spelling.
				t.Fatalf("checkReady = %q, want %q", got, wire.EncodeReady(tt.want))
			}
		})
	}
}
