package egress

import (
	"io"
	"net"
	"sync"
)

// relay is one relayed connection: the plugin's stream and the TCP
// connection dialled for it.
type relay struct {
	plugin *net.UnixConn
	remote net.Conn
	once   sync.Once
}

// close closes both sides; the copies then end.
func (r *relay) close() {
	r.once.Do(func() {
		r.plugin.Close()
		r.remote.Close()
	})
}

// run copies both ways until both are done and returns the bytes copied
// from the plugin to the host (out) and back (in). The end of one
// direction is passed on as a half-close (CloseWrite), so a request sent
// with its write side closed still gets its whole answer; a failure either
// way closes both.
func (r *relay) run() (out, in int64) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		out = r.pipe(r.remote, r.plugin)
	}()
	in = r.pipe(r.plugin, r.remote)
	<-done
	r.close()
	return out, in
}

func (r *relay) pipe(dst, src net.Conn) int64 {
	n, err := io.Copy(dst, src)
	if err != nil {
		r.close()
		return n
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
		r.close()
	}
	return n
}
