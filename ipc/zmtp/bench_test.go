package zmtp

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/go-zeromq/zmq4"
)

// BenchmarkRoundTrip: DEALER→ROUTER→DEALER echo of one message over this
// transport and over plain zmq4 "ipc://", in the same process, so the
// filter's overhead is the difference between the two.
func BenchmarkRoundTrip(b *testing.B) {
	for _, size := range []int{256, 64 << 10} {
		for _, scheme := range []string{Scheme, "ipc"} {
			b.Run(fmt.Sprintf("%s/%dB", scheme, size), func(b *testing.B) {
				ep := scheme + "://" + sockPath(b)
				echoRouter(b, ep)
				d := dealer(b, ep)
				msg := zmq4.NewMsg(bytes.Repeat([]byte{'x'}, size))
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := d.Send(msg); err != nil {
						b.Fatal(err)
					}
					if _, err := d.Recv(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
