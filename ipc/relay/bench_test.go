package relay

import (
	"io"
	"net"
	"testing"
)

// BenchmarkRelayRoundTrip measures one small request and its small answer
// over a kept-alive connection, straight to the Unix socket and through the
// relay; the difference is what the relay costs each exchange.
func BenchmarkRelayRoundTrip(b *testing.B) {
	const reqSize, respSize = 256, 1024
	srv := startUnix(b, func(c *net.UnixConn) {
		req, resp := make([]byte, reqSize), make([]byte, respSize)
		for {
			if _, err := io.ReadFull(c, req); err != nil {
				return
			}
			if _, err := c.Write(resp); err != nil {
				return
			}
		}
	})
	r := startRelay(b, Options{Socket: srv.path})
	for _, bm := range []struct {
		name string
		dial func() (net.Conn, error)
	}{
		{"direct-unix", func() (net.Conn, error) { return net.Dial("unix", srv.path) }},
		{"relay", func() (net.Conn, error) { return net.Dial("tcp", r.addr) }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			c, err := bm.dial()
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			req, resp := make([]byte, reqSize), make([]byte, respSize)
			b.SetBytes(reqSize + respSize)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
