package egress_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/carapace-dev/carapace/core/egress"
	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/core/plugin"
)

// msgSize is the size of the request and of the response of a round trip.
const msgSize = 64

// echoServer answers each msgSize bytes read with as many, until EOF.
func echoServer(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, msgSize)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(b *testing.B, c net.Conn, buf []byte) {
	if _, err := c.Write(buf); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRoundTrip compares a small request and response (64 bytes each
// way) over a direct loopback TCP connection with the same through the
// egress point: on an open connection (the relay's cost), and with a new
// connection each time (the request, the checks and the dial too).
//
//	go test -run XXX -bench RoundTrip -benchtime 2s ./core/egress
func BenchmarkRoundTrip(b *testing.B) {
	addr := echoServer(b)
	port := portOf(b, addr)
	p, err := egress.New(egress.Options{Plugin: "bench", Allow: []egress.Host{{Name: "127.0.0.1", Port: port}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	b.Setenv(pluginproto.EnvEgressFD, strconv.Itoa(int(p.PluginEnd().Fd())))
	direct := func() (net.Conn, error) { return net.Dial("tcp", addr) }
	through := func() (net.Conn, error) { return plugin.Dial(context.Background(), "tcp", addr) }

	for _, way := range []struct {
		name string
		dial func() (net.Conn, error)
	}{{"direct", direct}, {"egress", through}} {
		b.Run("open/"+way.name, func(b *testing.B) {
			c, err := way.dial()
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, msgSize)
			b.ResetTimer()
			for b.Loop() {
				roundTrip(b, c, buf)
			}
		})
		b.Run("dial/"+way.name, func(b *testing.B) {
			buf := make([]byte, msgSize)
			for b.Loop() {
				c, err := way.dial()
				if err != nil {
					b.Fatal(err)
				}
				roundTrip(b, c, buf)
				c.Close()
			}
		})
	}
}

func portOf(b *testing.B, addr string) uint16 {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		b.Fatal(err)
	}
	return uint16(n)
}
