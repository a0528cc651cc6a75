package server_test

// Benchmarks of the spine, on the measurements `make bench` reports
// (cmd/benchreport/measure), in `go test -bench` form:
//
//	go test -run '^$' -bench . ./core/server
//	go test -run '^$' -bench PipelineEcho -benchtime 3000x -count 5 -cpuprofile cpu.out ./core/server
//
// Latency benchmarks time every call and report p50-ns and p99-ns beside
// ns/op (the mean); throughput benchmarks report requests/s. A core here
// shares the machine with its load generator, as in `make bench`.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/cmd/benchreport/measure"
	"github.com/carapace-dev/carapace/ipc/zmtp"
)

// BenchmarkTransportFloor is (a): a zmq4 DEALER↔ROUTER echo of a 120-byte
// message over plain ipc://, in process.
func BenchmarkTransportFloor(b *testing.B) { benchFloor(b, "ipc") }

// BenchmarkTransportFloorHardened is (a′): the same with the ROUTER on the
// core's hardened listener (ipc/zmtp).
func BenchmarkTransportFloorHardened(b *testing.B) { benchFloor(b, zmtp.Scheme) }

func benchFloor(b *testing.B, scheme string) {
	f, err := measure.StartFloor(scheme)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	timed(b, f.RoundTrip)
}

// BenchmarkPipelineEcho is (b): sequential echo requests through a real
// core. The session is replaced (untimed) before it has finished 4096
// requests, so that its correlation cache stays below its cap as in the
// report; BenchmarkPipelineEchoCacheFull measures the other case.
func BenchmarkPipelineEcho(b *testing.B) {
	c := benchCore(b)
	var s *measure.Session
	b.Cleanup(func() {
		if s != nil {
			s.Close()
		}
	})
	const perSession = 3000
	samples := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		if i%perSession == 0 {
			b.StopTimer()
			if s != nil {
				s.Close()
			}
			var err error
			if s, err = c.OpenCaller(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		start := time.Now()
		if err := s.Call(); err != nil {
			b.Fatal(err)
		}
		samples[i] = time.Since(start)
	}
	b.StopTimer()
	report(b, samples)
}

// BenchmarkPipelineEchoCacheFull is (b″): the same on a session that has
// finished more requests than its correlation cache keeps.
func BenchmarkPipelineEchoCacheFull(b *testing.B) {
	s := benchSession(b, benchCore(b))
	for range measure.CorrelationCacheCap {
		if err := s.Call(); err != nil {
			b.Fatal(err)
		}
	}
	timed(b, s.Call)
}

// BenchmarkThroughput is (d): b.N requests spread over 1, 4 and 16
// sessions, each driven by its own goroutine with one request in flight
// (sequential request/reply), and 16 sessions with 4 in flight each.
func BenchmarkThroughput(b *testing.B) {
	for _, tc := range []struct{ sessions, window int }{{1, 1}, {4, 1}, {16, 1}, {16, 4}} {
		b.Run(fmt.Sprintf("sessions=%d/inflight=%d", tc.sessions, tc.window), func(b *testing.B) {
			c := benchCore(b)
			ss := make([]*measure.Session, tc.sessions)
			for i := range ss {
				ss[i] = benchSession(b, c)
			}
			b.ResetTimer()
			start := time.Now()
			if err := measure.RunRequests(ss, tc.window, b.N); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "requests/s")
		})
	}
}

// BenchmarkIPCExec is (e): one run of the real ipc binary (built by
// TestMain), exec to exit, against a session of an in-process core.
func BenchmarkIPCExec(b *testing.B) {
	r := benchIPC(b)
	timed(b, r.Run)
}

// BenchmarkIPCCallInProcess is the ipc binary's client code (ipc.Call:
// dial, handshake, request, close) without a process to start.
func BenchmarkIPCCallInProcess(b *testing.B) {
	r := benchIPC(b)
	timed(b, r.Call)
}

// BenchmarkIPCExecVsHello is (e) against (e′), interleaved as make bench
// runs them: each iteration runs the ipc binary once and a Go hello-world
// once, both built as make build builds bin/ipc (CGO_ENABLED=0,
// -trimpath, -ldflags '-s -w'; TestMain's ipc is built plainly), so that
// both see the same load. It reports both medians and their ratio (the
// report's target is at most 1.3).
func BenchmarkIPCExecVsHello(b *testing.B) {
	r := benchIPC(b)
	stripped.Do(func() {
		dir := filepath.Join(filepath.Dir(bins.ipc), "stripped") // removed by TestMain
		if stripped.hello, stripped.err = measure.BuildHello(dir); stripped.err != nil {
			return
		}
		stripped.ipc = filepath.Join(dir, "ipc")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", stripped.ipc, "../../cmd/ipc")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			stripped.err = fmt.Errorf("build ipc: %v\n%s", err, out)
		}
	})
	if stripped.err != nil {
		b.Fatal(stripped.err)
	}
	r.Bin = stripped.ipc
	b.ResetTimer()
	ls, err := measure.SampleAlternating(b.N, 0, r.Run, measure.ExecHello(stripped.hello))
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	ipcM, helloM := ls[0].Median, ls[1].Median
	b.ReportMetric(float64(ipcM.Nanoseconds()), "ipc-p50-ns")
	b.ReportMetric(float64(helloM.Nanoseconds()), "hello-p50-ns")
	b.ReportMetric(float64(ipcM)/float64(helloM), "ipc/hello")
}

// stripped holds the binaries of BenchmarkIPCExecVsHello, built once per
// test binary.
var stripped struct {
	sync.Once
	ipc, hello string
	err        error
}

func benchIPC(b *testing.B) measure.IPCRunner {
	c := benchCore(b)
	h, err := c.OpenSession()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return measure.IPCRunner{Bin: bins.ipc, Socket: h.Info().Socket}
}

// benchCore starts a core for one benchmark run with measure.BenchConfig
// (rate limits raised out of the way).
func benchCore(b *testing.B) *measure.Core {
	b.Helper()
	c, err := measure.StartCore("")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := c.Close(); err != nil {
			b.Error(err)
		}
	})
	return c
}

// benchSession opens a session of c with a DEALER on its socket.
func benchSession(b *testing.B, c *measure.Core) *measure.Session {
	b.Helper()
	s, err := c.OpenCaller()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// timed runs op b.N times, timing each call, and reports the median and
// p99 beside the mean that ns/op gives.
func timed(b *testing.B, op func() error) {
	b.Helper()
	samples := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		samples[i] = time.Since(start)
	}
	b.StopTimer()
	report(b, samples)
}

func report(b *testing.B, samples []time.Duration) {
	l := measure.Summarize(samples)
	b.ReportMetric(float64(l.Median.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(l.P99.Nanoseconds()), "p99-ns")
}
