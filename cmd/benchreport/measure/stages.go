package measure

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/sanitize"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/plugins/echo"
)

// StageCost is the single-threaded cost of one piece of the work the core
// does for an echo request, measured in isolation.
type StageCost struct {
	Name   string
	PerReq int // how many times one echo request does this; 0 for work it does not do (high-risk tools only)
	PerOp  time.Duration
	Allocs float64 // heap allocations per op
	Bytes  float64 // heap bytes per op
}

// opCost is the time and heap allocations of one call of an operation.
type opCost struct {
	per           time.Duration
	allocs, bytes float64
}

// costRounds is how many rounds costs interleaves; each op's time is the
// median of its rounds.
const costRounds = 5

// costs times each op for about d in all, in costRounds rounds that
// interleave the ops, so that a burst of load from other processes skews
// one round of each rather than all of one op. Time per call is the median
// of the rounds; allocations are averaged over all calls.
func costs(d time.Duration, ops []func()) []opCost {
	for _, op := range ops { // warm caches, grow buffers
		for range 100 {
			op()
		}
	}
	runtime.GC()
	per := make([][]time.Duration, len(ops))
	mallocs, bytes, calls := make([]uint64, len(ops)), make([]uint64, len(ops)), make([]int, len(ops))
	var before, after runtime.MemStats
	for range costRounds {
		for i, op := range ops {
			runtime.ReadMemStats(&before)
			n := 0
			start := time.Now()
			for time.Since(start) < d/costRounds {
				for range 100 {
					op()
				}
				n += 100
			}
			el := time.Since(start)
			runtime.ReadMemStats(&after)
			per[i] = append(per[i], el/time.Duration(n))
			mallocs[i] += after.Mallocs - before.Mallocs
			bytes[i] += after.TotalAlloc - before.TotalAlloc
			calls[i] += n
		}
	}
	out := make([]opCost, len(ops))
	for i := range ops {
		out[i] = opCost{per: Median(per[i]), allocs: float64(mallocs[i]) / float64(calls[i]), bytes: float64(bytes[i]) / float64(calls[i])}
	}
	return out
}

// StageCosts measures, interleaved and for about d each, the pieces of
// the core's work for one echo request. Where the core's code is exported
// (ipc.DecodeRequest, the schema, the limiter, the sanitiser, the audit
// log) it is called; the few steps of core/session and core/pipeline that
// are unexported are replicated below, each naming the function it mirrors.
// A piece with PerReq 0 is work an echo request does not do (the echo tool
// is low risk). The audit log is written in a temporary directory on the
// same filesystem as the benchmark core's home.
func StageCosts(d time.Duration) ([]StageCost, error) {
	h := &echo.Handler{}
	tool, err := echoTool(h)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cps")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	alog, err := audit.Open(filepath.Join(dir, "audit.jsonl"), audit.Options{})
	if err != nil {
		return nil, err
	}
	defer alog.Close()

	req, werr := ipc.DecodeRequest(echoRequest)
	if werr != nil {
		return nil, werr
	}
	args, aerr := decodeArguments(req.Arguments)
	if aerr != nil {
		return nil, aerr
	}
	if err := tool.Schema.Validate(args); err != nil {
		return nil, err
	}
	lim := rate.NewLimiter(rate.Inf, 1)
	result := map[string]any{"message": "hello"}
	id := uuid.NewString()
	entry := func() *audit.Entry {
		return &audit.Entry{ID: id, Session: "s-abcdefghijklm", Group: "main", Source: "echo", Topic: req.Topic,
			Correlation: req.Correlation, Stage: audit.StageResponse, Outcome: audit.OutcomeOK, DurationMS: 0.042}
	}
	var sink any
	var failed error
	stages := []struct {
		name   string
		perReq int
		op     func()
	}{
		{"strict wire decode (ipc.DecodeRequest, one pass for valid JSON)", 1, func() { sink, _ = ipc.DecodeRequest(echoRequest) }},
		{"request hash for the correlation cache (sha256)", 1, func() { sink = sha256.Sum256(echoRequest) }},
		{"envelope id (uuid.NewString)", 1, func() { sink = uuid.NewString() }},
		{"argument decode (UseNumber)", 1, func() { sink, _ = decodeArguments(req.Arguments) }},
		{"schema validation (jsonschema/v5)", 1, func() { sink = tool.Schema.Validate(args) }},
		{"rate limiter (x/time/rate Allow)", 1, func() { sink = lim.Allow() }},
		{"handler call: new goroutine + channel + context.WithTimeout (as pipeline.invoke)", 1, func() { sink, _ = invoke(h, &plugin.Request{Tool: "echo", Arguments: args}) }},
		{"sanitiser on the result (sanitize.Value)", 1, func() { sink, _ = sanitize.Value(any(result), "result") }},
		{"result + response envelope JSON encode", 1, func() { sink = encodeResponse(result, req, id) }},
		{"audit entry: JSON encode + write(2) (audit.Log.Write)", 2, func() {
			if err := alog.Write(entry()); err != nil {
				failed = err
			}
		}},
		// Stage 5 only: pipeline.(*Pipeline).Handle marshals the decoded
		// arguments (sorted keys) for the confirmation of a high-risk tool.
		{"canonical JSON (high-risk tools only)", 0, func() { sink, _ = json.Marshal(args) }},
	}
	ops := make([]func(), len(stages))
	for i, s := range stages {
		ops[i] = s.op
	}
	out := make([]StageCost, 0, len(stages))
	for i, c := range costs(d*time.Duration(len(stages)), ops) {
		out = append(out, StageCost{Name: stages[i].name, PerReq: stages[i].perReq, PerOp: c.per, Allocs: c.allocs, Bytes: c.bytes})
	}
	_ = sink
	if failed != nil {
		return nil, fmt.Errorf("audit write: %w", failed)
	}
	return out, nil
}

// GoroutineCosts measures why core/session runs requests on long-lived
// workers: the decoding and validation of an echo request on a new
// goroutine each time, as sessions did before their worker pool (one
// goroutine per message), against the same work handed to a long-lived
// goroutine whose stack has already grown, as a session's worker
// (session.(*Manager).worker) runs it now. The difference is goroutine
// creation and, mostly, stack growth: a new goroutine starts with a small
// stack, and JSON decoding and schema validation recurse deeply enough to
// make the runtime copy it several times.
func GoroutineCosts(d time.Duration) (fresh, warm StageCost, err error) {
	tool, err := echoTool(&echo.Handler{})
	if err != nil {
		return fresh, warm, err
	}
	work := func() {
		req, werr := ipc.DecodeRequest(echoRequest)
		if werr != nil {
			panic(werr)
		}
		args, _ := decodeArguments(req.Arguments)
		if err := tool.Schema.Validate(args); err != nil {
			panic(err)
		}
	}
	done := make(chan struct{})
	jobs := make(chan struct{})
	go func() {
		for range jobs {
			work()
			done <- struct{}{}
		}
	}()
	defer close(jobs)
	cs := costs(2*d, []func(){
		func() {
			go func() { work(); done <- struct{}{} }()
			<-done
		},
		func() {
			jobs <- struct{}{}
			<-done
		},
	})
	fresh = StageCost{Name: "wire decode + argument decode + schema validation, on a new goroutine per request (before the worker pool)", PerReq: 1, PerOp: cs[0].per, Allocs: cs[0].allocs, Bytes: cs[0].bytes}
	warm = StageCost{Name: "the same work handed to a long-lived goroutine (a session's worker, now)", PerReq: 1, PerOp: cs[1].per, Allocs: cs[1].allocs, Bytes: cs[1].bytes}
	return fresh, warm, nil
}

// echoRequest is a wire message of (b), its correlation of the Caller's
// form.
var echoRequest = []byte(`{"topic":"tool.invoke.echo","correlation":"b0123abcd-1-123456","arguments":{"message":"hello"}}`)

// echoTool is the built-in echo plugin's tool as the core catalogues it,
// from its manifest, with h as its handler.
func echoTool(h plugin.Handler) (*catalog.Tool, error) {
	m, err := manifest.Parse("echo/manifest.json", echo.Manifest(), manifest.Options{})
	if err != nil {
		return nil, err
	}
	tools, err := catalog.FromManifest("echo", m, h, nil)
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		if t.Name == "echo" {
			return t, nil
		}
	}
	return nil, errors.New("echo manifest has no echo tool")
}

// CorrelationCacheCap is core/session's bound on remembered correlations
// (cache.maxN). Beyond it, each finished request makes the cache drop its
// oldest entry, in O(1) (cache.expire advances a head index).
const CorrelationCacheCap = 4096

// decodeArguments mirrors core/pipeline's decodeArguments: one decode with
// exact numbers (json.Number), nothing else.
func decodeArguments(raw json.RawMessage) (map[string]any, error) {
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil || args == nil {
		return nil, errors.New("arguments must be a JSON object")
	}
	return args, nil
}

// invoke mirrors outcome.Call, through which the pipeline calls a handler:
// the handler on a new goroutine under a timeout, a panic recovered as a
// failure.
func invoke(h plugin.Handler, req *plugin.Request) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type outcome struct {
		res map[string]any
		err error
	}
	ch := make(chan outcome, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- outcome{err: fmt.Errorf("handler panicked: %v", r)}
			}
		}()
		res, err := h.Invoke(ctx, req)
		ch <- outcome{res, err}
	}()
	select {
	case o := <-ch:
		return o.res, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// encodeResponse mirrors the success path's encoding in
// pipeline.(*Pipeline).succeed and frame: the result, then the envelope
// around it.
func encodeResponse(result map[string]any, req *ipc.Request, id string) []byte {
	b, _ := json.Marshal(result)
	r := ipc.Response{ID: id, Version: ipc.ProtocolVersion, Type: ipc.TypeResponse, Topic: req.Topic, Source: "echo",
		Correlation: req.Correlation, Timestamp: time.Now().UTC(), Group: "main", Payload: ipc.Payload{Result: b}}
	out, _ := json.Marshal(&r)
	return out
}
