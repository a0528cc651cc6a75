package zmtp

import (
	"time"

	"github.com/go-zeromq/zmq4"
)

// Drain empties a closed socket's receive queue. zmq4 (v0.17.0) reads each
// connection on its own goroutine, which blocks for ever on a full queue
// once nobody calls Recv: after a flood, closing a ROUTER would leak one
// goroutine and one message per connection. Recv on a closed socket picks
// at random between its cancelled context and a queued message, so calling
// it until it has failed many times in a row, for a little while, lets
// every reader deliver, see its closed connection and exit. The core's
// session and plugin sockets call it after Close.
func Drain(s zmq4.Socket) {
	start := time.Now()
	for misses := 0; misses < 64 || time.Since(start) < 20*time.Millisecond; {
		if _, err := s.Recv(); err != nil {
			misses++
			if misses >= 64 {
				time.Sleep(time.Millisecond)
			}
			continue
		}
		misses = 0
	}
}
