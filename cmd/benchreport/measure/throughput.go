package measure

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Throughput is the outcome of one fixed-duration load run.
type Throughput struct {
	Sessions int           // concurrent sessions, each with its own DEALER and client goroutine
	Window   int           // requests each session keeps in flight (1: sequential request/reply)
	Duration time.Duration // how long the load ran
	Requests int64         // answers received within Duration
	PerSec   float64       // Requests / Duration
	All      int64         // every answer of the run: warm-up, Requests and those drained after Duration
}

// RunThroughput opens sessions sessions on c, each with a DEALER driven by
// its own goroutine that keeps window requests in flight (it sends the next
// as soon as an answer arrives), runs them all for d after a short untimed
// warm-up, and counts the answers received within d. The sessions are
// closed afterwards.
func RunThroughput(c *Core, sessions, window int, d time.Duration) (Throughput, error) {
	if sessions < 1 || window < 1 {
		return Throughput{}, errors.New("throughput: sessions and window must be positive")
	}
	ss := make([]*Session, 0, sessions)
	defer func() {
		for _, s := range ss {
			s.Close()
		}
	}()
	for range sessions {
		s, err := c.OpenCaller()
		if err != nil {
			return Throughput{}, fmt.Errorf("open session: %w", err)
		}
		ss = append(ss, s)
	}
	_, warm, err := load(ss, window, 200*time.Millisecond) // warm-up
	if err != nil {
		return Throughput{}, err
	}
	n, all, err := load(ss, window, d)
	if err != nil {
		return Throughput{}, err
	}
	return Throughput{Sessions: sessions, Window: window, Duration: d, Requests: n, PerSec: float64(n) / d.Seconds(), All: warm + all}, nil
}

// load drives every session for d and returns the answers received within
// d, and all answers. Requests still in flight at the deadline are drained.
func load(ss []*Session, window int, d time.Duration) (counted, all int64, err error) {
	var (
		total atomic.Int64
		every atomic.Int64
		wg    sync.WaitGroup
		errs  = make([]error, len(ss))
		start = make(chan struct{})
	)
	var deadline time.Time
	before := func(int) bool { return time.Now().Before(deadline) }
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			n, a, err := drive(s.Caller, window, before)
			total.Add(n)
			every.Add(a)
			errs[i] = err
		}()
	}
	deadline = time.Now().Add(d)
	close(start)
	wg.Wait()
	return total.Load(), every.Load(), errors.Join(errs...)
}

// drive keeps up to window requests in flight on c, sending the next as
// soon as an answer arrives, for as long as more(requests sent so far)
// holds; then it waits for the answers still due. It returns the answers
// received while more held, and all answers.
func drive(c *Caller, window int, more func(sent int) bool) (counted, all int64, err error) {
	sent, inflight := 0, 0
	send := func() error {
		sent++
		inflight++
		return c.Send()
	}
	for inflight < window && more(sent) {
		if err := send(); err != nil {
			return counted, all, err
		}
	}
	for inflight > 0 {
		if err := c.Recv(); err != nil {
			return counted, all, err
		}
		inflight--
		all++
		if more(sent) {
			counted++
			if err := send(); err != nil {
				return counted, all, err
			}
		}
	}
	return counted, all, nil
}

// RunRequests sends total requests spread evenly over the sessions, each
// session's goroutine keeping window requests in flight, and returns when
// every answer has arrived. It is the fixed-count form of RunThroughput,
// for Go benchmarks (total = b.N).
func RunRequests(ss []*Session, window, total int) error {
	if len(ss) == 0 || window < 1 {
		return errors.New("run requests: need sessions and a positive window")
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ss))
	for i, s := range ss {
		n := total / len(ss)
		if i < total%len(ss) {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = drive(s.Caller, window, func(sent int) bool { return sent < n })
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
