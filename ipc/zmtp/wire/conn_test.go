package wire_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/ipc/zmtp/wire"
)

// silentRouter accepts one connection, reads the greeting, sends a ROUTER's
// greeting and READY and then, if read, reads and discards everything;
// otherwise it reads nothing more. It never answers. The bytes it read are
// counted in got.
func silentRouter(t *testing.T, path string, read bool) (got *atomic.Int64) {
	t.Helper()
	got = new(atomic.Int64)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	acceptOne(t, path, func(c net.Conn) {
		got.Add(wire.GreetingLen)
		_, _ = c.Write(cat(greeting(), wire.EncodeReady("ROUTER")))
		if read {
			n, _ := io.Copy(io.Discard, c)
			got.Add(n)
			return
		}
		<-done
	})
	return got
}

// A Recv's deadline fires when the peer has done its handshake and then
// never answers, and not before.
func TestDealerRecvDeadline(t *testing.T) {
	path := sockPath(t)
	silentRouter(t, path, true)
	d, err := wire.Dial(context.Background(), path, soon(), wire.Limits{}, []byte("request"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	deadline := time.Now().Add(100 * time.Millisecond)
	_ = d.SetReadDeadline(deadline)
	if got, err := d.Recv(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Recv = %q, %v; want a deadline error", got, err)
	}
	if time.Now().Before(deadline) {
		t.Fatal("Recv gave up before its deadline")
	}
	// A deadline already passed fails at once, as a net.Conn's does.
	if _, err := d.Recv(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Recv after the deadline: %v", err)
	}
}

// Close from another goroutine ends a Recv that would otherwise wait for
// its (distant) deadline: that is how an interrupted ipc call stops.
func TestDealerCloseInterruptsRecv(t *testing.T) {
	path := sockPath(t)
	silentRouter(t, path, true)
	d, err := wire.Dial(context.Background(), path, soon(), wire.Limits{}, []byte("request"))
	if err != nil {
		t.Fatal(err)
	}
	_ = d.SetReadDeadline(soon())
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = d.Close()
	}()
	got, err := d.Recv()
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Recv after Close = %q, %v; want a closed-connection error", got, err)
	}
	if err := d.Close(); err == nil {
		t.Fatal("a second Close succeeded")
	}
}

// An alarm rings inside a Recv's wait when its time comes, once, and the
// wait goes on: here the alarm's function closes the Dealer, as bin/ipc's
// (signal handling) may.
func TestDealerAlarmRingsWhileWaiting(t *testing.T) {
	path := sockPath(t)
	silentRouter(t, path, true)
	var rings atomic.Int32
	rung := make(chan struct{})
	at := time.Now().Add(50 * time.Millisecond)
	alarm := wire.NewAlarm(at, func() {
		rings.Add(1)
		close(rung)
	})
	d, err := wire.DialAlarm(context.Background(), path, soon(), wire.Limits{}, []byte("request"), alarm)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		<-rung
		_ = d.Close()
	}()
	_ = d.SetReadDeadline(soon())
	if _, err := d.Recv(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Recv = %v; want it ended by the alarm's Close", err)
	}
	if time.Now().Before(at) {
		t.Fatal("the alarm rang before its time")
	}
	alarm.Ring()
	if n := rings.Load(); n != 1 {
		t.Fatalf("the alarm rang %d times, want 1", n)
	}
}

// Alarm.Sleep rings the alarm when its time falls within the sleep, and
// not otherwise; a nil alarm only sleeps.
func TestAlarmSleep(t *testing.T) {
	var rings atomic.Int32
	alarm := wire.NewAlarm(time.Now().Add(time.Hour), func() { rings.Add(1) })
	alarm.Sleep(time.Millisecond)
	if rings.Load() != 0 {
		t.Fatal("an alarm due in an hour rang")
	}
	alarm = wire.NewAlarm(time.Now().Add(10*time.Millisecond), func() { rings.Add(1) })
	start := time.Now()
	alarm.Sleep(30 * time.Millisecond)
	if rings.Load() != 1 {
		t.Fatal("the alarm did not ring during the sleep")
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("Sleep returned early")
	}
	var none *wire.Alarm
	none.Sleep(time.Millisecond)
}

// A request larger than the socket's buffers is written whole, the writer
// waiting for room as the peer reads; a peer that stops reading makes a
// Send fail at its deadline.
func TestDealerLargeWrites(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 4<<20)
	t.Run("read", func(t *testing.T) {
		path := sockPath(t)
		got := silentRouter(t, path, true)
		d, err := wire.Dial(context.Background(), path, soon(), wire.Limits{}, big)
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		want := int64(wire.GreetingLen + len(wire.EncodeReady("DEALER")) + 9 + len(big))
		for end := time.Now().Add(10 * time.Second); got.Load() != want && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		if got.Load() != want {
			t.Fatalf("the peer read %d bytes, want %d", got.Load(), want)
		}
	})
	t.Run("stalled", func(t *testing.T) {
		path := sockPath(t)
		silentRouter(t, path, false)
		d, err := wire.Dial(context.Background(), path, soon(), wire.Limits{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := d.Send(big, time.Now().Add(100*time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Send to a peer that does not read: %v, want a deadline error", err)
		}
	})
}

// Dial reports a socket nobody listens on, and a cancelled context, as
// errors without waiting.
func TestDialRefused(t *testing.T) {
	path := sockPath(t)
	if _, err := wire.Dial(context.Background(), path, soon(), wire.Limits{}, nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Dial to a missing socket: %v", err)
	}
	silentRouter(t, path, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := wire.Dial(ctx, path, soon(), wire.Limits{}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Dial with a cancelled context: %v", err)
	}
}
